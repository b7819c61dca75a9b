"""Timing statistics and the warnings that flag figures not to trust fully."""

from __future__ import annotations

import pytest

from gemmlab.core.timing import Timing, gbytes_per_s, gflops, planned_reps
from gemmlab.measure.run import timing_warnings


def test_median_min_max() -> None:
    t = Timing.of([3.0, 1.0, 2.0, 10.0])
    assert (t.median_ms, t.min_ms, t.max_ms, t.reps) == (2.5, 1.0, 10.0, 4)
    assert t.spread == 10.0


def test_no_samples() -> None:
    with pytest.raises(ValueError):
        Timing.of([])


@pytest.mark.parametrize(
    ("first_ms", "reps", "budget_s", "want"),
    [(0.1, 20, 10, 20), (1000.0, 20, 10, 10), (5000.0, 20, 10, 3), (0.0, 7, 1, 7)],
)
def test_planned_reps(first_ms: float, reps: int, budget_s: float, want: int) -> None:
    assert planned_reps(first_ms, reps, budget_s) == want


def test_rates() -> None:
    assert gflops(2 * 1024**3, 1.0) == pytest.approx(2 * 1024**3 / 1e-3 / 1e9)
    assert gbytes_per_s(128_000_000, 1.0) == pytest.approx(128.0)


def test_warnings() -> None:
    steady = Timing.of([1.0, 1.01, 1.02])
    assert timing_warnings(steady) == []
    noisy = Timing.of([1.0, 2.0, 1.1])
    assert any("wide spread" in w for w in timing_warnings(noisy))
    short = Timing.of([0.004, 0.004], graph_launches=50)
    assert any("CUDA graph of 50 launches" in w for w in timing_warnings(short))
    assert any("power cap" in w for w in timing_warnings(steady, ["software power cap"]))


class _FakeClock:
    """Stands in for CuPy's events: every timed call takes longer than the last,
    as on a GPU slowing under its power cap."""

    def __init__(self) -> None:
        self.now = 0.0
        self.calls: list[str] = []

    def call(self, name: str) -> None:
        self.calls.append(name)
        self.now += 1.0 + 0.1 * len(self.calls)

    uint64 = int

    def RawKernel(self, source: str, name: str):  # CuPy's name: the runner's hold
        return lambda grid, block, args, stream=None: self.held.append((name, args))

    @property
    def held(self) -> list:
        return self.__dict__.setdefault("_held", [])

    @property
    def cuda(self):  # the subset of cupy.cuda that run._time uses
        clock = self

        class Event:
            def record(self, stream) -> None:
                self.at = clock.now

            def synchronize(self) -> None:
                pass

        class Cuda:
            pass

        cuda = Cuda()
        cuda.Event = Event
        cuda.get_elapsed_time = lambda start, end: end.at - start.at
        return cuda


def test_every_timed_call_waits_behind_a_hold_queued_before_its_start_event() -> None:
    """The stream is kept busy on the GPU before the start event, so the host's
    launch work (a Python launcher's) is not inside the events."""
    from gemmlab.measure.run import HOLD_NS, _time

    clock = _FakeClock()
    order: list[str] = []
    real = clock.cuda

    class Cuda:
        class Event:
            def record(self, stream) -> None:
                order.append("event")
                self.at = clock.now

            def synchronize(self) -> None:
                pass

        get_elapsed_time = staticmethod(real.get_elapsed_time)

    class Cp:
        cuda = Cuda
        uint64 = int

        @staticmethod
        def RawKernel(source: str, name: str):
            assert "globaltimer" in source
            return lambda grid, block, args, stream=None: order.append(f"hold {args[0]}")

    samples = _time(Cp, None, lambda: (order.append("call"), clock.call("k")), reps=3, flush=None)
    assert len(samples) == 3
    assert order == [f"hold {HOLD_NS}", "event", "call", "event"] * 3
