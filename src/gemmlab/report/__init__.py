"""The report of `gemmlab reproduce` / `gemmlab report`: tables, plots and one
HTML page of stored results, with the source documents' figures beside ours.

Tables have the documents' shape: one per kernel and metric, sizes as rows,
block edges as columns; each cell reads "ours (published)". Every table is also
written as CSV (plain numbers) and all of a section's tables as one Markdown
file. The page needs no server and no JavaScript: open ``index.html``.

Rows are the store's dicts (see :func:`write_report`). :mod:`.model` groups
them into sections and series (pure, tested without a GPU or a database),
:mod:`.tables` and :mod:`.plots` draw them, :mod:`.html` writes the page;
this module writes the whole directory. What each experiment's section shows
is its layout, in its document's module under ``studies/experiments/``;
distributed results and stress runs get sections of their own
(:mod:`.distributed`, :mod:`.stress`). A database is only read: nothing is
written beside it.
"""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gemmlab.core.environment import cpu_name
from gemmlab.core.errors import GemmlabError
from gemmlab.report import distributed, stress
from gemmlab.report.heatmap import plot_share_heatmap, share_grids
from gemmlab.report.html import SectionOutput, dispatch_html, index_html, models_html
from gemmlab.report.model import (
    NO_EXPERIMENT,
    STRESS,
    Row,
    Section,
    build_sections,
    check_requested,
    no_results,
    slug,
)
from gemmlab.report.models import model_results, models_csv, models_plot, models_text, with_facts
from gemmlab.report.plots import draw, plot_roofline
from gemmlab.report.stress import StressRun
from gemmlab.report.summary import summary_html
from gemmlab.report.tables import markdown, metric_tables, occupancy_blocks, unrecorded_note, warnings_csv
from gemmlab.report.user_pages import UserPage, user_pages, write_pages
from gemmlab.store.records import Pick

# A report directory carries this file, so that a later run may replace it
# without risking a directory of the user's that happens to share the name.
MARKER = ".gemmlab-report"


@dataclass
class Stored:
    """What a report reads: the results rows, and from a database the failed
    points of every experiment, the measured peaks, the compiles stored with
    the runs, the dispatcher's picks and the stress runs."""

    rows: list[Row]
    failures: list[dict] = field(default_factory=list)
    peaks: list[dict] = field(default_factory=list)
    compiles: list[dict] = field(default_factory=list)
    picks: list[Pick] = field(default_factory=list)
    stress: list[StressRun] = field(default_factory=list)


def _read(source: list[Row] | str | Path) -> Stored:
    """Everything the report shows, read in one go; a database is opened
    read-only and left without a file beside it (Store.read_untouched)."""
    if not isinstance(source, str | Path):
        return Stored(list(source))
    path = Path(source)
    if not path.is_file():
        raise GemmlabError(
            f"No results database at {path}.",
            "Run `gemmlab reproduce` or `gemmlab sweep` first, or point --db at an existing database.",
        )
    from gemmlab.store.store import Store

    return Store.read_untouched(
        path,
        lambda store: Stored(
            store.rows(), store.failures(all_experiments=True), store.peaks(), store.compiles(), store.picks(),
            stress.stress_runs(store.stress_summaries(), store.stress_failures(), store.runs()),
        ),
    )  # fmt: skip


@dataclass
class Extras:
    """What is reported beside the documents' sections: the distributed points
    (and the rows they came from) and the stress runs."""

    spread: list[distributed.Point]
    stress: list[StressRun]
    spread_rows: list[Row]


