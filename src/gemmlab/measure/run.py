"""Run one GPU kernel: allocate, poison, launch, verify, time.

The kernel's backend (a :class:`gemmlab.backends.base.DeviceBackend`: NVRTC
for the catalogue) prepares it for the device and binds it to the inputs;
everything about measuring is here and the same for every backend.

No figure leaves this module for a kernel whose output was not checked in the
same run: the result is verified after the warm-up launch and again after the
timed launches (an error that moves between the two is a race). Each check
is made hard to fool (the problem supplies the pieces, gemmlab.problems.base):

- the output is poisoned (NaN, or the most negative integer) before each
  checked launch, so an element the kernel never writes, or reads before
  writing (``C += ...``), fails;
- the output lies between two canary bands, checked after each checked
  launch, so a write just outside it is named without compute-sanitizer;
- the last check runs on a second, freshly drawn input set written into the
  same buffers, with the reference recomputed, so a kernel that ignores its
  inputs or hands back an answer it computed before fails, and is named as
  such when its output equals the first one;
- a wrong float32 result whose error looks like float16 or bfloat16
  arithmetic is named as computing at lower precision.

None of it runs inside the timed loop.
"""

from __future__ import annotations

import contextlib
import functools
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
from gemmlab.core.errors import UnknownName, VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.core.timing import WIDE_SPREAD, Timing, gbytes_per_s, gflops, planned_reps
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec, Point
from gemmlab.problems.base import Prepared

# Below this median (about 50 us) a kernel's time is of the order of launch
# overhead, Python's included; it is then timed again from GRAPH_LAUNCHES
# launches at once: a replayed CUDA graph, or back-to-back launches where the
# call refuses capture. With a library beside it, both sides are timed so
# (_paired_series).
SHORT_KERNEL_MS = 0.05
GRAPH_LAUNCHES = 50


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

    @property
    def shape(self) -> Shape:
        return Shape(self.m, self.n, self.k)

    def to_dict(self) -> dict:
        return asdict(self)


# Before each timed call the stream is held busy this long on the GPU, so that
# the start event runs only once the call's launch has been queued behind it:
# with an idle GPU the events would also time the host's work between them
# (a Triton or CuTe DSL rung's Python launcher, 40 to 100 us on the H100 of
# 2026-11-24, where Nsight Compute put triton_tc_tma at 195 us and the events
# at 286 us). Longer than any launcher's host time; it costs that per sample.
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
def _holder(cp: Any) -> Any:
    """The busy-wait kernel, built once per process by CuPy."""
    return cp.RawKernel(HOLD_SOURCE, "gemmlab_hold")


def _hold(cp: Any, stream: Any) -> None:
    """Queue HOLD_NS of one thread's busy wait on ``stream``."""
    _holder(cp)((1,), (1,), (cp.uint64(HOLD_NS),), stream=stream)


def _time(cp: Any, stream: Any, fn: Any, reps: int, flush: Any | None) -> list[float]:
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


def _timed_series(
    cp: Any, stream: Any, fn: Any, reps: int, max_seconds: float, flush: Any | None, graph_ok: bool = True
) -> Timing:
    first = _time(cp, stream, fn, 1, flush)
    more = planned_reps(first[0], reps, max_seconds) - 1
    timing = Timing.of(first + _time(cp, stream, fn, more, flush) if more > 0 else first)
    return _graph_retimed(cp, stream, fn, timing, reps, flush) if graph_ok else timing


def _graph_retimed(cp: Any, stream: Any, fn: Any, timing: Timing, reps: int, flush: Any | None) -> Timing:
    """Events around one launch of a few microseconds measure the launch as
    much as the kernel; such a kernel is timed again by replaying a graph of
    back-to-back launches."""
    if timing.median_ms >= SHORT_KERNEL_MS or flush is not None:
        return timing
    try:
        graph = _captured(stream, fn, GRAPH_LAUNCHES)
    except Exception:
        # A launch that cannot be captured (a library call that refuses stream
        # capture, as cuBLAS behind a user's PyTorch or CuPy function may): the
        # events' figure stands, and timing_warnings says launch overhead is in it.
        return timing
    samples = _time(cp, stream, lambda: graph.launch(stream), reps, None)
    return Timing.of([t / GRAPH_LAUNCHES for t in samples], GRAPH_LAUNCHES)


