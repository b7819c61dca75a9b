"""Rung 4 of the 8-bit ladder, 04_fp8_wgmma.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung, needs
from gemmlab.kernels.lowp.family import SPECIALISED, scaling_rule, wgmma_rules
from gemmlab.kernels.tensor.family import HOPPER
from gemmlab.problems.lowp import FP8


def _fp8_wgmma_rules(c: Config) -> list[str]:
    # A promoting consumer holds two slabs (the FP32 sums and the tensor cores' partial): 64 x 128 each.
    return (
        wgmma_rules(c)
        + scaling_rule(c, (0, 1))
        + needs(c["PROMOTE"] in (0, 1), "PROMOTE must be 0 or 1")
        + needs(not c["PROMOTE"] or c["BN"] == 128, "PROMOTE=1 needs BN = 128 (two accumulator slabs per thread)")
    )


RUNG = Rung(
    id="tc_fp8_wgmma",
    source="04_fp8_wgmma.cu",
    summary="sm_90a: FP8 wgmma m64nNk32 warp-specialised; scales per tensor or row/column; PROMOTE every 128 K",
    dtypes=FP8,
    default=Config(BM=128, BN=128, STAGES=4, SCALING=0, PROMOTE=1),
    search=(Config(STAGES=6), Config(BM=64), Config(BN=256, PROMOTE=0)),
    # `gemmlab dispatch tune --dtype fp8` tries it on these classes of shape (the promoting, per-tensor
    # configurations: the others cannot run on a caller's arrays); gemmlab.matmul's FP8 product falls
    # back to it where no candidate takes a shape.
    serves={"few-tiles": 2, "k-heavy": 2, "skinny-m": 2, "skinny-n": 2},
    default_for={"e4m3": 2},
    sass=("QGMMA", "UTMALDG", "USETMAXREG"),
    rules=_fp8_wgmma_rules,
    **SPECIALISED,
    **HOPPER,
)
