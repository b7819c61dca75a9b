"""A launch's output judged: its guard bands, then its error against the full
float64 reference, with what a wrong result looks like named
(gemmlab.problems.base: poison left, lower precision; here: an answer
returned again for new inputs). Shared by the runner's checked launches and
the timed series' per-sample checks."""

from __future__ import annotations

from typing import Any

from gemmlab.core.errors import VerificationError
from gemmlab.kernels.spec import Point
from gemmlab.problems.base import Prepared


def checked(
    cp: Any, prepared: Prepared, tolerance: float, point: Point, when: str, first_answer: tuple | None = None
) -> float:
    """The relative error of the last checked launch, after its guard bands;
    VerificationError naming what went wrong."""
    for guard in prepared.guards:
        damage = guard.damage(cp)
        if damage is not None:
            raise VerificationError(
                f"{where(point, when)}: {damage}.",
                "Check the bounds test before each store (e.g. row < M && col < N) and that the grid covers "
                "the output and no more; `gemmlab check` runs compute-sanitizer for writes further away.",
            )
    error = prepared.error()
    if error <= tolerance:  # written this way so that NaN fails
        return error
    detail = prepared.explain() if prepared.explain is not None else None
    if detail is None and first_answer is not None and fingerprint(cp, prepared) == first_answer:
        detail = (
            "the output equals its output for the first input set: the kernel ignores its inputs "
            "or returns an answer it computed before"
        )
        if when.startswith("on timed sample"):
            detail += " (here on a timed launch, whose inputs were drawn afresh just before it)"
    raise VerificationError(
        f"{where(point, when)}: relative error {error:.3g}, tolerance {tolerance:.3g}"
        + (f"; {detail}." if detail else "."),
        "No timing is reported for a wrong result; "
        + (
            "fix the kernel (`gemmlab check` runs compute-sanitizer on it)."
            if point.spec.declaration is not None
            else "please report this with the command you ran."
        ),
    )


def where(point: Point, when: str) -> str:
    return (
        f"{point.spec.id} gave a wrong result on {point.shape} (block edge {point.block_edge}, {point.dtype}, {when})"
    )


def fingerprint(cp: Any, prepared: Prepared) -> tuple[float, ...]:
    """A cheap summary of the outputs (one float64 sum each), to tell whether
    a later output is the same as an earlier one."""
    return tuple(float(cp.sum(guard.inner.astype(cp.float64))) for guard in prepared.guards)
