"""Rung 10 of the FP32 ladder, 10_swizzle_l2.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config
from gemmlab.kernels.sgemm.family import warp_rung

RUNG = warp_rung(
    "sgemm_swizzle_l2",
    "10_swizzle_l2.cu",
    "sgemm_multistage with blocks ordered in groups of GROUP_M tile rows for L2 reuse",
    default=Config(BM=128, BN=128, BK=16, WM=32, WN=64, STAGES=3, GROUP_M=8, MIN_BLOCKS=2),
    # The tile of sgemm_multistage's default; only the order of the blocks varies.
    choices={
        "BM": (128,),
        "BN": (128,),
        "BK": (16,),
        "WM": (32,),
        "WN": (64,),
        "STAGES": (3,),
        "GROUP_M": (4, 8, 16),
        "MIN_BLOCKS": (2,),
    },
    stages=lambda c: c["STAGES"],
    a_per_access=1,
    default_for={"float32": 3},  # any size, on any GPU
)
