"""Rung 13 of the tensor-core ladder, 13_split_tail.cu: its configuration, search and launch facts."""

from __future__ import annotations

from collections.abc import Callable

from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.ladder import Config, Rung, cdiv, needs
from gemmlab.kernels.tensor.family import (
    C_BOX_ROWS,
    HOPPER,
    REGISTER_SPLIT,
    WARPGROUP,
    WIDE,
    c_boxes_bytes,
    persistent_rules,
    reuse_cgma,
    ring_bytes,
)
from gemmlab.problems.tensor import BF16_OUT, DTYPES


def _split_tail_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """Clusters of two along M, MAX_SLICES per cluster tile of 2 BM x BN: as
    many as can share the k-tiles of the fewest tiles (the runner launches no
    more than the GPU holds at once)."""
    return lambda s, b: (cdiv(s.m, 2 * c["BM"]) * cdiv(s.n, c["BN"]) * 2 * c["MAX_SLICES"], 1, 1)


def split_tail_workspace(c: Config) -> Callable[[Shape, int], int]:
    """tc_split_tail's workspace for a grid of ``blocks`` (clusters of two): a
    4-byte counter per block, padded to 16 bytes, then two BM x BN float32
    partials per block (each block row of a cluster numbers the pieces of the
    split tiles below twice the clusters; 13_split_tail.cu)."""
    return lambda s, blocks: cdiv(4 * blocks, 16) * 16 + 2 * blocks * c["BM"] * c["BN"] * 4


# A candidate: written after the newest stored benchmark of its ladder, so outside the catalogue
# until the change that stores a benchmark measuring it (see the ladder's spec.py).
CANDIDATE = True
RUNG = Rung(
    id="tc_split_tail",
    source="13_split_tail.cu",
    summary="sm_90a: tc_tma_store over the full waves of tiles, then the last wave's k-tiles shared out "
    "equally across every cluster (stream-K), each tile's pieces added in K order",
    dtypes=(*DTYPES, BF16_OUT),
    # MAX_SLICES = 4: the fastest split at 3000, 3072 and 5120 on an H100 and an
    # H200 (docs/tensor-ladder.md, round 7). MAX_SLICES = 1 would be tc_tma_store.
    default=Config(BM=128, BN=256, STAGES=4, GROUP_M=8, MAX_SLICES=4, C_BOXES=2),
    search=(
        Config(MAX_SLICES=2),
        Config(MAX_SLICES=8),
        Config(MAX_SLICES=16),
        Config(BN=128, STAGES=6),
        Config(BN=128, STAGES=6, MAX_SLICES=16),
        Config(BN=192, MAX_SLICES=4),
    ),
    threads=lambda c: (c["BM"] // 64 + 1) * WARPGROUP,
    smem_bytes=lambda c: ring_bytes(c, 2) + c_boxes_bytes(c),
    sass=("HGMMA", "UTMALDG", "UTMASTG", "USETMAXREG"),
    rules=lambda c: (
        persistent_rules(c, WIDE)
        + needs(c["MAX_SLICES"] >= 1, "MAX_SLICES must be at least 1")
        + needs(c["C_BOXES"] >= 1, "C_BOXES must be at least 1")
    ),
    persistent=True,
    cluster=2,
    grid=_split_tail_grid,
    cgma=reuse_cgma,
    fixed=REGISTER_SPLIT | Config(C_BOX_ROWS=C_BOX_ROWS),  # tc_tma_store's split and boxes of C
    workspace=split_tail_workspace,
    # Second at large shapes: it differs from tc_tma_store where the tiles leave a last wave part full.
    serves={"few-tiles": 3, "large": 2},
    cross_block=True,  # tc_tma_store's clusters, and the last block of a tile adds its pieces
    **HOPPER,
)
