"""Rung 6 of the tensor-core ladder, 06_persistent.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung
from gemmlab.kernels.tensor.family import HOPPER, REGISTER_SPLIT, WARPGROUP, persistent_rules, reuse_cgma, ring_bytes
from gemmlab.problems.tensor import DTYPES

RUNG = Rung(
    id="tc_persistent",
    source="06_persistent.cu",
    summary="sm_90a: tc_warpspecialized with one block per SM over tiles in GROUP_M-row groups (L2 order)",
    dtypes=DTYPES,
    default=Config(BM=128, BN=256, STAGES=4, GROUP_M=8),
    search=(Config(GROUP_M=4), Config(GROUP_M=16), Config(STAGES=3), Config(BM=256, BN=128)),
    threads=lambda c: (c["BM"] // 64 + 1) * WARPGROUP,
    smem_bytes=lambda c: ring_bytes(c, 2),
    sass=("HGMMA", "UTMALDG", "USETMAXREG"),
    rules=persistent_rules,
    persistent=True,
    cgma=reuse_cgma,
    fixed=REGISTER_SPLIT,
    serves={"k-heavy": 2, "few-tiles": 5, "large": 4},
    **HOPPER,
)
