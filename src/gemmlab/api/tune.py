"""Tuning from Python and for `gemmlab tune`: a rung of the FP32 or the
tensor-core ladder (or a user's kernel's declared parameters) searched on this
GPU, the fastest verified configuration kept per size class and element type
(:mod:`gemmlab.studies.tune` says how). `gemmlab run` and :func:`gemmlab.api.run`
then run what is stored for this GPU."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gemmlab.core.shapes import Shape
from gemmlab.store.store import DEFAULT_PATH, Store
from gemmlab.studies import tune as study
from gemmlab.studies.tune import DEFAULT_SIZES, MIN_REPS, TuneSummary, config_label

__all__ = ["DEFAULT_SIZES", "MIN_REPS", "TuneSummary", "config_label", "resolved_dtype", "tune"]


def resolved_dtype(kernel: str, dtype: str | None = None) -> str:
    """``dtype``, or ``kernel``'s first when None; UnknownName for a kernel no
    ladder or declaration tunes, ConstraintError for an element type it lacks."""
    return study.resolved_dtype(kernel, dtype)


def tune(
    kernel: str,
    sizes: Sequence[int] = DEFAULT_SIZES,
    *,
    dtype: str | None = None,
    db: str | Path = DEFAULT_PATH,
    budget_seconds: float | None = None,
    force: bool = False,
    reps: int = 20,
    progress: bool = True,
    console: Any = None,
) -> TuneSummary:
    """Compile, verify and time every configuration of ``kernel`` at the square
    ``sizes`` in ``dtype`` (default: its first) on this GPU, and store the
    fastest per size class in ``db``. A second call resumes: stored candidates
    are skipped (``force`` measures them again). A kernel that cannot be tuned,
    an element type it lacks, or a machine without a GPU is refused before the
    database is created."""
    dtype = resolved_dtype(kernel, dtype)
    shapes = [Shape.square(n) for n in sizes]
    device = study.current_device()
    with Store.open(db) as store:
        return study.tune(kernel, shapes, store, dtype=dtype, budget_seconds=budget_seconds, force=force, reps=reps,
                          device=device, progress=progress, console=console)  # fmt: skip
