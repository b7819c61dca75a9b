"""The tensor-core ladder: from WMMA fragments to Hopper's TMA + wgmma with
warp specialisation, persistent blocks and clusters (docs/tensor-ladder.md).

Every rung computes C = A . B^T, with A stored M x K and B stored N x K (both
row-major, "K-major": the layout the tensor cores read without a transpose,
and a linear layer's y = x . W^T), C in float32, accumulated in float32. The
element types:

- ``bfloat16`` and ``float16``: 16-bit inputs, FP32 accumulation;
- ``tf32``: float32 inputs that the tensor cores read with a 10-bit mantissa;
- ``bfloat16-out``: bfloat16 inputs, FP32 accumulation and a bfloat16 C (the
  sums rounded to nearest even); the rungs that store C by TMA take it.

The cuBLAS baseline runs the same layout and types through ``cublasGemmEx``
(compute type CUBLAS_COMPUTE_32F, or CUBLAS_COMPUTE_32F_FAST_TF32 for tf32),
with the same output type.

Rungs from tc_mma on take K with rows of whole 16-byte pieces (K a multiple
of 8 for 16-bit types, of 4 for tf32): 16-byte copies and TMA tensor maps
need 16-byte row strides. tc_wmma takes any K and is the fallback. The Hopper
rungs get their operands as TMA tensor maps, built for each run
(``cuTensorMapEncodeTiled`` through cuda.core) and passed by value.

Each rung's configuration, search and launch facts sit in ``rungNN_name.py``
beside its ``NN_name.cu``; what the rungs share (the register split, the
ring's bytes, the catalogue entry of a configuration) is ``family.py``. This
module is the ladder: its rungs in order, then its candidate rungs.
"""

from __future__ import annotations

from gemmlab.kernels.ladder import Ladder, Rung, rungs_beside
from gemmlab.kernels.spec import KernelSpec
from gemmlab.kernels.tensor.family import block_limits, build

# The rungs in their numbers' order, each the RUNG of its rungNN_name.py beside
# this file, then the candidates: modules that set CANDIDATE = True, written
# after the newest stored benchmark (benchmarks/results/*_tensor.json, which docs/tensor-ladder.md
# and tests/test_worklog.py hold the catalogue to). LADDER.configs(),
# LADDER.variant() and the dispatcher's search know them; they join the
# catalogue when the change that stores a benchmark measuring them drops CANDIDATE.
RUNGS: tuple[Rung, ...]
CANDIDATE_RUNGS: tuple[Rung, ...]
RUNGS, CANDIDATE_RUNGS = rungs_beside(__file__, __package__ or "")

LADDER = Ladder("tensor-core ladder", RUNGS, block_limits, build, candidates=CANDIDATE_RUNGS)
TENSOR_KERNELS: tuple[KernelSpec, ...] = LADDER.kernels
