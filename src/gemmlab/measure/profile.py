"""The profiler's view of one kernel launch, read from NVIDIA Nsight Compute.

The parent (:func:`profile_point`) starts::

    ncu --clock-control none --metrics M1,M2,... --kernel-name-base mangled
        --kernel-name <mangled name> --launch-skip 1 --launch-count 1
        --csv --page raw --print-units base
        python -m gemmlab.measure.profile KERNEL EDGE M N K DTYPE

(with the tensor-core counters too for a kernel that uses the tensor cores),
and the child runs that one point through the normal runner (fresh inputs,
warm-up launch, timed launches, verification), so the launch ncu measures is
one whose output is checked in the same run. The parent reads ncu's raw CSV
page and turns the counters into the figures the documents report (GIPS,
CGMA, occupancy) beside the models of the catalogue.

ncu keeps its default cache control: it flushes the caches before each replay
pass, so DRAM bytes read are those of a cold L2. Writes are counted when they
leave the L2, which is write-back: an output that fits in it (4 MB at N = 1024
in float32, against 50 MB of L2 on an H200) can show 0 bytes written.

Everything below the command line itself is pure: the formulas, the CSV
parser and the reading of ncu's failure messages are tested without a GPU.

To add a metric, add one :class:`ProfiledFigure` at the end of :data:`PROFILED`:
its key, a label and unit for people, the ncu counters it needs and the function
that computes it from them (and from the point, for a figure that needs a model
such as 2·M·N·K). Nothing else changes: ncu collects those counters too, the
figure is in every ProfileResult (``--json``, the stored profile_json),
`gemmlab profile` prints it as one more row, and the report makes a table of it.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from gemmlab.backends import PEERS
from gemmlab.core import errors
from gemmlab.core.errors import DeviceLimitError, GemmlabError, ProfilerError
from gemmlab.core.shapes import Shape
from gemmlab.core.timing import gbytes_per_s, gflops
from gemmlab.kernels import catalogue
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

# The child launches the kernel once as a warm-up, then for the timed series,
# then once more to verify. ncu skips the warm-up (its first launch loads the
# module) and measures the first timed launch: that index depends only on the
# warm-up count the child passes, not on how many repetitions the runner plans.
WARMUP_LAUNCHES = 1
PROFILED_LAUNCH = WARMUP_LAUNCHES

# Where ncu lives when it is not on PATH: the CUDA toolkit's bin folder, the
# standalone installer's folders, and the toolkit's bundled copy.
NCU_SEARCH_GLOBS: tuple[str, ...] = (
    "/usr/local/cuda/bin/ncu",
    "/opt/nvidia/nsight-compute/*/ncu",
    "/usr/local/cuda/nsight-compute*/ncu",
    "/usr/local/cuda-*/bin/ncu",
    "/usr/local/cuda-*/nsight-compute*/ncu",
)

STILL_WORKS = (
    "Without the profiler these still work: `gemmlab run`, `gemmlab sweep`, `gemmlab reproduce` "
    "(without --profile), `gemmlab compile` and `gemmlab occupancy`."
)

CHILD_RESULT = "gemmlab-profile-run: "
CHILD_ERROR = "gemmlab-profile-error: "

DEFAULT_TIMEOUT_S = 600.0


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


# --- ncu's raw CSV page (pure) --------------------------------------------------

_TIME_UNITS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
               "second": 1e9, "s": 1e9}  # fmt: skip
_PREFIXED = re.compile(r"^([KMGT])(byte|sector|request|inst|warp|wavefront|block|cycle)$")
_PREFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def unit_factor(unit: str) -> float:
    """Factor that brings a value printed in ``unit`` to the base unit (times to ns).

    ``--print-units base`` already prints base units; this keeps a capture made
    without it (ncu then scales per value: usecond, Mbyte...) from being misread.
    """
    unit = unit.strip()
    if unit in _TIME_UNITS:
        return _TIME_UNITS[unit]
    if m := _PREFIXED.match(unit):
        return _PREFIX[m.group(1)]
    return 1.0


def parse_number(text: str) -> float | None:
    """A value as ncu prints it: thousands separators allowed, 'n/a' or empty is None."""
    cleaned = text.strip().replace(",", "")
    if not cleaned:
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


@dataclass(frozen=True)
class RawPage:
    """ncu's ``--page raw --csv`` output: the units row and one row per profiled launch."""

    units: dict[str, str]
    launches: list[dict[str, str]]

    def metrics(self, index: int = -1) -> dict[str, float | None]:
        """One launch's metrics as numbers in base units (times in ns)."""
        row = self.launches[index]
        return {
            name: (v * unit_factor(self.units.get(name, "")) if (v := parse_number(row[name])) is not None else None)
            for name in row
            if "__" in name  # metric columns; the others are ID, Kernel Name, Grid Size...
        }


