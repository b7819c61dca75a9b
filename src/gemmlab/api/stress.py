"""Stress runs from Python and for `gemmlab stress`: kernels checked on random
shapes in several processes sharing the GPU, a cuBLAS load beside them if
asked, every failed draw stored with the seed and draw that replay it
(:mod:`gemmlab.studies.stress` says how)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gemmlab.store.store import DEFAULT_PATH, Store
from gemmlab.studies import stress as study
from gemmlab.studies.stress import DEFAULT_PROCESSES, LAUNCHES_PER_DRAW, MAX_DIM, Draw, StressResult

__all__ = ["DEFAULT_PROCESSES", "DEFAULT_SECONDS", "LAUNCHES_PER_DRAW", "MAX_DIM", "Draw", "StressResult",
           "replay_draw", "stress"]  # fmt: skip

# How long a run lasts when given neither a time nor a number of launches.
DEFAULT_SECONDS = 60.0


def stress(
    kernels: Sequence[str] | None = None,
    *,
    processes: int = DEFAULT_PROCESSES,
    load: bool = False,
    seconds: float | None = None,
    launches: int | None = None,
    launches_per_draw: int = LAUNCHES_PER_DRAW,
    seed: int = 0,
    max_dim: int = MAX_DIM,
    db: str | Path = DEFAULT_PATH,
) -> StressResult:
    """Check ``kernels`` (None: those that synchronise across blocks or through
    memory) on random shapes up to ``max_dim`` in ``processes`` processes, each
    drawing with seed ``seed`` + its number, each draw launched
    ``launches_per_draw`` times from a poisoned output and checked; ``load``
    adds a process running a large cuBLAS GEMM. It stops after ``seconds`` or
    ``launches`` of each kernel (neither: DEFAULT_SECONDS). The summaries and
    every failed draw are stored in ``db``; without a GPU nothing is created."""
    from gemmlab.studies.sweep import run_record

    if seconds is None and launches is None:
        seconds = DEFAULT_SECONDS
    plan = study.StressPlan(tuple(kernels or study.default_kernels()), processes, seconds, launches,
                            launches_per_draw, seed, max_dim, load)  # fmt: skip
    checker = study.gpu_checker()  # no GPU: said before the database is touched
    with Store.open(db) as store:
        return study.stress(plan, checker=checker, store=store, run_record=run_record())


def replay_draw(
    kernel: str, seed: int, draw: int, *, max_dim: int = MAX_DIM, launches: int = LAUNCHES_PER_DRAW
) -> tuple[Draw, float]:
    """Check one stored draw of ``kernel`` (its seed and number, with the run's
    ``max_dim``) again, alone: the draw and its largest relative error, or the
    VerificationError or KernelStopped it meets."""
    return study.replay(kernel, seed, draw, max_dim=max_dim, launches=launches)
