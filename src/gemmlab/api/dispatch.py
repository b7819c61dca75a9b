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

from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.store.records import Config, Pick
from gemmlab.store.store import DEFAULT_PATH, Store
from gemmlab.studies.shipped import ShippedTable

if TYPE_CHECKING:
    from gemmlab.studies.dispatch import Choice, Ranked
    from gemmlab.studies.dispatch_tuning import DispatchSummary

__all__ = [
    "Config", "Pick", "Ranking", "ShippedTable", "Tuned", "percent_of_cublas", "picks", "rank", "shipped_tables",
    "tune",
]  # fmt: skip


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
    from gemmlab.studies import dispatch_tuning as tuning
    from gemmlab.studies.dispatch import PER_RUNG
    from gemmlab.studies.suite import dtype_name, load_suite
    from gemmlab.studies.sweep import run_record

    loaded = load_suite(suite, suite_file)
    names = None if dtypes is None else [dtype_name(d) for d in dtypes]
    device = tuning.current_device()
    with Store.open(db) as store:
        summary = tuning.tune_suite(
            loaded, store, dtypes=names, device=device, run_record=run_record(),
            per_rung=per_rung or PER_RUNG, force=force, budget_seconds=budget_seconds, rungs=rungs,
            on_candidate=on_candidate,
            shape_seconds=tuning.SHAPE_SECONDS if shape_seconds is None else shape_seconds or None,
        )  # fmt: skip
        found = store.picks(device.name)
    clear_cache()  # gemmlab.matmul in this process reads the new picks
    return Tuned(summary, device.name, found)


def picks(db: str | Path = DEFAULT_PATH, gpu: str | None = None) -> list[Pick]:
    """The picks stored in ``db`` for the GPU named ``gpu`` as stored (None: every GPU's)."""
    with Store.open(db, readonly=True) as store:
        return store.picks(gpu)


@dataclass(frozen=True)
class Ranking:
    """The dispatcher's view of one shape on one GPU: the pick tuned for it (if
    any), and every candidate the cost model ranks, fastest first."""

    gpu_name: str
    shape: Shape
    dtype: str
    choice: Choice  # what gemmlab.matmul runs
    ranked: list[Ranked]
    picks: int  # the picks that correct the model (tuned here and shipped)


def rank(
    m: int, n: int, k: int, dtype: str = "float32", *, gpu: str | None = None, db: str | Path | None = None
) -> Ranking:
    """How the dispatcher chooses for M x N x K in ``dtype`` (fp32, bf16,
    bf16-out, fp8, fp8-bf16 too) on the GPU named ``gpu`` (a shipped table's
    GPU; default: this machine's GPU 0): its choice and the model's ranking,
    corrected by the picks of ``db`` (default: none) and the shipped table.
    Needs no GPU when ``gpu`` names a shipped table."""
    from gemmlab.studies.costmodel import GPUModel
    from gemmlab.studies.dispatch import choose, model_ranked
    from gemmlab.studies.dispatch_tuning import known_on
    from gemmlab.studies.shipped import tables
    from gemmlab.studies.suite import dtype_name

    name = dtype_name(dtype)
    shape = Shape(m, n, k)
    if gpu is None:
        from gemmlab.core import gpu as gpus
        from gemmlab.core.errors import NoGPUError

        try:
            info = gpus.describe(0)
        except NoGPUError as exc:
            known = ", ".join(repr(t.gpu_name) for t in tables())
            raise NoGPUError(exc.cause, f"Name a GPU gemmlab ships a table for (--gpu, gpu=): {known}.") from exc
        model, arch = GPUModel.of(info), info.arch
    else:
        table = next((t for t in tables() if t.gpu_name == gpu), None)
        if table is None:
            known = ", ".join(t.gpu_name for t in tables())
            raise GemmlabError(f"gemmlab ships no table for a GPU named {gpu!r}.", f"Name one of: {known}.")
        model, arch = table.model, f"sm_{table.cc.replace('.', '')}a"
    if db is not None and Path(db).is_file():
        with Store.open(db, readonly=True) as store:
            measured = known_on(store, model.name)
    else:
        measured = known_on(None, model.name)
    calibration = measured.calibration(model)
    choice = choose(measured.picks, shape, name, arch, gpu=model, calibration=calibration)
    ranked = model_ranked(shape, name, arch, model, calibration, measured.picks)
    return Ranking(model.name, shape, name, choice, ranked, len(measured.picks))


def shipped_tables() -> tuple[ShippedTable, ...]:
    """The dispatcher tables gemmlab ships, one per GPU model (package data)."""
    from gemmlab.studies.shipped import tables

    return tables()


def percent_of_cublas(pick: Pick) -> float | None:
    """cuBLAS's time over the pick's, as a percentage; None where either is missing."""
    from gemmlab.studies.dispatch import percent_of_cublas as percent

    return percent(pick)
