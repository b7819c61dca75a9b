"""Rung 6 of the 8-bit ladder, 06_fp8_tma_store.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung
from gemmlab.kernels.lowp.family import PERSISTENT, persistent_rules, scaling_rule
from gemmlab.kernels.tensor.family import HOPPER
from gemmlab.problems.lowp import FP8_WITH_BF16, MIXED

RUNG = Rung(
    id="tc_fp8_tma_store",
    source="06_fp8_tma_store.cu",
    summary="sm_90a: persistent FP8 wgmma in clusters, promotion every 128 K, C (float32/bf16) scaled per tensor "
    "or row/column, stored by TMA",
    default=Config(BM=128, BN=256, STAGES=4, GROUP_M=8, CLUSTER=2, C_BOXES=2, PROMOTE_K=128, STAGGER=0, SCALING=0),
    search=(
        Config(STAGGER=1),
        Config(CLUSTER=1),
        Config(CLUSTER=1, STAGGER=1),
        Config(GROUP_M=16),
        Config(STAGES=3, C_BOXES=4),
        # Half of a float32 slab's boxes at once with clusters of one: 100.2% of cuBLASLt at 8192 with a
        # float32 C on an H200, where the default measured 98.2% (2026-11-28m_h200_fp8-f32-epilogue.txt).
        Config(CLUSTER=1, STAGES=3, C_BOXES=4),
        Config(BN=192),
        Config(BN=192, CLUSTER=1),
        Config(BN=128, STAGES=6),
        Config(BN=128, STAGES=6, PROMOTE_K=256),
        Config(BN=128, STAGES=4, C_BOXES=4, PROMOTE_K=256),
        Config(BM=64, BN=128, STAGES=8),
        # BN = 144 (cuBLASLt's tile at 8192) is left out: 72-87.5% of cuBLASLt at 4096 and 8192 on an
        # H100 and an H200 whatever its stages and cluster, where the default measured 94.6-97.7% in
        # the same runs (benchmarks/results/2026-11-25g_h100_fp8-bn144.txt, 2026-11-25h_h200_fp8-bn144.txt).
    ),
    # `gemmlab dispatch tune --dtype fp8` tries it on these classes of shape (the promoting, per-tensor
    # configurations: the others cannot run on a caller's arrays); gemmlab.matmul's FP8 product falls
    # back to it where no candidate takes a shape.
    serves={"large": 1, "few-tiles": 1, "k-heavy": 1, "skinny-m": 1, "skinny-n": 1},
    default_for={"e4m3": 1, "e4m3-bf16": 1},
    sass=("QGMMA", "UTMALDG", "UTMASTG", "USETMAXREG"),
    cross_block=True,  # clusters of CLUSTER blocks share B by multicast
    # Its types add the mixed pair (A e5m2, B e4m3), a backward pass's product.
    **PERSISTENT | dict(rules=lambda c: persistent_rules(c) + scaling_rule(c, (0, 1)), dtypes=(*FP8_WITH_BF16, *MIXED)),
    **HOPPER,
)
