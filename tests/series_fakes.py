"""A GPU made of Python, for testing the timed series without one.

``FakeGPU`` stands in for CuPy as gemmlab.measure.series uses it: events on a
simulated clock (ms), a stream that captures graphs, the runner's hold, device
synchronisation and free memory. ``FakeSet`` is one input set: its inputs are
a number renewed in place, its output is what a kernel wrote, and the right
answer for inputs x is ``answer(x)``. ``FakeRecorder`` plays CUPTI: every
launch made through ``FakeGPU.work`` is an activity tagged with the external
id in force, on the clock, and every event record has its timestamp.

The kernels at the bottom are the cheats of the adversarial corpus
(tests/adversarial) reduced to their logic.
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass, field
from types import SimpleNamespace

from gemmlab.measure import activity
from gemmlab.problems.base import Prepared

POISON = "poison"


def answer(inputs: int) -> int:
    return 7 * inputs + 1


class FakeGPU:
    def __init__(self, free_bytes: int = 1 << 40) -> None:
        self.now = 0.0
        self.log: list[str] = []
        self.capturing = False
        self.recorded: list = []
        self.free_bytes = free_bytes
        self.recorder: FakeRecorder | None = None
        gpu = self

        class Event:
            def record(self, stream=None) -> None:
                self.at = gpu.now
                gpu.log.append("event")
                if gpu.recorder is not None:
                    gpu.recorder.event(gpu.now)

            def synchronize(self) -> None:
                pass

        runtime = SimpleNamespace(
            deviceSynchronize=lambda: self.log.append("sync"),
            memGetInfo=lambda: (self.free_bytes, self.free_bytes),
        )
        self.cuda = SimpleNamespace(Event=Event, get_elapsed_time=lambda a, b: b.at - a.at, runtime=runtime)

    uint64 = int

    def RawKernel(self, source: str, name: str):  # CuPy's name: the runner's hold
        return lambda grid, block, args, stream=None: self.log.append("hold")

    def __hash__(self) -> int:
        return id(self)

    # the stream
    def begin_capture(self) -> None:
        self.capturing, self.recorded = True, []

    def end_capture(self):
        self.capturing = False
        recorded, gpu = list(self.recorded), self

        class Graph:
            def launch(self, stream) -> None:
                gpu.log.append(f"graph({len(recorded)})")
                for replay in recorded:
                    replay()

        return Graph()

    def run(self, body) -> None:
        """A launch: ``body`` runs when the GPU runs it (now, or at each replay
        of a graph being captured) and spends its time through :meth:`work`."""
        if self.capturing:
            self.recorded.append(body)
        else:
            body()

    def work(self, name: str, ms: float, *, after: float = 0.0) -> None:
        """``ms`` of work on the timed stream (``after``: on a side stream,
        ending that long after now, the clock unmoved)."""
        self.log.append(name)
        start = self.now
        if after:
            end = self.now + after
        else:
            self.now += ms
            end = self.now
        if self.recorder is not None:
            self.recorder.activity(name, start, end)


@dataclass
class FakeSet:
    """One input set of a fake problem."""

    gpu: FakeGPU
    number: int
    inputs: int = 0
    out: object = None
    renewals: int = 0

    def __post_init__(self) -> None:
        self.inputs = 1000 * self.number + 1

    def renew(self) -> None:
        self.renewals += 1
        self.inputs = 1000 * self.number + 1 + self.renewals
        self.gpu.log.append(f"renew {self.number}")

    def poison(self) -> None:
        self.out = POISON
        self.gpu.log.append(f"poison {self.number}")

    def error(self) -> float:
        if self.out == POISON:
            return float("nan")
        return 0.0 if self.out == answer(self.inputs) else 1.0

    library_ms: float = 1.0

    def library(self) -> None:
        self.gpu.run(lambda: self.gpu.work("library", self.library_ms))

    def prepared(self) -> Prepared:
        return Prepared(args=(), poison=self.poison, error=self.error, baseline=self.library, baseline_name="lib",
                        buffers=(), renew=self.renew, sample_error=self.error, reference=lambda: None,
                        explain=lambda: "poison left" if self.out == POISON else None)  # fmt: skip


@dataclass
class FakeRecorder:
    """CUPTI as the series sees it, on the fake clock (ms turned into ns)."""

    gpu: FakeGPU
    available: bool = True
    method: str = "fake CUPTI"
    current: list[int] = field(default_factory=list)
    trace: activity.Trace = field(default_factory=activity.Trace)
    ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    foreign_thread: bool = False

    def __post_init__(self) -> None:
        self.gpu.recorder = self

    def start(self) -> None:
        pass

    def open(self) -> None:
        self.gpu.log.append("record")

    def close(self) -> None:
        self.gpu.log.append("stop recording")

    def flushed(self) -> activity.Trace:
        return self.trace

    def stop(self) -> None:
        pass

    @contextlib.contextmanager
    def tagged(self, external: int):
        self.current.append(external)
        try:
            yield
        finally:
            self.current.pop()

    def _correlate(self) -> int:
        correlation = next(self.ids)
        if self.current and not self.foreign_thread:
            self.trace.external[correlation] = self.current[-1]
        return correlation

    def activity(self, name: str, start: float, end: float) -> None:
        correlation = self._correlate()
        self.trace.activities.append(activity.Activity("kernel", name, int(start * 1e6), int(end * 1e6), 7,
                                                       correlation))  # fmt: skip

    def event(self, at: float) -> None:
        self.trace.events[self._correlate()] = int(at * 1e6)


# -- kernels: each a launch(set) on a FakeSet ----------------------------------------


def honest(work_ms: float):
    def body(s: FakeSet) -> None:
        s.gpu.work("honest", work_ms)
        s.out = answer(s.inputs)

    return lambda s: s.gpu.run(lambda: body(s))


def poison_sniffing(work_ms: float):
    """Does the work only when its output holds the poison (when it is being checked)."""

    def body(s: FakeSet) -> None:
        if s.out == POISON:
            s.gpu.work("sniffer", work_ms)
            s.out = answer(s.inputs)
        else:
            s.gpu.work("sniffer", 0.001)

    return lambda s: s.gpu.run(lambda: body(s))


def memoising(work_ms: float):
    """Keeps the answer it gave each output buffer, and hands it back."""
    kept: dict[int, object] = {}

    def body(s: FakeSet) -> None:
        if s.number in kept:
            s.gpu.work("memo", 0.001)
            s.out = kept[s.number]
        else:
            s.gpu.work("memo", work_ms)
            s.out = kept[s.number] = answer(s.inputs)

    return lambda s: s.gpu.run(lambda: body(s))


def launch_counting(work_ms: float, honest_launches: int):
    """Does the work on its first launches only, then returns at once."""
    count = itertools.count(1)

    def body(s: FakeSet) -> None:
        if next(count) <= honest_launches:
            s.gpu.work("counter", work_ms)
            s.out = answer(s.inputs)
        else:
            s.gpu.work("counter", 0.001)

    return lambda s: s.gpu.run(lambda: body(s))


def lingering(work_ms: float, left_ms: float):
    """Writes C, then leaves a kernel of its own running on a side stream."""

    def body(s: FakeSet) -> None:
        s.gpu.work("main", work_ms)
        s.out = answer(s.inputs)
        s.gpu.work("side", 0.0, after=left_ms)

    return lambda s: s.gpu.run(lambda: body(s))
