"""Rung 3 of the 8-bit ladder, 03_int8_wgmma.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung
from gemmlab.kernels.lowp.family import INT8_K, SPECIALISED, wgmma_rules
from gemmlab.kernels.tensor.family import HOPPER
from gemmlab.problems.lowp import INT8

RUNG = Rung(
    id="tc_int8_wgmma",
    source="03_int8_wgmma.cu",
    summary="sm_90a: int8 wgmma m64nNk32 (int32 sums) behind a TMA producer warpgroup, full/empty barriers",
    dtypes=(INT8,),
    default=Config(BM=128, BN=256, STAGES=4),
    search=(Config(STAGES=3), Config(BN=128, STAGES=6), Config(BM=64, BN=256)),
    sass=("IGMMA", "UTMALDG", "USETMAXREG"),
    rules=wgmma_rules,
    constraints=(INT8_K,),
    **SPECIALISED,
    **HOPPER,
)
