"""The 8-bit tensor-core ladder (docs/lowp-ladder.md): int8 products summed
in int32, exact, and FP8 (e4m3, e5m2) with scales, summed in FP32.

The layout is the tensor ladder's: C = A . B^T, A stored M x K and B N x K,
both K-major (8-bit wgmma reads B only that way). C is int32 for int8 and
float32 for FP8. A tile row is 128 bytes of K, 128 elements: the span of the
128-byte swizzle, and one block of DeepGEMM's FP8 scales, so a kernel meets
the scales of one K block per tile.

FP8 rungs take scales (problems/lowp.py draws data that would overflow e4m3
unscaled and quantises it) in the mode their SCALING parameter names: 0 one
per tensor, 1 one per row of A and per column of C, 2 by 1 x 128 blocks of A
and 128 x 128 blocks of B. SCALING changes the work, not how it is done, so
no search changes it; choose it with a configuration (``SCALING=1``).
PROMOTE (tc_fp8_wgmma) says whether partial sums leave the tensor cores for
FP32 registers after every 128 K, PROMOTE_K (tc_fp8_tma_store) whether after
every 128 or 256: the tolerance follows both.

Every rung takes K in whole 16-byte pieces (16-byte copies, TMA row
strides); the int8 rungs K under 2^17 as well, so that no int32 sum can
overflow.

Each rung's configuration, search and launch facts sit in ``rungNN_name.py``
beside its ``NN_name.cu``; what the rungs share (the rules several check, the
keyword sets of each kind of rung, the catalogue entry of a configuration) is
``family.py``. This module is the ladder: its rungs in order, then its
candidate rungs.
"""

from __future__ import annotations

from gemmlab.kernels.ladder import Ladder, Rung, rungs_beside
from gemmlab.kernels.lowp.family import build
from gemmlab.kernels.spec import KernelSpec
from gemmlab.kernels.tensor.family import block_limits

# The rungs in their numbers' order, each the RUNG of its rungNN_name.py beside
# this file, then the candidates: modules that set CANDIDATE = True (none yet).
# LADDER.configs(), LADDER.variant() and the dispatcher's search know them;
# the catalogue lists them once CANDIDATE is dropped.
RUNGS: tuple[Rung, ...]
CANDIDATE_RUNGS: tuple[Rung, ...]
RUNGS, CANDIDATE_RUNGS = rungs_beside(__file__, __package__ or "")

LADDER = Ladder("8-bit tensor-core ladder", RUNGS, block_limits, build, candidates=CANDIDATE_RUNGS)
LOWP_KERNELS: tuple[KernelSpec, ...] = LADDER.kernels
