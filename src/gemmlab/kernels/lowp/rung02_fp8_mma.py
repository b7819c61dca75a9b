"""Rung 2 of the 8-bit ladder, 02_fp8_mma.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung
from gemmlab.kernels.lowp.family import MMA, mma_rules, scaling_rule
from gemmlab.problems.lowp import FP8

RUNG = Rung(
    id="tc_fp8_mma",
    source="02_fp8_mma.cu",
    summary="FP8 mma.sync m16n8k32, FP32 promotion every 128 K; scales per tensor, row/column or 128-blocks",
    dtypes=FP8,
    default=Config(BM=128, BN=128, WM=64, WN=32, STAGES=3, SCALING=0),
    search=(Config(STAGES=4), Config(WM=32, WN=64)),
    # The FP8 multiply itself differs by architecture: QMMA.16832 on sm_89;
    # on sm_90 ptxas converts the bytes to float16 and runs HMMA.16816 (Hopper
    # has FP8 tensor cores only behind wgmma). So the claims are the feeding
    # instructions; tests/test_lowp.py checks the multiply on each architecture.
    # gemmlab.matmul's FP8 product with per-tensor scales, where no pick or model candidate takes a shape.
    default_for={"e4m3": 3},
    sass=("LDSM", "LDGSTS"),
    min_cc=(8, 9),  # FP8 mma.sync
    rules=lambda c: mma_rules(c) + scaling_rule(c, (0, 1, 2)),
    **MMA,
)
