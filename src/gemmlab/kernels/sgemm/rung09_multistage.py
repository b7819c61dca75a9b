"""Rung 9 of the FP32 ladder, 09_multistage.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config
from gemmlab.kernels.sgemm.family import WARP_TILES, warp_rung

RUNG = warp_rung(
    "sgemm_multistage",
    "09_multistage.cu",
    "sgemm_double_buffer with a ring of STAGES cp.async stages",
    default=Config(BM=128, BN=128, BK=16, WM=32, WN=64, STAGES=3, MIN_BLOCKS=2),
    choices={**WARP_TILES, "STAGES": (3, 4), "MIN_BLOCKS": (1, 2)},
    stages=lambda c: c["STAGES"],
    a_per_access=1,
    serves={"skinny-m": 5, "skinny-n": 4, "k-heavy": 5, "few-tiles": 4, "large": 4},  # the sm_80 rung of every class
)
