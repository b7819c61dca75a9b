"""Rung 13 of the FP32 ladder, 13_spread_copies.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, needs
from gemmlab.kernels.sgemm.family import warp_threads
from gemmlab.kernels.sgemm.rung11_large_tile import LARGE_TILE_DEFAULT, large_rung, large_tile_rules

# The default configuration of rungs 13 onward (sgemm_spread_copies to
# sgemm_padded_b): sgemm_large_tile's tile with four stages instead of three.
SPREAD_DEFAULT = LARGE_TILE_DEFAULT | Config(STAGES=4)


def spread_rules(c: Config) -> list[str]:
    """What rung 13's copies add: each warp's copy is laid out for 8 warps and whole sectors."""
    return (
        needs(warp_threads(c) == 256, "the copies are laid out for 8 warps: (BM / WM) x (BN / WN) must be 8")
        + needs(c["BK"] % 8 == 0, "BK must be a multiple of 8 (a warp copies 8 k-slices of A at once)")
        + needs(c["BN"] % 32 == 0, "BN must be a multiple of 32 (a warp copies 32 columns of B at once)")
    )


RUNG = large_rung(
    "sgemm_spread_copies",
    "13_spread_copies.cu",
    "sgemm_lean_loop with a tile's copies issued a share per k-slice, each warp's copy reading whole sectors",
    default=SPREAD_DEFAULT,
    rules=lambda c: large_tile_rules(c) + spread_rules(c),
)
