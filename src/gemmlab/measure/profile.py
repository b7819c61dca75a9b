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
from dataclasses import asdict, dataclass, field

from gemmlab.core import errors
from gemmlab.core.errors import DeviceLimitError, GemmlabError, ProfilerError
from gemmlab.core.shapes import Shape
from gemmlab.core.timing import gbytes_per_s, gflops
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import Point

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
# A counter, so ncu normalises it by the pipe's own peak rate: the share of the
# elapsed cycles the tensor pipe was busy, averaged over the SMs.
TENSOR_PIPE = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"

METRICS: tuple[str, ...] = (
    TIME, INST_EXECUTED, FADD, FMUL, FFMA, INTEGER,
    GLOBAL_LD_REQUESTS, GLOBAL_ST_REQUESTS, GLOBAL_LD_SECTORS, GLOBAL_ST_SECTORS,
    DRAM_READ, DRAM_WRITE,
    ACHIEVED_OCCUPANCY, THEORETICAL_OCCUPANCY,
    LIMIT_BLOCKS, LIMIT_REGISTERS, LIMIT_SHARED_MEM, LIMIT_WARPS,
    REGISTERS, SMEM_STATIC, SMEM_DYNAMIC,
    SM_THROUGHPUT, DRAM_THROUGHPUT,
    SHARED_LD_REQUESTS, SHARED_ST_REQUESTS, SHARED_LD_WAVEFRONTS, SHARED_ST_WAVEFRONTS,
    BANK_CONFLICTS_LD, BANK_CONFLICTS_ST,
)  # fmt: skip
# Asked for only where the kernel uses the tensor cores (see metrics_for): ncu
# refuses a whole run that names a counter the GPU lacks ("Failed to find
# metric", see ncu_failure), and GPUs before sm_80 have no bf16 or tf32 path.
# The tensor-core kernels need sm_80 or newer, where ncu lists these counters;
# a CUDA-core kernel on an older GPU profiles as before.
TENSOR_METRICS: tuple[str, ...] = (*TENSOR_OPS, TENSOR_PIPE)

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
    catalogue claims it and the harness checks in its cubin."""
    return any(op.endswith("MMA") for op in point.spec.sass)


def metrics_for(point: Point) -> tuple[str, ...]:
    """The counters ncu collects for ``point``: the tensor-core ones only where it uses them."""
    return METRICS + TENSOR_METRICS if uses_tensor_cores(point) else METRICS


def tensor_flops(metrics: dict[str, float | None]) -> float | None:
    """The tensor cores' operations over the input types of :data:`TENSOR_OPS`, or None
    when ncu gave no value for one of them: a partial sum would pass for the whole."""
    total = 0.0
    for name in TENSOR_OPS:
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
        if base in {metric.split(".")[0] for metric in TENSOR_METRICS}:
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
    """One profiled launch: ncu's counters and the figures derived from them.

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
    time_ms: float
    inst_executed: float
    gips: float | None
    ops_counter: str
    flops_measured: float  # what ops_counter names: CUDA-core FLOPs plus tensor_flops where measured
    tensor_flops: float | None  # the tensor cores' operations; None: not asked for (no MMA) or no value
    flops_model: int
    flops_ratio: float | None
    gflops: float  # the model's FLOPs over ncu's kernel time
    global_ld_requests: float
    global_st_requests: float
    global_requests: float  # loads + stores, the CGMA denominator
    global_ld_sectors: float
    global_st_sectors: float
    ld_sectors_per_request: float | None
    st_sectors_per_request: float | None
    dram_bytes_read: float
    dram_bytes_written: float
    dram_bytes: float  # read + written
    dram_gbs: float  # DRAM bytes read + written over ncu's kernel time
    min_bytes_model: int
    arithmetic_intensity: float | None  # model FLOPs per DRAM byte
    cgma_measured: float | None
    cgma_analytic: float
    achieved_occupancy: float | None  # percent of the SM's warp slots, averaged over active cycles
    theoretical_occupancy: float | None  # percent
    occupancy_limits: dict[str, float | None]  # blocks per SM each resource allows
    limiting_factors: list[str]
    registers_per_thread: float | None
    smem_per_block: float | None
    sm_throughput_pct: float | None
    tensor_pipe_pct: float | None  # share of the elapsed cycles the tensor pipe was busy, SM average
    dram_throughput_pct: float | None
    shared_ld_requests: float | None
    shared_st_requests: float | None
    shared_ld_wavefronts: float | None
    shared_st_wavefronts: float | None
    bank_conflicts_ld: float | None
    bank_conflicts_st: float | None
    device: str = ""
    cc: str = ""
    error: float | None = None  # the child's verified relative error
    ncu_command: list[str] = field(default_factory=list)
    metrics: dict[str, float | None] = field(default_factory=dict)  # every counter as read

    @property
    def shape(self) -> Shape:
        return Shape(self.m, self.n, self.k)

    def to_dict(self) -> dict:
        return asdict(self)


def _need(metrics: dict[str, float | None], name: str) -> float:
    value = metrics.get(name)
    if value is None:
        raise ProfilerError(
            f"ncu's output has no value for {name}.",
            "Check that this Nsight Compute supports the GPU (ncu --query-metrics), or report it with `ncu --version`.",
        )
    return value


