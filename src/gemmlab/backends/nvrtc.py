"""Compile catalogue kernels with NVRTC (through ``cuda.core``) to cubin.

Works with no GPU: CI compiles every kernel for several architectures and reads
the resource usage from the ptxas log. Compiled code is cached on disk, keyed
by the source text, the options, the architecture and the NVRTC version.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass
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


def cache_dir() -> Path:
    root = os.environ.get("GEMMLAB_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gemmlab"
    )
    return Path(root) / "cubin"


_nvrtc_loaded = False


def _nvrtc():
    """cuda.bindings' NVRTC, loaded with the CUDA compute cache off.

    NVRTC 13.0 keeps the cubins it assembles in the compute cache
    (~/.nv/ComputeCache, keyed by the PTX) and, on a hit, skips ptxas, so the
    resource report gemmlab reads (registers, shared memory, spills) is
    missing. It reads CUDA_CACHE_DISABLE once, when the library is loaded: the
    variable is set for that moment only and then put back as it was, so the
    rest of the importing process (the driver's JIT cache, CuPy) keeps its
    caches. gemmlab keeps its own cache of cubins (cache_dir). The command line
    sets the variable for its whole process (gemmlab.cli.app.main), so that
    nothing there can load NVRTC first."""
    global _nvrtc_loaded
    from cuda.bindings import nvrtc

    if not _nvrtc_loaded:
        previous = os.environ.get("CUDA_CACHE_DISABLE")
        os.environ["CUDA_CACHE_DISABLE"] = "1"
        try:
            nvrtc.nvrtcVersion()
        finally:
            if previous is None:
                del os.environ["CUDA_CACHE_DISABLE"]
            else:
                os.environ["CUDA_CACHE_DISABLE"] = previous
        _nvrtc_loaded = True
    return nvrtc


def nvrtc_version() -> str:
    _status, major, minor = _nvrtc().nvrtcVersion()
    return f"{major}.{minor}"


def _options(arch: str, name: str, extra_defines: tuple[str, ...] = ()):
    from cuda.core import ProgramOptions

    return ProgramOptions(
        name=name,
        arch=arch,
        std=CXX_STANDARD,
        ptxas_options=["-v"],
        define_macro=list(extra_defines) or None,
    )


def compile_kernel(
    spec: KernelSpec, block_edge: int, dtype: str, arch: str, *, use_cache: bool = True
) -> CompiledKernel:
    """Compile one instantiation of ``spec`` to a cubin for ``arch``."""
    return compile_source(spec.id, spec.source, spec.name_expression(dtype, block_edge), arch, use_cache=use_cache)


def compile_source(kernel_id: str, source: str, expr: str, arch: str, *, use_cache: bool = True) -> CompiledKernel:
    """Compile the instantiation ``expr`` (``function<args>``) of the kernel in
    ``kernels/<source>`` to a cubin for ``arch``; ``kernel_id`` names it in the
    result and in errors. :func:`compile_kernel` takes both from a catalogue
    entry; kernels that are no catalogue entry (the peak-rate kernels of
    :mod:`gemmlab.peak`) come here directly."""
    from cuda.core import Program

    _nvrtc()  # before cuda.core touches NVRTC
    arch = normalise_arch(arch)
    source_text = kernel_source(source)
    options = _options(arch, Path(source).name)
    key_text = json.dumps([source_text, expr, arch, repr(options), nvrtc_version()])
    key = hashlib.sha256(key_text.encode()).hexdigest()[:32]
    meta_path = cache_dir() / f"{key}.json"
    cubin_path = meta_path.with_suffix(".cubin")
    if use_cache and meta_path.exists() and cubin_path.exists():
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
    try:
        program = Program(source_text, "c++", options)
        obj = program.compile("cubin", name_expressions=(expr,))
    except Exception as exc:  # NVRTC errors carry the compiler log in the message
        raise CompileError(
            f"NVRTC could not compile {kernel_id} ({expr}) for {arch}: {exc}".strip(),
            "If the architecture is newer than this NVRTC knows, upgrade the nvidia-cuda-nvrtc wheel.",
        ) from None
    mangled = obj.symbol_mapping[expr]
    mangled = mangled.decode() if isinstance(mangled, bytes) else mangled
    text = _program_log(program)
    entries = parse_ptxas_log(text)
    # One program holds one entry, so a lone report is ours even if the names differ.
    usage = entries.get(mangled) or (next(iter(entries.values())) if len(entries) == 1 else None)
    if usage is None:
        raise CompileError(
            f"ptxas reported no resource usage for {kernel_id} ({expr}): NVRTC took the cubin from the CUDA "
            "compute cache, so ptxas did not run.",
            "Start Python with CUDA_CACHE_DISABLE=1 set, or let gemmlab compile before anything else in the process "
            "loads NVRTC (CuPy's own kernels do).",
        )
    compiled = CompiledKernel(kernel_id, expr, mangled, arch, bytes(obj.code), usage, text)
    if use_cache:
        _store(meta_path, cubin_path, compiled)
    return compiled


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