def parse_raw_csv(text: str) -> RawPage:
    """Read the raw page out of everything ncu and the program printed.

    The page is a header row (``"ID","Process ID",...,"Kernel Name",...`` then one
    column per metric), a units row (empty ID) and one row per launch (numeric
    ID). ``==PROF==`` lines and the program's own output come before it; every
    row of the page is quoted, so lines that do not start with a quote are not
    part of it.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        return RawPage({}, [])
    rows = list(csv.reader(line for line in lines[start:] if line.startswith('"')))
    header = rows[0]
    units: dict[str, str] = {}
    launches = []
    for row in rows[1:]:
        if len(row) != len(header):
            continue
        record = dict(zip(header, row, strict=True))
        if record["ID"].strip().isdigit():
            launches.append(record)
        elif not units and not record["ID"].strip():
            units = record
    return RawPage(units, launches)


# --- ncu's failures (pure) ------------------------------------------------------

_UNKNOWN_METRIC = re.compile(r"Failed to find metric (\S+)", re.IGNORECASE)


def missing_ncu_error() -> ProfilerError:
    return ProfilerError(
        "Nsight Compute (ncu) was not found on PATH, in /usr/local/cuda/bin or under /opt/nvidia/nsight-compute.",
        "Install it with the CUDA toolkit (package cuda-nsight-compute-XX-Y, or the standalone installer from "
        "https://developer.nvidia.com/nsight-compute) and put the folder holding `ncu` on PATH. " + STILL_WORKS,
    )


def ncu_failure(output: str, returncode: int) -> GemmlabError | None:
    """The error a failed or empty ncu run stands for, or None when it went well.

    Checked in order of cause: counters the driver withholds, a GPU ncu cannot
    profile, a metric this ncu lacks, the program's own error, nothing profiled.
    """
    low = output.lower()
    if "err_nvgpuctrperm" in low or "does not have permission to access nvidia gpu performance counters" in low:
        return ProfilerError(
            "ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): the driver keeps them for "
            "administrators.",
            "Run the command as root, or let every user read them (set NVreg_RestrictProfilingToAdminUsers=0 for "
            "the nvidia kernel module and reload it; see https://developer.nvidia.com/ERR_NVGPUCTRPERM). "
            + STILL_WORKS,
        )
    if "profiling is not supported on this device" in low or "device not supported" in low:
        return ProfilerError(
            "ncu cannot profile this GPU: it reports that profiling is not supported on this device (a "
            "virtualised GPU without profiling enabled, or a GPU this ncu version does not know).",
            "Profile on a bare-metal GPU or a vGPU with profiling enabled, or install a newer Nsight Compute. "
            + STILL_WORKS,
        )
    if "failed to initialize the profiler" in low or "librarynotloaded" in low:
        return ProfilerError(
            'ncu could not start its profiler on this machine ("Failed to initialize the profiler"); sandboxed '
            "or virtualised runtimes often hide the counters.",
            "Profile on a machine with direct access to the GPU. " + STILL_WORKS,
        )
    if m := _UNKNOWN_METRIC.search(output):
        name = m.group(1).rstrip(".")
        base = name.split(".")[0]
        everything = collected_counters(tensor_cores=True, eight_bit=True)
        tensor_only = set(everything) - set(collected_counters(tensor_cores=False))
        if base in {metric.split(".")[0] for metric in tensor_only}:
            # Only tensor-core kernels ask for these, so the other kernels still profile on this GPU.
            return ProfilerError(
                f"Nsight Compute has no counter {name} for this GPU; gemmlab reads it for the kernels that use "
                "the tensor cores (their operations and the tensor pipe's busy share).",
                f"Install Nsight Compute 2023.1 or newer. If `ncu --query-metrics` lists no {base} on this GPU, "
                "please report it with `ncu --version` and the GPU's name; kernels without tensor cores still "
                "profile, and `gemmlab run` times this one.",
            )
        return ProfilerError(
            f"This Nsight Compute does not know the metric {name}, which gemmlab reads.",
            "Install Nsight Compute 2023.1 or newer (the one of your CUDA toolkit usually is).",
        )
    if child := _child_error(output):
        return child
    if reported := [line for line in output.splitlines() if line.startswith("==ERROR==")]:
        return ProfilerError("ncu failed: " + " ".join(reported), "Please report it with `ncu --version`.")
    if returncode != 0:
        tail = "\n".join(line for line in output.splitlines()[-15:] if line.strip())
        return ProfilerError(f"ncu exited with status {returncode}. Its last lines:\n{tail}")
    if not parse_raw_csv(output).launches:
        return ProfilerError(
            "ncu ran but profiled no launch of the kernel (the launch index or the name filter matched nothing).",
            "Please report this with `gemmlab profile ... --json` output and `ncu --version`.",
        )
    return None


def _child_error(output: str) -> GemmlabError | None:
    """The gemmlab error the child printed (a wrong result, a device limit...), re-raised as its own class."""
    for line in output.splitlines():
        if line.startswith(CHILD_ERROR):
            info = json.loads(line.removeprefix(CHILD_ERROR))
            cls = getattr(errors, info.get("type", ""), GemmlabError)
            if not (isinstance(cls, type) and issubclass(cls, GemmlabError)):
                cls = GemmlabError
            return cls(info["cause"], info.get("fix", ""))
    return None


def child_summary(output: str) -> dict:
    """What the child reported about its run (device name, error against float64)."""
    for line in output.splitlines():
        if line.startswith(CHILD_RESULT):
            return json.loads(line.removeprefix(CHILD_RESULT))
    return {}


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


def result_from_output(
    point: Point, output: str, command: list[str] | None = None, returncode: int = 0
) -> ProfileResult:
    """Parse a whole ncu run (stdout and stderr) for ``point``; raise what a failure stands for."""
    if failure := ncu_failure(output, returncode):
        raise failure
    page = parse_raw_csv(output)
    summary = child_summary(output)
    return result_from_metrics(
        point,
        page.metrics(-1),
        device=summary.get("device", ""),
        cc=page.launches[-1].get("CC", ""),
        error=summary.get("error"),
        command=command,
    )


# --- running ncu ----------------------------------------------------------------


def find_ncu() -> str:
    """The ncu executable: PATH first, then the usual install folders (newest first)."""
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in NCU_SEARCH_GLOBS:
        for candidate in sorted(glob.glob(pattern), reverse=True):
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
    raise missing_ncu_error()


def mangled_name(point: Point) -> str:
    """The kernel's mangled name: it carries the template arguments, so `tiled<float, 16>`
    never matches `tiled_2x2` or another edge. The name does not depend on the
    architecture, so the oldest target the kernel compiles for will do (the compile
    is cached); bf16 mma.sync needs sm_80, wgmma sm_90a."""
    from gemmlab.backends.nvrtc import KNOWN_ARCHS, compile_kernel

    if point.spec.backend == "python":  # a user's Python function: its kernel is named by Triton or the declaration
        from gemmlab.kernels.callables import profiled_name

        return profiled_name(point.spec)  # type: ignore[arg-type]
    if point.spec.backend == PEERS:  # a Triton or CuTe DSL rung: the name its compiler gives the kernel
        return point.spec.kernel_name  # type: ignore[attr-defined]
    targets = (_target(point, arch) for arch in KNOWN_ARCHS)
    arch = next(target for target in targets if target)
    return compile_kernel(point.spec, point.block_edge, point.dtype, arch).mangled_name


def _target(point: Point, arch: str) -> str | None:
    """What the catalogue compiles ``point``'s kernel for on ``arch`` (sm_90 -> sm_90a), or None."""
    try:
        return point.spec.compile_arch(arch)
    except DeviceLimitError:
        return None


