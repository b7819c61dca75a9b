"""Rung 15 of the FP32 ladder, 15_column_order.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.sgemm.rung11_large_tile import large_rung, large_tile_rules
from gemmlab.kernels.sgemm.rung13_spread_copies import SPREAD_DEFAULT, spread_rules

RUNG = large_rung(
    "sgemm_column_order",
    "15_column_order.cu",
    "sgemm_spread_copies (not stream-K) with each k-slice's FFMAs issued a column of outputs at a time",
    default=SPREAD_DEFAULT,
    rules=lambda c: large_tile_rules(c) + spread_rules(c),
)
