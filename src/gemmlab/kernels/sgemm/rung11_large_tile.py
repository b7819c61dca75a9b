"""Rung 11 of the FP32 ladder, 11_large_tile.cu: its configuration, search and launch facts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.ladder import Config, Rung, needs
from gemmlab.kernels.sgemm.family import (
    blocktile_rules,
    swizzle_rules,
    tile_cgma,
    vector_rules,
    warp_rules,
    warp_threads,
)
from gemmlab.kernels.spec import Constraint

# sgemm_large_tile's default: a 128 x 256 tile of 8 warps of 64 x 64, a ring of
# three stages of BK = 16, one block per SM.
LARGE_TILE_DEFAULT = Config(BM=128, BN=256, BK=16, WM=64, WN=64, STAGES=3, MIN_BLOCKS=1)

# The configurations rungs 11 and 12 try besides their default. Each differs
# from it in one thing: the tile's orientation, the ring's depth, BK, and the
# warp's shape (8 x 16 per thread).
LARGE_TILE_SEARCH = (
    LARGE_TILE_DEFAULT | Config(BM=256, BN=128),
    LARGE_TILE_DEFAULT | Config(STAGES=2),
    LARGE_TILE_DEFAULT | Config(STAGES=4),
    LARGE_TILE_DEFAULT | Config(BK=8, STAGES=4),
    LARGE_TILE_DEFAULT | Config(WM=32, WN=128),
)


def large_tile_rules(c: Config) -> list[str]:
    """Rung 11's requirements: warp tiles, the A tile's swizzle, whole float4
    pieces shared evenly by the threads, a ring, and two fragment buffers."""
    return (
        warp_rules(c)
        + swizzle_rules(c)
        + vector_rules(c)
        + blocktile_rules(c, warp_threads(c), 4)
        + needs(c["STAGES"] >= 2, "STAGES must be at least 2")
        + needs(c["BK"] % 2 == 0, "BK must be even (the two fragment buffers alternate)")
    )


def large_rung(
    rung_id: str,
    source: str,
    summary: str,
    default: Config = LARGE_TILE_DEFAULT,
    rules: Callable[[Config], list[str]] = large_tile_rules,
    persistent: bool = False,
    workspace: Callable[[Config], Callable[[Shape, int], int]] | None = None,
    search: tuple[Config, ...] = LARGE_TILE_SEARCH,
    grid: Callable[[Config], Callable[[Shape, int], Dim3]] | None = None,
    constraints: tuple[Constraint, ...] = (),
    fixed: Config | None = None,
    **facts: Any,
) -> Rung:
    """sgemm_large_tile onwards: one block of 8 warps per SM, up to 128
    accumulators and two fragment buffers per thread, dynamic shared memory.
    ``facts``: the Rung fields the studies read (serves, every_config, default_for, cross_block)."""
    return Rung(
        id=rung_id,
        source=source,
        summary=summary,
        default=default,
        search=search,
        threads=warp_threads,
        outputs=lambda c: c["WM"] * c["WN"] // 32,
        # Two buffers of fragments: the slice in use and the next one.
        fragments=lambda c: 2 * (c["WM"] // 4 + c["WN"] // 8),
        smem_bytes=lambda c: 4 * c["STAGES"] * c["BK"] * (c["BM"] + c["BN"]),
        cgma=lambda c: tile_cgma(c["BM"], c["BN"], 1, 4),
        rules=rules,
        max_accumulators=128,
        dynamic_smem=True,
        persistent=persistent,
        workspace=workspace,
        grid=grid,
        constraints=constraints,
        fixed=fixed or {},
        **facts,
    )


RUNG = large_rung(
    "sgemm_large_tile",
    "11_large_tile.cu",
    "one block per SM (MIN_BLOCKS = 1): 128 x 256 block tile, 16 x 8 outputs per thread, "
    "next k-slice's fragments loaded while the current one is used",
)
