"""gemmlab stress: kernels verified on random shapes while other processes share the GPU.

A kernel whose blocks wait for one another (a cluster barrier, a ticket
counter, a persistent kernel's tile queue, a TMA store read back by another
block) can be right when it has the GPU to itself and wrong when its blocks
are scheduled differently: late, on fewer SMs, beside another context's work.
One such run of tc_cluster came back wrong three times in a row while six
processes shared an H100 (issue 23). So this study does what that run did, on
purpose and for as long as asked:

- ``processes`` workers, each a watchdog :class:`~gemmlab.measure.watchdog.Worker`
  (a spawned child of its own), check draws side by side; a parent thread
  per worker waits on its answers;
- each draw is one kernel at one random shape it accepts, launched
  ``launches_per_draw`` times by :func:`gemmlab.measure.run.checked_launches`,
  which poisons the output before each launch and checks each one;
- with ``load``, one more worker runs a large cuBLAS GEMM in a loop, so the
  kernels under test get the SMs that are left;
- a draw is a pure function of the process's seed and its index
  (:func:`draw`), so a failure is replayed from what is stored with it
  (:func:`replay`); process ``p`` of a run with seed ``s`` uses seed ``s + p``;
- a wrong result, a fault and a hang are each counted and stored with the
  seed, process and draw (``Store.add_stress``); the watchdog tells a fault
  (a CUDA error that poisons the context) from a hang and starts a fresh
  worker after either, so the run goes on.

A process's draws go round the kernels in order, so every kernel gets its
share of launches whatever the mix; ``launches`` is per kernel, over all processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import math
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from gemmlab import backends
from gemmlab.core.errors import GemmlabError, KernelStopped, VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec
from gemmlab.measure import watchdog
from gemmlab.measure.sanitize import small_shapes

# The catalogue's kernels that synchronise across blocks or through memory
# (Rung.cross_block: a cluster's barriers and multicast, stream-K's
# partial-tile fix-up, the padded kernel's ticket counters); the persistent
# ones (KernelSpec.persistent) are stressed too.
CROSS_BLOCK = tuple(rung.id for rung in catalogue.rungs(candidates=False) if rung.cross_block)
DEFAULT_PROCESSES = 4
# Launches of one draw: enough that a kernel's state kept between launches (a
# workspace's counters) is exercised, few enough that shapes change often.
LAUNCHES_PER_DRAW = 16
# The largest M, N or K drawn: several blocks (and clusters) in each direction
# for every kernel, and a float64 reference that costs little.
MAX_DIM = 600
# A drawn dimension is a multiple of one of these (1: any size), so that kernels
# wanting multiples of their tile, of 16 bytes or of a TMA box are drawn too.
UNITS = (1, 1, 8, 16, 32, 64, 128)
DRAW_TRIES = 400
# The share of tries that draw a square: some kernels (a user's with one size
# argument, say) take nothing else, and random M, N, K are seldom equal.
SQUARE_SHARE = 0.2
# The load: a square float32 GEMM of this edge (about 22 ms on an H100), run in
# bursts of LOAD_BURST_S seconds between which the load worker is asked to stop.
LOAD_EDGE = 8192
LOAD_BURST_S = 2.0
_LAUNCH_OF = re.compile(r"launch (\d+) of (\d+)")


class Runner(Protocol):
    """What runs a call: :class:`~gemmlab.measure.watchdog.Worker`, or in tests
    anything with its ``call`` and ``close``."""

    def call(self, label: str, limit_s: float, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any: ...

    def close(self) -> None: ...


Checker = Callable[..., float]


@dataclass(frozen=True)
class Draw:
    """One point a worker checks, and what replays it."""

    kernel: str
    shape: Shape
    block_edge: int
    dtype: str
    seed: int
    index: int

    def label(self, process: int) -> str:
        s = self.shape
        return (f"{self.kernel} {s.m}x{s.n}x{s.k} block edge {self.block_edge} {self.dtype} "
                f"(process {process}, seed {self.seed}, draw {self.index})")  # fmt: skip


@dataclass(frozen=True)
class StressPlan:
    kernels: tuple[str, ...]
    processes: int = DEFAULT_PROCESSES
    seconds: float | None = None
    launches: int | None = None  # per kernel, over all processes
    launches_per_draw: int = LAUNCHES_PER_DRAW
    seed: int = 0
    max_dim: int = MAX_DIM
    load: bool = False

    def __post_init__(self) -> None:
        if self.seconds is None and self.launches is None:
            raise GemmlabError("A stress run needs an end.", "Give --seconds S, --launches N, or both.")
        if not self.kernels:
            raise GemmlabError("A stress run needs at least one kernel.", "Name kernels, or give none for the default.")

    def draws_per_kernel(self) -> int | None:
        """How many draws of each kernel one process makes; None: until the time is up."""
        if self.launches is None:
            return None
        return math.ceil(self.launches / (self.processes * self.launches_per_draw))

    def process_seed(self, process: int) -> int:
        return self.seed + process


@dataclass
class Tally:
    """One kernel in one process."""

    launches: int = 0
    wrong: int = 0
    faults: int = 0
    hangs: int = 0
    errors: int = 0
    shapes: set[tuple] = field(default_factory=set)

    def count(self, kind: str) -> None:
        name = {"wrong": "wrong", "fault": "faults", "hang": "hangs"}.get(kind, "errors")
        setattr(self, name, getattr(self, name) + 1)


@dataclass(frozen=True)
class KernelSummary:
    kernel: str
    launches: int
    wrong: int
    faults: int
    hangs: int
    errors: int
    shapes: int
    processes: int
    seeds: tuple[int, ...]
    load: int
    seconds: float

    @property
    def clean(self) -> bool:
        return self.wrong + self.faults + self.hangs + self.errors == 0

    def row(self) -> dict:
        """The stored form (Store.add_stress)."""
        return {**self.__dict__, "seeds": json.dumps(list(self.seeds))}


@dataclass(frozen=True)
class StressResult:
    summaries: list[KernelSummary]
    failures: list[dict]  # rows of STRESS_FAILURE_FIELDS
    load_gemms: int
    seconds: float
    run_id: int | None = None
    load_error: str | None = None  # why the load stopped early, if it did
    interrupted: bool = False  # stopped by Ctrl-C; what was done is kept

    @property
    def clean(self) -> bool:
        return all(s.clean for s in self.summaries)


def default_kernels() -> list[str]:
    """The catalogue's kernels that synchronise across blocks or through memory."""
    persistent = [s.id for s in catalogue.CATALOGUE if s.persistent]
    return list(dict.fromkeys([*CROSS_BLOCK, *persistent]))


