"""What Nsight Compute counts, and the figures of a profiled launch that follow from the counts.

To add a metric, add one :class:`ProfiledFigure` at the end of :data:`PROFILED`:
its key, a label and unit for people, the ncu counters it needs and the function
that computes it from them (and from the point, for a figure that needs a model
such as 2·M·N·K). Nothing else changes: ncu collects those counters too, the
figure is in every ProfileResult (``--json``, the stored profile_json),
`gemmlab profile` prints it as one more row, and the report makes a table of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from gemmlab.backends import PEERS
from gemmlab.core.errors import ProfilerError
from gemmlab.core.shapes import Shape
from gemmlab.core.timing import gbytes_per_s, gflops
from gemmlab.kernels.spec import Point
from gemmlab.problems.lowp import FP8_WITH_BF16, INT8

# --- the counters ----------------------------------------------------------------

TIME = "gpu__time_duration.sum"
INST_EXECUTED = "smsp__inst_executed.sum"  # warp-level instructions
FADD = "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"
FMUL = "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
# There is no per-opcode IMAD counter among ncu's metrics; the integer class
# counts every integer instruction with its predicate on, index and loop
# arithmetic included (see ops_counter below).
INTEGER = "smsp__sass_thread_inst_executed_op_integer_pred_on.sum"
GLOBAL_LD_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
GLOBAL_ST_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"
GLOBAL_LD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
GLOBAL_ST_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
ACHIEVED_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL_OCCUPANCY = "sm__maximum_warps_per_active_cycle_pct"
LIMIT_BLOCKS = "launch__occupancy_limit_blocks"
LIMIT_REGISTERS = "launch__occupancy_limit_registers"
LIMIT_SHARED_MEM = "launch__occupancy_limit_shared_mem"
LIMIT_WARPS = "launch__occupancy_limit_warps"
REGISTERS = "launch__registers_per_thread"
SMEM_STATIC = "launch__shared_mem_per_block_static"
SMEM_DYNAMIC = "launch__shared_mem_per_block_dynamic"
SM_THROUGHPUT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_THROUGHPUT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SHARED_LD_REQUESTS = "smsp__inst_executed_op_shared_ld.sum"  # one request per warp instruction
SHARED_ST_REQUESTS = "smsp__inst_executed_op_shared_st.sum"
SHARED_LD_WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
SHARED_ST_WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"
BANK_CONFLICTS_LD = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
BANK_CONFLICTS_ST = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
# The tensor cores' operations by input type: ncu counts a multiply-add as two,
# as 2*M*N*K does (on an H200, 2 * 2048^3 exactly for HMMA and HGMMA in each of
# the three types). These are the types of the catalogue's tensor-core kernels;
# the families are disjoint, so their sum counts each MMA once. fp8 and fp64
# are left out: no kernel here issues them (they would add 0), and a chip
# without that path (fp8 before sm_89, fp64 outside the data-centre parts) may
# lack the counter, which makes ncu refuse the whole run. int8 products are
# not FLOPs.
TENSOR_BF16 = "sm__ops_path_tensor_src_bf16_dst_fp32.sum"
TENSOR_FP16 = "sm__ops_path_tensor_src_fp16.sum"  # fp16 inputs, fp16 or fp32 accumulator
TENSOR_TF32 = "sm__ops_path_tensor_src_tf32_dst_fp32.sum"
TENSOR_OPS = (TENSOR_BF16, TENSOR_FP16, TENSOR_TF32)
# The 8-bit paths (FP8: QGMMA/QMMA, INT8: IGMMA/IMMA), 2 per multiply-add as
# above; "src_fp8" sums both accumulator types. Asked for only where the
# kernel's inputs are 8-bit (EIGHT_BIT_DTYPES), so a GPU without an fp8 path
# (before sm_89) still profiles every other kernel. Names as ncu's metric
# lists give them for sm_89/sm_90 (other tools read the same two; an RTX 4090
# capture counted 2·M·N·K in src_fp8); no H100 capture of this repository has
# shown them yet, so benchmarks/scripts/capture_ncu_fixtures.sh checks that
# `ncu --query-metrics` lists them. int8 products are integer operations, and
# the ops label says so.
TENSOR_FP8 = "sm__ops_path_tensor_src_fp8.sum"
TENSOR_INT8 = "sm__ops_path_tensor_src_int8.sum"
TENSOR_8BIT = (TENSOR_FP8, TENSOR_INT8)
EIGHT_BIT_DTYPES = (INT8, *FP8_WITH_BF16)
# A counter, so ncu normalises it by the pipe's own peak rate: the share of the
# elapsed cycles the tensor pipe was busy, averaged over the SMs.
TENSOR_PIPE = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"

# The occupancy limiters as ncu names them (blocks per SM each resource allows).
LIMITERS = {
    "registers": LIMIT_REGISTERS,
    "shared memory": LIMIT_SHARED_MEM,
    "warps": LIMIT_WARPS,
    "blocks": LIMIT_BLOCKS,
}


# --- formulas (pure) ------------------------------------------------------------


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, or None where either is missing or the denominator is 0."""
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def flops_executed(fadd: float, fmul: float, ffma: float) -> float:
    """Floating-point operations the threads executed: an FMA counts as two."""
    return fadd + fmul + 2 * ffma