def write_report(
    rows: list[Row] | str | Path,
    out_dir: str | Path,
    experiments: list[str] | None = None,
    occupancy: bool = True,
    failures: list[dict] | None = None,
    peaks: list[dict] | None = None,
    compiles: list[dict] | None = None,
    picks: list[Pick] | None = None,
    stress_runs: Sequence[StressRun] | None = None,
) -> Path:
    """Write tables (Markdown, CSV), plots (PNG) and ``index.html`` to ``out_dir``.

    ``rows`` are the store's dicts (keys: experiment, kernel, m, n, k,
    block_edge, dtype, variant, median_ms, gflops, gbytes_per_s, metric, gips,
    cgma_measured, cgma_analytic, h2d_ms, d2h_ms, e2e_gflops, host_memory,
    warnings, gpu_name, cc, date, ...; any may be None) or the path of a
    results database, which is only read (no file is written beside it). The
    report is built in a temporary directory beside ``out_dir`` and moved
    into place, so a failure leaves nothing half written; an existing previous
    report at ``out_dir`` is replaced. Returns the path of ``index.html``.

    ``experiments`` picks what is reported: experiments of the rows, and
    ``stress`` for the stress runs; an unknown name is refused with the known
    ones, a known one with nothing stored with the command that measures it.

    Users' kernels (rows with a ``source``) get a page each as well
    (:mod:`.user_pages`), with their failed points: those of the database, or
    ``failures`` (the store's failure dicts) beside rows given as a list.
    The summary at the top (:mod:`.summary`) compares each ladder with the
    measured peaks: those of the database, or ``peaks`` (:meth:`Store.peaks` rows).

    The occupancy tables take registers and shared memory from the compiles
    stored with the runs (those of the database, or ``compiles``, the store's
    compile dicts), so a report written again later shows what was measured;
    only kernels with none stored are compiled now, and their notes say so.

    The dispatcher's heatmaps (% of cuBLAS by shape) draw its picks: those
    of the database, or ``picks`` (:meth:`Store.picks`). Distributed
    results (experiment ``distributed``) get a section of their own
    (:mod:`.distributed`), and so do the stress runs: those of the database,
    or ``stress_runs`` (:func:`.stress.stress_runs`).
    """
    stored = _read(rows)
    runs = list(stress_runs) if stress_runs is not None else stored.stress
    present = list(dict.fromkeys(r.get("experiment") or NO_EXPERIMENT for r in stored.rows))
    if runs:
        present.append(STRESS)
    if experiments:
        check_requested(experiments, present)
    chosen = set(experiments or present)
    found = [r for r in stored.rows if (r.get("experiment") or NO_EXPERIMENT) in chosen]
    spread = distributed.points(found)
    runs = runs if STRESS in chosen else []
    plain = [r for r in found if not distributed.is_distributed(r)]
    if not plain and not spread and not runs:
        raise no_results()
    sections = build_sections(plain) if plain else []
    reported = [r for section in sections for r in section.rows]
    failed = [f for f in (failures if failures is not None else stored.failures)
              if (f.get("experiment") or NO_EXPERIMENT) in chosen]  # fmt: skip
    pages = user_pages(reported, failed)
    out = Path(out_dir).expanduser().absolute()
    staging, created = _staging_dir(out)
    try:
        _render(
            sections, staging, occupancy, pages, peaks if peaks is not None else stored.peaks,
            compiles if compiles is not None else stored.compiles, picks if picks is not None else stored.picks,
            Extras(spread, runs, [r for r in found if distributed.is_distributed(r)]),
        )  # fmt: skip
        (staging / MARKER).write_text("written by gemmlab report; the next report may replace this directory\n")
        os.chmod(staging, 0o755)
        _move_into_place(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise
    return out / "index.html"


def _unwritable(out: Path, exc: OSError) -> GemmlabError:
    return GemmlabError(
        f"Cannot write the report to {out}: {exc.strerror or exc}.",
        "Choose a directory you can write to with --out.",
    )


def _staging_dir(out: Path) -> tuple[Path, Path | None]:
    """A fresh directory beside ``out`` (same file system, so the move is a
    rename), and the first parent directory this call had to create."""
    if out.exists():
        if not out.is_dir():
            raise GemmlabError(f"{out} is a file, not a directory.", "Give --out a directory path.")
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise GemmlabError(
                f"{out} already holds files that are not a gemmlab report.",
                "Give --out a new or empty directory; gemmlab replaces only reports it wrote.",
            )
    nearest = next((p for p in out.parents if p.exists()), None)
    if nearest is not None and not nearest.is_dir():
        # mkdir would only say "File exists"; name the file that is in the way.
        raise GemmlabError(f"Cannot write the report to {out}: {nearest} is a file, not a directory.",
                           "Choose a directory you can write to with --out.")  # fmt: skip
    created = next((p for p in reversed(out.parents) if not p.exists()), None)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)), created
    except OSError as exc:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise _unwritable(out, exc) from None


