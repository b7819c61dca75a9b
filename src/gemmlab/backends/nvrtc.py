"""The NVRTC backend: CUDA C++ kernels compiled with NVRTC (through
``cuda.core``) to cubins, loaded and launched through cuda.core.

The stages the runner (:func:`gemmlab.measure.run.run`) goes through for one
point, each a function here:

1. :func:`compile_kernel`: the spec's instantiation to a cubin for the device's
   architecture. Works with no GPU: CI compiles every kernel for several
   architectures and reads the resource usage from the ptxas log. Compiled code
   is cached on disk, keyed by the source text, the options, the architecture
   and the NVRTC version. The source is a catalogue file or, for a spec whose
   ``source`` is a ``Path``, any file (see :func:`gemmlab.kernels.spec.kernel_source`).
2. :func:`check_device_limits`: refuse what the device cannot run, before any launch.
3. :func:`load_kernel`: the cubin loaded, with dynamic shared memory opted in
   (:func:`allow_dynamic_smem`).
4. :func:`bind`: the problem's inputs allocated and the kernel bound to them,
   its launch configuration (:func:`launch_config`) and, for a persistent
   kernel, the grid the device holds at once (:func:`resident_grid`).
5. The returned :class:`Launcher` launches it once per call.

:data:`BACKEND` offers these as a :class:`gemmlab.backends.base.DeviceBackend`
serving the catalogue's kernels.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from gemmlab.backends.base import SpecQueries
from gemmlab.core import gpu
from gemmlab.core.errors import CompileError, DeclarationError, DeviceLimitError, UnknownName
from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec, Point, kernel_source
from gemmlab.problems.base import Prepared

# Architectures NVRTC from CUDA 13 can target; "a" variants unlock
# architecture-specific instructions (wgmma, setmaxnreg on sm_90a).
KNOWN_ARCHS = (
    "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a",
    "sm_100", "sm_100a", "sm_103", "sm_110", "sm_120", "sm_120a", "sm_121",
)  # fmt: skip
CXX_STANDARD = "c++17"
# Shared memory (static + dynamic) a block may use without the kernel opting in
# to more, on every architecture; check_device_limits checks the opt-in maximum.
DEFAULT_SMEM_PER_BLOCK = 48 * 1024
# Threads an SM holds at once on every GPU gemmlab knows (sm_70 to sm_90): the
# bound on resident blocks behind a persistent kernel's workspace estimate.
MAX_THREADS_PER_SM = 2048
# A kernel's parameters fit in 32764 bytes (CUDA 12.1 on), so no kernel has more than this many.
MAX_PARAMETERS = 32764
# The declared arguments passed as device pointers; the others (M, N, K, n) are int.
POINTER_ROLES = ("A", "B", "C")
# The speed model behind the sweep's repetition plan (NvrtcBackend.predicted_ms):
# deliberately crude, only meant to tell a millisecond kernel from a multi-second one.
ASSUMED_GPU_FLOPS = 1e12  # a global-memory kernel with every lane of every SM busy
ASSUMED_SMS = 128  # about an H100's 132; fewer blocks than this leave SMs idle


@dataclass(frozen=True)
class Resources:
    """What ptxas reported for one kernel (per thread / per block)."""

    registers: int
    smem_bytes: int  # static shared memory per block
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    barriers: int

    @property
    def spill_bytes(self) -> int:
        return self.spill_store_bytes + self.spill_load_bytes


@dataclass(frozen=True)
class CompiledKernel:
    kernel_id: str
    name_expression: str
    mangled_name: str
    arch: str
    cubin: bytes
    resources: Resources
    log: str


_ENTRY = re.compile(r"Compiling entry function '(?P<name>[^']+)' for '(?P<arch>[^']+)'")
_FRAME = re.compile(r"(?P<stack>\d+) bytes stack frame, (?P<st>\d+) bytes spill stores, (?P<ld>\d+) bytes spill loads")
_USED = re.compile(r"Used (?P<regs>\d+) registers")
_SMEM = re.compile(r"(?P<smem>\d+) bytes smem")
_BARRIERS = re.compile(r"used (?P<bar>\d+) barriers")


def parse_ptxas_log(log: str) -> dict[str, Resources]:
    """Resources per mangled entry name from ptxas ``-v`` output."""
    found: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = found.setdefault(m["name"], {})
            continue
        if current is None:
            continue
        if m := _FRAME.search(line):
            current.update(stack=int(m["stack"]), st=int(m["st"]), ld=int(m["ld"]))
        if m := _USED.search(line):
            current["regs"] = int(m["regs"])
            current["smem"] = int(s["smem"]) if (s := _SMEM.search(line)) else 0
            current["bar"] = int(b["bar"]) if (b := _BARRIERS.search(line)) else 0
    return {
        name: Resources(
            registers=v.get("regs", 0),
            smem_bytes=v.get("smem", 0),
            stack_bytes=v.get("stack", 0),
            spill_store_bytes=v.get("st", 0),
            spill_load_bytes=v.get("ld", 0),
            barriers=v.get("bar", 0),
        )
        for name, v in found.items()
    }


def normalise_arch(arch: str) -> str:
    """Accept 'sm_90a', '90a', '9.0' and return NVRTC's spelling ('sm_90a')."""
    text = arch.strip().lower()
    if re.fullmatch(r"\d+\.\d+[af]?", text):
        major, minor = text.rstrip("af").split(".")
        text = f"sm_{major}{minor}{text[-1] if text[-1] in 'af' else ''}"
    elif re.fullmatch(r"\d+[af]?", text):
        text = f"sm_{text}"
    elif text.startswith("compute_"):
        text = "sm_" + text.removeprefix("compute_")
    if not re.fullmatch(r"sm_\d{2,3}[af]?", text):
        raise UnknownName(
            f"'{arch}' is not a GPU architecture.",
            f"Use a name such as {', '.join(KNOWN_ARCHS[1:7])} (sm_XY for compute capability X.Y).",
        )
    return text


