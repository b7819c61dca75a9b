"""Measured peak rates: how fast this GPU runs one instruction family when
nothing else is in the way, beside the nominal rate at the clock it ran at
(issue #9: "% of the measured peak").

The nominal rate (:mod:`gemmlab.core.gpu`) is FLOPs per SM per clock x SMs x the
SM clock. A GPU under a power cap does not hold its boost clock under
sustained load (an H200 running bf16 products drops from 1980 to about
1450 MHz, ``benchmarks/results/2026-11-21_h200_sustained-clocks.json``), and an
instruction may not reach the per-clock rate at all (the warp-level mma.sync
on Hopper, whose tensor cores are built for wgmma). The measured peak is what
a kernel that does nothing but that instruction reaches, so "% of the measured
peak" says how much of the attainable rate a GEMM gets.

The families (``kernels/peak/``), each keeping one pipe as busy as it can with
no memory traffic in its loop, and a result that depends on every iteration:

- ``ffma``: FP32 FFMA, independent chains in every thread, full occupancy (any GPU);
- ``mma_sync``: the warp's mma.sync, m16n8k16 bf16/fp16 and m16n8k8 tf32, several
  independent accumulators per warp (compute capability 8.0 on);
- ``wgmma``: the warpgroup's wgmma m64n256k16 bf16/fp16 and m64n256k8 tf32, both
  operands from shared memory, two warpgroups per block, one group in flight
  while the next is issued (sm_90a only: compute capability 9.0);
- ``mma_sync_int8``, ``mma_sync_fp8``: mma.sync m16n8k32 in s8 (int32 sums,
  8.0 on) and e4m3 (8.9 only: on 9.0 ptxas turns it into float16 HMMA, which
  measures the conversion, not an FP8 unit; :data:`NOT_MEASURED` says so);
- ``wgmma_int8``, ``wgmma_fp8``: wgmma m64n256k32 in s8 and e4m3, as ``wgmma``.
  int8 rates count an integer multiply-add as two operations, as FLOPs.

FLOPs are what the loop issues: 2·M·N·K per instruction of shape M x N x K (an
FFMA is 1 x 1 x 1 per thread) x the instructions per loop iteration x the threads,
warps or warpgroups that issue them x the blocks x the iterations. The grid fills
the GPU (the blocks the driver's occupancy calculator puts on an SM x the SMs,
all resident at once); each timed launch lasts about :data:`LAUNCH_MS` after
:data:`WARMUP_S` of launches that let the clock settle; the rate is from the
median of :data:`REPS` launches timed with CUDA events, and the SM clock is read
(NVML) right after each of them: the nominal rate is at their median.

Pure: the family table, which families a compute capability has, FLOP counts,
the launch length, the nominal rate and the ratio. :func:`measure` is the GPU part.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gemmlab.backends.nvrtc import Launcher, compile_source
from gemmlab.core import gpu
from gemmlab.core.dtypes import DTYPE_CTYPES
from gemmlab.core.errors import DeviceLimitError, UnknownName
from gemmlab.core.timing import Timing, gflops
from gemmlab.kernels.tensor.family import WARPGROUP
from gemmlab.measure.run import _time, timing_warnings

LAUNCH_MS = 50.0  # each timed launch: launch overhead and the clock reading are small against it
REPS = 10
# Launches before the timed ones: a power-capped GPU lowers its clock over the
# first few hundred ms of sustained load (the sustained-clock benchmark drops
# the first third of 3 s as the ramp).
WARMUP_S = 1.0
PROBE_ITERATIONS = 1024  # the warm-up's launches (about a ms), one timed to size those that last LAUNCH_MS
MAX_ITERATIONS = 2**31 - 1  # the kernels count iterations in an int
SEED = 1  # operand bits and chain starting values; any value does

FFMA_THREADS, FFMA_CHAINS, FFMA_UNROLL = 256, 8, 32
MMA_THREADS, MMA_ACCUMULATORS, MMA_UNROLL = 256, 8, 4
WGMMA_CONSUMERS = 2
# One iteration of the wgmma kernel is one wgmma.cuh wgmma_slice: a 128-byte row of
# K in 32-byte steps (16 bf16/fp16 or 8 tf32 elements each).
WGMMA_SLICE_STEPS = 4


@dataclass(frozen=True)
class Instruction:
    """One instruction of a family, for one element type."""

    dtype: str
    name: str  # the PTX instruction and its shape (the types are in dtype)
    shape: tuple[int, int, int]  # M, N, K of one instruction's product (an FFMA: 1, 1, 1 per thread)

    @property
    def flops(self) -> int:
        m, n, k = self.shape
        return 2 * m * n * k


def _fp32_rate(info: gpu.DeviceInfo, dtype: str, clock_mhz: float | None) -> float | None:
    """The FP32 lanes' rate (two FLOPs per FFMA) at ``clock_mhz`` (None: the boost clock)."""
    return info.fp32_gflops_at(clock_mhz)


