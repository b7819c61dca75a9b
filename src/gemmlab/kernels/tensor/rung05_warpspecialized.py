"""Rung 5 of the tensor-core ladder, 05_warpspecialized.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung
from gemmlab.kernels.tensor.family import HOPPER, REGISTER_SPLIT, WARPGROUP, reuse_cgma, ring_bytes, specialised_rules
from gemmlab.problems.tensor import DTYPES

RUNG = Rung(
    id="tc_warpspecialized",
    source="05_warpspecialized.cu",
    summary="sm_90a: a TMA producer warpgroup, wgmma consumer warpgroups, full/empty barriers, setmaxnreg",
    dtypes=DTYPES,
    default=Config(BM=128, BN=256, STAGES=4),
    search=(Config(STAGES=3), Config(BN=128, STAGES=6), Config(BM=256, BN=128)),
    threads=lambda c: (c["BM"] // 64 + 1) * WARPGROUP,
    smem_bytes=lambda c: ring_bytes(c, 2),
    sass=("HGMMA", "UTMALDG", "USETMAXREG"),
    rules=specialised_rules,
    cgma=reuse_cgma,
    fixed=REGISTER_SPLIT,
    **HOPPER,
)