def draw(spec: KernelSpec, seed: int, index: int, max_dim: int = MAX_DIM) -> Draw:
    """Draw ``index`` of the process with ``seed``: a block edge, dtype and
    shape ``spec`` accepts, the same every time it is asked for."""
    rng = random.Random(f"{spec.id}:{seed}:{index}")
    edge = rng.choice(spec.block_edges) if spec.block_edges else 0
    dtype = rng.choice(spec.dtypes)
    for _ in range(DRAW_TRIES):
        if rng.random() < SQUARE_SHARE:
            shape = Shape.square(_dimension(rng, edge, max_dim))
        else:
            shape = Shape(*(_dimension(rng, edge, max_dim) for _ in range(3)))
        if not spec.violations(shape, edge, dtype):
            return Draw(spec.id, shape, edge, dtype, seed, index)
    fallback = [s for s in small_shapes(spec, edge) if not spec.violations(s, edge, dtype)]
    if not fallback:
        raise GemmlabError(
            f"No shape with M, N, K up to {max_dim} that {spec.id} accepts at block edge {edge} in {dtype} "
            f"was found in {DRAW_TRIES} draws.",
            "Give a larger --max-dim, or leave this kernel out of the stress run.",
        )
    return Draw(spec.id, rng.choice(fallback), edge, dtype, seed, index)


