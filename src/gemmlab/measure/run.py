"""Run one GPU kernel: allocate, poison, launch, verify, time.

The kernel's backend (a :class:`gemmlab.backends.base.DeviceBackend`: NVRTC
for the catalogue) prepares it for the device and binds it to the inputs;
everything about measuring is here and in gemmlab.measure.series, and the
same for every backend.

No figure leaves this module for a launch whose output was not checked:

- before timing, the warm-up launches run from a poisoned output (NaN, or
  the most negative integer) and the last is checked against the full
  float64 reference, its guard bands (canary bands either side of the
  output) first;
- every timed launch runs on an input set drawn afresh just before it, from
  a pool the set is picked from at random, and is checked after it
  (gemmlab.measure.series): a kernel that can tell checked from timed,
  remembers answers, counts launches or returns early fails there;
- everything the timed call ran on the GPU, on any stream or thread, is
  recorded with CUPTI (gemmlab.measure.activity) and counts in its time;
- a time under what the GPU's peak allows is refused (gemmlab.measure.floor);
- the last check runs on a new input set against the full reference again;
  an output equal to the first one is named as an answer computed before,
  and a wrong float32 result that looks like float16 or bfloat16
  arithmetic is named as computing at lower precision.

None of the checking runs between the events.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from gemmlab import backends
from gemmlab.backends import NVRTC
from gemmlab.backends.base import Compiled, DeviceBackend
from gemmlab.backends.nvrtc import Resources
from gemmlab.core import gpu
from gemmlab.core.dtypes import TOLERANCE
from gemmlab.core.environment import host_record
from gemmlab.core.errors import UnknownName
from gemmlab.core.shapes import Shape
from gemmlab.core.timing import WIDE_SPREAD, Timing, gbytes_per_s, gflops, ratio_interval, within_noise
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec, Point
from gemmlab.measure import activity, floor, series
from gemmlab.measure.checks import checked as _checked
from gemmlab.measure.checks import fingerprint as _fingerprint
from gemmlab.measure.series import GRAPH_LAUNCHES, HOLD_NS, SHORT_KERNEL_MS  # noqa: F401 (named for callers)
from gemmlab.measure.series import hold as _hold
from gemmlab.measure.series import holder as _holder  # noqa: F401 (benchmarks/scripts/matmul_overhead.py)


@dataclass
class RunResult:
    kernel: str
    m: int
    n: int
    k: int
    block_edge: int
    dtype: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem: int
    resources: Resources
    arch: str
    timing: Timing
    gflops: float
    gbytes_per_s: float  # the minimum bytes (inputs once, output once) over the time
    error: float
    tolerance: float
    metric: str = "gflops"  # the headline figure: "gflops", or "gbs" for memory-bound kernels
    baseline_name: str | None = None
    baseline_timing: Timing | None = None
    baseline_gflops: float | None = None
    baseline_gbytes_per_s: float | None = None
    ratio_to_baseline: float | None = None
    flush_l2: bool = False
    sm_clock_after_mhz: float | None = None  # read through NVML right after the timed launches
    # The named template parameters of a tunable kernel (the ladders'), as launched; else None.
    config: dict | None = None
    backend: str = NVRTC  # what compiled and launched it (see gemmlab.backends)
    source: str = ""  # a user's kernel: the path of its declaration; "" for the catalogue's
    device: dict = field(default_factory=dict)
    host: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # How each figure was taken, and what it rests on (gemmlab.measure.series):
    ratio_interval: tuple[float, float] | None = None  # 95% interval of ratio_to_baseline, from the rounds
    activity: str = ""  # how the work in each window was known (CUPTI, or the events alone)
    kernels_seen: list[str] = field(default_factory=list)  # what the timed calls ran on the GPU
    input_sets: int = 0  # the pool the timed launches drew from
    l2_policy: str = ""
    floor_ms: float | None = None  # the least time a launch can take (gemmlab.measure.floor)
    energy_j: float | None = None  # per launch, from NVML's energy counter over the kernel's samples
    baseline_energy_j: float | None = None
    slowed_samples: int = 0  # samples after which NVML reported a clock slowdown

    @property
    def shape(self) -> Shape:
        return Shape(self.m, self.n, self.k)

    def to_dict(self) -> dict:
        return asdict(self)


def _time(cp: Any, stream: Any, fn: Any, reps: int, flush: Any | None) -> list[float]:
    """``reps`` samples of ``fn`` between two events behind a hold: for the
    measurements that time gemmlab's own kernels (gemmlab peak, the roofline's
    ceilings), where nothing needs checking."""
    samples = []
    start, end = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(reps):
        if flush is not None:
            flush()
        _hold(cp, stream)
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize()
        samples.append(cp.cuda.get_elapsed_time(start, end))
    return samples


@dataclass
class _Measured:
    outcome: series.Outcome
    timing: Timing
    error: float
    tolerance: float
    sm_clock_mhz: float | None
    clock_events: list[str] | None
    baseline_timing: Timing | None
    baseline_name: str | None
    grid: tuple[int, int, int]


def _measure(
    cp: Any,
    backend: DeviceBackend,
    point: Point,
    compiled: Compiled,
    info: gpu.DeviceInfo,
    device_index: int,
    *,
    reps: int,
    warmup: int,
    max_seconds: float,
    flush_l2: bool,
    baseline: bool,
    seed: int | None,
) -> _Measured:
    """Allocate, poison, launch, verify and time; every device buffer dies with this call."""
    with cp.cuda.Device(device_index):
        cp_stream = cp.cuda.Stream(non_blocking=True)
        with cp_stream:
            prepared, launch, grid = backend.bind(cp, point, compiled, info, device_index, cp_stream, seed)
            flush = _l2_flusher(cp, info) if flush_l2 else None

            for _ in range(max(1, warmup)):
                # Before each launch: the checked one must start from the poison,
                # or, where C is also an input (beta * C), from C0 and not from
                # the last warm-up's result.
                prepared.poison()
                launch()
            cp_stream.synchronize()
            tolerance = prepared.tolerance if prepared.tolerance is not None else TOLERANCE[point.dtype]
            error = _checked(cp, prepared, tolerance, point, "first launch")
            first_answer = _fingerprint(cp, prepared)

            def bind_more() -> series.InputSet:
                # Fresh entropy for every set but the first, which the seed fixes.
                more, more_launch, _grid = backend.bind(cp, point, compiled, info, device_index, cp_stream, None)
                return series.InputSet(more, more_launch)

            pool = series.Pool(cp, series.InputSet(prepared, launch), bind_more, point.spec.problem.device_bytes(point),
                               point, tolerance)  # fmt: skip
            pool.first_answer = first_answer
            kernel_side = series.Side(activity.CALL, lambda i: pool.sets[i].launch(), checked=True)
            library_side = None
            if baseline and prepared.baseline is not None:
                prepared.baseline()  # the library's own warm-up (handle, workspace, heuristics)
                cp_stream.synchronize()
                # Every set is bound as the first, with the library's routine; the call is
                # timed, so it stays a bare call rather than one behind a check.
                library = lambda i: pool.sets[i].prepared.baseline()  # type: ignore[misc]
                library_side = series.Side(activity.LIBRARY, library, checked=False)
            timed = series.Series(cp, cp_stream, pool, activity.Recorder(), flush=flush, device_index=device_index)
            outcome = series.timed(timed, kernel_side, library_side, reps=reps, max_seconds=max_seconds)
            error = max(error, outcome.error)
            sm_clock_mhz = gpu.current_sm_clock_mhz(device_index)
            clock_events = gpu.clock_slowdown_reasons(device_index)
            assert prepared.redraw is not None  # every GPU problem draws a second input set
            prepared.redraw()
            prepared.poison()
            launch()
            cp_stream.synchronize()
            when = "after timing, on a new set of inputs"
            error = max(error, _checked(cp, prepared, tolerance, point, when, first_answer))
    kernel_timing = _timing_of(outcome.kernel, outcome.kernel_batch)
    base_timing = _timing_of(outcome.library, outcome.library_batch) if outcome.library else None
    return _Measured(outcome, kernel_timing, error, tolerance, sm_clock_mhz, clock_events, base_timing,
                     prepared.baseline_name, grid)  # fmt: skip


def _timing_of(samples: list[series.Sample], batch: series.Batch | None) -> Timing:
    """A side's samples (per launch) as a Timing that says how they were taken."""
    per_launch = [s.ms for s in samples]
    if batch is None:
        return Timing.of(per_launch)
    if batch.graphed:
        return Timing.of(per_launch, graph_launches=batch.count)
    return Timing.of(per_launch, back_to_back=batch.count)


