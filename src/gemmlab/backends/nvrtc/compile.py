"""CUDA C++ to a cubin with NVRTC (through ``cuda.core``): the targets this NVRTC knows,
the program's options, ptxas's resource report, and the cubin cache, on disk or, in a
grading worker, in this process's memory alone (:func:`compile_kernel`, the first stage
of the package's list)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from gemmlab.core.errors import CompileError, UnknownName
from gemmlab.kernels.spec import KernelSpec, kernel_source

# Architectures NVRTC from CUDA 13 can target; "a" variants unlock
# architecture-specific instructions (wgmma, setmaxnreg on sm_90a).
KNOWN_ARCHS = (
    "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a",
    "sm_100", "sm_100a", "sm_103", "sm_110", "sm_120", "sm_120a", "sm_121",
)  # fmt: skip
CXX_STANDARD = "c++17"


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