@functools.cache
def supported_archs() -> tuple[int, ...] | None:
    """The targets this NVRTC compiles for, as numbers (75 for sm_75), or None
    where it cannot say (a cuda-bindings without nvrtcGetSupportedArchs)."""
    try:
        from cuda.bindings import nvrtc

        status, archs = nvrtc.nvrtcGetSupportedArchs()
    except Exception:  # no NVRTC, or one too old to list its targets
        return None
    return tuple(sorted(archs)) if status == nvrtc.nvrtcResult.NVRTC_SUCCESS and archs else None


def check_target(arch: str) -> str:
    """``arch`` (as :func:`normalise_arch` spells it) when this NVRTC can compile
    for it; otherwise an error that says whether the target is too old, too new
    or unknown to it, and which to use instead."""
    known = supported_archs()
    number = int(re.sub(r"\D", "", arch))
    if known is None or number in known:
        return arch
    oldest, newest = f"sm_{known[0]}", f"sm_{known[-1]}"
    cannot = f"NVRTC {nvrtc_version()} cannot compile for {arch}"
    if number < known[0]:
        cc = f"{number // 10}.{number % 10}"
        raise UnknownName(
            f"{cannot}: the target is older than the oldest it supports, {oldest}.",
            f"Compile for a supported target, e.g. `--arch {oldest}`; for an older GPU's occupancy, give the "
            f"kernel's own figures to `gemmlab occupancy --cc {cc} --threads T --regs R --smem S`.",
        )
    if number > known[-1]:
        raise UnknownName(
            f"{cannot}: the target is newer than the newest it supports, {newest}.",
            f"Upgrade the nvidia-cuda-nvrtc wheel, or compile for a target it knows, e.g. `--arch {newest}`.",
        )
    raise UnknownName(
        f"{cannot}: it supports {', '.join(f'sm_{n}' for n in known)}.",
        "Use one of those (sm_XY for compute capability X.Y).",
    )


# Set to "1" where cubins must come from this process's own compiles (the
# grader's workers: issue 49 saw a Python submission, at its import, write a
# cubin into the shared cache under the key of a classmate's kernel, which was
# then graded at 11.5x cuBLAS). The disk cache is then neither read nor
# written; compiles are kept in this process's memory for its later calls.
PRIVATE_CACHE_ENV = "GEMMLAB_PRIVATE_CACHE"
_IN_MEMORY: dict[str, CompiledKernel] = {}


def private_cache() -> bool:
    return os.environ.get(PRIVATE_CACHE_ENV) == "1"


def cache_dir() -> Path:
    root = os.environ.get("GEMMLAB_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gemmlab"
    )
    return Path(root) / "cubin"


