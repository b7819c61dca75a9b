"""Rung 20 of the FP32 ladder, 20_skinny.cu: its configuration, search and launch facts."""

from __future__ import annotations

from collections.abc import Callable

from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.ladder import Config, Rung, cdiv, needs
from gemmlab.kernels.sgemm.family import MAX_ACCUMULATORS, block_holds
from gemmlab.kernels.spec import Constraint

# sgemm_skinny's default: all 16 rows, strips of 32 columns (8 lanes of float4s
# side by side, 4 k-rows a warp), 8 warps along K, 8 loads of B in flight.
SKINNY_DEFAULT = Config(ROWS=16, COL_VECS=8, WARPS=8, K_STEPS=8)

# Its search (16 in all): for 8 and 16 rows, the strip's width (4 x COL_VECS
# columns: more blocks when narrower) and the loads in flight (16 loads only
# for 8 rows: with 16 rows ptxas spills on sm_80, 255 registers); for 1, 2 and 4
# rows (decoding's matrix-vector products, bandwidth-bound), configurations
# that keep B's bandwidth: 12 loads in flight per thread and strips of 8 or 16
# columns in blocks of 4 warps (512 or 256 blocks at N = 4096: 2 to 4 per SM),
# or of 32 in blocks of 8. 12 loads, not 16: their addresses and values fit
# 128 registers (ptxas: 93 to 128), so four blocks of 4 warps share an SM; 16
# take 128 to 138, three blocks, and 512 blocks would need two waves.
SKINNY_SEARCH = (
    *(Config(ROWS=r, COL_VECS=v) for r in (8, 16) for v in (4, 8, 16) if (r, v) != (16, 8)),
    Config(ROWS=8, K_STEPS=16),
    *(Config(ROWS=r, COL_VECS=v, WARPS=4, K_STEPS=12) for r in (1, 2, 4) for v in (2, 4)),
    *(Config(ROWS=r, K_STEPS=12) for r in (1, 2, 4)),
)


def skinny_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """sgemm_skinny's grid: a block per strip of 4 x COL_VECS columns of C, all M rows."""
    return lambda s, block_edge: (cdiv(s.n, 4 * c["COL_VECS"]), 1, 1)


def _skinny_chunk(c: Config) -> int:
    """k-rows of one chunk of A (KC in 20_skinny.cu)."""
    return c["WARPS"] * (32 // c["COL_VECS"]) * c["K_STEPS"]


def _skinny_smem_bytes(c: Config) -> int:
    """A chunk of A (ROWS x KC) or, after it, the warps' sums (WARPS x ROWS x 4 COL_VECS), in one array."""
    return 4 * max(c["ROWS"] * _skinny_chunk(c), c["WARPS"] * c["ROWS"] * 4 * c["COL_VECS"])


def _skinny_cgma(c: Config) -> float:
    """Per chunk a thread loads K_STEPS float4s of B and ROWS x KC / threads =
    ROWS x K_STEPS / COL_VECS elements of A, for 2 x ROWS x 4 x K_STEPS FLOPs."""
    rows, vecs = c["ROWS"], c["COL_VECS"]
    return 8 * rows * vecs / (vecs + rows)


def _skinny_rules(c: Config) -> list[str]:
    return (
        needs(c["COL_VECS"] in (2, 4, 8, 16, 32), "COL_VECS must be 2, 4, 8, 16 or 32 (a warp's lanes split evenly)")
        + needs(1 <= c["ROWS"] <= 16, "ROWS must be from 1 to 16 (4 x ROWS sums per thread)")
        + needs(c["K_STEPS"] >= 1, "K_STEPS must be at least 1")
    )


def _skinny_rows_fit(c: Config) -> tuple[Constraint, ...]:
    return block_holds("m", "ROWS", c["ROWS"], "rows")


# A candidate: written after the newest stored benchmark of its ladder, so outside the catalogue
# until the change that stores a benchmark measuring it (see the ladder's spec.py).
CANDIDATE = True
RUNG = Rung(
    id="sgemm_skinny",
    source="20_skinny.cu",
    summary="M of 1 to ROWS (16 at most): a block per strip of columns reads B once, down K, for all M rows; A "
    "staged in shared memory, sums added by shuffles and in shared memory",
    default=SKINNY_DEFAULT,
    search=SKINNY_SEARCH,
    threads=lambda c: 32 * c["WARPS"],
    tile=lambda c: (c["ROWS"], 4 * c["COL_VECS"]),
    grid=skinny_grid,
    shape_rules=_skinny_rows_fit,
    outputs=lambda c: 4 * c["ROWS"],
    fragments=lambda c: 4 * c["K_STEPS"],
    max_accumulators=MAX_ACCUMULATORS,
    smem_bytes=_skinny_smem_bytes,
    cgma=_skinny_cgma,
    rules=_skinny_rules,
    serves={"skinny-m": 2},
    every_config=("skinny-m",),
)
