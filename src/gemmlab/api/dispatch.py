"""The dispatcher's table from Python and for `gemmlab dispatch`: per GPU,
element type and shape of the shape suite (gemmlab/studies/shapes.toml), the
fastest verified rung and configuration, tuned beside cuBLAS
(:mod:`gemmlab.studies.dispatch`), and the stored picks read back.
:func:`gemmlab.api.matmul.dispatch` chooses from them for `gemmlab run best`
and ``gemmlab.matmul``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gemmlab.store.records import Pick
from gemmlab.store.store import DEFAULT_PATH, Store
from gemmlab.studies.shipped import ShippedTable

if TYPE_CHECKING:
    from gemmlab.studies.dispatch import DispatchSummary

__all__ = ["Pick", "ShippedTable", "Tuned", "percent_of_cublas", "picks", "shipped_tables", "tune"]


@dataclass(frozen=True)
class Tuned:
    """What a tuning of the dispatcher did, and the picks of its GPU after it."""

    summary: DispatchSummary
    gpu_name: str
    picks: list[Pick]


def tune(
    suite: str = "quick",
    *,
    dtypes: Sequence[str] | None = None,
    db: str | Path = DEFAULT_PATH,
    suite_file: str | Path | None = None,
    per_rung: int | None = None,
    rungs: Sequence[str] | None = None,
    force: bool = False,
    budget_seconds: float | None = None,
    shape_seconds: float | None = None,
    on_candidate: Callable[[str], None] | None = None,
) -> Tuned:
    """Per shape of the ``suite`` ("quick" or "full", from ``suite_file`` or
    gemmlab/studies/shapes.toml), verify and time a handful of rungs
    and configurations beside cuBLAS on this GPU, and store the fastest
    verified one in ``db``; shapes with a pick are skipped unless ``force``.
    ``dtypes``: names or their short forms (fp32, bf16, bf16-out; default: the
    suite's). ``per_rung``: configurations tried per rung and shape (default
    3). ``rungs``: tried on every shape instead of each class's.
    ``shape_seconds``: seconds of timing per shape, compiling not counted
    (default 10; 0: no limit). ``on_candidate(label)`` before each candidate.
    An unknown suite or element type, or no GPU, is refused before the database is created."""
    from gemmlab.api.matmul import clear_cache
    from gemmlab.studies import dispatch
    from gemmlab.studies.suite import dtype_name, load_suite
    from gemmlab.studies.sweep import run_record

    loaded = load_suite(suite, suite_file)
    names = None if dtypes is None else [dtype_name(d) for d in dtypes]
    device = dispatch.current_device()
    with Store.open(db) as store:
        summary = dispatch.tune_suite(
            loaded, store, dtypes=names, device=device, run_record=run_record(),
            per_rung=per_rung or dispatch.PER_RUNG, force=force, budget_seconds=budget_seconds, rungs=rungs,
            on_candidate=on_candidate,
            shape_seconds=dispatch.SHAPE_SECONDS if shape_seconds is None else shape_seconds or None,
        )  # fmt: skip
        found = store.picks(device.name)
    clear_cache()  # gemmlab.matmul in this process reads the new picks
    return Tuned(summary, device.name, found)


def picks(db: str | Path = DEFAULT_PATH, gpu: str | None = None) -> list[Pick]:
    """The picks stored in ``db`` for the GPU named ``gpu`` as stored (None: every GPU's)."""
    with Store.open(db, readonly=True) as store:
        return store.picks(gpu)


def shipped_tables() -> tuple[ShippedTable, ...]:
    """The dispatcher tables gemmlab ships, one per GPU model (package data)."""
    from gemmlab.studies.shipped import tables

    return tables()


def percent_of_cublas(pick: Pick) -> float | None:
    """cuBLAS's time over the pick's, as a percentage; None where either is missing."""
    from gemmlab.studies.dispatch import percent_of_cublas as percent

    return percent(pick)
