"""What this machine can do with gemmlab, and what to install or change for
what it cannot: the questions behind `gemmlab doctor`.

:func:`probe` asks the machine (the driver, NVRTC, the GPUs, the CUDA tools on
PATH, the folders gemmlab writes, the installed extras) and returns plain
values, a :class:`Machine`; :func:`rows` turns a machine into the table's rows,
deciding each status and the fix that goes with it. The decisions are tested on
made-up machines and the probes with the functions they call patched, neither
with a GPU. Nothing here creates a file: the cache folder and the database are
judged by the nearest folder that exists.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from gemmlab.backends.nvrtc import cache_dir, nvrtc_version, supported_archs
from gemmlab.core import gpu
from gemmlab.core.errors import GemmlabError
from gemmlab.store.store import DEFAULT_PATH

if TYPE_CHECKING:
    from packaging.requirements import Requirement

# A row's status: what a reader scans the second column for.
OK = "ok"
MISSING = "missing"
TOO_OLD = "too old"
UNKNOWN = "unknown"
UNSUPPORTED = "unsupported"
NOT_WRITABLE = "not writable"
INSTALLED = "installed"
NOT_INSTALLED = "not installed"
# The statuses that need nothing done.
FINE = (OK, INSTALLED)

# What each extra of pyproject.toml brings; tests/test_doctor.py checks that
# every extra there has its line here.
EXTRA_PURPOSE = {
    "cpu": "the CPU baselines cpu_naive and cpu_blocked (numba)",
    "pandas": "results and failures as DataFrames (gemmlab.results(db).to_pandas())",
    "parquet": "`gemmlab export --format parquet`, Results.to_parquet",
    "torch": "your Python kernels on torch tensors; PyTorch's FP8 and INT8 baselines",
    "triton": "your Triton kernels and the triton_* peer rungs",
    "cute": "the CuTe DSL peer rungs (cute_*)",
    "scale": "`--workers` and `--scheduler`: points spread over Dask workers",
    "multigpu": "`gemmlab distributed`: one product over several GPUs",
    "cublasmp": "`gemmlab distributed --algorithms ...,cublasmp` (cuBLASMp's baseline)",
    "test": "the test suite, with the CPU baselines and the SASS checks",
}
# The wheel NVRTC comes in; another package that pins it can hold it at an older version.
NVRTC_WHEEL = "nvidia-cuda-nvrtc"
# How long a tool's `--version` may take before it is taken as not answering.
TOOL_TIMEOUT_S = 20


@dataclass(frozen=True)
class Row:
    """One line of the table: the component, its status, what was found, and
    what it enables or the fix."""

    component: str
    status: str
    detail: str
    note: str

    @property
    def fine(self) -> bool:
        return self.status in FINE


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    cc: tuple[int, int]
    memory_bytes: int


@dataclass(frozen=True)
class Tool:
    """A CUDA tool gemmlab runs: where it was found (None: not found) and the version it gives."""

    path: str | None
    version: str | None = None


@dataclass(frozen=True)
class Place:
    """A file or folder gemmlab writes: whether it exists, and whether gemmlab
    may write it (or, where it does not exist yet, create it)."""

    path: Path
    exists: bool
    writable: bool
    size_bytes: int | None = None  # a file's, where it exists


@dataclass(frozen=True)
class Extra:
    """An extra of gemmlab's and the requirements of it that are not met (empty: installed)."""

    name: str
    unmet: tuple[str, ...]


@dataclass(frozen=True)
class Machine:
    """What the probes found, as plain values."""

    nvrtc_version: str | None  # None: NVRTC could not be loaded
    nvrtc_error: str | None
    nvrtc_archs: tuple[int, ...] | None  # None: this NVRTC cannot list them
    nvrtc_held_by: tuple[str, ...]  # installed packages that pin NVRTC's wheel at its version
    driver_cuda: int | None  # gpu.installed_driver(): None no driver, 0 one that does not say
    gpus: tuple[Gpu, ...]
    gpu_error: str | None
    sanitizer: Tool
    ncu: Tool
    cache: Place
    database: Place
    extras: tuple[Extra, ...]


# --- the probes ---------------------------------------------------------------------