def _energy_j(samples: list[series.Sample]) -> float | None:
    """Joules per launch from NVML's energy counter, summed over a side's
    samples; None where the counter is unreadable or moved fewer than
    ENERGY_UPDATES times over them (it moves about every 100 ms on an H200,
    so a short series would read 0 or one step)."""
    readings = [s.energy_mj for s in samples]
    if not readings or None in readings or sum(1 for r in readings if r) < ENERGY_UPDATES:
        return None
    return sum(readings) / 1e3 / sum(s.launches for s in samples)  # type: ignore[arg-type]


# Samples whose energy reading moved, fewer than which no energy is reported.
ENERGY_UPDATES = 5


def _ready(
    kernel_id: str, shape: Shape, block_edge: int | None, dtype: str | None, spec: KernelSpec | None,
    device_index: int,
) -> tuple[DeviceBackend, Point, Any, gpu.DeviceInfo, Compiled]:  # fmt: skip
    """The point checked, its kernel compiled for the device, and the device made
    current: everything before the first allocation. Raises ConstraintError /
    DeviceLimitError before touching the GPU, NoGPUError with no GPU."""
    backend = backends.for_spec(spec) if spec is not None else backends.for_kernel(kernel_id)
    if not isinstance(backend, DeviceBackend):
        raise UnknownName(
            f"{kernel_id} runs on the host ({backend.name} backend), not on a GPU.",
            f"Measure it with `gemmlab sweep --kernels {kernel_id} ...`.",
        )
    point = catalogue.point(kernel_id, shape, block_edge, dtype, spec=spec)
    cp = gpu.cupy()
    info = gpu.describe(device_index)
    compiled = backend.compile(point, info)

    from cuda.core import Device

    Device(device_index).set_current()
    return backend, point, cp, info, compiled


