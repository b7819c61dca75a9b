"""Rung 1 of the 8-bit ladder, 01_int8_mma.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung
from gemmlab.kernels.lowp.family import INT8_K, MMA, mma_rules
from gemmlab.problems.lowp import INT8

RUNG = Rung(
    id="tc_int8_mma",
    source="01_int8_mma.cu",
    summary="int8 mma.sync m16n8k32 (int32 sums, exact) fed by a cp.async ring of swizzled 128-byte rows",
    dtypes=(INT8,),
    default=Config(BM=128, BN=128, WM=64, WN=32, STAGES=3),
    search=(Config(STAGES=4), Config(BN=256, WN=64), Config(WM=32, WN=64)),
    sass=("IMMA", "LDSM", "LDGSTS"),
    min_cc=(8, 0),  # int8 mma.sync m16n8k32, cp.async
    rules=mma_rules,
    constraints=(INT8_K,),
    **MMA,
)