def probe(db: Path = DEFAULT_PATH) -> Machine:
    """Ask this machine; fast without a GPU (no CUDA context is made when there is no driver)."""
    from gemmlab.measure.ncu.command import find_ncu
    from gemmlab.measure.sanitize import find_sanitizer

    version, error = _nvrtc()
    driver = gpu.installed_driver()
    gpus, gpu_error = _gpus() if driver is not None else ((), None)
    return Machine(
        nvrtc_version=version,
        nvrtc_error=error,
        nvrtc_archs=supported_archs() if version else None,
        nvrtc_held_by=held_by(NVRTC_WHEEL),
        driver_cuda=driver,
        gpus=gpus,
        gpu_error=gpu_error,
        sanitizer=find_tool(find_sanitizer),
        ncu=find_tool(find_ncu),
        cache=place(cache_dir(), folder=True),
        database=place(db, folder=False),
        extras=extras(),
    )


def _nvrtc() -> tuple[str | None, str | None]:
    try:
        return nvrtc_version(), None
    except Exception as exc:  # no cuda-bindings, or no libnvrtc for it to load
        return None, f"{type(exc).__name__}: {exc}"


def versions() -> str:
    """gemmlab's version, then what a bug report needs beside it; none of these
    looks at a GPU, so `--version` answers on any machine."""
    import platform

    from gemmlab import __version__

    nvrtc = _nvrtc()[0] or "not found"  # no NVRTC wheel or library: say so rather than fail
    try:
        cupy = metadata.version("cupy-cuda13x")
    except metadata.PackageNotFoundError:
        cupy = "not installed"
    return f"gemmlab {__version__}\nPython {platform.python_version()}, NVRTC {nvrtc}, CuPy {cupy}"


def _gpus() -> tuple[tuple[Gpu, ...], str | None]:
    try:
        infos = [gpu.describe(i) for i in range(gpu.device_count())]
    except GemmlabError as exc:  # NoGPUError: a driver too old, or no GPU behind it
        return (), exc.cause
    except Exception as exc:  # CuPy's own failure, said as it is
        return (), f"{type(exc).__name__}: {exc}"
    return tuple(Gpu(i.index, i.name, i.cc, i.memory_bytes) for i in infos), None


def find_tool(find: Callable[[], str]) -> Tool:
    """The tool ``find`` locates (it raises GemmlabError when there is none), with its version."""
    try:
        path = find()
    except GemmlabError:
        return Tool(None)
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return Tool(path)
    # Both tools end their banner with "Version 2025.3.0 (build ...)" or "Version 2025.3.0".
    found = re.search(r"Version\s+(\S+)", out.stdout + out.stderr)
    return Tool(path, found.group(1) if found else None)


def place(path: Path, folder: bool) -> Place:
    """Whether gemmlab can write ``path`` (a folder, or a SQLite file, whose
    journal files go beside it), judged without creating anything: a path that
    does not exist yet by the nearest folder above it that does."""
    path = Path(os.path.abspath(path))
    if path.exists():
        right_kind = path.is_dir() if folder else path.is_file()
        beside = folder or os.access(path.parent, os.W_OK | os.X_OK)
        size = None if folder or not right_kind else path.stat().st_size
        return Place(path, True, right_kind and beside and os.access(path, os.W_OK), size)
    # exists() is False too under a file (NotADirectoryError); that file is then the nearest and no folder.
    nearest = next(p for p in path.parents if p.exists())
    return Place(path, False, nearest.is_dir() and os.access(nearest, os.W_OK | os.X_OK))


def extras() -> tuple[Extra, ...]:
    """gemmlab's extras as its installed metadata declares them, each with its unmet requirements."""
    from packaging.requirements import Requirement  # matplotlib, a dependency, brings packaging

    try:
        dist = metadata.distribution("gemmlab")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return ()
    requirements = [Requirement(text) for text in dist.requires or ()]
    found = []
    for name in dist.metadata.get_all("Provides-Extra") or ():
        wanted = [r for r in requirements if _for_extra(r, name)]
        found.append(Extra(name, tuple(filter(None, map(_unmet, wanted)))))
    return tuple(found)


def _for_extra(requirement: Requirement, extra: str) -> bool:
    """Whether ``requirement`` comes with ``extra`` (not with gemmlab itself on some Python)."""
    marker = requirement.marker
    return marker is not None and "extra" in str(marker) and marker.evaluate({"extra": extra})


