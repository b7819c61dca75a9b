"""cublasGemmEx as one call the runner can time and capture into a CUDA graph.

CuPy's cuBLAS wrappers refuse to run while a stream is being captured
(NotImplementedError: "calling cuBLAS API during stream capture is currently
unsupported"; an H100 with cuBLAS 13.1, 2026-11-24), although cuBLAS itself
records a GEMM into a graph. Short problems are timed from graphs on both
sides (gemmlab.measure.run), so the baseline calls libcublas through ctypes:
the library CuPy already loaded, with CuPy's handle. Where that library cannot
be found, the call goes through CuPy's wrapper, which still runs outside a
capture; the runner then times it from back-to-back launches and says so.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

# A GEMM's arguments after the handle, in cublasGemmEx's order.
_GEMM_ARGTYPES = (
    ctypes.c_int, ctypes.c_int,  # transa, transb
    ctypes.c_int, ctypes.c_int, ctypes.c_int,  # m, n, k
    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,  # alpha, A, Atype, lda
    ctypes.c_void_p, ctypes.c_int, ctypes.c_int,  # B, Btype, ldb
    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,  # beta, C, Ctype, ldc
    ctypes.c_int, ctypes.c_int,  # computeType, algo
)  # fmt: skip


class CublasStatusError(RuntimeError):
    """A cuBLAS call that returned a status other than CUBLAS_STATUS_SUCCESS."""


def loaded_library_path(prefix: str, maps: Path = Path("/proc/self/maps")) -> Path | None:
    """The file of a shared library this process has loaded whose name starts
    with ``prefix`` (Linux: from /proc/self/maps); None if none is mapped."""
    try:
        lines = maps.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        if path.startswith("/") and Path(path).name.startswith(prefix):
            return Path(path)
    return None


@functools.cache
def _library() -> Any | None:
    """libcublas as CuPy loaded it, with the two entry points typed; None where it cannot be found."""
    path = loaded_library_path("libcublas.so")
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(str(path))
        set_stream, gemm = lib.cublasSetStream_v2, lib.cublasGemmEx
    except (OSError, AttributeError):
        return None
    set_stream.argtypes, set_stream.restype = (ctypes.c_void_p, ctypes.c_void_p), ctypes.c_int
    gemm.argtypes, gemm.restype = (ctypes.c_void_p, *_GEMM_ARGTYPES), ctypes.c_int
    return lib


def gemm_ex(cp: Any, args: tuple[int, ...], keep: tuple[Any, ...] = ()) -> Callable[[], None]:
    """A call of cublasGemmEx(handle, *args) on the current CuPy stream.
    ``args`` follow cuBLAS's order after the handle, pointers as integers;
    ``keep`` holds what those pointers point into (host scalars), alive as long
    as the call."""
    handle = cp.cuda.device.get_cublas_handle()  # loads libcublas too
    lib = _library()
    if lib is None:
        from cupy_backends.cuda.libs import cublas

        def through_cupy(keep: tuple[Any, ...] = keep) -> None:
            cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
            cublas.gemmEx(handle, *args)

        return through_cupy

    def direct(keep: tuple[Any, ...] = keep) -> None:
        _checked(lib.cublasSetStream_v2(handle, cp.cuda.get_current_stream().ptr), "cublasSetStream")
        _checked(lib.cublasGemmEx(handle, *args), "cublasGemmEx")

    return direct


def _checked(status: int, what: str) -> None:
    if status != 0:
        raise CublasStatusError(f"{what} returned cuBLAS status {status}")
