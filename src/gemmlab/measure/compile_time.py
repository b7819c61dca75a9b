"""How long a rung takes to compile, and the text its lines of code are counted
from: the programming-models table's two facts besides speed (report/models.py).

A compile is timed once, with the caches off (NVRTC's for a CUDA C++ rung,
Triton's for a Triton rung; the CuTe DSL keeps none between calls), for a target
rather than a device: none of the compilers needs a GPU, so the figure is the
host's time, never a GPU's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from importlib import resources

from gemmlab.backends.nvrtc import compile_kernel
from gemmlab.core.errors import GemmlabError
from gemmlab.kernels.peers.ahead import compile_ahead
from gemmlab.kernels.peers.spec import MODELS, PeerSpec, installed
from gemmlab.kernels.spec import KernelSpec


@dataclass(frozen=True)
class CompileTime:
    """One rung's compile: the seconds it took, or None and why it could not be timed here."""

    seconds: float | None
    reason: str = ""


def compile_seconds(spec: KernelSpec, dtype: str, arch: str) -> float:
    """Seconds to compile ``spec``'s default configuration in ``dtype`` for the
    GPU architecture ``arch`` (sm_XY), with the compile caches off."""
    if isinstance(spec, PeerSpec):
        return compile_ahead(spec, dtype, arch).seconds
    start = time.perf_counter()
    compile_kernel(spec, spec.default_block_edge(), dtype, spec.compile_arch(arch), use_cache=False)
    return time.perf_counter() - start


def time_compile(spec: KernelSpec, dtype: str, arch: str) -> CompileTime:
    """:func:`compile_seconds`, or the reason it cannot be measured on this machine."""
    if isinstance(spec, PeerSpec) and not installed(MODELS[spec.model].module):
        model = MODELS[spec.model]
        return CompileTime(None, f"{model.name} is not installed here (pip install 'gemmlab[{model.extra}]')")
    try:
        return CompileTime(compile_seconds(spec, dtype, arch))
    except GemmlabError as exc:
        return CompileTime(None, exc.cause)
    # The peers' compilers raise their own errors (Triton's CompilationError, the
    # DSL's, a missing ptxas); a report shows the figure as unknown and says why.
    except Exception as exc:
        return CompileTime(None, f"{type(exc).__name__}: {exc}")


def source_text(spec: KernelSpec) -> str:
    """The text a rung's lines of code are counted in: a peer rung's Python
    module, found in the installed package; a CUDA C++ rung's ``.cu`` with its
    local headers inlined, as NVRTC compiles it."""
    if isinstance(spec, PeerSpec):
        return (resources.files("gemmlab") / "kernels" / str(spec.source)).read_text(encoding="utf-8")
    return spec.source_text()
