"""Rung 21 of the FP32 ladder, 21_skinny_n.cu: its configuration, search and launch facts."""

from __future__ import annotations

from collections.abc import Callable

from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.ladder import Config, Rung, cdiv, needs
from gemmlab.kernels.sgemm.family import MAX_ACCUMULATORS, block_holds
from gemmlab.kernels.spec import Constraint

# sgemm_skinny_n's default: up to 16 columns, 8 lanes along each row of A (128
# bytes per load: whole lines), one row a thread, 4 warps (16 rows a block),
# 8 loads of A in flight per thread.
SKINNY_N_DEFAULT = Config(COLS=16, ROW_LANES=8, THREAD_ROWS=1, WARPS=4, K_STEPS=8)

# Its search (20 in all): the columns a block holds (the dispatcher's ranking
# prefers the fewest that cover N), two rows a thread (each value of B serves
# both), the lanes per row (a warp per row for few rows), the warps (2: twice
# the blocks, 8 rows each) and the loads in flight. Two chunks of B must fit
# 48 KB: at 16 columns and 8 lanes a row, K_STEPS 8 at most; more loads in
# flight come with fewer columns.
SKINNY_N_SEARCH = (
    *(Config(COLS=c) for c in (1, 2, 4, 8)),
    Config(THREAD_ROWS=2),
    Config(THREAD_ROWS=2, COLS=8),
    Config(THREAD_ROWS=2, COLS=4, K_STEPS=16),
    Config(WARPS=8),
    Config(WARPS=2),
    Config(WARPS=2, K_STEPS=16, COLS=8),
    Config(K_STEPS=4),
    Config(K_STEPS=16, COLS=8),
    Config(ROW_LANES=4),
    Config(ROW_LANES=32, K_STEPS=2),
    Config(ROW_LANES=32, K_STEPS=4, COLS=1),
    # N of 17 to 32 (issue 50): 32 columns; two chunks of B fit 48 KB at K_STEPS 4 or less.
    Config(COLS=32, K_STEPS=4),
    Config(COLS=32, K_STEPS=4, THREAD_ROWS=2),
    Config(COLS=32, K_STEPS=2, WARPS=8),
    Config(COLS=32, K_STEPS=2, ROW_LANES=16),  # 8 rows a block: twice the blocks for a short M
)


def _skinny_n_rows(c: Config) -> int:
    """Rows of C one block computes (BR in 21_skinny_n.cu)."""
    return c["WARPS"] * (32 // c["ROW_LANES"]) * c["THREAD_ROWS"]


def skinny_n_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """sgemm_skinny_n's grid: a block per BR rows of C, all N columns."""
    return lambda s, block_edge: (cdiv(s.m, _skinny_n_rows(c)), 1, 1)


def _skinny_n_smem_bytes(c: Config) -> int:
    """Two chunks of B: KC / 4 groups of 4 k-rows each, each padded to 4 x (COLS | 1) floats."""
    return 2 * 4 * c["ROW_LANES"] * c["K_STEPS"] * 4 * (c["COLS"] | 1)


def _skinny_n_cgma(c: Config) -> float:
    """Per chunk a thread loads K_STEPS x THREAD_ROWS float4s of A and KC x
    COLS / threads elements of B, for 8 x K_STEPS x THREAD_ROWS x COLS FLOPs."""
    a_loads = c["K_STEPS"] * c["THREAD_ROWS"]
    b_loads = 4 * c["ROW_LANES"] * c["K_STEPS"] * c["COLS"] / (32 * c["WARPS"])
    return 8 * a_loads * c["COLS"] / (a_loads + b_loads)


def _skinny_n_rules(c: Config) -> list[str]:
    return (
        needs(c["COLS"] in (1, 2, 4, 8, 16, 32), "COLS must be 1, 2, 4, 8, 16 or 32")
        + needs(c["WARPS"] * 8 % c["COLS"] == 0, "WARPS x 8 must be a multiple of COLS (a thread copies one column)")
        + needs(c["THREAD_ROWS"] * c["COLS"] <= 64, "THREAD_ROWS x COLS sums per thread, 64 at most")
        + needs(c["ROW_LANES"] in (4, 8, 16, 32), "ROW_LANES must be 4, 8, 16 or 32 (a warp's lanes split evenly)")
        + needs(c["THREAD_ROWS"] >= 1 and c["K_STEPS"] >= 1, "THREAD_ROWS and K_STEPS must be at least 1")
        + needs(
            _skinny_n_smem_bytes(c) <= 48 * 1024,
            "two chunks of B (2 x 4 x ROW_LANES x K_STEPS x 4 x (COLS | 1) bytes) must fit 48 KB of static "
            "shared memory: fewer K_STEPS, ROW_LANES or COLS",
        )
    )


def _skinny_n_cols_fit(c: Config) -> tuple[Constraint, ...]:
    return block_holds("n", "COLS", c["COLS"], "columns", most=32)


# A candidate: written after the newest stored benchmark of its ladder, so outside the catalogue
# until the change that stores a benchmark measuring it (see the ladder's spec.py).
CANDIDATE = True
RUNG = Rung(
    id="sgemm_skinny_n",
    source="21_skinny_n.cu",
    summary="N of 1 to COLS (32 at most): a few lanes per row of A read it along K in 16-byte loads; B's chunk "
    "in shared memory serves every row; sums added by shuffles",
    default=SKINNY_N_DEFAULT,
    search=SKINNY_N_SEARCH,
    threads=lambda c: 32 * c["WARPS"],
    tile=lambda c: (_skinny_n_rows(c), c["COLS"]),
    grid=skinny_n_grid,
    shape_rules=_skinny_n_cols_fit,
    outputs=lambda c: c["THREAD_ROWS"] * c["COLS"],
    # A's loads in flight, and one float4 of B.
    fragments=lambda c: 4 * c["K_STEPS"] * c["THREAD_ROWS"] + 4,
    max_accumulators=MAX_ACCUMULATORS,
    smem_bytes=_skinny_n_smem_bytes,
    cgma=_skinny_n_cgma,
    rules=_skinny_n_rules,
    # N of 17 to 32 falls in the few-tiles and k-heavy classes: tried there too (COLS = 32).
    serves={"skinny-n": 1, "k-heavy": 6, "few-tiles": 7},
    every_config=("skinny-n",),
)