def result_from_metrics(
    point: Point,
    metrics: dict[str, float | None],
    *,
    device: str = "",
    cc: str = "",
    error: float | None = None,
    command: list[str] | None = None,
) -> ProfileResult:
    """Derive every figure of a :class:`ProfileResult` from one launch's counters."""
    time_ns = _need(metrics, TIME)
    tensor = None
    if point.dtype == "int32":
        ops_counter = "integer instructions (thread level; includes index arithmetic)"
        executed = _need(metrics, INTEGER)
    else:
        ops_counter = "fadd + fmul + 2 x ffma (thread level)"
        executed = flops_executed(_need(metrics, FADD), _need(metrics, FMUL), _need(metrics, FFMA))
        if uses_tensor_cores(point):
            # HMMA/HGMMA products are invisible to the thread-level counters; the tensor
            # path's own counters add them. Without a value the total must say what it lacks.
            tensor = tensor_flops(metrics)
            if tensor is None:
                ops_counter += "; the tensor-core products are not in it (ncu gave no value for them)"
            else:
                ops_counter += " + tensor-core operations (sm__ops_path_tensor_src_*: bf16, fp16, tf32)"
                executed += tensor
    ld_req, st_req = _need(metrics, GLOBAL_LD_REQUESTS), _need(metrics, GLOBAL_ST_REQUESTS)
    ld_sec, st_sec = _need(metrics, GLOBAL_LD_SECTORS), _need(metrics, GLOBAL_ST_SECTORS)
    read, written = _need(metrics, DRAM_READ), _need(metrics, DRAM_WRITE)
    limits = {name: metrics.get(metric) for name, metric in LIMITERS.items()}
    smem = [metrics.get(SMEM_STATIC), metrics.get(SMEM_DYNAMIC)]
    inst = _need(metrics, INST_EXECUTED)
    return ProfileResult(
        kernel=point.spec.id,
        m=point.shape.m,
        n=point.shape.n,
        k=point.shape.k,
        block_edge=point.block_edge,
        dtype=point.dtype,
        grid=point.grid,
        block=point.block,
        time_ms=time_ns / 1e6,
        inst_executed=inst,
        gips=gips(inst, time_ns),
        ops_counter=ops_counter,
        flops_measured=executed,
        tensor_flops=tensor,
        flops_model=point.flops,
        flops_ratio=ratio(executed, point.flops),
        gflops=gflops(point.flops, time_ns / 1e6),
        global_ld_requests=ld_req,
        global_st_requests=st_req,
        global_requests=ld_req + st_req,
        global_ld_sectors=ld_sec,
        global_st_sectors=st_sec,
        ld_sectors_per_request=ratio(ld_sec, ld_req),
        st_sectors_per_request=ratio(st_sec, st_req),
        dram_bytes_read=read,
        dram_bytes_written=written,
        dram_bytes=read + written,
        dram_gbs=gbytes_per_s(int(read + written), time_ns / 1e6),
        min_bytes_model=point.min_bytes,
        arithmetic_intensity=arithmetic_intensity(point.flops, read + written),
        cgma_measured=cgma(executed, ld_req, st_req),
        cgma_analytic=point.spec.cgma(point.shape, point.block_edge),
        achieved_occupancy=metrics.get(ACHIEVED_OCCUPANCY),
        theoretical_occupancy=metrics.get(THEORETICAL_OCCUPANCY),
        occupancy_limits=limits,
        limiting_factors=limiting_factors(limits),
        registers_per_thread=metrics.get(REGISTERS),
        smem_per_block=sum(v for v in smem if v is not None) if any(v is not None for v in smem) else None,
        sm_throughput_pct=metrics.get(SM_THROUGHPUT),
        tensor_pipe_pct=metrics.get(TENSOR_PIPE),
        dram_throughput_pct=metrics.get(DRAM_THROUGHPUT),
        shared_ld_requests=metrics.get(SHARED_LD_REQUESTS),
        shared_st_requests=metrics.get(SHARED_ST_REQUESTS),
        shared_ld_wavefronts=metrics.get(SHARED_LD_WAVEFRONTS),
        shared_st_wavefronts=metrics.get(SHARED_ST_WAVEFRONTS),
        bank_conflicts_ld=metrics.get(BANK_CONFLICTS_LD),
        bank_conflicts_st=metrics.get(BANK_CONFLICTS_ST),
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

    targets = (_target(point, arch) for arch in KNOWN_ARCHS)
    arch = next(target for target in targets if target)
    return compile_kernel(point.spec, point.block_edge, point.dtype, arch).mangled_name


def _target(point: Point, arch: str) -> str | None:
    """What the catalogue compiles ``point``'s kernel for on ``arch`` (sm_90 -> sm_90a), or None."""
    try:
        return point.spec.compile_arch(arch)
    except DeviceLimitError:
        return None


def ncu_command(ncu: str, kernel_name: str, point: Point, python: str = sys.executable) -> list[str]:
    """The whole command line that profiles ``point`` (pure)."""
    s = point.shape
    return [
        ncu,
        "--clock-control", "none",  # leave the clocks as they are; the timing runs see the same
        "--metrics", ",".join(metrics_for(point)),
        "--kernel-name-base", "mangled",
        "--kernel-name", kernel_name,
        "--launch-skip", str(PROFILED_LAUNCH),
        "--launch-count", "1",
        "--csv",
        "--page", "raw",
        "--print-units", "base",
        python, "-m", "gemmlab.measure.profile",
        point.spec.id, str(point.block_edge), str(s.m), str(s.n), str(s.k), point.dtype,
    ]  # fmt: skip


def command_for(kernel_id: str, shape: Shape, block_edge: int | None = None, dtype: str | None = None) -> list[str]:
    """Check the point, find ncu, and build the command for it."""
    point = catalogue.point(kernel_id, shape, block_edge, dtype)
    return ncu_command(find_ncu(), mangled_name(point), point)


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
    command = ncu_command(find_ncu(), mangled_name(point), point)
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