# NVRTC 13.0 keeps the cubins it assembles in the CUDA compute cache
# (~/.nv/ComputeCache, keyed by the PTX) and, on a hit, skips ptxas, so the
# resource report gemmlab reads (registers, shared memory, spills) is missing.
# It reads CUDA_CACHE_DISABLE once, at the first compile of the process (seen
# on an H100, NVRTC 13.0: with the variable set around each of gemmlab's
# compiles, processes whose first compile was CuPy's still hit the cache). So
# the variable is set when this backend is imported, which in gemmlab's
# command line and tests is before anything compiles; the import of gemmlab
# itself leaves the environment alone. A compile that still finds the cache on
# (the process had compiled with NVRTC before this import) is done again in a
# fresh process (_compile_in_fresh_process). gemmlab keeps its own cubin cache.
os.environ.setdefault("CUDA_CACHE_DISABLE", "1")


def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    _status, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


# Set to "1" in a process whose compiles should carry line tables (`gemmlab
# check`'s child: compute-sanitizer then names the file and line of a finding,
# the user's own for a user's kernel). The SASS is the same; the cache key differs.
LINEINFO_ENV = "GEMMLAB_LINEINFO"


@functools.cache
def _toolkit_include() -> str | None:
    """The CUDA toolkit's include folder, where ``cuda_fp16.h`` and
    ``cuda_bf16.h`` live: NVRTC has no search path of its own, and a user's
    float16/bfloat16 kernel includes them. None when no toolkit is found; such
    an include then fails with NVRTC's own "could not open source file"."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        return find_nvidia_header_directory("cudart")
    except Exception:  # no toolkit, or a pathfinder too old to know it: the file may include nothing
        return None


def _options(arch: str, name: str, extra_defines: tuple[str, ...] = ()):
    from cuda.core import ProgramOptions

    include = _toolkit_include()
    return ProgramOptions(
        name=name,
        arch=arch,
        std=CXX_STANDARD,
        ptxas_options=["-v"],
        define_macro=list(extra_defines) or None,
        lineinfo=os.environ.get(LINEINFO_ENV) == "1",
        include_path=[include] if include else None,
    )


def compile_kernel(
    spec: KernelSpec, block_edge: int, dtype: str, arch: str, *, use_cache: bool = True
) -> CompiledKernel:
    """Compile one instantiation of ``spec`` to a cubin for ``arch``."""
    return compile_source(
        spec.id, spec.source, spec.name_expression(dtype, block_edge), arch,
        use_cache=use_cache, source_text=spec.source_text(block_edge),
    )  # fmt: skip


def compile_source(
    kernel_id: str, source: str | Path, expr: str, arch: str, *, use_cache: bool = True, source_text: str | None = None
) -> CompiledKernel:
    """Compile the instantiation ``expr`` (``function<args>``) of the kernel in
    ``source`` (``kernels/<source>`` for a str, the file itself for a Path) to a
    cubin for ``arch``; ``kernel_id`` names it in the result and in errors.
    ``source_text``: the text to compile when it is not ``source``'s as it is
    (a user's kernel with its ``#define`` parameters set).
    :func:`compile_kernel` takes all from a spec; kernels that have no spec
    (the peak-rate kernels of :mod:`gemmlab.measure.peak`) come here directly."""

    arch = check_target(normalise_arch(arch))
    if source_text is None:
        source_text = kernel_source(source)
    key_text = json.dumps([source_text, expr, arch, repr(_options(arch, Path(source).name)), nvrtc_version()])
    key = hashlib.sha256(key_text.encode()).hexdigest()[:32]
    meta_path = cache_dir() / f"{key}.json"
    cubin_path = meta_path.with_suffix(".cubin")
    private = private_cache()
    if use_cache and private and key in _IN_MEMORY:
        return replace(_IN_MEMORY[key], kernel_id=kernel_id)
    if use_cache and not private and meta_path.exists() and cubin_path.exists():
        try:
            meta = json.loads(meta_path.read_text())
            return CompiledKernel(
                kernel_id=kernel_id,
                name_expression=expr,
                mangled_name=meta["mangled_name"],
                arch=arch,
                cubin=cubin_path.read_bytes(),
                resources=Resources(**meta["resources"]),
                log=meta["log"],
            )
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a damaged cache entry is simply rebuilt
    name = Path(source).name
    try:
        cubin, mangled, text = nvrtc_compile(source_text, expr, arch, name)
        usage = _usage(text, mangled)
        if usage is None:  # a cubin from the compute cache: ptxas did not run here
            cubin, mangled, text = _compile_in_fresh_process(source_text, expr, arch, name)
            usage = _usage(text, mangled)
    except Exception as exc:  # NVRTC errors carry the compiler log in the message
        raise _compile_error(kernel_id, expr, arch, str(exc)) from None
    if usage is None:
        raise CompileError(
            f"ptxas reported no resource usage for {kernel_id} ({expr}), even compiled in a fresh process with "
            "the CUDA compute cache off.",
            "Please report this with the command you ran; removing ~/.nv/ComputeCache may help meanwhile.",
        )
    compiled = CompiledKernel(kernel_id, expr, mangled, arch, cubin, usage, text)
    if use_cache and private:
        _IN_MEMORY[key] = compiled
    elif use_cache:
        _store(meta_path, cubin_path, compiled)
    return compiled


# A header of the CUDA toolkit's that the headers gemmlab hands NVRTC include
# but do not have (seen on an H200, 2026-11-29: nvidia-cuda-runtime's mma.h
# including crt/mma.h, which ships in nvidia-cuda-crt), and the pip package
# that ships each such folder.
_MISSING_HEADER = re.compile(r'cannot open source file "((?:crt|cuda|cub|thrust)/[^"]+)"')
_HEADER_PACKAGES = {"crt": "nvidia-cuda-crt", "cuda": "nvidia-cuda-cccl", "cub": "nvidia-cuda-cccl",
                    "thrust": "nvidia-cuda-cccl"}  # fmt: skip

# One of NVRTC's error lines: `file(line): error: what`. For a file outside the
# package, ``file`` and ``line`` are the user's (kernel_source's #line directives).
_ERROR_LINE = re.compile(r"^.*\(\d+\): (?:catastrophic )?error.*$", re.MULTILINE)


def _compile_error(kernel_id: str, expr: str, arch: str, message: str) -> CompileError:
    """The CompileError for NVRTC's ``message``: its error lines, each naming
    file and line, when the source is at fault; the whole message otherwise."""
    errors = _ERROR_LINE.findall(message)
    if errors and (missing := _MISSING_HEADER.search(message)):
        package = _HEADER_PACKAGES[missing.group(1).split("/")[0]]
        return CompileError(
            f"NVRTC could not compile {kernel_id} ({expr}) for {arch}: {'; '.join(e.strip() for e in errors)}.",
            f"The CUDA headers gemmlab found ({_toolkit_include() or 'none'}) lack {missing.group(1)}, a header "
            f"of the toolkit's own: `pip install {package}` (the same CUDA version as nvidia-cuda-nvrtc) adds it.",
        )
    if errors:
        return CompileError(
            f"NVRTC could not compile {kernel_id} ({expr}) for {arch}: {'; '.join(e.strip() for e in errors)}.",
            "Correct the source at the lines named; `gemmlab compile` shows the result without a GPU.",
        )
    return CompileError(
        f"NVRTC could not compile {kernel_id} ({expr}) for {arch}: {message}".strip(),
        "If the log names the architecture, compile for one this NVRTC supports (a newer NVRTC, from the "
        "nvidia-cuda-nvrtc wheel, knows newer ones); otherwise please report it with the command you ran.",
    )


def nvrtc_compile(source_text: str, expr: str, arch: str, name: str) -> tuple[bytes, str, str]:
    """NVRTC's cubin for the instantiation ``expr`` of ``source_text``, its
    mangled name and NVRTC's log (ptxas's resource report among it)."""
    from cuda.core import Program

    program = Program(source_text, "c++", _options(arch, name))
    obj = program.compile("cubin", name_expressions=(expr,))
    mangled = obj.symbol_mapping[expr]
    mangled = mangled.decode() if isinstance(mangled, bytes) else mangled
    return bytes(obj.code), mangled, _program_log(program)


def _usage(log: str, mangled: str) -> Resources | None:
    """ptxas's report for the entry ``mangled`` in ``log``; None when ptxas did not run."""
    entries = parse_ptxas_log(log)
    # One program holds one entry, so a lone report is ours even if the names differ.
    return entries.get(mangled) or (next(iter(entries.values())) if len(entries) == 1 else None)