def _unmet(requirement: Requirement) -> str | None:
    """None when ``requirement`` is installed at a version it allows; else what is wrong, in a few words."""
    try:
        version = metadata.version(requirement.name)
    except metadata.PackageNotFoundError:
        return f"{requirement.name} missing"
    if requirement.specifier and not requirement.specifier.contains(version, prereleases=True):
        return f"{requirement.name} {version} (needs {requirement.specifier})"
    return None


def held_by(package: str) -> tuple[str, ...]:
    """The installed packages that require ``package`` at exactly the version
    installed ("cuda-toolkit 13.0.3, which torch 2.14.1 requires"): pip keeps it
    there, whatever gemmlab's own range allows. Empty when none does."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    installed = list(metadata.distributions())

    def pinning(target: str) -> list[metadata.Distribution]:
        try:
            version = metadata.version(target)
        except metadata.PackageNotFoundError:
            return []
        pins = []
        for dist in installed:
            for requirement in map(Requirement, dist.requires or ()):
                exact = any(spec.operator in ("==", "===") for spec in requirement.specifier)
                if (exact and canonicalize_name(requirement.name) == canonicalize_name(target)
                        and requirement.specifier.contains(version, prereleases=True)):  # fmt: skip
                    pins.append(dist)
                    break
        return pins

    try:
        return tuple(
            f"{d.name} {d.version}"
            + (f", which {' and '.join(f'{u.name} {u.version}' for u in users)} requires" if users else "")
            for d in pinning(package)
            for users in [pinning(d.name)]
        )
    except Exception:  # an installed package's metadata that packaging cannot read: say nothing of pins
        return ()


# --- the decisions --------------------------------------------------------------------


def rows(machine: Machine) -> list[Row]:
    """The doctor's table for ``machine``, core first."""
    return [
        nvrtc_row(machine),
        driver_row(machine),
        *gpu_rows(machine),
        _tool_row("compute-sanitizer", machine.sanitizer,
                  "`gemmlab check` and the grader's sanitizer stage",
                  "Install the CUDA toolkit (it ships compute-sanitizer) or add its bin folder to PATH."),
        _tool_row("ncu", machine.ncu,
                  "`gemmlab profile` and `--profile` (reproduce, sweep, grade)",
                  "Install Nsight Compute (ncu, in the CUDA toolkit) or add its folder to PATH."),
        cache_row(machine.cache),
        database_row(machine.database),
        *map(extra_row, machine.extras),
    ]  # fmt: skip


def core_usable(machine: Machine) -> bool:
    """Whether gemmlab's core, compiling with NVRTC, works here."""
    return machine.nvrtc_version is not None


def nvrtc_row(machine: Machine) -> Row:
    if machine.nvrtc_version is None:
        return Row("NVRTC", MISSING, f"cannot be loaded ({machine.nvrtc_error})",
                   "Nothing compiles without it. Reinstall gemmlab's wheel for it: "
                   "`pip install --force-reinstall 'nvidia-cuda-nvrtc>=13,<14'`.")  # fmt: skip
    archs = machine.nvrtc_archs
    targets = ", ".join(f"sm_{a}" for a in archs) if archs else "targets not listed by this NVRTC"
    note = "compiles every kernel, with or without a GPU (`gemmlab compile`, `occupancy`)"
    if machine.nvrtc_held_by:
        note += (
            f". {NVRTC_WHEEL} is held at this version by {'; '.join(machine.nvrtc_held_by)}; registers and "
            "spills can differ from a newer NVRTC's. An environment without that pin (for torch's, without the "
            "torch, triton, cute, multigpu and cublasmp extras) gets the newest NVRTC"
        )
    return Row("NVRTC", OK, f"{machine.nvrtc_version}: {targets}", note)


def _cuda_major(machine: Machine) -> int | None:
    """The CUDA major version gemmlab's cubins need the driver to support: NVRTC's."""
    return int(machine.nvrtc_version.split(".")[0]) if machine.nvrtc_version else None


def _release_for(major: int | None) -> str:
    release = gpu.MIN_DRIVER_RELEASE.get(major) if major else None
    return f"release {release} or newer (CUDA {major})" if release else "a current release"


