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
"""

from __future__ import annotations

import numpy as np
import torch

from gemmlab.core.extras import require
from gemmlab.studies.distributed.ladder import AllGatherGemm, Context

_INITIALISED: list[int] = []


def nvmath_distributed(device_index: int):
    """nvmath.distributed, initialised on this rank's GPU (MissingExtra naming the extra without it)."""
    nvd = require("nvmath.distributed", "cublasmp", "The cuBLASMp baseline (nvmath-python's distributed matmul)")
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