def uses_tensor_cores(point: Point) -> bool:
    """Whether the kernel's SASS holds a tensor-core instruction (HMMA, HGMMA...), as the
    catalogue claims it and the harness checks in its cubin. A user's kernel and a
    peer rung (Triton, CuTe DSL) claim nothing: their compiler chooses (a tl.dot,
    a wmma in a .cu), so their tensor-core counters are collected too; they read
    zero for a kernel that does not use them."""
    if point.spec.declaration is not None or point.spec.backend == PEERS:
        return point.dtype != "int32"
    return any(op.endswith("MMA") for op in point.spec.sass)


def uses_8bit_tensor_cores(point: Point) -> bool:
    """Whether the kernel multiplies 8-bit inputs on the tensor cores (FP8 or INT8),
    whose operations only the 8-bit counters of :data:`TENSOR_8BIT` see."""
    return uses_tensor_cores(point) and point.dtype in EIGHT_BIT_DTYPES


def tensor_counters_for(point: Point) -> tuple[str, ...]:
    """The tensor-path operation counters summed for ``point``."""
    return TENSOR_OPS + TENSOR_8BIT if uses_8bit_tensor_cores(point) else TENSOR_OPS


def tensor_flops(metrics: dict[str, float | None], names: tuple[str, ...] = TENSOR_OPS) -> float | None:
    """The tensor cores' operations over the counters ``names`` (by default the 16-bit
    and tf32 ones of :data:`TENSOR_OPS`), or None when ncu gave no value for one of
    them: a partial sum would pass for the whole."""
    total = 0.0
    for name in names:
        value = metrics.get(name)
        if value is None:
            return None
        total += value
    return total


def gips(inst_executed: float, time_ns: float) -> float | None:
    """Warp-level instructions per second, in billions (the Poznan report's GIPS)."""
    return ratio(inst_executed, time_ns)  # inst / (t_ns * 1e-9) / 1e9 == inst / t_ns


def cgma(flops: float, ld_requests: float, st_requests: float) -> float | None:
    """FLOPs per global-memory request (warp level, loads and stores): measured CGMA."""
    return ratio(flops, ld_requests + st_requests)


def arithmetic_intensity(flops: float, dram_bytes: float) -> float | None:
    """FLOPs per byte moved to or from DRAM: the roofline's x axis."""
    return ratio(flops, dram_bytes)


def limiting_factors(limits: dict[str, float | None]) -> list[str]:
    """The resources whose block limit is the smallest (ncu's launch__occupancy_limit_*)."""
    known = {name: v for name, v in limits.items() if v is not None}
    if not known:
        return []
    low = min(known.values())
    return [name for name, v in known.items() if v == low]


