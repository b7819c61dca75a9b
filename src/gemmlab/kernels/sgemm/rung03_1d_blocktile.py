"""Rung 3 of the FP32 ladder, 03_1d_blocktile.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung, needs
from gemmlab.kernels.sgemm.family import MAX_ACCUMULATORS, blocktile_rules, tile_cgma

RUNG = Rung(
    id="sgemm_1d_blocktile",
    source="03_1d_blocktile.cu",
    summary="BM x BN block tile; each thread TM outputs down a column of C",
    default=Config(BM=64, BN=64, BK=8, TM=8),
    choices={"BM": (64, 128), "BN": (64,), "BK": (8,), "TM": (8, 16)},
    threads=lambda c: c["BM"] * c["BN"] // c["TM"],
    outputs=lambda c: c["TM"],
    fragments=lambda c: 2,
    max_accumulators=MAX_ACCUMULATORS,
    smem_bytes=lambda c: 4 * c["BK"] * (c["BM"] + c["BN"]),
    cgma=lambda c: tile_cgma(c["BM"], c["BN"], 1, 1),
    rules=lambda c: (
        needs(c["BM"] % c["TM"] == 0, "TM must divide BM") + blocktile_rules(c, c["BM"] * c["BN"] // c["TM"], 1)
    ),
)
