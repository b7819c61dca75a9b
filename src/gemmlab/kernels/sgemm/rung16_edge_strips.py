"""Rung 16 of the FP32 ladder, 16_edge_strips.cu: its configuration, search and launch facts."""

from __future__ import annotations

from collections.abc import Callable

from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.ladder import Config, cdiv, needs
from gemmlab.kernels.sgemm.rung11_large_tile import large_rung, large_tile_rules
from gemmlab.kernels.sgemm.rung13_spread_copies import SPREAD_DEFAULT, spread_rules

# Rung 16's widest strip: a remainder of M % BM or N % BN up to this goes to
# edge blocks, each of which takes this many columns (rows below the tiles) or
# rows (columns right of them), one per lane of a warp. Passed to the kernel
# as a template argument (edge_strips.cuh static_asserts what it relies on).
EDGE_MAX = 32
# k-slices per chunk of a strip's operand that an edge block stages: one per
# thread of the tiles' 256 (a template argument too).
EDGE_KC = 256
EDGE_FACTS = Config(EDGE_MAX=EDGE_MAX, EDGE_KC=EDGE_KC)


def tiled_extent(extent: int, tile: int) -> int:
    """How much of ``extent`` sgemm_edge_strips's tiles cover: all of it, or
    all but a last strip of 1 .. EDGE_MAX (tiled_extent in edge_strips.cuh)."""
    rest = extent % tile
    return extent - rest if extent >= tile and rest <= EDGE_MAX else extent


def edge_strips_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """sgemm_edge_strips's grid: the tiles, then rows of edge blocks (EDGE_MAX
    columns of the strip below the tiles, or EDGE_MAX rows of the one to their
    right, each), as many rows as those take at the tiles' width."""

    def grid(s: Shape, block_edge: int) -> Dim3:
        m_tiled, n_tiled = tiled_extent(s.m, c["BM"]), tiled_extent(s.n, c["BN"])
        across, down = cdiv(n_tiled, c["BN"]), cdiv(m_tiled, c["BM"])
        edge = (cdiv(s.n, EDGE_MAX) if m_tiled < s.m else 0) + (cdiv(m_tiled, EDGE_MAX) if n_tiled < s.n else 0)
        return (across, down + cdiv(edge, across), 1)

    return grid


def edge_rules(c: Config) -> list[str]:
    """What rung 16's edge blocks add: the ring's shared memory holds a chunk of
    a strip's operand (EDGE_KC x (EDGE_MAX + 4) floats), then the 8 warps' sums
    (EdgeSplit's static_asserts in edge_strips.cuh)."""
    floats, need = c["STAGES"] * c["BK"] * (c["BM"] + c["BN"]), max(EDGE_KC * (EDGE_MAX + 4), 8 * EDGE_MAX * 32)
    return needs(floats >= need, f"the ring's {floats} floats of shared memory are fewer than an edge block's {need}")


RUNG = large_rung(
    "sgemm_edge_strips",
    "16_edge_strips.cu",
    "sgemm_column_order on whole tiles; a last strip of up to 32 rows or columns of C in small blocks at the "
    "end of the grid",
    default=SPREAD_DEFAULT,
    rules=lambda c: large_tile_rules(c) + spread_rules(c) + edge_rules(c),
    grid=edge_strips_grid,
    fixed=EDGE_FACTS,
    serves={"large": 2},
    default_for={"float32": 2},
)
