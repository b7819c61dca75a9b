"""Rung 3 of the tensor-core ladder, 03_mma_pipeline.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung, needs
from gemmlab.kernels.tensor.family import ROWS_16, reuse_cgma, ring_bytes, warp_rules, warp_threads
from gemmlab.problems.tensor import DTYPES_16

RUNG = Rung(
    id="tc_mma_pipeline",
    source="03_mma_pipeline.cu",
    summary="tc_mma fed by a ring of STAGES cp.async stages",
    dtypes=DTYPES_16,
    default=Config(BM=128, BN=128, WM=64, WN=32, STAGES=3),
    search=(Config(STAGES=4), Config(BN=256, WN=64), Config(WM=32, WN=64), Config(BM=256, WN=64)),
    threads=warp_threads,
    smem_bytes=lambda c: ring_bytes(c, 0),
    sass=("HMMA", "LDSM", "LDGSTS"),
    min_cc=(8, 0),  # mma.sync with bf16, cp.async
    rules=lambda c: warp_rules(c) + needs(c["STAGES"] >= 2, "STAGES must be at least 2"),
    cgma=reuse_cgma,
    dynamic_smem=True,
    k_bytes_multiple=ROWS_16,
    serves={"skinny-m": 3, "skinny-n": 3, "large": 5},
    default_for={"bfloat16": 4},
)