def run(
    kernel_id: str,
    shape: Shape,
    block_edge: int | None = None,
    dtype: str | None = None,
    *,
    reps: int = 20,
    warmup: int = 2,
    max_seconds: float = 10.0,
    flush_l2: bool = False,
    baseline: bool = True,
    seed: int | None = None,
    device_index: int = 0,
    spec: KernelSpec | None = None,
) -> RunResult:
    """Run ``kernel_id`` once on ``shape`` and return its verified, timed result.

    ``spec``: the entry to run instead of the catalogue's, e.g. a tuned
    configuration (:func:`gemmlab.kernels.sgemm.spec.variant`, :func:`gemmlab.studies.tune.tuned_spec`)
    or a user's kernel (:func:`gemmlab.kernels.catalogue.get`); ``kernel_id`` is then only its name.
    Raises ConstraintError / DeviceLimitError before touching the GPU when the
    point cannot run, NoGPUError with no GPU, VerificationError on a wrong result.
    """
    backend, point, cp, info, compiled = _ready(kernel_id, shape, block_edge, dtype, spec, device_index)
    try:
        m = _measure(
            cp, backend, point, compiled, info, device_index,
            reps=reps, warmup=warmup, max_seconds=max_seconds, flush_l2=flush_l2, baseline=baseline, seed=seed,
        )  # fmt: skip
    finally:
        # CuPy's pool keeps freed blocks for reuse; over a sweep of many sizes
        # they pile up, and the next point's free-memory check (which asks the
        # driver) would see a full GPU. The buffers died with _measure: give
        # their memory back.
        cp.get_default_memory_pool().free_all_blocks()

    result = RunResult(
        kernel=point.spec.id,
        backend=backend.name,
        m=shape.m,
        n=shape.n,
        k=shape.k,
        block_edge=point.block_edge,
        dtype=point.dtype,
        grid=m.grid,
        block=point.block,
        dynamic_smem=point.dynamic_smem,
        resources=compiled.resources,
        arch=compiled.arch,
        timing=m.timing,
        gflops=gflops(point.flops, m.timing.median_ms),
        gbytes_per_s=gbytes_per_s(point.min_bytes, m.timing.median_ms),
        error=m.error,
        tolerance=m.tolerance,
        metric=point.spec.problem.metric,
        flush_l2=flush_l2,
        # A backend that tunes when it binds (the peer rungs) names the configuration it chose.
        config=getattr(compiled, "tuned_config", None) or point.spec.config,
        source=str(point.spec.declaration or ""),
        device=info.to_dict(),
        host=host_record(),
    )
    outcome = m.outcome
    base = m.baseline_timing
    if base is not None:
        result.baseline_name = m.baseline_name
        result.baseline_timing = base
        result.baseline_gflops = gflops(point.flops, base.median_ms)
        result.baseline_gbytes_per_s = gbytes_per_s(point.min_bytes, base.median_ms)
        # Same work on both sides, so the speed ratio is the inverse time ratio.
        result.ratio_to_baseline = base.median_ms / m.timing.median_ms
        result.ratio_interval = ratio_interval([s.ms for s in outcome.kernel], [s.ms for s in outcome.library])
        result.baseline_energy_j = _energy_j(outcome.library)
    lowest = floor_of(point, info, m.sm_clock_mhz)
    floor.refuse_under([s.ms for s in outcome.kernel], lowest, f"{point.spec.id} on {point.shape} ({point.dtype})")
    result.floor_ms = lowest.ms or None
    result.activity = outcome.method
    result.kernels_seen = list(dict.fromkeys(outcome.names))
    result.input_sets = outcome.input_sets
    result.l2_policy = series.L2_FLUSHED if flush_l2 else series.L2_POLICY
    result.energy_j = _energy_j(outcome.kernel)
    result.slowed_samples = sum(1 for s in outcome.kernel + outcome.library if s.slowed)  # kept ones
    result.sm_clock_after_mhz = m.sm_clock_mhz
    result.warnings = timing_warnings(m.timing, m.clock_events) + series_warnings(result, outcome)
    result.warnings += other_process_warnings(gpu.other_processes(info.index))
    return result