# --- the figures (pure) ---------------------------------------------------------

Counters = dict[str, float | None]  # one launch's counters by ncu's name, in base units (times in ns)


def _need(metrics: Counters, name: str) -> float:
    value = metrics.get(name)
    if value is None:
        raise ProfilerError(
            f"ncu's output has no value for {name}.",
            "Check that this Nsight Compute supports the GPU (ncu --query-metrics), or report it with `ncu --version`.",
        )
    return value


@dataclass(frozen=True)
class ProfiledFigure:
    """One figure of a profiled launch: what ncu collects for it and how it follows from that."""

    key: str  # its name in ProfileResult.figures, `gemmlab profile --json` and the stored profile_json
    label: str  # for people: the row of `gemmlab profile`, the report's table caption
    unit: str  # "" for a plain count
    counters: tuple[str, ...]
    # From the counters, and the point for the models (FLOPs, bytes): a number, or None where ncu gave no
    # value. Only figures presented by hand hold anything else (the words, dict or list their rows need).
    value: Callable[[Counters, Point], Any]
    # Collected only for a kernel that uses the tensor cores: ncu refuses a whole run that names a counter
    # the GPU lacks ("Failed to find metric", see ncu_failure), and GPUs before sm_80 have no bf16 or tf32
    # path. The tensor-core kernels need sm_80 or newer, where ncu lists them; a CUDA-core kernel on an
    # older GPU profiles without them.
    tensor_counters: tuple[str, ...] = ()
    number_format: str = ",.2f"  # how `gemmlab profile` prints it
    higher_is_better: bool = True  # which block edge the report calls best


def _time_ms(c: Counters) -> float:
    return _need(c, TIME) / 1e6


def _executed(c: Counters, point: Point) -> tuple[float, str, float | None]:
    """(operations executed, what counted them, the tensor cores' share or None)."""
    if point.dtype == "int32":
        return _need(c, INTEGER), "integer instructions (thread level; includes index arithmetic)", None
    ops_counter = "fadd + fmul + 2 x ffma (thread level)"
    executed = flops_executed(_need(c, FADD), _need(c, FMUL), _need(c, FFMA))
    if not uses_tensor_cores(point):
        return executed, ops_counter, None
    # HMMA/HGMMA products are invisible to the thread-level counters; the tensor
    # path's own counters add them. Without a value the total must say what it lacks.
    tensor = tensor_flops(c, tensor_counters_for(point))
    if tensor is None:
        return executed, ops_counter + "; the tensor-core products are not in it (ncu gave no value for them)", None
    return executed + tensor, ops_counter + " + " + _tensor_label(point), tensor


def _tensor_label(point: Point) -> str:
    """What the tensor-core part of the operations executed counts."""
    if not uses_8bit_tensor_cores(point):
        return "tensor-core operations (sm__ops_path_tensor_src_*: bf16, fp16, tf32)"
    if point.dtype == INT8:
        # An int8 kernel's total is mostly integer multiply-adds: operations, not FLOPs.
        return "tensor-core operations (sm__ops_path_tensor_src_*: bf16, fp16, tf32, fp8, int8; int8 ones are integer)"
    return "tensor-core operations (sm__ops_path_tensor_src_*: bf16, fp16, tf32, fp8, int8)"


def _dram_bytes(c: Counters) -> float:
    return _need(c, DRAM_READ) + _need(c, DRAM_WRITE)


def _occupancy_limits(c: Counters) -> dict[str, float | None]:
    return {name: c.get(metric) for name, metric in LIMITERS.items()}


def _smem_per_block(c: Counters) -> float | None:
    smem = [v for v in (c.get(SMEM_STATIC), c.get(SMEM_DYNAMIC)) if v is not None]
    return sum(smem) if smem else None


_OPS = (FADD, FMUL, FFMA, INTEGER)
_GLOBAL_REQUESTS = (GLOBAL_LD_REQUESTS, GLOBAL_ST_REQUESTS)
_DRAM = (DRAM_READ, DRAM_WRITE)
_LIMITS = (LIMIT_BLOCKS, LIMIT_REGISTERS, LIMIT_SHARED_MEM, LIMIT_WARPS)


