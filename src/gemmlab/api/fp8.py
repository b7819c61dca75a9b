"""FP8 through ``gemmlab.matmul``: e4m3 inputs with one float32 scale per
tensor, as ``torch._scaled_mm`` takes them, and a float32 or bfloat16 C.

``gemmlab.matmul(a, b, scale_a=sa, scale_b=sb, out_dtype=None | "bfloat16")``
computes ``(sa * A) @ (sb * B)``:

- ``a`` is M x K, C-contiguous; ``b`` K x N, best the transpose view of an
  N x K C-contiguous array (``bt.T``, no copy; torch._scaled_mm wants the same
  layout), else C-contiguous and transposed into a copy. K must be a multiple
  of 16 (whole 16-byte rows for the tensor maps).
- PyTorch tensors of ``torch.float8_e4m3fn`` are taken through DLPack as
  their bytes, with no copy. CuPy has no FP8 type: a CuPy caller passes uint8
  arrays of e4m3 codes and says so with ``fp8="e4m3"``.
- ``scale_a`` and ``scale_b``: Python floats, or float32 arrays or tensors
  of one element on the GPU (read by the kernel at each launch).
- No alpha, beta or input C: fold alpha into ``scale_a``.

The dispatcher chooses among the 8-bit ladder's rungs that take per-tensor
scales and promote their sums into FP32 every 128 K (``tc_fp8_tma_store`` on
Hopper; the model ranks its configurations as it does the others'). e5m2 and
the mixed pair run in `gemmlab run`, not here yet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gemmlab.api.arrays import caller_stream, is_torch, to_cupy, to_torch
from gemmlab.core import gpu
from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.problems.base import GemmOperands

FORMATS = ("e4m3",)
# torch's FP8 types, by name (nothing imports torch for a CuPy caller).
TORCH_FP8 = {"torch.float8_e4m3fn": "e4m3", "torch.float8_e5m2": "e5m2", "torch.float8_e4m3fnuz": "e4m3fnuz",
             "torch.float8_e5m2fnuz": "e5m2fnuz"}  # fmt: skip


def fp8_format(x: Any) -> str | None:
    """The FP8 format of a torch tensor (``e4m3``, ``e5m2``, ...), else None."""
    return TORCH_FP8.get(str(x.dtype)) if x is not None and is_torch(x) else None


def wants_fp8(a: Any, b: Any, scale_a: Any, scale_b: Any, fp8: str | None) -> bool:
    """Whether a matmul call asks for the FP8 product: scales, ``fp8=``, or FP8 tensors."""
    return fp8 is not None or scale_a is not None or scale_b is not None or bool(fp8_format(a) or fp8_format(b))


def check_fp8_operands(
    a: Any, b: Any, c: Any, *, alpha: float, beta: float, out_dtype: str | None, fmt: str | None
) -> tuple[str, Shape, bool]:  # fmt: skip
    """The element type (``e4m3`` for a float32 C, ``e4m3-bf16`` for a
    bfloat16 one), the shape, and whether ``b`` is the transpose view of an
    N x K array; a GemmlabError with cause and fix for anything the FP8
    product cannot take. ``a`` and ``b`` are the codes (uint8). Reads only
    shapes, dtypes and flags, so NumPy arrays stand in for CuPy ones."""
    if fmt not in FORMATS:
        raise GemmlabError(
            f"gemmlab.matmul's FP8 product takes e4m3 inputs; these are {fmt or 'not marked as FP8'}.",
            'Pass torch.float8_e4m3fn tensors, or uint8 CuPy arrays of e4m3 codes with fp8="e4m3" '
            "(e5m2 runs in `gemmlab run tc_fp8_tma_store --dtype e5m2`).",
        )
    if c is not None or beta != 0.0 or alpha != 1.0:
        raise GemmlabError("The FP8 product takes no alpha, beta or input C.",
                           "Fold alpha into scale_a, and add beta * c to the result yourself.")  # fmt: skip
    if str(a.dtype) != "uint8" or str(b.dtype) != "uint8":
        raise GemmlabError(f"FP8 codes are bytes; got {a.dtype} and {b.dtype}.",
                           "Pass uint8 arrays of e4m3 codes, or torch.float8_e4m3fn tensors.")  # fmt: skip
    if a.ndim != 2 or b.ndim != 2:
        raise GemmlabError(f"gemmlab.matmul multiplies matrices; got arrays of {a.ndim} and {b.ndim} dimensions.",
                           "Reshape them to 2-D (M x K and K x N).")  # fmt: skip
    (m, k), (k_b, n) = a.shape, b.shape
    if k != k_b:
        raise GemmlabError(f"a is {m} x {k} and b is {k_b} x {n}: a's columns must equal b's rows.",
                           "Give b as K x N: the transpose view bt.T of an N x K array.")  # fmt: skip
    if min(m, n, k) < 1:
        raise GemmlabError(f"The product {m} x {n} x {k} is empty.", "Give matrices with at least one element.")
    if not a.flags.c_contiguous:
        raise GemmlabError("a is not C-contiguous.", "Pass cupy.ascontiguousarray(a) (torch: a.contiguous()).")
    transposed = b.T.flags.c_contiguous and not b.flags.c_contiguous
    if not (b.flags.c_contiguous or transposed):
        raise GemmlabError("b is neither contiguous nor the transpose view of an N x K array.",
                           "Pass bt.T for an N x K C-contiguous bt (torch: bt.t()).")  # fmt: skip
    wanted = None if out_dtype is None else str(out_dtype).replace("torch.", "").replace("bf16", "bfloat16")
    if wanted not in (None, "float32", "bfloat16"):
        raise GemmlabError(f"FP8 inputs give a float32 or bfloat16 C, not {out_dtype}.",
                           'Use out_dtype="float32" or out_dtype="bfloat16".')  # fmt: skip
    return ("e4m3-bf16" if wanted == "bfloat16" else "e4m3"), Shape(m, n, k), transposed


def device_scale(cp: Any, scale: Any, name: str) -> Any:
    """A per-tensor scale as the kernel reads it: a float32 device array of one element."""
    if scale is None:
        raise GemmlabError(f"The FP8 product needs {name}, the scale of its operand's codes.",
                           f"Pass {name}=1.0 for codes that are the values themselves.")  # fmt: skip
    if isinstance(scale, (int, float)):
        return cp.full((1,), scale, dtype=cp.float32)
    found = to_cupy(cp, scale, name, "gemmlab.matmul")
    if not isinstance(found, cp.ndarray) or found.size != 1 or str(found.dtype) != "float32":
        kind = getattr(found, "dtype", type(found).__name__)
        size = getattr(found, "size", "?")
        raise GemmlabError(f"{name} must be one float32 value; it is {kind} with {size} elements.",
                           "Pass a float, or a float32 array or tensor of one element on the GPU.")  # fmt: skip
    return found.reshape(1)


def matmul_fp8(
    a: Any, b: Any, c: Any = None, *, alpha: float = 1.0, beta: float = 0.0, out_dtype: str | None = None,
    db: str | Path | None = None, autotune: bool | None = None, scale_a: Any = None, scale_b: Any = None,
    fp8: str | None = None,
) -> Any:  # fmt: skip
    """The FP8 product of ``gemmlab.matmul`` (the module's docstring)."""
    from gemmlab.api.matmul import dispatch, one_device

    cp = gpu.cupy()
    tensors = any(is_torch(x) for x in (a, b))
    fmt = fp8 or fp8_format(a) or fp8_format(b)
    if fp8_format(a) != fp8_format(b) and is_torch(a) and is_torch(b):
        raise GemmlabError(f"a is {a.dtype} and b is {b.dtype}; the FP8 product takes one format for both.",
                           "Convert both to torch.float8_e4m3fn.")  # fmt: skip
    a, b = (to_cupy(cp, x, name, "gemmlab.matmul") for x, name in ((a, "a"), (b, "b")))
    dtype, shape, b_is_transposed = check_fp8_operands(a, b, c, alpha=alpha, beta=beta, out_dtype=out_dtype,
                                                       fmt=fmt)  # fmt: skip
    device = one_device(cp, "gemmlab.matmul", a, b)
    with cp.cuda.Device(device):
        sa, sb = device_scale(cp, scale_a, "scale_a"), device_scale(cp, scale_b, "scale_b")
    one_device(cp, "gemmlab.matmul", a, sa, sb)
    _choice, spec = dispatch(shape, dtype, db, device, autotune)
    from gemmlab.measure.gemm import launch_gemm

    bf16_c = dtype == "e4m3-bf16"
    with cp.cuda.Device(device), caller_stream(cp, device, tensors):
        bt = b.T if b_is_transposed else cp.ascontiguousarray(b.T)
        out = cp.empty((shape.m, shape.n), dtype=cp.uint16 if bf16_c else cp.float32)
        launch_gemm(spec, dtype, GemmOperands(a, bt, out, out, scale_a=sa, scale_b=sb), device)
    return to_torch(cp, out, bf16_c) if tensors else out
