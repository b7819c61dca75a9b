"""Rung 18 of the FP32 ladder, 18_small_tile.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config
from gemmlab.kernels.sgemm.family import warp_rung

# sgemm_small_tile's default: 64 x 64 tiles of four 32 x 32 warp tiles (32
# outputs a thread), rung 9's three stages of BK = 16 (24 KB), and registers
# capped for four blocks per SM (128 a thread).
SMALL_TILE_DEFAULT = Config(BM=64, BN=64, BK=16, WM=32, WN=32, STAGES=3, MIN_BLOCKS=4)

# What the tuner tries besides the default (16 in all): the tile from 32 x 32
# (one warp) to 64 x 64 and one 128 x 64 for the sizes between; 16-row warp
# tiles (twice the warps, half the outputs each); BK = 32; two to four stages;
# and a looser register cap.
SMALL_TILE_SEARCH = (
    Config(BK=32),
    Config(STAGES=2),
    Config(STAGES=4),
    Config(WM=16),
    Config(WM=16, STAGES=4),
    Config(MIN_BLOCKS=2),
    Config(BM=32),
    Config(BN=32),
    Config(BM=32, BK=32),
    Config(BN=32, BK=32),
    Config(BM=32, BN=32),
    Config(BM=32, BN=32, WM=16),
    Config(BM=32, BN=32, BK=32),
    Config(BM=32, BN=32, STAGES=4),
    Config(BM=128, MIN_BLOCKS=2),
)


# A candidate: written after the newest stored benchmark of its ladder, so outside the catalogue
# until the change that stores a benchmark measuring it (see the ladder's spec.py).
CANDIDATE = True
RUNG = warp_rung(
    "sgemm_small_tile",
    "18_small_tile.cu",
    "sgemm_multistage's ring on 32 to 64-row, 32 to 64-column block tiles, several blocks per SM: every SM busy "
    "at 512 to 1024",
    default=SMALL_TILE_DEFAULT,
    choices={},
    stages=lambda c: c["STAGES"],
    a_per_access=1,
    search=SMALL_TILE_SEARCH,
    dependent_launch=True,  # waits as its first statement (18_small_tile.cu; docs/dispatch.md, 2026-11-28)
    # Last at large shapes: its 128 x 64 tile, 2 blocks per SM, for a short K
    # (one block's epilogue runs beside the other's main loop).
    serves={"few-tiles": 1, "skinny-n": 2, "skinny-m": 3, "k-heavy": 4, "large": 5},
)