def driver_row(machine: Machine) -> Row:
    needs_gpu = "Without it no kernel runs; these work: " + ", ".join(
        # the command's name, and `--list` where only the listing works without a GPU (reproduce)
        dict.fromkeys(
            command.split()[1] + (" --list" if "--list" in command else "") for command in gpu.WORKS_WITHOUT_GPU
        )
    )
    major = _cuda_major(machine)
    if machine.driver_cuda is None:
        return Row("NVIDIA driver", MISSING, "no driver: libcuda cannot be loaded",
                   f"{needs_gpu}. On a machine with an NVIDIA GPU, install {_release_for(major)}.")  # fmt: skip
    if machine.driver_cuda == 0:
        return Row("NVIDIA driver", UNKNOWN, "found, but it does not say which CUDA it supports",
                   f"gemmlab needs {_release_for(major)}.")  # fmt: skip
    supports = f"supports CUDA {machine.driver_cuda // 1000}.{machine.driver_cuda % 1000 // 10}"
    if major and machine.driver_cuda < major * 1000:
        return Row("NVIDIA driver", TOO_OLD, supports, f"{needs_gpu}. Update it to {_release_for(major)}.")
    return Row("NVIDIA driver", OK, supports, "runs the kernels on the GPUs below")


def gpu_rows(machine: Machine) -> list[Row]:
    if machine.driver_cuda is None:
        return [Row("GPUs", MISSING, "not looked for: no driver", "run, sweep, reproduce, tune and the other "
                    "commands that measure need one (README, What works)")]  # fmt: skip
    if machine.gpu_error or not machine.gpus:
        return [Row("GPUs", MISSING, machine.gpu_error or "the driver reports none",
                    "run, sweep, reproduce, tune and the other commands that measure need one")]  # fmt: skip
    found = []
    for g in machine.gpus:
        arch = g.cc[0] * 10 + g.cc[1]
        detail = f"{g.name}, compute capability {g.cc[0]}.{g.cc[1]}, {g.memory_bytes / 2**30:.1f} GiB"
        if machine.nvrtc_archs and arch not in machine.nvrtc_archs:
            found.append(Row(f"GPU {g.index}", UNSUPPORTED, detail,
                             f"this NVRTC cannot compile for sm_{arch}: upgrade the {NVRTC_WHEEL} wheel"))  # fmt: skip
        else:
            found.append(Row(f"GPU {g.index}", OK, detail, f"kernels compiled for sm_{arch} run on it"))
    return found


def _tool_row(name: str, tool: Tool, needed_by: str, fix: str) -> Row:
    if tool.path is None:
        return Row(name, MISSING, "not on PATH nor in the usual CUDA folders", f"{needed_by} need it. {fix}")
    version = f"{tool.version} at " if tool.version else "version not given, at "
    return Row(name, OK, version + tool.path, needed_by)


def cache_row(cache: Place) -> Row:
    if not cache.writable:
        state = "" if cache.exists else " (does not exist, and cannot be made)"
        return Row("compile cache", NOT_WRITABLE, f"{cache.path}{state}",
                   "Every compile is done again in each process, and lab.declare cannot write its declarations. "
                   "Set GEMMLAB_CACHE to a folder you can write.")  # fmt: skip
    state = "" if cache.exists else " (made at the first compile)"
    return Row("compile cache", OK, f"{cache.path}{state}", "a kernel compiled once is loaded from here after")


def database_row(database: Place) -> Row:
    if not database.exists:
        made = "made by" if database.writable else "cannot be made by"
        state = f" ({made} the first command that stores a result)"
    elif database.size_bytes is None:
        state = " (not a file)"
    else:
        state = f" ({database.size_bytes / 2**20:.1f} MiB)"
    if not database.writable:
        fix = "Commands that store results would fail: run from a folder you can write, or give --db PATH."
        return Row("results database", NOT_WRITABLE, f"{database.path}{state}", fix)
    return Row("results database", OK, f"{database.path}{state}", "sweep, reproduce, tune and peak store results here")


def extra_row(extra: Extra) -> Row:
    purpose = EXTRA_PURPOSE.get(extra.name, "see pyproject.toml's optional-dependencies")
    if not extra.unmet:
        return Row(f"extra: {extra.name}", INSTALLED, "", purpose)
    return Row(f"extra: {extra.name}", NOT_INSTALLED, ", ".join(extra.unmet),
               f"{purpose}: `pip install 'gemmlab[{extra.name}]'`")  # fmt: skip
