"""Rung 1 of the tensor-core ladder, 01_wmma.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung, needs
from gemmlab.kernels.tensor.family import reuse_cgma, warp_rules, warp_threads
from gemmlab.problems.tensor import DTYPES

RUNG = Rung(
    id="tc_wmma",
    source="01_wmma.cu",
    summary="WMMA fragments (16 x 16 x 16, tf32 16 x 16 x 8) from padded shared tiles; any M, N, K",
    dtypes=DTYPES,
    default=Config(BM=128, BN=128, BK=32, WM=64, WN=32),
    search=(Config(BK=16), Config(WM=32)),
    threads=warp_threads,
    smem_bytes=lambda c: 0,
    sass=("HMMA",),
    min_cc=(8, 0),  # mma.sync with bf16, cp.async
    rules=lambda c: (
        warp_rules(c)
        + needs(c["BK"] % 16 == 0, "BK must be a multiple of 16")
        # Static shared memory: padded rows of BK + 8 tf32 elements (the widest type).
        + needs((c["BM"] + c["BN"]) * (c["BK"] + 8) * 4 <= 48 * 1024, "the tf32 tiles must fit 48 KB")
    ),
    cgma=reuse_cgma,
    default_for={"bfloat16": 5},
)
