"""Rung 7 of the FP32 ladder, 07_warptile.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config
from gemmlab.kernels.sgemm.family import WARP_TILES, warp_rung

RUNG = warp_rung(
    "sgemm_warptile",
    "07_warptile.cu",
    "block tile -> warp tile (WM x WN) -> 4 x 4 thread micro-tiles",
    default=Config(BM=128, BN=128, BK=16, WM=32, WN=64, MIN_BLOCKS=2),
    choices={**WARP_TILES, "MIN_BLOCKS": (1, 2)},
    stages=lambda c: 1,
    a_per_access=4,
)
