"""The arrays people hold, for :func:`gemmlab.matmul` and :class:`gemmlab.Matmul`:
CuPy arrays as they are, and PyTorch tensors through DLPack, with no copy.
A caller who passes tensors gets a tensor back, written on PyTorch's current
stream, so it is ordered after the work that made the inputs and before the
work that reads the result.

CuPy has no bfloat16 type, so a bfloat16 tensor travels as its 16-bit
patterns (a view, not a copy) and a bfloat16 result comes back as a bfloat16
tensor. An FP8 tensor travels as its bytes (:mod:`gemmlab.api.fp8`). float32,
bfloat16 and FP8 are taken; other types are refused with the conversion that
fixes them."""

from __future__ import annotations

import contextlib
from typing import Any

from gemmlab.core.errors import GemmlabError


def is_torch(x: Any) -> bool:
    """Whether ``x`` is a PyTorch tensor (told by its type's module, so that
    nothing imports torch for a CuPy caller)."""
    return type(x).__module__.split(".")[0] == "torch"


def to_cupy(cp: Any, x: Any, name: str, caller: str) -> Any:
    """``x`` as a CuPy array on the same memory: a tensor through DLPack (a
    bfloat16 one as uint16 bit patterns); anything else as it is (None too)."""
    if x is None or not is_torch(x):
        return x
    import torch

    if not x.is_cuda:
        raise GemmlabError(
            f"{caller}: {name} is a PyTorch tensor on {x.device}, and the product runs on the GPU.",
            f"Move it to the GPU first: {name}.cuda().",
        )
    if x.dtype == torch.float32:
        return cp.from_dlpack(x)
    if x.dtype == torch.bfloat16:
        # The same bytes as int16 (DLPack carries that type everywhere), then CuPy's uint16 view of them.
        return cp.from_dlpack(x.view(torch.int16)).view(cp.uint16)
    if str(x.dtype).startswith("torch.float8"):
        return cp.from_dlpack(x.view(torch.uint8))  # the codes, as bytes (api/fp8.py tells the format)
    raise GemmlabError(
        f"{caller} takes float32, bfloat16 and float8_e4m3fn tensors; {name} is {x.dtype}.",
        f"Convert it first: {name}.float() or {name}.bfloat16().",
    )


def to_torch(cp: Any, out: Any, bfloat16_bits: bool) -> Any:
    """The CuPy result ``out`` as a tensor on the same memory (bfloat16 bit
    patterns as a bfloat16 tensor)."""
    import torch

    if bfloat16_bits:
        return torch.from_dlpack(out.view(cp.int16)).view(torch.bfloat16)
    return torch.from_dlpack(out)


def caller_stream(cp: Any, device: int, tensors: bool) -> contextlib.AbstractContextManager:
    """For a caller who gave tensors, CuPy's current stream set to PyTorch's
    current stream on ``device``, so that a launch on CuPy's current stream is
    ordered with the caller's work; nothing changed for a CuPy caller."""
    if not tensors:
        return contextlib.nullcontext()
    import torch

    return cp.cuda.ExternalStream(torch.cuda.current_stream(device).cuda_stream, device)
