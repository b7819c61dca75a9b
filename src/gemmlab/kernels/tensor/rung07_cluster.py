"""Rung 7 of the tensor-core ladder, 07_cluster.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung
from gemmlab.kernels.tensor.family import HOPPER, REGISTER_SPLIT, WARPGROUP, persistent_rules, reuse_cgma, ring_bytes
from gemmlab.problems.tensor import DTYPES

RUNG = Rung(
    id="tc_cluster",
    source="07_cluster.cu",
    summary="sm_90a: tc_persistent in clusters of 2 blocks along M sharing B by TMA multicast",
    dtypes=DTYPES,
    default=Config(BM=128, BN=256, STAGES=4, GROUP_M=8),
    search=(Config(GROUP_M=4), Config(GROUP_M=16), Config(STAGES=3)),
    threads=lambda c: (c["BM"] // 64 + 1) * WARPGROUP,
    smem_bytes=lambda c: ring_bytes(c, 2),
    sass=("HGMMA", "UTMALDG", "USETMAXREG"),
    rules=persistent_rules,
    persistent=True,
    cluster=2,
    cgma=reuse_cgma,
    fixed=REGISTER_SPLIT,
    serves={"large": 3},
    default_for={"bfloat16": 2},
    cross_block=True,  # a cluster's two blocks share B by multicast
    **HOPPER,
)