def _paired_series(
    cp: Any, stream: Any, fn: Any, library: Any, reps: int, max_seconds: float, flush: Any | None
) -> tuple[Timing, Timing]:
    """The kernel and the library routine timed in alternation, each round in
    the opposite order to the last. A GPU under a power cap slows as it heats,
    so two series timed one after the other favour whichever ran first (on an
    H200 the SM clock moved between 1.5 and 1.98 GHz within one benchmark);
    alternating gives both the same clocks. When either side is short, both
    are timed again the same way, from many launches at once (_short_pair)."""
    kernel_ms, library_ms = _alternated(cp, stream, (fn, library), reps, max_seconds, flush)
    kernel, base = Timing.of(kernel_ms), Timing.of(library_ms)
    if flush is not None or min(kernel.median_ms, base.median_ms) >= SHORT_KERNEL_MS:
        return kernel, base
    return _short_pair(cp, stream, fn, library, reps, max_seconds)


def _alternated(
    cp: Any, stream: Any, calls: tuple[Any, Any], reps: int, max_seconds: float, flush: Any | None
) -> tuple[list[float], list[float]]:
    """Samples of two calls, one each per round, the second first in every other round."""
    samples = ([*_time(cp, stream, calls[0], 1, flush)], [*_time(cp, stream, calls[1], 1, flush)])
    rounds = planned_reps(samples[0][0] + samples[1][0], reps, max_seconds) - 1
    for i in range(rounds):
        for side in (1, 0) if i % 2 == 0 else (0, 1):
            samples[side].extend(_time(cp, stream, calls[side], 1, flush))
    return samples


def _short_pair(cp: Any, stream: Any, fn: Any, library: Any, reps: int, max_seconds: float) -> tuple[Timing, Timing]:
    """Both sides of a short problem timed from GRAPH_LAUNCHES launches per
    sample, still in alternation: a launch of a few microseconds between two
    events measures Python and the driver as much as the GPU, and timing one
    side so and the other from a graph would compare two different things.
    Each side is a replayed CUDA graph where its calls capture, else its calls
    issued back to back (a library that refuses capture); Timing.method says which."""
    (kernel_call, kernel_graphed), (library_call, library_graphed) = (
        _batched(stream, call, GRAPH_LAUNCHES) for call in (fn, library)
    )
    kernel_ms, library_ms = _alternated(cp, stream, (kernel_call, library_call), reps, max_seconds, None)
    return _per_launch(kernel_ms, kernel_graphed), _per_launch(library_ms, library_graphed)


def _per_launch(samples: list[float], graphed: bool) -> Timing:
    """Samples of GRAPH_LAUNCHES launches each, as figures per launch with their method."""
    per_launch = [t / GRAPH_LAUNCHES for t in samples]
    if graphed:
        return Timing.of(per_launch, graph_launches=GRAPH_LAUNCHES)
    return Timing.of(per_launch, back_to_back=GRAPH_LAUNCHES)


def _batched(stream: Any, fn: Any, count: int) -> tuple[Any, bool]:
    """``count`` calls of ``fn`` as one call, and whether it is a CUDA graph
    (else the calls issued one after the other, for a call that cannot be
    captured)."""
    try:
        graph = _captured(stream, fn, count)
    except Exception:

        def calls() -> None:
            for _ in range(count):
                fn()

        return calls, False
    return (lambda: graph.launch(stream)), True


def _captured(stream: Any, fn: Any, count: int) -> Any:
    """A CUDA graph of ``count`` calls of ``fn`` recorded on ``stream``. A call
    that raises ends the capture before the error goes on, so the stream is
    never left capturing."""
    stream.begin_capture()
    try:
        for _ in range(count):
            fn()
    except BaseException:
        try:
            stream.end_capture()
        except Exception:
            pass  # the failed call invalidated the capture; ending it only takes the stream out of capture mode
        raise
    return stream.end_capture()