def _move_into_place(staging: Path, out: Path) -> None:
    old = staging.with_suffix(".old")
    try:
        if out.exists():
            os.rename(out, old)
        try:
            os.rename(staging, out)
        except OSError:
            if old.exists():
                os.rename(old, out)
            raise
    except OSError as exc:
        raise _unwritable(out, exc) from None
    shutil.rmtree(old, ignore_errors=True)


def _render(
    sections: list[Section], root: Path, occupancy: bool, pages: list[UserPage], peaks: list[dict],
    compiles: list[dict], picks: list[Pick], extras: Extras,
) -> None:  # fmt: skip
    reported = [r for section in sections for r in section.rows]
    note = unrecorded_note(reported)
    outputs = []
    for section in sections:
        sdir = root / section.slug
        sdir.mkdir()
        tables = metric_tables(section)
        for t in tables:
            (sdir / f"{t.file_stem}.csv").write_text(t.to_csv(), encoding="utf-8")
        # Every section gets a roofline where it has the data for one.
        plots = [p for spec in section.layout.plots for p in draw(spec, section, sdir)] + plot_roofline(section, sdir)
        blocks = occupancy_blocks(section, compiles) if occupancy else []
        (sdir / "tables.md").write_text(markdown(section, tables, unrecorded_note(section.rows)), encoding="utf-8")
        if section.notes.texts:
            (sdir / "warnings.csv").write_text(warnings_csv(section), encoding="utf-8")
        outputs.append(SectionOutput(section, tables, plots, blocks))
    links = write_pages(pages, root)
    others, held = [], []
    if extras.spread:
        line = distributed.summary_line(extras.spread)
        others.append((distributed.ANCHOR, distributed.TITLE, line, distributed.write(extras.spread, root)))
        held.append(f"{len(extras.spread)} distributed results")
    if extras.stress:
        line = stress.summary_line(extras.stress)
        others.append((stress.ANCHOR, stress.TITLE, line, stress.write(extras.stress, root)))
        held.append(f"{len(extras.stress)} stress run{'s' * (len(extras.stress) != 1)}")
    summary = summary_html(sections, peaks, root, reported + extras.spread_rows, held)
    findings = summary + _dispatch_block(sections, picks, root) + _models_block(sections, root)
    page = index_html(outputs, links, findings, others, note)
    (root / "index.html").write_text(page, encoding="utf-8")


def _dispatch_block(sections: list[Section], picks: list[Pick], root: Path) -> str:
    """The dispatcher's heatmaps, in their own folder, and their block of the page."""
    grids = share_grids([r for section in sections for r in section.rows], picks)
    if not grids:
        return ""
    folder = root / "dispatch"
    folder.mkdir(exist_ok=True)
    return dispatch_html([plot_share_heatmap(grid, folder) for grid in grids], "dispatch")


def _models_block(sections: list[Section], root: Path) -> str:
    """The programming-models tables (where the reported rows hold peer rungs'
    results), their CSV, text and plots in their own folder, and their block of
    the page. The winners' compiles are timed now, on this machine."""
    by_gpu = model_results([r for section in sections for r in section.rows])
    if not by_gpu:
        return ""
    folder = root / "models"
    folder.mkdir(exist_ok=True)
    tables = [with_facts(gpu, results) for gpu, results in by_gpu.items()]
    stems = ["programming_models" if len(tables) == 1 else f"programming_models_{slug(t.gpu_name)}" for t in tables]
    plots = [models_plot(t.rows, folder, stem)[0] for t, stem in zip(tables, stems, strict=True)]
    (folder / "models.csv").write_text(models_csv(tables), encoding="utf-8")
    text = "\n\n".join(f"{t.gpu_name} ({t.arch})\n{models_text(t.rows)}" + "".join(f"\n- {n}" for n in t.notes)
                       for t in tables)  # fmt: skip
    (folder / "models.txt").write_text(text + "\n", encoding="utf-8")
    return models_html(list(zip(tables, plots, strict=True)), "models", f"{platform.node()}, {cpu_name()}")
