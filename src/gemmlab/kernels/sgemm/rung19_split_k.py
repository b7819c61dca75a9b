"""Rung 19 of the FP32 ladder, 19_split_k.cu: its configuration, search and launch facts."""

from __future__ import annotations

from collections.abc import Callable

from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.ladder import Config, cdiv
from gemmlab.kernels.sgemm.family import warp_rung

# sgemm_split_k's default: sgemm_small_tile's tile, K in four slices.
SPLIT_K_DEFAULT = Config(BM=64, BN=64, BK=16, WM=32, WN=32, STAGES=3, SPLITS=4)

# Its search (22 in all): the split count on the 64 x 64 tile, and the tiles
# of 128 x 128 (rung 9's, for C of many tiles and long K), 64 x 128 and 128 x
# 64 (between), and 32 x 32 (for C of very few). The counts are chosen so
# that tiles x SPLITS nearly fills whole waves on the H100's 132 SMs for the
# suite's K-heavy and few-tile shapes: the 128 x 128 tile (155 registers: one
# block of 8 warps per SM) at 1024 x 1024 x 16384 makes 64 tiles, 128 or 256
# blocks in 2 or 4 slices (one or two waves at 97%), and at 128 x 4096 x 4096
# 32 tiles, 128 or 256 blocks in 4 or 8; 64 x 64 (107 registers, 4 blocks per
# SM) at 1024 x 1024 x 16384 makes 256 tiles, 1536 blocks in 6 slices (3 waves
# of 528, 97%).
SPLIT_K_SEARCH = (
    *(Config(SPLITS=s) for s in (2, 3, 6, 8, 12, 16)),
    *(Config(BM=128, BN=128, WN=64, SPLITS=s) for s in (2, 3, 4, 6, 8, 16)),
    *(Config(BM=64, BN=128, WN=64, SPLITS=s) for s in (2, 4, 8)),
    *(Config(BM=128, BN=64, SPLITS=s) for s in (2, 4, 8)),
    *(Config(BM=32, BN=32, SPLITS=s) for s in (4, 8, 16)),
)


def split_k_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """sgemm_split_k's grid: a block per tile of C (x along N, y along M) and slice of K (z)."""
    return lambda s, block_edge: (cdiv(s.n, c["BN"]), cdiv(s.m, c["BM"]), c["SPLITS"])


def _split_k_workspace(c: Config) -> Callable[[Shape, int], int]:
    """One 4-byte counter per tile, padded to 16 bytes, then SPLITS partial
    tiles of BM x BN floats per tile (see 19_split_k.cu). ``blocks`` counts the
    slices too: blocks / SPLITS tiles."""
    tile_bytes = 4 * c["BM"] * c["BN"]
    return lambda s, blocks: cdiv(4 * (blocks // c["SPLITS"]), 16) * 16 + blocks * tile_bytes


# A candidate: written after the newest stored benchmark of its ladder, so outside the catalogue
# until the change that stores a benchmark measuring it (see the ladder's spec.py).
CANDIDATE = True
RUNG = warp_rung(
    "sgemm_split_k",
    "19_split_k.cu",
    "sgemm_small_tile's blocks with K cut into SPLITS slices (grid z); the last slice of a tile to finish adds "
    "the partial tiles in slice order",
    default=SPLIT_K_DEFAULT,
    choices={},
    stages=lambda c: c["STAGES"],
    a_per_access=1,
    search=SPLIT_K_SEARCH,
    grid=split_k_grid,
    workspace=_split_k_workspace,
    dependent_launch=True,  # waits as its first statement (19_split_k.cu)
    serves={"k-heavy": 2, "few-tiles": 3, "skinny-n": 3, "skinny-m": 4},
    cross_block=True,  # the last slice of a tile adds the others' partial tiles
)