def ncu_command(
    ncu: str, kernel_name: str, point: Point, python: str = sys.executable, skip: int = PROFILED_LAUNCH
) -> list[str]:
    """The whole command line that profiles ``point`` (pure); ``skip``: the
    launches of the kernel before the one measured."""
    s = point.shape
    return [
        ncu,
        "--clock-control", "none",  # leave the clocks as they are; the timing runs see the same
        "--metrics", ",".join(metrics_for(point)),
        "--kernel-name-base", "mangled",
        "--kernel-name", kernel_name,
        "--launch-skip", str(skip),
        "--launch-count", "1",
        "--csv",
        "--page", "raw",
        "--print-units", "base",
        python, "-m", "gemmlab.measure.profile",
        # A user's kernel by its declaration's path: the child reads it again.
        catalogue.reference(point.spec.id), str(point.block_edge), str(s.m), str(s.n), str(s.k), point.dtype,
    ]  # fmt: skip


def command_for(kernel_id: str, shape: Shape, block_edge: int | None = None, dtype: str | None = None) -> list[str]:
    """Check the point, find ncu, and build the command for it."""
    point = catalogue.point(kernel_id, shape, block_edge, dtype)
    return ncu_command(find_ncu(), mangled_name(point), point, skip=launches_to_skip(point))