def _counter(
    key: str, label: str, unit: str, counter: str, *, required: bool = False, tensor: bool = False
) -> ProfiledFigure:
    """A figure that is one counter as ncu gives it: None where it gave no value, unless
    ``required`` (then a missing value is an error); ``tensor``: see tensor_counters."""
    read = (lambda c, p: _need(c, counter)) if required else (lambda c, p: c.get(counter))
    if tensor:
        return ProfiledFigure(key, label, unit, (), read, tensor_counters=(counter,))
    return ProfiledFigure(key, label, unit, (counter,), read)


# The figures `gemmlab profile` has shown since before the registry: cli/profile.py
# writes their rows by hand (several share a row), and the report shows the four it
# keeps in stored columns (gips, cgma_measured, cgma_analytic, achieved_occupancy).
# Their order gives the order of ncu's --metrics list.
PRESENTED_BY_HAND: tuple[ProfiledFigure, ...] = (
    ProfiledFigure("time_ms", "kernel time", "ms", (TIME,), lambda c, p: _time_ms(c)),
    _counter("inst_executed", "instructions executed (warp level)", "", INST_EXECUTED, required=True),
    ProfiledFigure("gips", "GIPS", "10^9/s", (INST_EXECUTED, TIME),
                   lambda c, p: gips(_need(c, INST_EXECUTED), _need(c, TIME))),
    ProfiledFigure("ops_counter", "what the operations executed count", "", _OPS,
                   lambda c, p: _executed(c, p)[1], tensor_counters=TENSOR_OPS),
    # What ops_counter names: CUDA-core FLOPs plus tensor_flops where measured.
    ProfiledFigure("flops_measured", "operations executed", "", _OPS, lambda c, p: _executed(c, p)[0],
                   tensor_counters=TENSOR_OPS),
    # None: not asked for (no MMA in the kernel) or no value.
    ProfiledFigure("tensor_flops", "tensor-core FLOPs", "", (), lambda c, p: _executed(c, p)[2],
                   tensor_counters=TENSOR_OPS),
    ProfiledFigure("flops_model", "FLOPs of the model (2·M·N·K)", "", (), lambda c, p: p.flops),
    ProfiledFigure("flops_ratio", "operations executed over the model", "", _OPS,
                   lambda c, p: ratio(_executed(c, p)[0], p.flops), tensor_counters=TENSOR_OPS),
    # The model's FLOPs over ncu's kernel time.
    ProfiledFigure("gflops", "GFLOPS", "GFLOP/s", (TIME,), lambda c, p: gflops(p.flops, _time_ms(c))),
    _counter("global_ld_requests", "global load requests", "", GLOBAL_LD_REQUESTS, required=True),
    _counter("global_st_requests", "global store requests", "", GLOBAL_ST_REQUESTS, required=True),
    # The CGMA denominator.
    ProfiledFigure("global_requests", "global requests (loads + stores)", "", _GLOBAL_REQUESTS,
                   lambda c, p: _need(c, GLOBAL_LD_REQUESTS) + _need(c, GLOBAL_ST_REQUESTS)),
    _counter("global_ld_sectors", "global load sectors", "", GLOBAL_LD_SECTORS, required=True),
    _counter("global_st_sectors", "global store sectors", "", GLOBAL_ST_SECTORS, required=True),
    ProfiledFigure("ld_sectors_per_request", "sectors per global load request", "",
                   (GLOBAL_LD_SECTORS, GLOBAL_LD_REQUESTS),
                   lambda c, p: ratio(_need(c, GLOBAL_LD_SECTORS), _need(c, GLOBAL_LD_REQUESTS))),
    ProfiledFigure("st_sectors_per_request", "sectors per global store request", "",
                   (GLOBAL_ST_SECTORS, GLOBAL_ST_REQUESTS),
                   lambda c, p: ratio(_need(c, GLOBAL_ST_SECTORS), _need(c, GLOBAL_ST_REQUESTS))),
    _counter("dram_bytes_read", "DRAM bytes read", "byte", DRAM_READ, required=True),
    _counter("dram_bytes_written", "DRAM bytes written", "byte", DRAM_WRITE, required=True),
    ProfiledFigure("dram_bytes", "DRAM bytes read and written", "byte", _DRAM, lambda c, p: _dram_bytes(c)),
    ProfiledFigure("dram_gbs", "DRAM bandwidth", "GB/s", (*_DRAM, TIME),
                   lambda c, p: gbytes_per_s(int(_dram_bytes(c)), _time_ms(c))),
    ProfiledFigure("min_bytes_model", "bytes of the model (inputs read once, output written once)", "byte", (),
                   lambda c, p: p.min_bytes),
    # The model's FLOPs per DRAM byte: the roofline's x axis.
    ProfiledFigure("arithmetic_intensity", "arithmetic intensity", "FLOP/byte", _DRAM,
                   lambda c, p: arithmetic_intensity(p.flops, _dram_bytes(c))),
    ProfiledFigure("cgma_measured", "CGMA, measured", "FLOP/request", (*_OPS, *_GLOBAL_REQUESTS),
                   lambda c, p: cgma(_executed(c, p)[0], _need(c, GLOBAL_LD_REQUESTS), _need(c, GLOBAL_ST_REQUESTS)),
                   tensor_counters=TENSOR_OPS),
    ProfiledFigure("cgma_analytic", "CGMA, analytic", "FLOP/access", (),
                   lambda c, p: None if p.spec.cgma is None else p.spec.cgma(p.shape, p.block_edge)),
    # Percent of the SM's warp slots, averaged over active cycles.
    _counter("achieved_occupancy", "achieved occupancy", "%", ACHIEVED_OCCUPANCY),
    _counter("theoretical_occupancy", "theoretical occupancy", "%", THEORETICAL_OCCUPANCY),
    # Blocks per SM each resource allows, and the resources that allow the fewest.
    ProfiledFigure("occupancy_limits", "blocks per SM allowed by", "blocks", _LIMITS,
                   lambda c, p: _occupancy_limits(c)),
    ProfiledFigure("limiting_factors", "occupancy limited by", "", _LIMITS,
                   lambda c, p: limiting_factors(_occupancy_limits(c))),
    _counter("registers_per_thread", "registers per thread", "", REGISTERS),
    ProfiledFigure("smem_per_block", "shared memory per block", "byte", (SMEM_STATIC, SMEM_DYNAMIC),
                   lambda c, p: _smem_per_block(c)),
    _counter("sm_throughput_pct", "SM throughput", "% of peak", SM_THROUGHPUT),
    # Share of the elapsed cycles the tensor pipe was busy, SM average.
    _counter("tensor_pipe_pct", "tensor pipe busy", "% of peak", TENSOR_PIPE, tensor=True),
    _counter("dram_throughput_pct", "DRAM throughput", "% of peak", DRAM_THROUGHPUT),
    _counter("shared_ld_requests", "shared loads (warp requests)", "", SHARED_LD_REQUESTS),
    _counter("shared_st_requests", "shared stores (warp requests)", "", SHARED_ST_REQUESTS),
    _counter("shared_ld_wavefronts", "shared load wavefronts", "", SHARED_LD_WAVEFRONTS),
    _counter("shared_st_wavefronts", "shared store wavefronts", "", SHARED_ST_WAVEFRONTS),
    _counter("bank_conflicts_ld", "shared bank conflicts, loads", "", BANK_CONFLICTS_LD),
    _counter("bank_conflicts_st", "shared bank conflicts, stores", "", BANK_CONFLICTS_ST),
)  # fmt: skip