def _tensor_rate(info: gpu.DeviceInfo, dtype: str, clock_mhz: float | None) -> float | None:
    """The tensor cores' dense rate for ``dtype`` at ``clock_mhz`` (None: the boost clock)."""
    return info.peak_tensor_gflops(dtype, clock_mhz)


@dataclass(frozen=True)
class Family:
    """One microbenchmark kernel and the instructions it measures."""

    id: str
    source: str  # file under gemmlab/kernels/
    function: str  # the __global__ template
    instructions: tuple[Instruction, ...]
    threads: int  # per block
    issuer_threads: int  # threads that issue one instruction together: 1, a warp (32), a warpgroup (128)
    per_iteration: int  # instructions each issuer issues per loop iteration
    template: tuple[int, ...]  # template arguments after the element type's tag
    sass: str  # the instruction's SASS opcode: every one in the cubin is in the loop
    # GFLOP/s the hardware is rated for: (device, dtype, SM clock in MHz) -> rate.
    rate: Callable[[gpu.DeviceInfo, str, float | None], float | None]
    typed: bool = True  # templated on the element type's tag (first template argument)
    min_cc: tuple[int, int] = (0, 0)
    max_cc: tuple[int, int] | None = None  # the newest compute capability that has the instruction
    arch_suffix: str = ""  # "a": architecture-specific instructions (wgmma: sm_90a)

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(i.dtype for i in self.instructions)

    def instruction(self, dtype: str) -> Instruction:
        for found in self.instructions:
            if found.dtype == dtype:
                return found
        raise UnknownName(f"The {self.id} peak kernel has no {dtype} version.", f"It takes {', '.join(self.dtypes)}.")

    def applies(self, cc: tuple[int, int]) -> bool:
        """Whether a GPU of compute capability ``cc`` has this family's instructions."""
        return cc >= self.min_cc and (self.max_cc is None or cc <= self.max_cc)

    def compile_arch(self, cc: tuple[int, int]) -> str:
        return f"sm_{cc[0]}{cc[1]}{self.arch_suffix}"

    def name_expression(self, dtype: str) -> str:
        self.instruction(dtype)  # an element type the family lacks is an error, not a silent instantiation
        args = [DTYPE_CTYPES[dtype]] if self.typed else []
        args += [str(v) for v in self.template]
        return f"{self.function}<{', '.join(args)}>"

    def nominal_gflops(self, info: gpu.DeviceInfo, dtype: str, clock_mhz: float | None) -> float | None:
        """The rate this family's ``dtype`` instruction is rated for on ``info``
        at ``clock_mhz`` (None: the boost clock), or None where it is not known."""
        self.instruction(dtype)
        return self.rate(info, dtype, clock_mhz)

    def launch_flops(self, dtype: str, blocks: int, iterations: int) -> int:
        """FLOPs one launch of ``blocks`` blocks and ``iterations`` loop iterations issues."""
        issuers = blocks * (self.threads // self.issuer_threads)
        return self.instruction(dtype).flops * self.per_iteration * issuers * iterations


def _mma_sync_family(
    id: str,
    source: str,
    function: str,
    instructions: tuple[Instruction, ...],
    sass: str,
    min_cc: tuple[int, int],
    max_cc: tuple[int, int] | None = None,
) -> Family:
    """A family of warp-wide mma.sync kernels (peak/mma_sync*.cu): one warp issues
    each instruction, on the compute capabilities from min_cc to max_cc."""
    return Family(
        id=id,
        source=source,
        function=function,
        instructions=instructions,
        threads=MMA_THREADS,
        issuer_threads=32,
        per_iteration=MMA_ACCUMULATORS * MMA_UNROLL,
        template=(MMA_THREADS, MMA_ACCUMULATORS, MMA_UNROLL),
        sass=sass,
        rate=_tensor_rate,
        min_cc=min_cc,
        max_cc=max_cc,
    )


def _wgmma_family(id: str, source: str, function: str, instructions: tuple[Instruction, ...], sass: str) -> Family:
    """A family of wgmma kernels (peak/wgmma*.cu): one warpgroup issues each
    instruction, and only sm_90a has them (later architectures have other
    matrix instructions)."""
    return Family(
        id=id,
        source=source,
        function=function,
        instructions=instructions,
        threads=WGMMA_CONSUMERS * WARPGROUP,
        issuer_threads=WARPGROUP,
        per_iteration=WGMMA_SLICE_STEPS,
        template=(WGMMA_CONSUMERS,),
        sass=sass,
        rate=_tensor_rate,
        min_cc=(9, 0),
        max_cc=(9, 0),
        arch_suffix="a",
    )


FAMILIES: tuple[Family, ...] = (
    Family(
        id="ffma",
        source="peak/ffma.cu",
        function="peak_ffma",
        instructions=(Instruction("float32", "fma.rn.f32", (1, 1, 1)),),
        threads=FFMA_THREADS,
        issuer_threads=1,
        per_iteration=FFMA_CHAINS * FFMA_UNROLL,
        template=(FFMA_THREADS, FFMA_CHAINS, FFMA_UNROLL),
        sass="FFMA",
        rate=_fp32_rate,
        typed=False,
    ),
    _mma_sync_family(
        "mma_sync",
        "peak/mma_sync.cu",
        "peak_mma",
        (
            Instruction("bfloat16", "mma.sync.m16n8k16", (16, 8, 16)),
            Instruction("float16", "mma.sync.m16n8k16", (16, 8, 16)),
            Instruction("tf32", "mma.sync.m16n8k8", (16, 8, 8)),
        ),
        sass="HMMA",
        min_cc=(8, 0),  # mma.sync with bf16 and tf32 inputs
    ),
    _wgmma_family(
        "wgmma",
        "peak/wgmma.cu",
        "peak_wgmma",
        (
            Instruction("bfloat16", "wgmma.m64n256k16", (64, 256, 16)),
            Instruction("float16", "wgmma.m64n256k16", (64, 256, 16)),
            Instruction("tf32", "wgmma.m64n256k8", (64, 256, 8)),
        ),
        sass="HGMMA",
    ),
)
# The 8-bit families: a family has one SASS opcode, and FP8 and int8 differ in it.
_MMA_SYNC8 = ("peak/mma_sync8.cu", "peak_mma8")
_WGMMA8 = ("peak/wgmma8.cu", "peak_wgmma8")
FAMILIES += (
    _mma_sync_family(
        "mma_sync_int8",
        *_MMA_SYNC8,
        (Instruction("int8", "mma.sync.m16n8k32", (16, 8, 32)),),
        sass="IMMA",
        min_cc=(8, 0),
    ),
    # Ada's; Hopper emulates it (see NOT_MEASURED).
    _mma_sync_family(
        "mma_sync_fp8",
        *_MMA_SYNC8,
        (Instruction("e4m3", "mma.sync.m16n8k32", (16, 8, 32)),),
        sass="QMMA",
        min_cc=(8, 9),
        max_cc=(8, 9),
    ),
    _wgmma_family("wgmma_int8", *_WGMMA8, (Instruction("int8", "wgmma.m64n256k32", (64, 256, 32)),), sass="IGMMA"),
    # Every FP8 pair the rungs run: Hopper's datasheet gives FP8 one rate, and this measures each.
    _wgmma_family(
        "wgmma_fp8",
        *_WGMMA8,
        tuple(Instruction(d, "wgmma.m64n256k32", (64, 256, 32)) for d in ("e4m3", "e5m2", "e5m2xe4m3")),
        sass="QGMMA",
    ),
)
# Families a compute capability could run but that would not measure what
# their name says: (family, compute capability) -> why it is left out.
NOT_MEASURED = {
    ("mma_sync_fp8", (9, 0)): "Hopper has no FP8 mma.sync: ptxas converts the bytes to float16 and runs HMMA, "
    "so the rate would be the conversion's; FP8 on Hopper is wgmma_fp8",
}


def left_out(cc: tuple[int, int]) -> list[tuple[str, str]]:
    """(family, reason) for the families a GPU of compute capability ``cc`` does not measure although they compile."""
    return [(family, why) for (family, at), why in NOT_MEASURED.items() if at == cc]


DTYPES: tuple[str, ...] = tuple(dict.fromkeys(d for f in FAMILIES for d in f.dtypes))


def checked_dtypes(dtypes: Iterable[str] | None) -> tuple[str, ...] | None:
    """``dtypes`` as given (None: all), or UnknownName naming the ones measured."""
    if not dtypes:
        return None
    chosen = tuple(dict.fromkeys(dtypes))
    unknown = [d for d in chosen if d not in DTYPES]
    if unknown:
        raise UnknownName(f"No peak is measured for {', '.join(unknown)}.", f"Use --dtype {' or '.join(DTYPES)}.")
    return chosen


def families_for(cc: tuple[int, int], dtypes: Iterable[str] | None = None) -> list[tuple[Family, Instruction]]:
    """What a GPU of compute capability ``cc`` measures: (family, instruction)
    for every family it has and every element type asked for (None: all)."""
    wanted = checked_dtypes(dtypes) or DTYPES
    return [(f, i) for f in FAMILIES if f.applies(cc) for i in f.instructions if i.dtype in wanted]


def iterations_for(target_ms: float, probe_ms: float, probe_iterations: int) -> int:
    """Loop iterations that make a launch last about ``target_ms``, from a launch of
    ``probe_iterations`` that took ``probe_ms`` (the time is linear in them)."""
    if probe_ms <= 0:
        return probe_iterations
    return max(1, min(MAX_ITERATIONS, round(probe_iterations * target_ms / probe_ms)))


@dataclass
class Peak:
    """One family's measured rate for one element type."""

    family: str
    instruction: str
    dtype: str
    gflops: float
    nominal_gflops: float | None  # at sm_clock_after_mhz (or the boost clock when that is unknown)
    sm_clock_after_mhz: float | None  # the median of the readings right after each timed launch
    timing: Timing
    flops: int  # per launch
    iterations: int  # loop iterations per launch
    grid: int  # blocks
    block: int  # threads per block
    registers: int
    arch: str
    warnings: list[str] = field(default_factory=list)

    @property
    def ratio_to_nominal(self) -> float | None:
        return self.gflops / self.nominal_gflops if self.nominal_gflops else None

    def to_dict(self) -> dict:
        return {**asdict(self), "ratio_to_nominal": self.ratio_to_nominal}

    def row(self) -> dict:
        """The flat row :meth:`gemmlab.store.store.Store.add_peaks` stores."""
        row = self.to_dict()
        timing = row.pop("timing")
        row.update({key: timing[key] for key in ("median_ms", "min_ms", "max_ms", "reps")})
        return row


def best_by_dtype(peaks: Sequence[Peak]) -> dict[str, Peak]:
    """The fastest family of each element type: the GPU's measured peak for it."""
    best: dict[str, Peak] = {}
    for p in peaks:
        if p.dtype not in best or p.gflops > best[p.dtype].gflops:
            best[p.dtype] = p
    return best


# --- the GPU part -------------------------------------------------------------------


def measure(
    dtypes: Iterable[str] | None = None,
    *,
    device_index: int = 0,
    launch_ms: float = LAUNCH_MS,
    reps: int = REPS,
    warmup_s: float = WARMUP_S,
) -> list[Peak]:
    """Measure every family this GPU has, for ``dtypes`` (None: all), in the order of :data:`FAMILIES`.

    Raises NoGPUError without a GPU, UnknownName for an element type no
    family measures, DeviceLimitError when this GPU has none of those asked for.
    """
    wanted = checked_dtypes(dtypes)
    cp = gpu.cupy()
    info = gpu.describe(device_index)
    plan = families_for(info.cc, wanted)
    if not plan:
        asked = ", ".join(wanted or DTYPES)
        raise DeviceLimitError(
            f"{info.name} (compute capability {info.cc[0]}.{info.cc[1]}) has no peak kernel for {asked}: mma.sync "
            "needs 8.0 or newer, wgmma 9.0.",
            "Use --dtype float32 (FFMA runs on every GPU).",
        )
    from cuda.core import Device

    Device(device_index).set_current()
    with cp.cuda.Device(device_index):
        cp_stream = cp.cuda.Stream(non_blocking=True)
        with cp_stream:
            return [_measure_one(cp, cp_stream, info, f, i, launch_ms, reps, warmup_s) for f, i in plan]


def _measure_one(
    cp: Any, cp_stream: Any, info: gpu.DeviceInfo, family: Family, instruction: Instruction, launch_ms: float,
    reps: int, warmup_s: float,
) -> Peak:  # fmt: skip
    import numpy as np
    from cuda.core import LaunchConfig, ObjectCode, Stream

    dtype = instruction.dtype
    compiled = compile_source(f"peak_{family.id}", family.source, family.name_expression(dtype),
                              family.compile_arch(info.cc))  # fmt: skip
    kernel = ObjectCode.from_cubin(compiled.cubin).get_kernel(compiled.mangled_name)
    per_sm = kernel.occupancy.max_active_blocks_per_multiprocessor(family.threads, 0)
    if per_sm < 1:
        raise DeviceLimitError(
            f"The {family.id} peak kernel ({compiled.resources.registers} registers, {family.threads} threads) "
            f"fits no block on an SM of {info.name}.",
            "Please report this with `gemmlab devices --json`.",
        )
    blocks = per_sm * info.sm_count
    out = cp.empty(blocks * family.threads, dtype=cp.float32)
    config = LaunchConfig(grid=blocks, block=family.threads)
    stream = Stream.from_handle(cp_stream.ptr)

    def launcher(iterations: int) -> Launcher:
        return Launcher(kernel, config, stream, (out.data.ptr, np.int32(iterations), np.uint32(SEED)))

    # Short launches back to back until the clock has settled under this
    # load; timed then, the probe sizes launches that last launch_ms at the
    # clock the timed ones will run at.
    probe = launcher(PROBE_ITERATIONS)
    deadline = time.monotonic() + warmup_s
    while True:
        probe()
        cp_stream.synchronize()
        if time.monotonic() >= deadline:
            break
    (probe_ms,) = _time(cp, cp_stream, probe, 1, None)
    iterations = iterations_for(launch_ms, probe_ms, PROBE_ITERATIONS)
    timed = launcher(iterations)
    samples, clocks = [], []
    for _ in range(reps):
        samples += _time(cp, cp_stream, timed, 1, None)
        clocks.append(gpu.current_sm_clock_mhz(info.index))
    clock_events = gpu.clock_slowdown_reasons(info.index)

    timing = Timing.of(samples)
    read = [c for c in clocks if c is not None]
    clock = statistics.median(read) if read else None
    flops = family.launch_flops(dtype, blocks, iterations)
    warnings = timing_warnings(timing, clock_events)
    if clock is None:
        warnings.append("SM clock unreadable (no NVML: install nvidia-ml-py): the nominal rate is at the boost clock")
    return Peak(
        family=family.id,
        instruction=instruction.name,
        dtype=dtype,
        gflops=gflops(flops, timing.median_ms),
        nominal_gflops=family.nominal_gflops(info, dtype, clock),
        sm_clock_after_mhz=clock,
        timing=timing,
        flops=flops,
        iterations=iterations,
        grid=blocks,
        block=family.threads,
        registers=compiled.resources.registers,
        arch=compiled.arch,
        warnings=warnings,
    )