def other_process_warnings(others: list[tuple[int, str]] | None) -> list[str]:
    """A warning naming the other processes that held a context on the GPU
    when it was timed (NVML): CUPTI records this process's work only, so
    theirs could have shared the GPU unseen."""
    if not others:
        return []
    named = ", ".join(f"{name} (pid {pid})" for pid, name in others[:4])
    more = f" and {len(others) - 4} more" if len(others) > 4 else ""
    return [
        f"other processes held a context on this GPU when it was timed: {named}{more}; work of theirs could "
        "have shared the GPU with the timed calls, and CUPTI, which records this process only, would not see it"
    ]


def floor_of(point: Point, info: gpu.DeviceInfo, clock_mhz: float | None = None) -> floor.Floor:
    """The least time one launch of ``point`` can take on the device ``info``
    describes, at the higher of its boost clock and ``clock_mhz`` (the clock read after timing)."""
    from gemmlab.core.gpu import TENSOR_FLOPS_PER_SM_CLOCK

    clock = max(c for c in (info.sm_clock_mhz, clock_mhz, 0.0) if c is not None) or None
    tensor = {dtype: info.peak_tensor_gflops(dtype, clock) for dtype in TENSOR_FLOPS_PER_SM_CLOCK.get(info.cc, {})}
    return floor.floor_ms(point.flops, point.min_bytes, point.dtype, fp32_gflops=info.fp32_gflops_at(clock),
                          tensor_gflops=tensor, bandwidth_gbs=info.peak_bandwidth_gbs, l2_bytes=info.l2_bytes,
                          gpu=info.name, clock_mhz=clock)  # fmt: skip


def series_warnings(result: RunResult, outcome: series.Outcome) -> list[str]:
    """What a reader should know of how the series went: work that outlived
    its events (counted), samples taken while the clocks were held back,
    and whether the kernel and the library are told apart at all."""
    found = []
    if outcome.lingering:
        names = activity.distinct(outcome.lingering)
        found.append(f"work the timed call launched ran past its end event and was counted: {names}")
    if outcome.retaken:
        found.append(f"{outcome.retaken} rounds were taken again: NVML reported a transient slowdown during them")
    if result.slowed_samples:
        found.append(f"{result.slowed_samples} samples were taken while NVML reported the clocks held back")
    if within_noise(result.ratio_interval):
        low, high = result.ratio_interval  # type: ignore[misc]
        found.append(f"within noise of the library: the ratio's 95% interval {low:.3f}-{high:.3f} holds 1")
    return found


def run_declared(
    reference: str, values: dict[str, int] | None, shape: Shape, block_edge: int | None = None,
    dtype: str | None = None, **options: Any,
) -> RunResult:  # fmt: skip
    """:func:`run` of a user's kernel named by its declaration's path, with its
    parameters set to ``values`` (a configuration `gemmlab tune` chose) or as
    declared (None): what the watchdog's worker, another process, is given."""
    from gemmlab.kernels import user

    spec = catalogue.get(reference)
    if values:
        spec = user.variant(spec, values)
    return run(spec.id, shape, block_edge, dtype, spec=spec, **options)