def _compile_in_fresh_process(source_text: str, expr: str, arch: str, name: str) -> tuple[bytes, str, str]:
    """:func:`nvrtc_compile` in a new Python process that starts with the CUDA
    compute cache off, for a process whose NVRTC had it on before gemmlab was
    imported. A spawned process, not a forked one: a fork would inherit this
    process's NVRTC as it is."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    previous = os.environ.get("CUDA_CACHE_DISABLE")
    os.environ["CUDA_CACHE_DISABLE"] = "1"  # the child's environment is this one, copied at its start
    try:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            return pool.submit(nvrtc_compile, source_text, expr, arch, name).result()
    finally:
        if previous is None:
            del os.environ["CUDA_CACHE_DISABLE"]
        else:
            os.environ["CUDA_CACHE_DISABLE"] = previous


def _program_log(program) -> str:
    """NVRTC's log, read from the program handle (the log of the ptxas run)."""
    from cuda.bindings import nvrtc

    _status, size = nvrtc.nvrtcGetProgramLogSize(program.handle)
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(program.handle, buf)
    return buf.rstrip(b"\x00 ").decode(errors="replace")


def _store(meta_path: Path, cubin_path: Path, compiled: CompiledKernel) -> None:
    """Write the cache entry atomically; an unwritable cache only costs speed."""
    try:
        meta_path.parent.mkdir(parents=True, exist_ok=True)
        for path, data in (
            (cubin_path, compiled.cubin),
            (meta_path, json.dumps({
                "mangled_name": compiled.mangled_name,
                "resources": asdict(compiled.resources),
                "log": compiled.log,
            }).encode()),
        ):  # fmt: skip
            tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
    except OSError:
        pass


