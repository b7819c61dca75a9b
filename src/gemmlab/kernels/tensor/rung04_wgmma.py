"""Rung 4 of the tensor-core ladder, 04_wgmma.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung, needs
from gemmlab.kernels.tensor.family import HOPPER, WARPGROUP, reuse_cgma, ring_bytes, wgmma_rules
from gemmlab.problems.tensor import DTYPES

RUNG = Rung(
    id="tc_wgmma",
    source="04_wgmma.cu",
    summary="sm_90a: TMA tile loads on mbarriers, wgmma from shared memory; one barrier per tile",
    dtypes=DTYPES,
    default=Config(BM=128, BN=128, STAGES=4),
    search=(Config(BN=256, STAGES=3), Config(STAGES=5), Config(BM=64, BN=256)),
    threads=lambda c: c["BM"] // 64 * WARPGROUP,
    smem_bytes=lambda c: ring_bytes(c, 1),
    sass=("HGMMA", "UTMALDG"),
    rules=lambda c: wgmma_rules(c) + needs(c["STAGES"] >= 1, "STAGES must be at least 1"),
    cgma=reuse_cgma,
    serves={"skinny-m": 4, "skinny-n": 4, "k-heavy": 3, "few-tiles": 4},
    **HOPPER,
)
