"""Rung 4 of the FP32 ladder, 04_2d_blocktile.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung
from gemmlab.kernels.sgemm.family import (
    MAX_ACCUMULATORS,
    blocktile_rules,
    thread_tile_rules,
    thread_tile_threads,
    tile_cgma,
)

RUNG = Rung(
    id="sgemm_2d_blocktile",
    source="04_2d_blocktile.cu",
    summary="BM x BN block tile; each thread a TM x TN outer product; scalar loads, any size and alignment",
    default=Config(BM=128, BN=128, BK=8, TM=8, TN=8),
    # BK = 16 compiles too, but at 64 x 64 tiles ptxas needs 254 of its 255 registers.
    choices={"BM": (64, 128), "BN": (64, 128), "BK": (8,), "TM": (8,), "TN": (8,)},
    threads=thread_tile_threads,
    outputs=lambda c: c["TM"] * c["TN"],
    fragments=lambda c: c["TM"] + c["TN"],
    max_accumulators=MAX_ACCUMULATORS,
    smem_bytes=lambda c: 4 * c["BK"] * (c["BM"] + c["BN"]),
    cgma=lambda c: tile_cgma(c["BM"], c["BN"], 1, 1),
    rules=lambda c: thread_tile_rules(c) + blocktile_rules(c, thread_tile_threads(c), 1),
)
