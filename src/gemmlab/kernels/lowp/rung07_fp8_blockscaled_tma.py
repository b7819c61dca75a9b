"""Rung 7 of the 8-bit ladder, 07_fp8_blockscaled_tma.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung, needs
from gemmlab.kernels.lowp.family import PERSISTENT, persistent_rules
from gemmlab.kernels.tensor.family import HOPPER, c_boxes_bytes, ring_bytes


def scale_stage_bytes(c: Config) -> int:
    """fp8_persistent.cuh's STAGE_SCALES floats per stage (block scales): A's rows' and up to 4 of B's."""
    return c["STAGES"] * (c["BM"] + 4) * 4


BLOCKSCALED_PERSISTENT = PERSISTENT | dict(
    # a third barrier per stage: scales_free, the consumers' word that the stage's scales are read
    smem_bytes=lambda c: ring_bytes(c, 3) + c_boxes_bytes(c) + scale_stage_bytes(c),
    rules=lambda c: (
        persistent_rules(c)
        + needs(
            c["BN"] not in (144, 192),
            f"BN={c['BN']} takes per-tensor scales only: with block scales a pass is one 128-column block",
        )
    ),
)

RUNG = Rung(
    id="tc_fp8_blockscaled_tma",
    source="07_fp8_blockscaled_tma.cu",
    summary="sm_90a: tc_fp8_tma_store with 1 x 128 / 128 x 128 block scales applied at each promotion",
    default=Config(BM=128, BN=256, STAGES=4, GROUP_M=8, CLUSTER=2, C_BOXES=2, STAGGER=0),
    # CLUSTER=1 and STAGGER=1 at BN = 256 spilled in one C type or the other until the consumers' descriptors
    # moved to uniform registers (docs/lowp-ladder.md, round 10); then CLUSTER=1 measured 100.6-103% of
    # cuBLASLt's block-scaled product at 4096 on an H200 and joined the search; STAGGER=1, 92-94%, did not.
    search=(
        Config(CLUSTER=1),
        Config(CLUSTER=1, GROUP_M=16),
        Config(GROUP_M=16),
        Config(BN=128, STAGES=5),
        Config(BN=128, STAGES=5, STAGGER=1),
        Config(BN=128, STAGES=4, C_BOXES=4),
    ),
    sass=("QGMMA", "UTMALDG", "UTMASTG", "USETMAXREG"),
    cross_block=True,  # tc_fp8_tma_store's clusters
    **BLOCKSCALED_PERSISTENT,
    **HOPPER,
)
