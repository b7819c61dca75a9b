"""Rung 23 of the FP32 ladder, 23_cluster_split_k.cu: its configuration, search and launch facts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.ladder import Config, cdiv, needs
from gemmlab.kernels.sgemm.family import warp_threads
from gemmlab.kernels.sgemm.rung11_large_tile import large_rung, large_tile_rules
from gemmlab.kernels.sgemm.rung13_spread_copies import spread_rules

# sgemm_cluster_split_k's default: the large tile and four stages of rung 13,
# K in 8 slices, one cluster of 8 blocks per tile (GROUPS = 1: no global memory).
CLUSTER_SPLIT_K_DEFAULT = Config(BM=128, BN=256, BK=16, WM=64, WN=64, STAGES=4, SPLITS=8, GROUPS=1)
MAX_CLUSTER = 8  # the most blocks a portable cluster holds

# Its search (18 in all). A cluster's blocks must all find room in one GPC,
# and the GPU holds fewer clusters than its SMs / SPLITS: an H100 or H200
# holds 15 clusters of 8, 17 of 6, 30 of 4, 39 of 3 and 66 of 2 (one block
# per SM; benchmarks/results/2026-11-24g_h100_cluster-occupancy.txt), so 16
# clusters of 8 or 32 of 4 run as two waves. Hence the counts that fill whole
# clusters (3, 6, 7), and GROUPS > 1: a tile's slices as several clusters of
# 2, whose sums meet in global memory (64 clusters of 2 fit in one wave).
CLUSTER_SPLIT_K_SEARCH = (
    Config(SPLITS=7),
    Config(SPLITS=6),
    Config(SPLITS=4),
    Config(SPLITS=2),
    Config(SPLITS=2, GROUPS=4),
    Config(SPLITS=2, GROUPS=2),
    *(Config(BN=128, WN=32, SPLITS=s) for s in (8, 4, 3, 2)),
    Config(BN=128, WN=32, SPLITS=2, GROUPS=2),
    # BK = 8: half the main loop's code, for short runs of k-tiles, whose warps
    # waited on instruction fetches (benchmarks/results/2026-11-24h_cluster-split-k-profiles.txt).
    Config(BN=128, WN=32, SPLITS=2, GROUPS=2, BK=8),
    Config(BN=128, WN=32, SPLITS=2, BK=8),
    # 64 x 128 and 128 x 64 tiles (8 warps of 32 x 32) for 64 rows or columns
    # against 4096 x 4096: 128 or 256 blocks in clusters of 2. On an H100
    # (2026-11-24o_h100_fp32-skinny.txt) 64 x 4096 x 4096 went from 70.7%
    # of cuBLAS (sgemm_split_k) to 85.8-87.4%, 4096 x 64 x 4096 from 76.8% to 87%.
    Config(BM=64, WM=32, BN=128, WN=32, SPLITS=2, GROUPS=2),
    Config(BM=64, WM=32, BN=128, WN=32, SPLITS=2, GROUPS=4),
    Config(BM=128, BN=64, WM=32, WN=32, SPLITS=2, GROUPS=2),
    Config(BM=128, BN=64, WM=32, WN=32, SPLITS=2, GROUPS=4),
)


def cluster_split_k_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """sgemm_cluster_split_k's grid: GROUPS clusters of SPLITS blocks along x per
    tile column, a row per tile row."""
    return lambda s, block_edge: (cdiv(s.n, c["BN"]) * c["SPLITS"] * c["GROUPS"], cdiv(s.m, c["BM"]), 1)


def _cluster_split_k_smem_bytes(c: Config) -> int:
    """The ring of rung 13, or one BM x BN partial tile of floats if larger (it takes the ring's place)."""
    return 4 * max(c["STAGES"] * c["BK"] * (c["BM"] + c["BN"]), c["BM"] * c["BN"])


def _cluster_vecs(c: Config) -> int:
    """float4s of accumulators per thread (VECS in 23_cluster_split_k.cu)."""
    return (c["WM"] // 16 * 4) * (c["WN"] // 32)


def _cluster_split_k_workspace(c: Config) -> Callable[[Shape, int], int]:
    """With GROUPS > 1: a counter per tile and rank, padded to 16 bytes, then
    per tile, rank and group a slot of the rank's share (at most
    ceil(VECS / SPLITS) float4s of each thread). None needed otherwise."""
    slices, share = c["SPLITS"] * c["GROUPS"], cdiv(_cluster_vecs(c), c["SPLITS"])

    def size(s: Shape, blocks: int) -> int:
        if c["GROUPS"] == 1:
            return 0
        tiles = blocks // slices
        return cdiv(4 * tiles * c["SPLITS"], 16) * 16 + tiles * slices * share * warp_threads(c) * 16

    return size


def _cluster_split_k_rules(c: Config) -> list[str]:
    vecs = _cluster_vecs(c)
    return (
        large_tile_rules(c)
        + spread_rules(c)
        + needs(2 <= c["SPLITS"] <= MAX_CLUSTER, f"SPLITS must be 2 to {MAX_CLUSTER} (a portable cluster's blocks)")
        + needs(
            c["SPLITS"] <= vecs,
            f"SPLITS must be at most the {vecs} float4s of accumulators per thread (each slice adds a share)",
        )
        + needs(c["GROUPS"] >= 1, "GROUPS (clusters per tile) must be at least 1")
    )


# A candidate: written after the newest stored benchmark of its ladder, so outside the catalogue
# until the change that stores a benchmark measuring it (see the ladder's spec.py).
CANDIDATE = True
RUNG = replace(
    large_rung(
        "sgemm_cluster_split_k",
        "23_cluster_split_k.cu",
        "sm_90: the large tile with K cut into SPLITS slices, a tile's slices one thread-block cluster; the "
        "partial tiles added in slice order through distributed shared memory, each block adding its share",
        default=CLUSTER_SPLIT_K_DEFAULT,
        rules=_cluster_split_k_rules,
        search=CLUSTER_SPLIT_K_SEARCH,
        grid=cluster_split_k_grid,
        workspace=_cluster_split_k_workspace,
    ),
    smem_bytes=_cluster_split_k_smem_bytes,
    cluster_size=lambda c: c["SPLITS"],
    min_cc=(9, 0),
    dependent_launch=True,  # waits as its first statement (23_cluster_split_k.cu)
    # Before sgemm_split_k (sm_90 on): the large tile's speed with K split, and no block waiting out a tile's fix-up.
    serves={"k-heavy": 1, "few-tiles": 2},
    # 18 configurations, whose speed depends on how many clusters the GPU holds at
    # once, which the fill score does not model. (sgemm_split_k, before it at
    # K-heavy shapes, now gives its three best-filling of 22.)
    every_config=("few-tiles", "k-heavy"),
    cross_block=True,  # a cluster's blocks add their partial tiles through distributed shared memory
)
