"""Rung 14 of the FP32 ladder, 14_stream_k.cu: its configuration, search and launch facts."""

from __future__ import annotations

from collections.abc import Callable

from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.ladder import Config, cdiv
from gemmlab.kernels.sgemm.rung11_large_tile import LARGE_TILE_SEARCH, large_rung, large_tile_rules
from gemmlab.kernels.sgemm.rung13_spread_copies import SPREAD_DEFAULT, spread_rules

# sgemm_stream_k's search: LARGE_TILE_SEARCH less the 256 x 128 tile, for which
# ptxas spills (64 bytes on sm_90, 88 on sm_80: the piece-of-work bookkeeping
# around the main loop leaves it no register to spare).
STREAM_K_SEARCH = tuple(c for c in LARGE_TILE_SEARCH if (c["BM"], c["BN"]) != (256, 128))


# sgemm_stream_k's grid counts a work unit per STREAM_K_MIN_RUN k-tiles of each
# tile, so that with fewer tiles than SMs the runner's clamp (no more blocks
# than the GPU holds) still gives every SM a run of at least this many k-tiles
# where the problem has them; with more tiles than SMs the clamp gives one
# block per resident slot, as before.
STREAM_K_MIN_RUN = 8


def stream_k_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """sgemm_stream_k's work units (the runner launches no more blocks than the GPU holds)."""

    def grid(s: Shape, block_edge: int) -> Dim3:
        tiles = cdiv(s.m, c["BM"]) * cdiv(s.n, c["BN"])
        return (tiles * cdiv(cdiv(s.k, c["BK"]), STREAM_K_MIN_RUN), 1, 1)

    return grid


def _stream_k_workspace(c: Config) -> Callable[[Shape, int], int]:
    """sgemm_stream_k's workspace for ``blocks`` blocks: two arrival counters
    per block (4 bytes each, padded to 16 bytes), then two partial tiles of
    BM x BN floats per block (see 14_stream_k.cu)."""
    tile_bytes = 4 * c["BM"] * c["BN"]
    return lambda s, blocks: cdiv(8 * blocks, 16) * 16 + 2 * blocks * tile_bytes


RUNG = large_rung(
    "sgemm_stream_k",
    "14_stream_k.cu",
    "sgemm_spread_copies in persistent blocks; the last partial wave of tiles and the full one before it shared "
    "out along K (stream-K), their partial sums added by the last block to arrive",
    default=SPREAD_DEFAULT,
    rules=lambda c: large_tile_rules(c) + spread_rules(c),
    persistent=True,
    workspace=_stream_k_workspace,
    search=STREAM_K_SEARCH,
    grid=stream_k_grid,
    serves={"k-heavy": 3, "few-tiles": 5, "large": 3},
    cross_block=True,  # partial tiles fixed up through a workspace
)
