"""Rung 17 of the FP32 ladder, 17_padded_b.cu: its configuration, search and launch facts."""

from __future__ import annotations

from collections.abc import Callable

from gemmlab.core.shapes import MAX_INDEX, Dim3, Shape
from gemmlab.kernels.ladder import Config, cdiv
from gemmlab.kernels.sgemm.rung11_large_tile import large_rung, large_tile_rules
from gemmlab.kernels.sgemm.rung13_spread_copies import SPREAD_DEFAULT, spread_rules
from gemmlab.kernels.sgemm.rung16_edge_strips import EDGE_FACTS, edge_rules, edge_strips_grid
from gemmlab.kernels.spec import Constraint

# The blocks of sgemm_padded_b that copy B into its padded form, in whole rows
# of the grid in front of sgemm_edge_strips's (17_padded_b.cu counts the rows
# past rung 16's as theirs). Passed to the kernel as a template argument.
PAD_BLOCKS = 128


def padded_b_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """sgemm_padded_b's grid: sgemm_edge_strips's, and when N % 4 != 0 the
    rows of PAD_BLOCKS blocks (rounded up to whole rows) that copy B first."""
    edge = edge_strips_grid(c)

    def grid(s: Shape, block_edge: int) -> Dim3:
        across, down, _ = edge(s, block_edge)
        return (across, down + (cdiv(PAD_BLOCKS, across) if s.n % 4 else 0), 1)

    return grid


def _padded_b_elems(s: Shape) -> int:
    """sgemm_padded_b's copy of B: K rows of N rounded up to 4 floats, or none
    when N % 4 == 0."""
    return s.k * cdiv(s.n, 4) * 4 if s.n % 4 else 0


def _padded_b_workspace(c: Config) -> Callable[[Shape, int], int]:
    """Two 64-bit counters (16 bytes), then the padded B (see 17_padded_b.cu)."""
    return lambda s, blocks: 16 + 4 * _padded_b_elems(s)


def _padded_b_fits(shape: Shape, block_edge: int) -> str | None:
    elems = _padded_b_elems(shape)
    if elems > MAX_INDEX:
        return f"B padded to rows of a multiple of 4 floats has {elems} elements, over the 2^31 - 1 of 32-bit indexing"
    return None


# Rung 17, whole: everything it takes from the rungs below it is named here.
RUNG = large_rung(
    "sgemm_padded_b",
    "17_padded_b.cu",
    "sgemm_edge_strips that, when N % 4 != 0, first copies B with its rows padded to 16 bytes, so the tiles "
    "copy B 16 bytes at a time at every N",
    default=SPREAD_DEFAULT,  # rung 13's: rung 11's tile, four stages
    rules=lambda c: (
        large_tile_rules(c)  # rung 11: warp tiles, the A swizzle, float4 pieces, a ring, two fragment buffers
        + spread_rules(c)  # rung 13: copies laid out for 8 warps and whole sectors
        + edge_rules(c)  # rung 16: the ring's shared memory holds an edge block's chunk and sums
    ),
    grid=padded_b_grid,  # rung 16's grid, then PAD_BLOCKS in whole rows when N % 4 != 0
    workspace=_padded_b_workspace,  # its own: two counters and the padded B
    constraints=(Constraint("B padded to whole 16-byte rows fits 32-bit indexing", _padded_b_fits),),
    fixed=EDGE_FACTS | Config(PAD_BLOCKS=PAD_BLOCKS),  # rung 16's strips, then its own copy's blocks
    serves={"large": 1, "few-tiles": 6},
    default_for={"float32": 1},  # the top rung
    cross_block=True,  # ticket counters: a block of tiles waits for the blocks copying B
)