def launches_to_skip(point: Point) -> int:
    """Launches of the kernel before the first timed one: the warm-up, and for
    a peer rung the launches its backend makes while it chooses a configuration."""
    if point.spec.backend == PEERS:
        from gemmlab.backends.peers import bind_launches

        return bind_launches(point.spec, point.dtype) + PROFILED_LAUNCH  # type: ignore[arg-type]
    return PROFILED_LAUNCH


def ncu_environment() -> dict[str, str]:
    """The environment ncu runs in: numbers printed with '.' as the decimal point."""
    env = dict(os.environ)
    env.pop("LC_ALL", None)
    env["LC_NUMERIC"] = "C"
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def profile_point(
    kernel_id: str,
    shape: Shape,
    block_edge: int | None = None,
    dtype: str | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> ProfileResult:
    """Profile one verified launch of ``kernel_id`` on ``shape`` under Nsight Compute.

    Raises ConstraintError before starting anything when the point cannot run,
    ProfilerError when ncu is missing or cannot read the counters, and the
    child's own error (VerificationError, DeviceLimitError...) when the run fails.
    """
    point = catalogue.point(kernel_id, shape, block_edge, dtype)
    command = ncu_command(find_ncu(), mangled_name(point), point, skip=launches_to_skip(point))
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=ncu_environment())
    except subprocess.TimeoutExpired:
        raise ProfilerError(
            f"ncu did not finish profiling {point.spec.id} on {shape} within {timeout:.0f} s.",
            "Profile a smaller size: ncu replays the launch once per group of counters.",
        ) from None
    return result_from_output(point, proc.stdout + "\n" + proc.stderr, command, proc.returncode)


# --- the child ------------------------------------------------------------------


def _child(argv: list[str]) -> int:
    """Run one point through the runner; ncu measures its first timed launch."""
    kernel_id, edge, m, n, k, dtype = argv
    from gemmlab.measure.run import run

    try:
        result = run(kernel_id, Shape(int(m), int(n), int(k)), int(edge), dtype, reps=1,
                     warmup=WARMUP_LAUNCHES, baseline=False)  # fmt: skip
    except GemmlabError as exc:
        info = {"type": type(exc).__name__, "cause": exc.cause, "fix": exc.fix}
        print(CHILD_ERROR + json.dumps(info), flush=True)
        return exc.exit_code
    info = {"device": result.device.get("name", ""), "error": result.error, "arch": result.arch}
    print(CHILD_RESULT + json.dumps(info), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
