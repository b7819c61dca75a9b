"""Rung 8 of the FP32 ladder, 08_double_buffer.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config
from gemmlab.kernels.sgemm.family import WARP_TILES, warp_rung

RUNG = warp_rung(
    "sgemm_double_buffer",
    "08_double_buffer.cu",
    "sgemm_warptile fed by cp.async into two shared-memory stages",
    default=Config(BM=128, BN=128, BK=16, WM=32, WN=64, MIN_BLOCKS=2),
    choices={**WARP_TILES, "MIN_BLOCKS": (1, 2)},
    stages=lambda c: 2,
    a_per_access=1,
)