# -- loading and launching ----------------------------------------------------


@dataclass
class Launcher:
    """A compiled kernel bound to a stream, its geometry and its arguments."""

    kernel: Any
    config: Any
    stream: Any
    args: tuple
    workspace: Any = None  # the device array behind a workspace argument, kept alive with the launcher

    def __call__(self) -> None:
        from cuda.core import launch

        launch(self.stream, self.config, self.kernel, *self.args)


def check_device_limits(point: Point, compiled: CompiledKernel, info: gpu.DeviceInfo) -> None:
    """Refuse, before any launch, what the device cannot run."""
    threads = point.spec.threads_per_block(point.shape, point.block_edge)
    if threads > info.max_threads_per_block:
        raise DeviceLimitError(
            f"{point.spec.id} needs {threads} threads per block; {info.name} allows {info.max_threads_per_block}.",
            "Use a smaller block edge or size.",
        )
    smem = compiled.resources.smem_bytes + point.dynamic_smem
    if smem > info.max_smem_per_block_optin:
        raise DeviceLimitError(
            f"{point.spec.id} needs {smem} bytes of shared memory per block; {info.name} allows "
            f"{info.max_smem_per_block_optin}.",
            "Use a smaller block edge or K.",
        )
    regs = compiled.resources.registers * threads
    if regs > 65536:
        raise DeviceLimitError(
            f"{point.spec.id} needs {regs} registers per block ({compiled.resources.registers} x {threads} "
            "threads); a block may use 65536.",
            "Use a smaller block edge.",
        )
    need = point.spec.problem.device_bytes(point) + workspace_bound(point, threads, info) + gpu.MEMORY_HEADROOM
    if need > info.free_bytes:
        raise DeviceLimitError(
            f"{point.shape} needs about {need / 2**30:.1f} GiB of device memory (inputs, output and the "
            f"float64 reference); {info.name} has {info.free_bytes / 2**30:.1f} GiB free.",
            "Use a smaller size.",
        )


