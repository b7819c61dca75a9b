"""Statistics over repeated timings; pure, so it is tested without a GPU."""

from __future__ import annotations

import statistics
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
