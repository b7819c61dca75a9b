"""The timed series: every sample on inputs the kernel has not seen, checked
after it, with everything the timed call ran on the GPU recorded.

A figure is only as good as its weakest sample. A kernel that can tell a
checked launch from a timed one, or remember an answer, or leave work running
past the end event, is timed here as it really is, or refused:

- **A pool of input sets** (:class:`Pool`). Each is a whole problem (inputs,
  output between guard bands, reference, the library's call on the same
  inputs), bound to the kernel. Before every sample the set it runs on is
  chosen at random (``secrets``), its inputs are drawn afresh in place and
  its output is poisoned (``Prepared.renew``, ``poison``); after it, the
  output is checked against those inputs (``Prepared.sample_error``: a
  float64 sketch, gemmlab.problems.base.Sketch) and its guard bands looked
  at. None of it is inside the events. A sample replayed from a CUDA graph
  runs each of its launches on a set of its own, every one renewed before
  and checked after.
- **The library gets the same treatment**: its inputs are renewed before
  each of its samples, so that both sides start with the inputs just
  written: cold in L2 beyond its size, warm below it (:data:`L2_POLICY`,
  stored with each figure; ``--flush-l2`` writes a buffer twice L2's size
  after the renewal instead).
- **Everything the call launched** (gemmlab.measure.activity): a sample
  whose own work ends after its end event is lengthened to that end; work
  from other threads inside a kernel's window counts as the kernel's;
  inside the library's window it makes the series refused. After every
  sample the device is synchronised, so nothing left running reaches the
  next sample.
- **Telemetry**: NVML's clock-event reasons and energy counter are read
  around every sample.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gemmlab.core import gpu
from gemmlab.core.errors import GemmlabError, VerificationError
from gemmlab.core.timing import planned_reps
from gemmlab.measure import activity
from gemmlab.measure.activity import CALL, END, LIBRARY, START, Recorder, tag
from gemmlab.measure.checks import checked
from gemmlab.measure.stack import Stacked
from gemmlab.problems.base import Prepared

# Below this median (about 50 us) a kernel's time is of the order of launch
# overhead, Python's included; it is then timed from GRAPH_LAUNCHES launches
# at once: a replayed CUDA graph, or back-to-back launches where the call
# refuses capture. Both sides are timed so when either is short.
SHORT_KERNEL_MS = 0.05
GRAPH_LAUNCHES = 50
# Input sets beyond the first may take at most this share of the device
# memory free when the series starts (each set is a whole problem); a series
# of single launches draws from SINGLE_SETS of them.
POOL_SHARE = 0.5
SINGLE_SETS = 2
L2_POLICY = "inputs written afresh before every sample (warm in L2 up to its size)"
# NVML's energy counter is read around a side's samples when its first sample
# took at least this long: a read costs about 3 ms on an H200 (2026-11-29),
# and the counter moves about every 100 ms.
METERED_MS = 20.0
L2_FLUSHED = "inputs written afresh, then a buffer of twice L2's size written, before every sample"

# Before each timed call the stream is held busy this long on the GPU, so that
# the start event runs only once the call's launch has been queued behind it:
# with an idle GPU the events would also time the host's work between them
# (a Triton or CuTe DSL rung's Python launcher: 40 to 100 us on an H100;
# docs/peer-ladders.md, "With the runner's hold"). Longer than any launcher's
# host time; it costs that per sample.
HOLD_NS = 300_000
HOLD_SOURCE = r"""
extern "C" __global__ void gemmlab_hold(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
"""


@functools.cache
def holder(cp: Any) -> Any:
    """The busy-wait kernel, built once per process by CuPy."""
    return cp.RawKernel(HOLD_SOURCE, "gemmlab_hold")


def hold(cp: Any, stream: Any) -> None:
    """Queue HOLD_NS of one thread's busy wait on ``stream``."""
    holder(cp)((1,), (1,), (cp.uint64(HOLD_NS),), stream=stream)


def mark(cp: Any, stream: Any) -> None:
    """Queue an empty kernel on ``stream``: where CUPTI records it, its start is the end event's time."""
    holder(cp)((1,), (1,), (cp.uint64(0),), stream=stream)


# -- the input sets ---------------------------------------------------------------


@dataclass
class InputSet:
    prepared: Prepared
    launch: Callable[[], None]


class Pool:
    """The input sets of one series: the first, bound before the series, and
    more bound on demand (:meth:`grow`) while device memory allows.
    ``bind()`` binds one more set (fresh random inputs, its own buffers);
    ``set_bytes`` is what one set takes at most (the problem's device_bytes)."""

    def __init__(self, cp: Any, first: InputSet, bind: Callable[[], InputSet], set_bytes: int, point: Any,
                 tolerance: float) -> None:  # fmt: skip
        self.cp, self.bind, self.set_bytes, self.point, self.tolerance = cp, bind, set_bytes, point, tolerance
        self.sets = [first]
        self.budget = int(POOL_SHARE * _free_bytes(cp))
        # The output of the checked first launch (checks.fingerprint): a timed
        # launch that hands it back again is named as returning an old answer.
        self.first_answer: tuple | None = None

    def grow(self, count: int) -> int:
        """Bind sets until there are ``count`` or memory runs short; how many there are."""
        while len(self.sets) < count and self.budget >= self.set_bytes and _free_bytes(self.cp) > 2 * self.set_bytes:
            self.sets.append(self.bind())
            self.budget -= self.set_bytes
        return len(self.sets)

    def pick(self, among: int | None = None) -> int:
        """A set chosen at random, unpredictably to the code being timed."""
        return secrets.randbelow(among or len(self.sets))

    def ready(self, index: int, poison: bool) -> None:
        """Set ``index`` renewed (new inputs) and, for the kernel, its output poisoned."""
        prepared = self.sets[index].prepared
        (prepared.renew or prepared.redraw or _nothing)()
        if poison:
            prepared.poison()

    def stacked(self, count: int) -> Stacked | None:
        """The first ``count`` sets renewed and checked together
        (gemmlab.measure.stack), where their problem allows it."""
        sets = [s.prepared for s in self.sets[:count]]
        if all(p.stack is not None for p in sets) and all(p.guards for p in sets):
            return Stacked(self.cp, sets, self.cp.random.default_rng())
        return None

    def check(self, index: int, when: str) -> float:
        """Set ``index``'s output after a timed launch: its guard bands and its
        error against the inputs it was given; VerificationError naming what
        went wrong (the full reference recomputed to explain it)."""
        prepared = self.sets[index].prepared
        for guard in prepared.guards:
            if guard.damage(self.cp) is not None:
                return checked(self.cp, prepared, self.tolerance, self.point, when)
        return self.judged(index, (prepared.sample_error or prepared.error)(), when)

    def judged(self, index: int, error: float, when: str) -> float:
        """``error`` (a sampled check of set ``index``) when within the
        tolerance; else VerificationError, explained against the full reference."""
        if error <= self.tolerance:  # NaN fails
            return error
        prepared = self.sets[index].prepared
        if prepared.reference is not None:
            prepared.reference()
        found = checked(self.cp, prepared, self.tolerance, self.point, when, self.first_answer)
        # The full reference passed where the sketch did not: the sketch's
        # estimate erred (it cannot, beyond rounding, for a correct answer).
        raise VerificationError(
            f"{self.point.spec.id} gave a wrong result {when}: relative error about {error:.3g} through the "
            f"sampled check, {found:.3g} against the full reference, tolerance {self.tolerance:.3g}.",
            "Please report this with the command you ran.",
        )


def _nothing() -> None:
    pass


def _free_bytes(cp: Any) -> int:
    try:
        return int(cp.cuda.runtime.memGetInfo()[0])
    except Exception:
        return 0


# -- one side of a series ---------------------------------------------------------


@dataclass
class Side:
    """What one side of a series calls: the kernel (checked after every
    sample) or the library (renewed, not checked). ``call(i)`` runs it once
    on input set ``i``; ``batch`` is set for the short problems' mode."""

    role: int
    call: Callable[[int], None]
    checked: bool
    batch: Batch | None = None


@dataclass
class Batch:
    """Many launches timed as one sample, each on its own input set (0..count-1)."""

    run: Callable[[], None]
    count: int
    graphed: bool  # a CUDA graph; else the calls issued back to back (a call that refuses capture)
    stacked: Stacked | None = None  # the sets renewed and checked together, where the problem allows


@dataclass
class Sample:
    ms: float  # per launch
    launches: int
    slowed: list[str]  # NVML's clock-event reasons read after it
    energy_mj: int | None  # NVML's energy counter's change over it (None: unreadable)


@dataclass
class Outcome:
    """A series' samples per side, what they ran, and what was refused or flagged."""

    kernel: list[Sample] = field(default_factory=list)
    library: list[Sample] = field(default_factory=list)
    kernel_batch: Batch | None = None
    library_batch: Batch | None = None
    names: list[str] = field(default_factory=list)  # what the kernel's calls ran on the GPU
    lingering: list[str] = field(default_factory=list)
    method: str = ""
    input_sets: int = 1
    error: float = 0.0  # the largest sampled error over the checked launches
    retaken: int = 0  # rounds taken again after a transient slowdown


class Series:
    """Samples of one or two sides on ``stream``, each on a pool set, checked,
    recorded (see the module's docstring)."""

    def __init__(self, cp: Any, stream: Any, pool: Pool, recorder: Recorder, *, flush: Callable[[], None] | None,
                 device_index: int = 0) -> None:  # fmt: skip
        self.cp, self.stream, self.pool, self.recorder, self.flush = cp, stream, pool, recorder, flush
        self.device_index = device_index
        self.start, self.end = cp.cuda.Event(), cp.cuda.Event()
        self.ids: list[tuple[int, int]] = []
        self.taken: dict[tuple[int, int], Sample] = {}
        self.metered: dict[int, bool] = {}  # by side: whether its samples read the energy counter
        self.works: dict[tuple[int, int], activity.SampleWork] = {}  # what CUPTI saw in each sample
        self.error = 0.0

    def sample(self, side: Side) -> Sample:
        """One sample of ``side``: input set(s) readied, the call timed between
        the events behind a hold, the device synchronised, the output checked."""
        number = len(self.ids)
        sets = list(range(side.batch.count)) if side.batch else [self.pool.pick(min(len(self.pool.sets), SINGLE_SETS))]
        stacked = side.batch.stacked if side.batch else None
        if stacked is not None:
            stacked.renew(poison=side.checked)
        else:
            for i in sets:
                self.pool.ready(i, poison=side.checked)
        if self.flush is not None:
            self.flush()
        metered = self.metered.get(side.role, False)
        before = gpu.energy_mj(self.device_index) if metered else None
        # A batch replays a captured graph: fixed GPU work on the timed stream,
        # in which the timed code does not run; its single launches are recorded.
        recorded = self.recorder.available and side.batch is None
        if recorded:
            self.recorder.open()
        with self.recorder.tagged(tag(START, number)):
            hold(self.cp, self.stream)
            self.start.record(self.stream)
        with self.recorder.tagged(tag(side.role, number)):
            if side.batch:
                side.batch.run()
            else:
                side.call(sets[0])
        with self.recorder.tagged(tag(END, number)):
            self.end.record(self.stream)
            if recorded:
                mark(self.cp, self.stream)
        self.end.synchronize()
        self.cp.cuda.runtime.deviceSynchronize()  # whatever the call left on other streams ends here
        if recorded:
            self.recorder.close()
        elapsed = self.cp.cuda.get_elapsed_time(self.start, self.end)
        after = gpu.energy_mj(self.device_index) if metered else None
        if side.role not in self.metered:
            # NVML's energy read costs milliseconds: only samples long enough to carry it are metered.
            self.metered[side.role] = elapsed * (side.batch.count if side.batch else 1) >= METERED_MS
        slowed = gpu.clock_slowdown_reasons(self.device_index) or []
        if side.checked:
            ordinal = 1 + sum(1 for role, _ in self.ids if role == side.role)
            errors = stacked.errors() if stacked is not None else None
            damaged = stacked.damaged() if stacked is not None else None
            for i in sets:
                when = f"on timed sample {ordinal}" + (f", launch {i + 1} of its batch" if side.batch else "")
                if errors is None or damaged is None or damaged[i]:
                    error = self.pool.check(i, when)
                else:
                    error = self.pool.judged(i, errors[i], when)
                self.error = max(self.error, error)
        launches = len(sets)
        energy = None if before is None or after is None else after - before
        taken = Sample(elapsed / launches, launches, slowed, energy)
        self.ids.append((side.role, number))
        self.taken[(side.role, number)] = taken
        return taken

    def batch(self, side: Side, count: int) -> Batch:
        """``side`` as ``count`` calls, one per input set, captured as one
        CUDA graph where its calls capture, else issued back to back."""
        calls = [lambda i=i: side.call(i) for i in range(count)]
        try:
            graph = captured(self.stream, calls)
        except Exception:  # a call that refuses capture (a library behind a user's function)

            def in_turn() -> None:
                for call in calls:
                    call()

            return Batch(in_turn, count, graphed=False)
        return Batch(lambda: graph.launch(self.stream), count, graphed=True)

    def settle(self) -> None:
        """What the samples taken since the last settle ran (CUPTI's records
        flushed and judged): each kernel sample lengthened by its own work
        outside its events; GemmlabError when work that is not the library's
        ran inside the library's window."""
        if not self.recorder.available:
            return
        fresh = [key for key in self.ids if key not in self.works]
        for work in activity.judge(self.recorder.flushed(), fresh):
            self.works[(work.role, work.sample)] = work
            if work.role == LIBRARY and work.foreign:
                raise GemmlabError(
                    f"the GPU was not idle while the library was timed: {activity.distinct(work.foreign)} ran "
                    "inside its window, left there by the timed code (another thread, or work still running).",
                    "The kernel's code left work running (a thread of its own, a stream it did not wait on); "
                    "gemmlab times the library on an otherwise idle GPU. Join such threads before returning.",
                )
            if work.role == CALL and work.extra_ns:
                sample = self.taken[(CALL, work.sample)]
                sample.ms += work.extra_ns / 1e6 / sample.launches


# Clock-event reasons a sample is taken again for: a slowdown that comes and
# goes (heat, a power brake). The software power cap is how a loaded H100 or
# H200 runs all the time; a sample taken again would be capped again, so it is
# only counted (Outcome, RunResult.slowed_samples).
TRANSIENT_SLOWDOWNS = ("hardware slowdown", "software thermal slowdown", "hardware thermal slowdown", "power brake")


def _retake(series: Series, sides: list[Side], rounds: int, reps: int) -> set[tuple[int, int]]:
    """Rounds whose samples were taken while NVML reported a transient
    slowdown, taken again (at most ``reps`` more rounds, alternating as
    before): the ids of the samples replaced, each replaced by a clean one."""

    def slowed_rounds() -> list[list[tuple[int, int]]]:
        keys = series.ids[-len(sides) * rounds :] if rounds else []
        grouped = [keys[i : i + len(sides)] for i in range(0, len(keys), len(sides))]
        return [g for g in grouped if any(set(series.taken[k].slowed) & set(TRANSIENT_SLOWDOWNS) for k in g)]

    replaced: set[tuple[int, int]] = set()
    for i, flagged in enumerate(slowed_rounds()[:reps]):
        fresh = [series.sample(side) for side in (sides if i % 2 else sides[::-1])]
        if not any(set(sample.slowed) & set(TRANSIENT_SLOWDOWNS) for sample in fresh):
            replaced.update(flagged)
    return replaced


def captured(stream: Any, calls: Sequence[Callable[[], None]]) -> Any:
    """A CUDA graph of ``calls`` recorded on ``stream``. A call that raises
    ends the capture before the error goes on, so the stream is never left capturing."""
    stream.begin_capture()
    try:
        for call in calls:
            call()
    except BaseException:
        try:
            stream.end_capture()
        except Exception:
            pass  # the failed call invalidated the capture; ending it only takes the stream out of capture mode
        raise
    return stream.end_capture()


def timed(series: Series, kernel: Side, library: Side | None, *, reps: int, max_seconds: float) -> Outcome:
    """The kernel's samples, and the library's in alternation with them
    (each round in the opposite order to the last: a GPU under a power cap
    slows as it heats, so two series one after the other favour whichever
    ran first). A side under SHORT_KERNEL_MS on its first sample switches
    both to batches of GRAPH_LAUNCHES launches (never with an L2 flush,
    which must come between launches); the first samples are then taken
    again in that mode."""
    series.recorder.start()
    sides = [kernel] if library is None else [kernel, library]
    series.pool.grow(SINGLE_SETS)
    probes = [series.sample(side) for side in sides]
    series.settle()  # a call's work outside its events counts before the choice below
    firsts = probes
    if series.flush is None and min(s.ms for s in probes) < SHORT_KERNEL_MS:
        count = series.pool.grow(GRAPH_LAUNCHES)
        stacked = series.pool.stacked(count)
        for side in sides:
            side.batch = series.batch(side, count)
            side.batch.stacked = stacked
        firsts = [series.sample(side) for side in sides]
    rounds = planned_reps(sum(s.ms * s.launches for s in firsts), reps, max_seconds) - 1
    for i in range(rounds):
        for side in sides if i % 2 else sides[::-1]:
            series.sample(side)
    retaken = _retake(series, sides, rounds, reps)
    series.settle()
    series.recorder.stop()
    method = series.recorder.method
    if kernel.batch is not None and series.recorder.available:
        method += " (its single launches; a graph's replays are fixed GPU work, timed by the events)"
    out = Outcome(method=method, input_sets=len(series.pool.sets), error=series.error, kernel_batch=kernel.batch,
                  library_batch=library.batch if library else None)  # fmt: skip
    skipped = 0 if firsts is probes else len(probes)
    for key in series.ids[skipped:]:
        if key not in retaken:
            (out.kernel if key[0] == CALL else out.library).append(series.taken[key])
    out.retaken = len(retaken) // len(sides)
    for key, work in series.works.items():
        if key[0] == CALL:
            out.names += work.names
            out.lingering += work.lingering
    return out
