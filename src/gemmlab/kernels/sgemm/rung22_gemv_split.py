"""Rung 22 of the FP32 ladder, 22_gemv_split.cu: its configuration, search and launch facts."""

from __future__ import annotations

from collections.abc import Callable

from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.ladder import Config, Rung, cdiv, needs
from gemmlab.kernels.sgemm.family import MAX_ACCUMULATORS
from gemmlab.kernels.spec import Constraint, at_most

# sgemm_gemv_split's default (issue 21, third round): one row, strips of 128
# columns (a warp reads 512 contiguous bytes of a row of B), 4 warps, 3 quads
# (12 loads of B) in flight per thread, K in 16 slices: 32 x 16 = 512 blocks
# at N = 4096, one wave of 4 per SM on 132.
GEMV_SPLIT_DEFAULT = Config(ROWS=1, COL_VECS=32, WARPS=4, QUADS=3, SPLITS=16)

# Its search (13 in all): 2 and 4 rows (4 with 2 quads: the quads' A registers
# grow with the rows), the split count for fewer or more blocks (8: 256 blocks,
# two per SM; 32: two waves), 8-warp blocks, the loads in flight, and strips of
# 32 or 64 columns (128 or 256 bytes of a row per lane group) with fewer slices
# for the same 512 blocks.
GEMV_SPLIT_SEARCH = (
    Config(ROWS=2),
    Config(ROWS=4, QUADS=2),
    Config(SPLITS=8),
    Config(SPLITS=32),
    Config(WARPS=8, SPLITS=8),
    Config(QUADS=2),
    Config(QUADS=4),
    Config(COL_VECS=8, SPLITS=4),
    Config(COL_VECS=8, SPLITS=4, ROWS=2),
    Config(COL_VECS=8, SPLITS=4, ROWS=4, QUADS=2),
    Config(COL_VECS=16, SPLITS=8),
    Config(ROWS=2, SPLITS=8),
)


def gemv_split_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """sgemm_gemv_split's grid: a block per strip of 4 x COL_VECS columns (x) and slice of K (y)."""
    return lambda s, block_edge: (cdiv(s.n, 4 * c["COL_VECS"]), c["SPLITS"], 1)


def _gemv_split_workspace(c: Config) -> Callable[[Shape, int], int]:
    """One 4-byte counter per strip, padded to 16 bytes, then SPLITS partial
    strips of ROWS x 4 COL_VECS floats per strip (see 22_gemv_split.cu)."""
    strip_bytes = 4 * c["ROWS"] * 4 * c["COL_VECS"]
    return lambda s, blocks: cdiv(4 * (blocks // c["SPLITS"]), 16) * 16 + blocks * strip_bytes


def _gemv_split_rules(c: Config) -> list[str]:
    return (
        needs(c["COL_VECS"] in (8, 16, 32), "COL_VECS must be 8, 16 or 32 (row pieces of whole 128-byte lines)")
        + needs(1 <= c["ROWS"] <= 4, "ROWS must be from 1 to 4 (a quad holds ROWS float4s of A)")
        + needs(c["QUADS"] >= 1, "QUADS must be at least 1")
        + needs(c["SPLITS"] >= 2, "SPLITS must be at least 2 (one slice is sgemm_skinny's job)")
    )


def _gemv_rows_fit(c: Config) -> tuple[Constraint, ...]:
    rows = c["ROWS"]
    why = (
        f"a block holds the sums of ROWS = {rows} rows; use a configuration with ROWS >= M (4 at most), "
        "or sgemm_skinny for up to 16 rows"
    )
    return (at_most("m", rows, why),)


# A candidate: written after the newest stored benchmark of its ladder, so outside the catalogue
# until the change that stores a benchmark measuring it (see the ladder's spec.py).
CANDIDATE = True
RUNG = Rung(
    id="sgemm_gemv_split",
    source="22_gemv_split.cu",
    summary="M of 1 to ROWS (4 at most): strips of columns read in whole lines, K cut into SPLITS slices, "
    "no barrier in the loop; the last slice of a strip to finish adds the partial strips in slice order",
    default=GEMV_SPLIT_DEFAULT,
    search=GEMV_SPLIT_SEARCH,
    threads=lambda c: 32 * c["WARPS"],
    tile=lambda c: (c["ROWS"], 4 * c["COL_VECS"]),
    grid=gemv_split_grid,
    workspace=_gemv_split_workspace,
    shape_rules=_gemv_rows_fit,
    outputs=lambda c: 4 * c["ROWS"],
    # The quads in flight: 4 float4s of B and ROWS of A each.
    fragments=lambda c: c["QUADS"] * (16 + 4 * c["ROWS"]),
    max_accumulators=MAX_ACCUMULATORS,
    smem_bytes=lambda c: 4 * c["WARPS"] * c["ROWS"] * 4 * c["COL_VECS"],
    # Per quad a thread loads 4 float4s of B and ROWS float4s of A for 32 ROWS FLOPs.
    cgma=lambda c: 32 * c["ROWS"] / (4 + c["ROWS"]),
    rules=_gemv_split_rules,
    # First at skinny M: it takes M of 1 to 4 (decoding), sgemm_skinny up to 16.
    serves={"skinny-m": 1},
    every_config=("skinny-m",),
    cross_block=True,  # the last slice of a strip adds the others' partial strips
)