# Every figure of a profiled launch, in order. Add a new one at the end (see the
# module's docstring): it gets a row of `gemmlab profile` and a report table.
PROFILED: tuple[ProfiledFigure, ...] = PRESENTED_BY_HAND


def generic_figures() -> tuple[ProfiledFigure, ...]:
    """The figures that `gemmlab profile` and the report present from their entry alone:
    every one but those of :data:`PRESENTED_BY_HAND`."""
    by_hand = {figure.key for figure in PRESENTED_BY_HAND}
    return tuple(figure for figure in PROFILED if figure.key not in by_hand)


def collected_counters(tensor_cores: bool, eight_bit: bool = False) -> tuple[str, ...]:
    """The counters ncu collects: the union of the registry's, in its order, the
    tensor-core ones after the rest and only where the kernel uses the tensor cores,
    the 8-bit ones last and only where its inputs are 8-bit."""
    names = [name for figure in PROFILED for name in figure.counters]
    if tensor_cores:
        names += [name for figure in PROFILED for name in figure.tensor_counters]
    if tensor_cores and eight_bit:
        names += TENSOR_8BIT
    return tuple(dict.fromkeys(names))


def metrics_for(point: Point) -> tuple[str, ...]:
    """The counters ncu collects for ``point``."""
    return collected_counters(uses_tensor_cores(point), uses_8bit_tensor_cores(point))


