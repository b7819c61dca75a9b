"""Rung 10 of the tensor-core ladder, 10_split_k.cu: its configuration, search and launch facts."""

from __future__ import annotations

from collections.abc import Callable

from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.ladder import Config, Rung, cdiv, grid_rows_fit, grid_y_fits, needs
from gemmlab.kernels.tensor.family import HOPPER, REGISTER_SPLIT, WARPGROUP, reuse_cgma, ring_bytes, specialised_rules
from gemmlab.problems.tensor import BF16_OUT, DTYPES


def _split_k_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """x along N, y along M; with a cluster of two, x along M (rounded up to
    whole clusters), so that a cluster's blocks share one strip of B."""
    cluster = c["CLUSTER"]
    if cluster == 1:
        return lambda s, b: (cdiv(s.n, c["BN"]), cdiv(s.m, c["BM"]), c["SPLITS"])
    return lambda s, b: (cdiv(cdiv(s.m, c["BM"]), cluster) * cluster, cdiv(s.n, c["BN"]), c["SPLITS"])


def split_k_workspace(c: Config) -> Callable[[Shape, int], int]:
    """tc_split_k's workspace: one 4-byte counter per tile of the grid (a
    cluster's padding tile too), padded to 16 bytes, then SPLITS partial tiles
    of BM x BN floats per tile (10_split_k.cu)."""
    grid = _split_k_grid(c)

    def size(s: Shape, blocks: int) -> int:
        x, y, _ = grid(s, blocks)
        tiles = x * y
        return cdiv(4 * tiles, 16) * 16 + tiles * c["SPLITS"] * c["BM"] * c["BN"] * 4

    return size


def _split_k_rules(c: Config) -> list[str]:
    return (
        specialised_rules(c)
        + needs(c["SPLITS"] >= 2, "SPLITS must be at least 2")
        + needs(c["CLUSTER"] in (1, 2), "CLUSTER must be 1 or 2 (blocks sharing B by TMA multicast)")
    )


# A candidate: written after the newest stored benchmark of its ladder, so outside the catalogue
# until the change that stores a benchmark measuring it (see the ladder's spec.py).
CANDIDATE = True
RUNG = Rung(
    id="tc_split_k",
    source="10_split_k.cu",
    summary="sm_90a: tc_warpspecialized over one of SPLITS slices of K per block; the last block of a tile "
    "adds the float32 partials in slice order",
    dtypes=(*DTYPES, BF16_OUT),
    default=Config(BM=128, BN=128, STAGES=4, SPLITS=4, CLUSTER=1),
    search=(
        Config(SPLITS=2),
        Config(SPLITS=3),
        Config(SPLITS=8),
        Config(BN=256, SPLITS=2),
        Config(BN=256, SPLITS=4, STAGES=3),
        Config(BN=256, SPLITS=4, STAGES=4),
        # cuBLAS's kernel at 1024 x 1024 x 16384 on an H100 (its name,
        # benchmarks/results/2026-11-24k_h100_cublas-kernels.txt) is 128 x 128
        # in two slices with a ring of 6 and clusters of two. Deeper rings
        # measured faster there (4 to 7 stages: 58.5 to 53.9 us, 2026-11-24k);
        # clusters of two sharing B slower (62.7 us at 6 stages against 55.3).
        Config(SPLITS=2, STAGES=5),
        Config(SPLITS=2, STAGES=6),
        Config(SPLITS=2, STAGES=7),
        Config(SPLITS=4, STAGES=7),
        Config(SPLITS=2, CLUSTER=2, STAGES=7),
    ),
    threads=lambda c: (c["BM"] // 64 + 1) * WARPGROUP,
    smem_bytes=lambda c: ring_bytes(c, 2),
    sass=("HGMMA", "UTMALDG", "USETMAXREG"),
    rules=_split_k_rules,
    cgma=reuse_cgma,
    fixed=REGISTER_SPLIT,
    grid=_split_k_grid,
    shape_rules=lambda c: (grid_rows_fit(c["BM"]) if c["CLUSTER"] == 1 else grid_y_fits(_split_k_grid(c)),),
    workspace=split_k_workspace,
    cluster_size=lambda c: c["CLUSTER"],
    multicast=lambda c: c["CLUSTER"],
    serves={"k-heavy": 1, "skinny-m": 2, "skinny-n": 2, "few-tiles": 2},
    # 12 configurations, about 60 us each at 1024 x 1024 x 16384, where the ones
    # that fill the GPU alike differ by their ring's depth, which the fill score
    # does not model (7 stages against 4: 54 us against 58, on an H100).
    every_config=("k-heavy",),
    cross_block=True,  # the last block of a tile adds the partials; clusters share B by multicast
    **HOPPER,
)
