"""Statistics over repeated timings; pure, so it is tested without a GPU."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# A max/min spread above this marks the timing as noisy (see RunResult.warnings).
WIDE_SPREAD = 1.5


@dataclass(frozen=True)
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    reps: int
    # 0: each repetition is one launch between two events. N > 0: each
    # repetition replays a CUDA graph of N launches and the figures are per launch.
    graph_launches: int = 0
    # N > 0: each repetition is N launches issued back to back between two
    # events (no graph: a call that refuses stream capture), figures per launch.
    back_to_back: int = 0

    @classmethod
    def of(cls, samples_ms: list[float], graph_launches: int = 0, back_to_back: int = 0) -> Timing:
        if not samples_ms:
            raise ValueError("no timing samples")
        return cls(statistics.median(samples_ms), min(samples_ms), max(samples_ms), len(samples_ms), graph_launches,
                   back_to_back)  # fmt: skip

    @property
    def method(self) -> str:
        """How the figure was taken, in the words stored beside it and printed with it."""
        if self.graph_launches:
            return f"CUDA graph of {self.graph_launches} launches"
        if self.back_to_back:
            return f"{self.back_to_back} back-to-back launches"
        return "events around each launch"

    @property
    def spread(self) -> float:
        return self.max_ms / self.min_ms if self.min_ms > 0 else float("inf")


def planned_reps(first_ms: float, reps: int, max_seconds: float, min_reps: int = 3) -> int:
    """Repetitions to run after a first timed launch of ``first_ms``: ``reps``,
    cut so that the whole series stays near ``max_seconds`` (never below ``min_reps``)."""
    if first_ms <= 0:
        return reps
    affordable = int(max_seconds * 1e3 / first_ms)
    return max(min_reps, min(reps, affordable))


def gflops(flops: int, ms: float) -> float:
    return flops / (ms * 1e-3) / 1e9


def gbytes_per_s(nbytes: int, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9


# The ratio to the library carries an interval: the 2.5th and 97.5th
# percentiles of the ratio of medians over BOOTSTRAP resamplings of the
# alternated rounds (a round's kernel and library samples kept together, as
# they shared the GPU's clock), from a fixed seed so that the same samples
# give the same interval.
BOOTSTRAP = 2000
CONFIDENCE = 0.95


def ratio_interval(kernel_ms: Sequence[float], library_ms: Sequence[float]) -> tuple[float, float] | None:
    """The CONFIDENCE interval of library median / kernel median, or None
    with fewer than three samples a side."""
    import numpy as np

    rounds = min(len(kernel_ms), len(library_ms))
    if rounds < 3:
        return None
    kernel, library = np.asarray(kernel_ms[:rounds], float), np.asarray(library_ms[:rounds], float)
    drawn = np.random.default_rng(rounds).integers(0, rounds, size=(BOOTSTRAP, rounds))
    with np.errstate(divide="ignore"):
        ratios = np.median(library[drawn], axis=1) / np.median(kernel[drawn], axis=1)
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(low), float(high)


def within_noise(interval: tuple[float, float] | None) -> bool:
    """Whether an interval of the ratio holds 1: kernel and library not told apart."""
    return interval is not None and interval[0] <= 1.0 <= interval[1]


def overlap(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    """Whether two intervals share a point (two figures within noise of each other)."""
    return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]