def figures_of(point: Point, counters: Counters) -> dict[str, Any]:
    """Every figure of the registry for one launch of ``point``, by key."""
    return {figure.key: figure.value(counters, point) for figure in PROFILED}


# --- the result -----------------------------------------------------------------


@dataclass
class ProfileResult:
    """One profiled launch: ncu's counters and the figures of :data:`PROFILED` derived
    from them, each of which reads as an attribute too (``result.gips``).

    FLOPs measured: fadd + fmul + 2 x ffma, thread level, predicate on, and
    for a kernel that uses the tensor cores their operations too
    (``tensor_flops``, 2 per multiply-add). ncu counts every MMA the kernel
    issues in full, so the tiles a kernel pads past the matrix's edge (tc_wmma
    on a ragged size) count as well. For int32 kernels there is no per-opcode
    counter, so ``flops_measured`` holds every integer instruction (predicate
    on, thread level) and ``ops_counter`` says so: it includes index and loop
    arithmetic, and a multiply-add is one IMAD, so it is not comparable one to
    one with the 2*M*N*K model.
    """

    kernel: str
    m: int
    n: int
    k: int
    block_edge: int
    dtype: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    figures: dict[str, Any]  # by ProfiledFigure.key
    device: str = ""
    cc: str = ""
    error: float | None = None  # the child's verified relative error
    ncu_command: list[str] = field(default_factory=list)
    metrics: Counters = field(default_factory=dict)  # every counter as read

    def __getattr__(self, name: str) -> Any:
        # Called only for names that are not fields: the figures.
        figures = self.__dict__.get("figures", {})
        if name in figures:
            return figures[name]
        raise AttributeError(f"{type(self).__name__} has no field or figure {name!r}")

    @property
    def shape(self) -> Shape:
        return Shape(self.m, self.n, self.k)

    def to_dict(self) -> dict:
        """Flat: the figures sit among the launch's fields, as in the stored profile_json."""
        flat: dict = {}
        for name, value in asdict(self).items():
            if name == "figures":
                flat.update(value)
            else:
                flat[name] = value
        return flat


def result_from_metrics(
    point: Point,
    metrics: Counters,
    *,
    device: str = "",
    cc: str = "",
    error: float | None = None,
    command: list[str] | None = None,
) -> ProfileResult:
    """The :class:`ProfileResult` of one launch: its counters and the registry's figures from them."""
    return ProfileResult(
        kernel=point.spec.id,
        m=point.shape.m,
        n=point.shape.n,
        k=point.shape.k,
        block_edge=point.block_edge,
        dtype=point.dtype,
        grid=point.grid,
        block=point.block,
        figures=figures_of(point, metrics),
        device=device,
        cc=cc,
        error=error,
        ncu_command=list(command or []),
        metrics=dict(metrics),
    )
