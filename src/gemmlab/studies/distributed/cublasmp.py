"""The library baseline: NVIDIA's cuBLASMp through nvmath-python's distributed
matmul (the `cublasmp` extra), on allgather_gemm's layout and inputs.

cuBLASMp reads Fortran-order matrices. This rank's blocks are C-order, and a
C-order X (r x c) read in Fortran order is X^T (c x r), so with no copy:
A's row block (M/P x K) is A^T's column block (K x M/P), and Bt's row block
(N/P x K) is B's column block (K x N/P). Both are column slabs (``Slab.Y``),
A marked transposed: cuBLASMp's all-gather + GEMM pattern, whose C
(M x N/P per rank, a column slab) is this rank's block of C, in bfloat16
(cuBLASMp's result type follows the inputs).

Its communication and GEMM are not separable, so the row's ``comm_ms`` and
``gemm_ms`` are allgather_gemm's halves on the same blocks (NCCL's all-gather
and the local GEMM): the overlap efficiency says how much of that pair the
library hid.

nvmath.distributed is initialised once per process on torch.distributed's
group with the NCCL backend alone: NVSHMEM (the other backend) is not needed
for matmul, and multicast stays off (NCCL_NVLS_ENABLE=0 in the launch).

cuBLASMp 0.8.1 and later (which nvmath-python 0.9 and later require) call
NCCL functions that NCCL 2.28 lacks (ncclCommQueryProperties, ncclPutSignal,
ncclWaitSignal: read from the libraries' symbol tables, 2026-11-29), and
libcublasmp.so uses whichever libnccl.so.2 the process loaded first, torch's.
torch 2.11's CUDA 13 wheels bring NCCL 2.28.9, so the version of the library
loaded is checked (plan.check_nccl) before cuBLASMp is loaded, and a too-old
one stops the rank with the fix.
"""

from __future__ import annotations

import numpy as np
import torch

from gemmlab.core.extras import require
from gemmlab.studies.distributed.ladder import AllGatherGemm, Context
from gemmlab.studies.distributed.plan import check_nccl

_INITIALISED: list[int] = []


def loaded_nccl_version() -> tuple[int, ...]:
    """The version of the NCCL this process runs: ncclGetVersion of the
    libnccl.so.2 already loaded (torch loads it on import; dlopen by that name
    finds it). ``torch.cuda.nccl.version()`` is no use here: it is the
    version torch was built against, and says 2.28.9 even when a newer
    library was loaded in its place. Falls back to it where the library cannot be opened."""
    import ctypes

    try:
        lib = ctypes.CDLL("libnccl.so.2")
        code = ctypes.c_int()
        if lib.ncclGetVersion(ctypes.byref(code)) != 0:
            raise OSError("ncclGetVersion failed")
    except (OSError, AttributeError):
        return tuple(torch.cuda.nccl.version())
    return (code.value // 10000, code.value // 100 % 100, code.value % 100)  # NCCL 2.9 on: x.yy.zz as xyyzz


def nvmath_distributed(device_index: int):
    """nvmath.distributed, initialised on this rank's GPU (MissingExtra naming the extra without it)."""
    nvd = require("nvmath.distributed", "cublasmp", "The cuBLASMp baseline (nvmath-python's distributed matmul)")
    check_nccl(loaded_nccl_version())
    if not _INITIALISED:
        from nvmath.distributed.process_group import TorchProcessGroup

        nvd.initialize(device_index, TorchProcessGroup(device_id=device_index), backends=["nccl"])
        _INITIALISED.append(device_index)
    return nvd


class CublasMp(AllGatherGemm):
    """cuBLASMp's all-gather + GEMM, planned once and executed per repetition."""

    name = "cublasmp"

    def prepare(self, a: torch.Tensor, bt: torch.Tensor) -> None:
        super().prepare(a, bt)
        ctx: Context = self.ctx
        if not ctx.nccl:
            raise RuntimeError("the cuBLASMp baseline runs on GPUs only")
        nvmath_distributed(ctx.device.index)
        from nvmath.distributed.distribution import Slab
        from nvmath.distributed.linalg.advanced import Matmul, matrix_qualifiers_dtype

        qualifiers = np.zeros((3,), dtype=matrix_qualifiers_dtype)
        qualifiers[0]["is_transpose"] = True  # A^T's column slab, read as A
        stream = torch.cuda.current_stream(ctx.device)
        self.library = Matmul(self.a_mine.T, self.bt_mine.T, distributions=[Slab.Y, Slab.Y, Slab.Y],
                              qualifiers=qualifiers, stream=stream)  # fmt: skip
        self.library.plan()

    def run(self) -> None:
        self.c = self.library.execute(stream=torch.cuda.current_stream(self.ctx.device))