def _dimension(rng: random.Random, edge: int, max_dim: int) -> int:
    unit = rng.choice((*UNITS, edge or 1))
    return unit * rng.randint(1, max(1, max_dim // unit))


def replay(
    kernel: str, seed: int, index: int, *, max_dim: int = MAX_DIM, launches: int = LAUNCHES_PER_DRAW,
    checker: Checker | None = None, runner: Runner | None = None,
) -> tuple[Draw, float]:  # fmt: skip
    """Check a stored draw again, alone, in a worker of its own: its largest
    relative error, or the VerificationError or KernelStopped it meets."""
    spec = catalogue.get(kernel)
    point = draw(spec, seed, index, max_dim)
    worker = runner if runner is not None else watchdog.Worker()
    try:
        return point, _checked_draw(worker, point, 0, launches, checker or gpu_checker())
    finally:
        worker.close()


def stress(
    plan: StressPlan, *, checker: Checker | None = None, runner_factory: Callable[[], Runner] | None = None,
    load_burst: Callable[..., int] | None = None, store: Any = None, run_record: dict | None = None,
) -> StressResult:  # fmt: skip
    """Run ``plan``; with ``store``, keep its summaries and failures there
    under a run described by ``run_record``. ``checker`` (checked_launches by
    default) and ``load_burst`` run in the workers ``runner_factory`` makes
    (watchdog workers by default)."""
    specs = _stressable(plan)
    check = checker or gpu_checker()
    runner_factory = runner_factory or watchdog.Worker
    stop = threading.Event()
    started = time.monotonic()
    deadline = None if plan.seconds is None else started + plan.seconds
    interrupted = False
    with _background_load(plan.load, stop, runner_factory, load_burst or _load_burst) as load:
        with ThreadPoolExecutor(max_workers=plan.processes, thread_name_prefix="gemmlab-stress") as pool:
            futures = [pool.submit(_process, p, plan, specs, runner_factory, check, deadline, stop)
                       for p in range(plan.processes)]  # fmt: skip
            try:
                outcomes = [f.result() for f in futures]
            except KeyboardInterrupt:  # let every worker finish its draw, then keep what was done
                stop.set()
                interrupted = True
                outcomes = [f.result() for f in futures]
        stop.set()
    result = _summarised(plan, specs, outcomes, load, time.monotonic() - started, interrupted)
    if store is not None:
        run_id = store.start_run(run_record or {})
        store.add_stress(run_id, [s.row() for s in result.summaries], result.failures)
        result = dataclasses.replace(result, run_id=run_id)
    return result


def _stressable(plan: StressPlan) -> list[KernelSpec]:
    """The plan's kernels; one that runs on the host or has no shape to draw is
    refused before any process starts."""
    for kernel in plan.kernels:
        if backends.on_host(kernel):
            raise GemmlabError(f"{kernel} runs on the host; gemmlab stress checks GPU kernels.",
                               f"Leave {kernel} out of the stress run.")  # fmt: skip
    specs = [catalogue.get(k) for k in plan.kernels]
    for spec in specs:
        draw(spec, plan.seed, 0, plan.max_dim)
    return specs


def _process(
    process: int, plan: StressPlan, specs: list[KernelSpec], runner_factory: Callable[[], Runner], check: Checker,
    deadline: float | None, stop: threading.Event,
) -> tuple[dict[str, Tally], list[dict]]:  # fmt: skip
    """One worker's share: draws round the kernels until the time or the draws run out."""
    seed = plan.process_seed(process)
    tallies = {spec.id: Tally() for spec in specs}
    failures: list[dict] = []
    per_kernel = plan.draws_per_kernel()
    runner = runner_factory()
    try:
        for index in itertools.count() if per_kernel is None else range(per_kernel * len(specs)):
            if stop.is_set() or (deadline is not None and time.monotonic() >= deadline):
                break
            point = draw(specs[index % len(specs)], seed, index, plan.max_dim)
            tally = tallies[point.kernel]
            tally.shapes.add((point.shape.m, point.shape.n, point.shape.k, point.block_edge, point.dtype))
            try:
                _checked_draw(runner, point, process, plan.launches_per_draw, check)
                tally.launches += plan.launches_per_draw
            except Exception as exc:  # every failure is counted and stored, and the run goes on
                kind = _kind(exc)
                tally.count(kind)
                tally.launches += _launches_made(exc, plan.launches_per_draw)
                failures.append(_failure_row(point, process, plan.max_dim, kind, exc))
    finally:
        runner.close()
    return tallies, failures


def _checked_draw(runner: Runner, point: Draw, process: int, launches: int, check: Checker) -> float:
    limit = watchdog.point_time_limit(point.kernel, point.shape, point.block_edge, reps=launches, warmup=0,
                                      max_seconds=0)  # fmt: skip
    reference = catalogue.reference(point.kernel)
    return runner.call(point.label(process), limit, check, reference, point.shape, point.block_edge, point.dtype,
                       launches=launches)  # fmt: skip


def _kind(exc: BaseException) -> str:
    if isinstance(exc, VerificationError):
        return "wrong"
    if isinstance(exc, KernelStopped):
        return exc.kind
    return "error"


def _launches_made(exc: BaseException, launches: int) -> int:
    """Launches a failed draw made: up to the one a VerificationError names
    ("launch 3 of 16"); all of them when it names none."""
    found = _LAUNCH_OF.search(str(exc)) if isinstance(exc, VerificationError) else None
    return int(found.group(1)) if found else launches


def _failure_row(point: Draw, process: int, max_dim: int, kind: str, exc: BaseException) -> dict:
    reason = str(exc) if isinstance(exc, GemmlabError) else f"{type(exc).__name__}: {exc}"
    s = point.shape
    return {"kernel": point.kernel, "m": s.m, "n": s.n, "k": s.k, "block_edge": point.block_edge,
            "dtype": point.dtype, "seed": point.seed, "process": process, "draw": point.index, "max_dim": max_dim,
            "kind": kind, "reason": reason}  # fmt: skip


def _summarised(
    plan: StressPlan, specs: list[KernelSpec], outcomes: list[tuple[dict[str, Tally], list[dict]]], load: _Load,
    seconds: float, interrupted: bool,
) -> StressResult:  # fmt: skip
    summaries = []
    seeds = tuple(plan.process_seed(p) for p in range(len(outcomes)))
    for spec in specs:
        kept = [by_kernel[spec.id] for by_kernel, _ in outcomes]
        totals = {name: sum(getattr(t, name) for t in kept) for name in ("launches", "wrong", "faults", "hangs",
                                                                         "errors")}  # fmt: skip
        shapes = set().union(*(t.shapes for t in kept))
        summaries.append(KernelSummary(spec.id, **totals, shapes=len(shapes), processes=len(outcomes), seeds=seeds,
                                       load=load.gemms, seconds=round(seconds, 3)))  # fmt: skip
    failures = [row for _, rows in outcomes for row in rows]
    return StressResult(summaries, failures, load.gemms, seconds, load_error=load.error, interrupted=interrupted)


@dataclass
class _Load:
    gemms: int = 0
    error: str | None = None  # why the load stopped before the run did


@contextlib.contextmanager
def _background_load(
    enabled: bool, stop: threading.Event, runner_factory: Callable[[], Runner], burst: Callable[..., int]
) -> Iterator[_Load]:
    """While the block runs, one more worker runs ``burst`` (a GEMM loop) again
    and again. A load that fails says why and stops; the run goes on without it."""
    load = _Load()
    if not enabled:
        yield load
        return
    done = threading.Event()

    def loop() -> None:
        runner = runner_factory()
        try:
            while not stop.is_set() and not done.is_set():
                load.gemms += runner.call("the load (a cuBLAS GEMM in a loop)", watchdog.FLOOR_S + LOAD_BURST_S,
                                          burst, LOAD_EDGE, LOAD_BURST_S)  # fmt: skip
        except Exception as exc:  # the stress run is worth finishing without its load; the summary says so
            load.error = str(exc) if isinstance(exc, GemmlabError) else f"{type(exc).__name__}: {exc}"
        finally:
            runner.close()

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="gemmlab-stress-load") as pool:
        pool.submit(loop)
        try:
            yield load
        finally:
            done.set()


_LOAD_ARRAYS: dict[int, Any] = {}


def _load_burst(edge: int, seconds: float) -> int:
    """In the load worker: square float32 GEMMs of ``edge`` for about
    ``seconds``; returns how many finished. The arrays stay for the next burst."""
    import cupy as cp

    if edge not in _LOAD_ARRAYS:
        a = cp.random.random((edge, edge), dtype=cp.float32)
        _LOAD_ARRAYS[edge] = (a, a.T.copy(), cp.empty_like(a))
    a, b, c = _LOAD_ARRAYS[edge]
    end = time.monotonic() + seconds
    count = 0
    while time.monotonic() < end:
        for _ in range(4):
            cp.matmul(a, b, out=c)
        cp.cuda.Device().synchronize()
        count += 4
    return count


def gpu_checker() -> Checker:
    """checked_launches, once this machine is known to have a GPU: without
    one every draw would fail alike, so the run stops here with NoGPUError."""
    from gemmlab.core import gpu
    from gemmlab.measure.run import checked_launches

    gpu.cupy()
    return checked_launches