def workspace_bound(point: Point, threads: int, info: gpu.DeviceInfo) -> int:
    """The most workspace ``point``'s launch can take: for a persistent kernel,
    as if every SM held as many blocks as its threads allow (the launch
    itself asks the driver how many fit)."""
    if point.spec.workspace_bytes is None:
        return 0
    x, y, z = point.grid
    blocks = x * y * z
    if point.spec.persistent:
        blocks = min(blocks, info.sm_count * max(1, MAX_THREADS_PER_SM // threads))
    return point.spec.workspace_bytes(point.shape, blocks)


def allow_dynamic_smem(kernel: Any, static_bytes: int, dynamic_bytes: int, device_index: int) -> None:
    """Let ``kernel`` (a cuda.core Kernel) launch with ``dynamic_bytes`` of dynamic
    shared memory when static + dynamic is over the 48 KB a launch gets by default:
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, which the driver requires
    before such a launch. cuda.core loads cubins through the library API, so the
    handle is a CUkernel (cuKernelSetAttribute, per device); a CUfunction handle
    takes cuFuncSetAttribute. Raises DeviceLimitError when the driver refuses."""
    if dynamic_bytes <= 0 or static_bytes + dynamic_bytes <= DEFAULT_SMEM_PER_BLOCK:
        return
    from cuda.bindings import driver

    attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    handle = kernel.handle
    if isinstance(handle, driver.CUfunction):
        (status,) = driver.cuFuncSetAttribute(handle, attribute, dynamic_bytes)
    else:
        status, device = driver.cuDeviceGet(device_index)
        if status == driver.CUresult.CUDA_SUCCESS:
            (status,) = driver.cuKernelSetAttribute(attribute, dynamic_bytes, driver.CUkernel(int(handle)), device)
    if status != driver.CUresult.CUDA_SUCCESS:
        raise DeviceLimitError(
            f"the driver refused {dynamic_bytes} bytes of dynamic shared memory (+ {static_bytes} static) for "
            f"this kernel: {status.name}.",
            "Use a configuration with less shared memory (fewer stages or a smaller tile).",
        )


# Set to 0 to launch every kernel without programmatic dependent launch, to
# time what it gains (benchmarks/scripts/pdl_probe.py) or to rule it out.
DEPENDENT_LAUNCH_ENV = "GEMMLAB_DEPENDENT_LAUNCH"


def dependent_launch(point: Point) -> bool:
    """Whether to launch ``point`` with programmatic stream serialization: the
    kernel says it waits for the launch before it (KernelSpec.dependent_launch),
    the current device has compute capability 9.0 or newer, and
    $GEMMLAB_DEPENDENT_LAUNCH is not 0."""
    if not point.spec.dependent_launch or os.environ.get(DEPENDENT_LAUNCH_ENV, "1") == "0":
        return False
    from cuda.core import Device

    return tuple(Device().compute_capability) >= (9, 0)


def launch_config(point: Point, grid: tuple[int, int, int]) -> Any:
    """cuda.core's LaunchConfig for ``point`` on ``grid`` (in blocks). With
    clusters, cuda.core counts the grid in clusters, while a KernelSpec's grid
    (what the kernel sees as gridDim) counts blocks. A kernel that waits for
    the launch before it is launched with PDL where :func:`dependent_launch`
    allows it and cuda.core knows the option (0.4 and newer)."""
    from cuda.core import LaunchConfig

    cluster = point.spec.cluster
    options: dict[str, Any] = dict(block=point.block, shmem_size=point.dynamic_smem)
    if cluster is not None:
        options["cluster"] = cluster
        grid = tuple(g // c for g, c in zip(grid, cluster, strict=True))
    if dependent_launch(point):
        try:
            return LaunchConfig(grid=grid, programmatic_stream_serialization=True, **options)
        except TypeError:  # an older cuda.core: launched as any other kernel
            pass
    return LaunchConfig(grid=grid, **options)


def blocks_at_once(kernel: Any, point: Point, info: gpu.DeviceInfo, stream: Any) -> int:
    """How many blocks of ``point`` the GPU runs at once, as the driver's
    occupancy calculator counts them: whole clusters for a clustered kernel (a
    cluster needs its blocks on SMs of one GPC, so fewer may fit than SMs /
    size). 0 when not one fits."""
    cluster = point.spec.cluster
    if cluster is None:
        threads = point.spec.threads_per_block(point.shape, point.block_edge)
        return kernel.occupancy.max_active_blocks_per_multiprocessor(threads, point.dynamic_smem) * info.sm_count
    clusters = kernel.occupancy.max_active_clusters(launch_config(point, point.grid), stream=stream)
    return clusters * cluster[0] * cluster[1] * cluster[2]


def resident_grid(kernel: Any, point: Point, info: gpu.DeviceInfo, stream: Any) -> tuple[int, int, int]:
    """A persistent kernel's grid: its work units (point.grid's x), but no
    more blocks than the GPU runs at once (:func:`blocks_at_once`)."""
    resident = blocks_at_once(kernel, point, info, stream)
    if resident < 1:
        threads = point.spec.threads_per_block(point.shape, point.block_edge)
        what = "blocks" if point.spec.cluster is None else "clustered blocks"
        raise DeviceLimitError(
            f"{point.spec.id} fits no {what} on {info.name}: {threads} threads and "
            f"{point.dynamic_smem} bytes of shared memory per block.",
            "Use a configuration with fewer stages or a smaller tile.",
        )
    x, y, z = point.grid
    return (min(x, resident), y, z)


def load_kernel(point: Point, compiled: CompiledKernel, device_index: int = 0) -> Any:
    """``compiled`` loaded from its cubin, with ``point``'s dynamic shared memory opted in."""
    from cuda.core import ObjectCode

    kernel = ObjectCode.from_cubin(compiled.cubin).get_kernel(compiled.mangled_name)
    allow_dynamic_smem(kernel, compiled.resources.smem_bytes, point.dynamic_smem, device_index)
    return kernel


# The kernel loaded last: the input sets of one timed series (gemmlab.measure.series)
# are bound one after the other to the same compile, and need its module once.
_LAST_LOADED: list[tuple[CompiledKernel, int, int, Any]] = []


def _loaded(point: Point, compiled: CompiledKernel, device_index: int) -> Any:
    """:func:`load_kernel`, reusing the kernel loaded for the same compile, shared memory and device."""
    for held, smem, device, kernel in _LAST_LOADED:
        if held is compiled and smem == point.dynamic_smem and device == device_index:
            return kernel
    kernel = load_kernel(point, compiled, device_index)
    _LAST_LOADED[:] = [(compiled, point.dynamic_smem, device_index, kernel)]
    return kernel


def bind(
    cp: Any, point: Point, compiled: CompiledKernel, info: gpu.DeviceInfo, device_index: int, cp_stream: Any,
    seed: int | None,
) -> tuple[Prepared, Launcher, tuple[int, int, int]]:  # fmt: skip
    """The point's inputs, allocated on ``cp_stream`` (call it inside ``with
    cp_stream``), and its compiled kernel bound to them on that stream, with
    the dynamic shared memory opted in and, for a persistent kernel, the grid
    the driver says fits at once: (prepared problem, launcher, grid)."""
    from cuda.core import Stream

    prepared = point.spec.problem.prepare(cp, point, cp.random.default_rng(seed))
    kernel = _loaded(point, compiled, device_index)
    stream = Stream.from_handle(cp_stream.ptr)
    grid = resident_grid(kernel, point, info, stream) if point.spec.persistent else point.grid
    args, workspace = kernel_arguments(point.spec, prepared), None
    if point.spec.arguments is not None:
        check_declared_arguments(point.spec, parameter_sizes(kernel), args)
    if point.spec.workspace_bytes is not None:
        blocks = grid[0] * grid[1] * grid[2]
        workspace = cp.zeros(max(1, point.spec.workspace_bytes(point.shape, blocks)), dtype=cp.uint8)
        args = (*args, workspace.data.ptr)
    return prepared, Launcher(kernel, launch_config(point, grid), stream, args, workspace), grid


def kernel_arguments(spec: KernelSpec, prepared: Prepared) -> tuple:
    """The launch arguments in the kernel's order: the problem's own, or those
    ``spec.arguments`` names (the declaration was checked against the problem's
    names when it was read; ``n`` exists only for square shapes, which a kernel
    taking it is limited to)."""
    if spec.arguments is None:
        return prepared.args
    return tuple(prepared.named[name] for name in spec.arguments)


def parameter_sizes(kernel: Any) -> list[int] | None:
    """The byte size of each parameter of a loaded kernel, as the driver lays
    them out (cuKernelGetParamInfo, or cuFuncGetParamInfo for a CUfunction
    handle; CUDA 12.4 drivers on): what the compiled function really takes,
    whatever its declaration says. None where the driver cannot tell."""
    from cuda.bindings import driver

    handle = kernel.handle
    if isinstance(handle, driver.CUfunction):
        query = functools.partial(driver.cuFuncGetParamInfo, handle)
    else:
        query = functools.partial(driver.cuKernelGetParamInfo, driver.CUkernel(int(handle)))
    sizes: list[int] = []
    while len(sizes) <= MAX_PARAMETERS:
        try:
            status, _offset, size = query(len(sizes))
        except RuntimeError:  # a driver older than the call: the binding finds no such function
            return None
        if status == driver.CUresult.CUDA_ERROR_INVALID_VALUE:  # past the last parameter
            return sizes
        if status != driver.CUresult.CUDA_SUCCESS:  # not supported by this driver
            return None
        sizes.append(int(size))
    return None


def argument_size(value: Any) -> int:
    """The bytes cuda.core passes for one launch argument: a NumPy scalar's own
    size (``np.int32``: 4), 8 for a Python int or float and for a pointer."""
    itemsize = getattr(value, "itemsize", None)
    return itemsize if isinstance(itemsize, int) else 8


def check_declared_arguments(spec: KernelSpec, sizes: list[int] | None, args: tuple) -> None:
    """Refuse, before any launch, a declared argument list that does not match
    the compiled function (``sizes`` from :func:`parameter_sizes`; None: the
    driver cannot tell, and the count read from the source stays the check)."""
    if sizes is None or spec.arguments is None:
        return
    where = f"`arguments` in {spec.declaration}" if spec.declaration else "the kernel's `arguments`"
    if len(sizes) != len(spec.arguments):
        raise DeclarationError(
            f"{spec.id}: the compiled function takes {len(sizes)} arguments ({_bytes(sizes)}), but the declaration "
            f"lists {len(spec.arguments)}: {', '.join(spec.arguments)}.",
            f"Correct {where} to name every argument of the function, in order.",
        )
    for i, (role, size, value) in enumerate(zip(spec.arguments, sizes, args, strict=True), start=1):
        passed = argument_size(value)
        if size != passed:
            kind = "a pointer" if role in POINTER_ROLES else "an int"
            raise DeclarationError(
                f"{spec.id}: argument {i}, declared as {role}, is {size} bytes in the compiled function, but gemmlab "
                f"passes {kind} of {passed} bytes for {role}.",
                f"Declare the function's argument as {'a float/int pointer' if role in POINTER_ROLES else 'int'} "
                f"(A, B, C are pointers, M, N, K and n are int), or correct {where}.",
            )


def _bytes(sizes: list[int]) -> str:
    return ", ".join(f"{size} bytes" for size in sizes) or "none"


class NvrtcBackend(SpecQueries):
    """The catalogue's CUDA kernels as a :class:`gemmlab.backends.base.DeviceBackend`."""

    name = "nvrtc"
    on_host = False

    def kernel_ids(self) -> list[str]:
        return catalogue.kernel_ids()

    def predicted_ms(self, kernel_id: str, shape: Shape, block_edge: int) -> float:
        """2MNK over ASSUMED_GPU_FLOPS, scaled down by the share of each warp's
        lanes that have a thread (a 1x1 block runs 1 lane of 32) and by the share
        of SMs that get a block at all (single_block uses one SM)."""
        spec = catalogue.get(kernel_id)
        threads = spec.threads_per_block(shape, block_edge)
        lanes = threads / (32 * math.ceil(threads / 32))
        blocks = math.prod(spec.grid(shape, block_edge))
        busy_sms = min(1.0, blocks / ASSUMED_SMS)
        return 2 * shape.m * shape.n * shape.k / (ASSUMED_GPU_FLOPS * lanes * busy_sms) * 1e3

    def analytic_cgma(self, kernel_id: str, shape: Shape, block_edge: int) -> float | None:
        model = catalogue.get(kernel_id).cgma
        return None if model is None else float(model(shape, block_edge))

    def compile(self, point: Point, info: gpu.DeviceInfo) -> CompiledKernel:
        compiled = compile_kernel(point.spec, point.block_edge, point.dtype, point.spec.compile_arch(info.arch))
        check_device_limits(point, compiled, info)
        return compiled

    def bind(
        self, cp: Any, point: Point, compiled: CompiledKernel, info: gpu.DeviceInfo, device_index: int,
        cp_stream: Any, seed: int | None,
    ) -> tuple[Prepared, Launcher, Dim3]:  # fmt: skip
        return bind(cp, point, compiled, info, device_index, cp_stream, seed)


BACKEND = NvrtcBackend()