def checked_launches(
    kernel_id: str, shape: Shape, block_edge: int | None = None, dtype: str | None = None, *, launches: int = 2,
    device_index: int = 0,
) -> float:  # fmt: skip
    """Launch ``kernel_id`` ``launches`` times on one set of inputs, each from
    a poisoned output and each checked as :func:`run` checks it, and time
    nothing: what a tool that watches every access (compute-sanitizer) needs,
    with no launch it does not. Two launches by default, so state a kernel
    keeps from one launch to the next (a workspace's counters) is seen too.
    Returns the largest relative error."""
    backend, point, cp, info, compiled = _ready(kernel_id, shape, block_edge, dtype, None, device_index)
    error = 0.0
    with cp.cuda.Device(device_index):
        cp_stream = cp.cuda.Stream(non_blocking=True)
        with cp_stream:
            prepared, launch, _grid = backend.bind(cp, point, compiled, info, device_index, cp_stream, None)
            tolerance = prepared.tolerance if prepared.tolerance is not None else TOLERANCE[point.dtype]
            for i in range(launches):
                prepared.poison()
                launch()
                cp_stream.synchronize()
                error = max(error, _checked(cp, prepared, tolerance, point, f"launch {i + 1} of {launches}"))
    cp.get_default_memory_pool().free_all_blocks()
    return error


@contextlib.contextmanager
def bound(
    kernel_id: str, shape: Shape, dtype: str | None = None, *, spec: KernelSpec | None = None, device_index: int = 0
) -> Iterator[tuple[Any, Any | None, Any]]:
    """``kernel_id`` bound to one set of inputs on its own stream and checked
    once, for a tool that drives the launches itself (a sustained load whose
    clocks are watched: benchmarks/scripts/clock_watch.py). Yields (launch,
    the library's call on the same inputs or None, the stream); the buffers
    die on leaving. Raises as :func:`run` does, VerificationError included."""
    backend, point, cp, info, compiled = _ready(kernel_id, shape, None, dtype, spec, device_index)
    try:
        with cp.cuda.Device(device_index):
            cp_stream = cp.cuda.Stream(non_blocking=True)
            with cp_stream:
                prepared, launch, _grid = backend.bind(cp, point, compiled, info, device_index, cp_stream, None)
                tolerance = prepared.tolerance if prepared.tolerance is not None else TOLERANCE[point.dtype]
                prepared.poison()
                launch()
                cp_stream.synchronize()
                _checked(cp, prepared, tolerance, point, "first launch")
                yield launch, prepared.baseline, cp_stream
    finally:
        cp.get_default_memory_pool().free_all_blocks()


def timing_warnings(timing: Timing, clock_events: list[str] | None = None) -> list[str]:
    """Reasons not to trust a figure fully; stored and shown with the result."""
    found = []
    if timing.spread > WIDE_SPREAD:
        found.append(f"wide spread: max/min = {timing.spread:.2f} over {timing.reps} repetitions")
    if timing.graph_launches:
        found.append(
            f"short kernel ({timing.median_ms * 1e3:.1f} us): timed by replaying a CUDA graph of "
            f"{timing.graph_launches} launches, each on an input set of its own, so back-to-back launches "
            "overlap their ramp-up and drain"
        )
    elif timing.back_to_back:
        found.append(
            f"short kernel ({timing.median_ms * 1e3:.1f} us): timed from {timing.back_to_back} launches issued "
            "back to back (its calls refuse CUDA graph capture)"
        )
    elif timing.median_ms < SHORT_KERNEL_MS:
        found.append(f"short kernel ({timing.median_ms * 1e3:.1f} us): launch overhead is a large part of it")
    if clock_events:
        found.append(f"clocks held back during the run: {', '.join(clock_events)}")
    return found


def _l2_flusher(cp: Any, info: gpu.DeviceInfo) -> Any:
    """Writing a buffer twice the L2's size between repetitions evicts the inputs."""
    scratch = cp.empty(max(2 * info.l2_bytes, 1 << 20) // 4, dtype=cp.int32)
    state = {"value": 0}

    def flush() -> None:
        state["value"] += 1
        scratch.fill(state["value"])

    return flush
