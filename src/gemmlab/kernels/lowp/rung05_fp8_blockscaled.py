"""Rung 5 of the 8-bit ladder, 05_fp8_blockscaled.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung, needs
from gemmlab.kernels.lowp.family import SPECIALISED, wgmma_rules
from gemmlab.kernels.tensor.family import HOPPER
from gemmlab.problems.lowp import FP8, SCALE_BLOCK


def _blockscaled_rules(c: Config) -> list[str]:
    return wgmma_rules(c) + needs(c["BN"] == SCALE_BLOCK, "BN must be 128: one block of B's scales per tile")


RUNG = Rung(
    id="tc_fp8_blockscaled",
    source="05_fp8_blockscaled.cu",
    summary="sm_90a: tc_fp8_wgmma with DeepGEMM's 1 x 128 / 128 x 128 scales, applied at each 128-K promotion",
    dtypes=FP8,
    default=Config(BM=128, BN=128, STAGES=4),
    search=(Config(STAGES=6), Config(BM=64, STAGES=8)),
    sass=("QGMMA", "UTMALDG", "USETMAXREG"),
    rules=_blockscaled_rules,
    **SPECIALISED,
    **HOPPER,
)