@dataclass
class _Measured:
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

            base_timing = None
            if baseline and prepared.baseline is not None:
                prepared.baseline()  # the library's own warm-up (handle, workspace, heuristics)
                cp_stream.synchronize()
                timing, base_timing = _paired_series(cp, cp_stream, launch, prepared.baseline, reps, max_seconds, flush)
            else:
                timing = _timed_series(cp, cp_stream, launch, reps, max_seconds, flush)
            sm_clock_mhz = gpu.current_sm_clock_mhz(device_index)
            clock_events = gpu.clock_slowdown_reasons(device_index)
            when = "after timing"
            if prepared.redraw is not None:
                prepared.redraw()
                when = "after timing, on a second set of inputs"
            prepared.poison()
            launch()
            cp_stream.synchronize()
            error = max(error, _checked(cp, prepared, tolerance, point, when, first_answer))
    return _Measured(timing, error, tolerance, sm_clock_mhz, clock_events, base_timing, prepared.baseline_name, grid)


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
    or a user's kernel (:func:`gemmlab.kernels.user.resolve`); ``kernel_id`` is then only its name.
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
    base = m.baseline_timing
    if base is not None:
        result.baseline_name = m.baseline_name
        result.baseline_timing = base
        result.baseline_gflops = gflops(point.flops, base.median_ms)
        result.baseline_gbytes_per_s = gbytes_per_s(point.min_bytes, base.median_ms)
        # Same work on both sides, so the speed ratio is the inverse time ratio.
        result.ratio_to_baseline = base.median_ms / m.timing.median_ms
    result.sm_clock_after_mhz = m.sm_clock_mhz
    result.warnings = timing_warnings(m.timing, m.clock_events)
    return result


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
            f"{timing.graph_launches} launches, so back-to-back launches overlap their ramp-up and drain"
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


def _checked(
    cp: Any, prepared: Prepared, tolerance: float, point: Point, when: str, first_answer: tuple | None = None
) -> float:
    """The relative error of the last checked launch, after its guard bands;
    VerificationError naming what went wrong."""
    for guard in prepared.guards:
        damage = guard.damage(cp)
        if damage is not None:
            raise VerificationError(
                f"{_where(point, when)}: {damage}.",
                "Check the bounds test before each store (e.g. row < M && col < N) and that the grid covers "
                "the output and no more; `gemmlab check` runs compute-sanitizer for writes further away.",
            )
    error = prepared.error()
    if error <= tolerance:  # written this way so that NaN fails
        return error
    detail = prepared.explain() if prepared.explain is not None else None
    if detail is None and first_answer is not None and _fingerprint(cp, prepared) == first_answer:
        detail = (
            "the output equals its output for the first input set: the kernel ignores its inputs "
            "or returns an answer it computed before"
        )
    raise VerificationError(
        f"{_where(point, when)}: relative error {error:.3g}, tolerance {tolerance:.3g}"
        + (f"; {detail}." if detail else "."),
        "No timing is reported for a wrong result; "
        + (
            "fix the kernel (`gemmlab check` runs compute-sanitizer on it)."
            if point.spec.declaration is not None
            else "please report this with the command you ran."
        ),
    )


def _where(point: Point, when: str) -> str:
    return (
        f"{point.spec.id} gave a wrong result on {point.shape} (block edge {point.block_edge}, {point.dtype}, {when})"
    )


def _fingerprint(cp: Any, prepared: Prepared) -> tuple[float, ...]:
    """A cheap summary of the outputs (one float64 sum each), to tell whether
    a later output is the same as an earlier one."""
    return tuple(float(cp.sum(guard.inner.astype(cp.float64))) for guard in prepared.guards)


def _l2_flusher(cp: Any, info: gpu.DeviceInfo) -> Any:
    """Writing a buffer twice the L2's size between repetitions evicts the inputs."""
    scratch = cp.empty(max(2 * info.l2_bytes, 1 << 20) // 4, dtype=cp.int32)
    state = {"value": 0}

    def flush() -> None:
        state["value"] += 1
        scratch.fill(state["value"])

    return flush
