"""Rung 12 of the tensor-core ladder, 12_small.cu: its configuration, search and launch facts."""

from __future__ import annotations

from collections.abc import Callable

from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.ladder import Config, Rung, cdiv, grid_y_fits, needs
from gemmlab.kernels.tensor.family import HOPPER, WARPGROUP, reuse_cgma, ring_bytes
from gemmlab.problems.tensor import BF16_OUT, DTYPES, ROW_BYTES

# tc_small: tiles of 64 or 128 rows and columns, the slices of K of one tile
# in a cluster (SPLITS blocks along x), their partials added through
# distributed shared memory in the ring they no longer need.
SMALL_SPLITS = (1, 2, 4, 8)  # a portable cluster holds at most 8 blocks


def _small_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """x: the tile rows, each as SPLITS blocks in a row, PAIR tile rows to a
    cluster (a pair's second row may lie past M); y: the tile columns. With
    PAIR_COLS = 2, x: the tile columns, two to a cluster (the second may lie
    past N); y: the tile rows."""
    pair = c["PAIR"]
    if c["PAIR_COLS"] == 2:
        return lambda s, b: (cdiv(cdiv(s.n, c["BN"]), 2) * 2, cdiv(s.m, c["BM"]), 1)
    return lambda s, b: (cdiv(cdiv(s.m, c["BM"]), pair) * pair * c["SPLITS"], cdiv(s.n, c["BN"]), 1)


def _small_rules(c: Config) -> list[str]:
    ring = c["STAGES"] * (c["BM"] + c["BN"]) * ROW_BYTES
    splits = "SPLITS must be 1, 2, 4 or 8 (a cluster of at most 8 blocks, each adding an equal share of the tile)"
    partial = "the float32 partial tile must fit the ring it reuses: more STAGES"
    return (
        needs(c["BM"] in (64, 128), "BM must be 64 or 128 (one or two consumer warpgroups)")
        + needs(c["BN"] in (64, 128), "BN must be 64 or 128 (the N of one wgmma)")
        + needs(c["STAGES"] >= 2, "STAGES must be at least 2")
        + needs(c["SPLITS"] in SMALL_SPLITS, splits)
        + needs(c["SPLITS"] == 1 or c["BM"] * c["BN"] * 4 <= ring, partial)
        + needs(c["PAIR"] in (1, 2), "PAIR must be 1 or 2 (row tiles sharing B by multicast)")
        + needs(c["PAIR"] * c["SPLITS"] <= 8, "PAIR x SPLITS must be at most 8 (the blocks of a portable cluster)")
        + needs(c["PAIR_COLS"] in (1, 2), "PAIR_COLS must be 1 or 2 (column tiles sharing A by multicast)")
        + needs(
            c["PAIR_COLS"] == 1 or (c["PAIR"] == 1 and c["SPLITS"] == 1),
            "PAIR_COLS = 2 takes PAIR = 1 and SPLITS = 1 (a cluster of the two column tiles only)",
        )
    )


# A candidate: written after the newest stored benchmark of its ladder, so outside the catalogue
# until the change that stores a benchmark measuring it (see the ladder's spec.py).
CANDIDATE = True
RUNG = Rung(
    id="tc_small",
    source="12_small.cu",
    dependent_launch=True,  # 12_small.cu waits after its barriers are set up (docs/dispatch.md, 2026-11-28)
    summary="sm_90a: 64- or 128-wide tiles on a short TMA ring fed by one producer warp; SPLITS slices of K "
    "per tile in a cluster, added in slice order through distributed shared memory",
    dtypes=(*DTYPES, BF16_OUT),
    default=Config(BM=64, BN=128, STAGES=4, SPLITS=1, PAIR=1, PAIR_COLS=1),
    search=(
        Config(BN=64),
        Config(BN=64, SPLITS=2),
        Config(BN=64, SPLITS=4),
        Config(SPLITS=2),
        Config(BM=128),
        Config(BM=128, BN=64, SPLITS=2),
        Config(BM=128, BN=64, SPLITS=4),
        Config(BM=128, SPLITS=4),
        Config(BM=128, SPLITS=8, STAGES=3),  # 96 KB: two blocks per SM
        # Deeper rings (cuBLAS runs 8 stages of 128 x 64 at 1024 and 13 of 64 x 64
        # at 128 x 4096 x 4096 on an H100): measured 2026-11-24k, 4 to 8 stages
        # took 1024 from 93% to 96-100% of cuBLAS, 128 x 4096 x 4096 from 93% to 116-118%.
        Config(BM=128, BN=64, STAGES=8),
        Config(BM=128, BN=64, STAGES=9),
        Config(BN=128, STAGES=8),
        Config(BN=64, STAGES=8),
        Config(BM=128, BN=64, SPLITS=2, STAGES=8),
        # 64 or 128 rows (or columns) against 4096 x 4096 (the full suite's
        # skinny shapes): 64 x 4096 x 4096 from 72.0% to 90.2% of cuBLAS and
        # 4096 x 128 x 4096 from 77.0% to 83.9% on an H100 (2026-11-24k).
        Config(BN=64, SPLITS=2, STAGES=8),
        Config(BN=128, SPLITS=2, STAGES=8),
        # Pairs of column tiles sharing A by multicast (round 13; cuBLAS's
        # clusters at 1000 and 1024, 128 x 64 tiles, 1 x 2): at 1000 the
        # 128 x 64 pair took 8.33 us, 101% of cuBLAS, against 9.35 for the
        # same tiles in row pairs (PAIR = 2, round 12) and 9.60 for the best
        # without pairs (H100, 2026-11-25a_h100_tc-small-column-pairs.txt).
        # Row pairs lost to column pairs wherever both were timed: not searched.
        Config(BM=128, BN=64, STAGES=8, PAIR_COLS=2),
        Config(BN=128, STAGES=8, PAIR_COLS=2),
    ),
    threads=lambda c: c["BM"] // 64 * WARPGROUP + 32,
    smem_bytes=lambda c: ring_bytes(c, 2),
    sass=("HGMMA", "UTMALDG"),
    rules=_small_rules,
    cgma=reuse_cgma,
    grid=_small_grid,
    shape_rules=lambda c: (grid_y_fits(_small_grid(c)),),
    cluster_size=lambda c: c["SPLITS"] * c["PAIR"] * c["PAIR_COLS"],
    multicast=lambda c: c["PAIR"],
    multicast_a=lambda c: c["PAIR_COLS"],
    serves={"few-tiles": 1},
    every_config=("few-tiles",),  # 17 configurations, 2 to 20 us each at the few-tile shapes
    cross_block=True,  # the slices of a tile added through distributed shared memory; pairs share by multicast
    **HOPPER,
)
