"""Rung 11 of the tensor-core ladder, 11_gemv.cu: its configuration, search and launch facts."""

from __future__ import annotations

from collections.abc import Callable

from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.ladder import Config, Rung, cdiv, needs
from gemmlab.kernels.spec import Constraint
from gemmlab.kernels.tensor.family import ROWS_16
from gemmlab.problems.tensor import BF16_OUT, DTYPES_16

# tc_gemv: rows of the big operand per block (the M of one mma.sync).
GEMV_ROWS = 16


def gemv_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """One block per 16 rows of the streamed operand: B's when M is small, else A's."""
    return lambda s, b: (cdiv(s.n if s.m <= c["MAX_M"] else s.m, GEMV_ROWS), 1, 1)


def _gemv_small_side(c: Config) -> tuple[Constraint, ...]:
    most = c["MAX_M"]

    def check(shape: Shape, block_edge: int) -> str | None:
        if min(shape.m, shape.n) > most:
            return (
                f"M = {shape.m} and N = {shape.n} are both over {most}: tc_gemv streams one operand past at most "
                f"{most} rows of the other"
            )
        return None

    return (Constraint(f"M or N at most {most}", check),)


def _gemv_rules(c: Config) -> list[str]:
    return (
        needs(c["MAX_M"] in (8, 16), "MAX_M must be 8 or 16 (one or two 8-column mma operands)")
        + needs(c["UNROLL"] >= 1, "UNROLL must be at least 1")
        + needs(c["PREFETCH"] in (0, 1) and c["NO_L1"] in (0, 1), "PREFETCH and NO_L1 must be 0 or 1")
    )


# A candidate: written after the newest stored benchmark of its ladder, so outside the catalogue
# until the change that stores a benchmark measuring it (see the ladder's spec.py).
CANDIDATE = True
RUNG = Rung(
    id="tc_gemv",
    source="11_gemv.cu",
    summary="mma.sync fed straight from 16-byte loads: one operand streamed past at most MAX_M rows of "
    "the other (M or N of 1 to 16)",
    dtypes=(*DTYPES_16, BF16_OUT),
    # PREFETCH = 1 keeps two batches of loads live per lane (11_gemv.cu's
    # software pipeline; UNROLL = 2 at MAX_M = 16 is 66 registers, UNROLL = 4
    # 142, one block of 8 warps per SM), NO_L1 = 1 streams past L1. Both
    # measured slower on the H100 at the 16-row shapes than loading and
    # multiplying a batch in one iteration (11_gemv.cu's header), so the
    # default is the latter and the tuner tries both.
    default=Config(MAX_M=16, WARPS=8, UNROLL=2, PREFETCH=0, NO_L1=0),
    search=(
        Config(UNROLL=4),
        Config(WARPS=16),
        Config(MAX_M=8, UNROLL=4),
        Config(MAX_M=8, UNROLL=8),
        Config(PREFETCH=1, NO_L1=1),
        Config(PREFETCH=1),
        Config(NO_L1=1),
        Config(WARPS=4, UNROLL=4, PREFETCH=1, NO_L1=1),
        Config(UNROLL=1),
    ),
    threads=lambda c: c["WARPS"] * 32,
    smem_bytes=lambda c: 0,
    sass=("HMMA",),
    rules=_gemv_rules,
    cgma=lambda c: 2 * c["MAX_M"],  # each element of the streamed operand meets up to MAX_M rows
    tile=lambda c: (c["MAX_M"], GEMV_ROWS),
    grid=gemv_grid,
    shape_rules=_gemv_small_side,
    min_cc=(8, 0),  # mma.sync with bf16
    k_bytes_multiple=ROWS_16,
    # Not launched with PDL: with a wait before its first load it ran 4-22%
    # slower on an H200 (docs/dispatch.md, 2026-11-28), where tc_small gained.
    serves={"skinny-m": 1, "skinny-n": 1},
)
