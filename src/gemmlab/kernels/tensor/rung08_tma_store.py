"""Rung 8 of the tensor-core ladder, 08_tma_store.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung, needs
from gemmlab.kernels.tensor.family import (
    C_BOX_ROWS,
    HOPPER,
    REGISTER_SPLIT,
    WARPGROUP,
    WIDEST_CHOICE,
    c_boxes_bytes,
    persistent_rules,
    reuse_cgma,
    ring_bytes,
)
from gemmlab.problems.tensor import BF16_OUT, DTYPES

RUNG = Rung(
    id="tc_tma_store",
    source="08_tma_store.cu",
    summary="sm_90a: tc_cluster storing C (float32, or bfloat16) from swizzled shared boxes by TMA",
    dtypes=(*DTYPES, BF16_OUT),
    default=Config(BM=128, BN=256, STAGES=4, GROUP_M=8, C_BOXES=2),
    search=(
        Config(C_BOXES=1),
        Config(STAGES=3, C_BOXES=4),
        Config(GROUP_M=16),
        Config(BN=192),
        Config(BN=144),
        # 192 x 192, three consumers: 94% of cuBLAS at 3000 on an H100 where 128 x 192 made 86%; with
        # STAGES = 3 (C_BOXES = 2, the same shared memory) 83% (docs/tensor-ladder.md, round 9).
        Config(BM=192, BN=192, C_BOXES=1),
        # Boxes for a warpgroup's whole 64 x 192 slab of bfloat16 C (3): one fence, then every store
        # (08_tma_store.cu). 8192 x 8192 x 256 on an H200: 67.6 us against 70.6 with C_BOXES = 2
        # (docs/tensor-ladder.md, round 15).
        Config(BN=192, C_BOXES=3),
    ),
    threads=lambda c: (c["BM"] // 64 + 1) * WARPGROUP,
    smem_bytes=lambda c: ring_bytes(c, 2) + c_boxes_bytes(c),
    sass=("HGMMA", "UTMALDG", "UTMASTG", "USETMAXREG"),
    rules=lambda c: (
        persistent_rules(c, WIDEST_CHOICE, "tc_tma_store") + needs(c["C_BOXES"] >= 1, "C_BOXES must be at least 1")
    ),
    persistent=True,
    cluster=2,
    fixed=REGISTER_SPLIT | Config(C_BOX_ROWS=C_BOX_ROWS),  # tc_cluster's split, then its own boxes of C
    cgma=reuse_cgma,
    serves={"large": 1, "skinny-m": 5, "skinny-n": 5, "k-heavy": 4, "few-tiles": 6},
    default_for={"bfloat16": 1, "bfloat16-out": 1},
    cross_block=True,  # tc_cluster's clusters
    **HOPPER,
)
