"""`gemmlab dispatch tune` and `gemmlab dispatch show`: the dispatcher's
picks per shape on this GPU (gemmlab.studies.dispatch), tuned on the shape
suite (gemmlab/studies/shapes.toml); `gemmlab run best M N K` and
``gemmlab.matmul`` read them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.cells import cell_len
from rich.markup import escape
from rich.table import Table

from gemmlab.api.dispatch import Pick, Ranking, percent_of_cublas, picks, rank, shipped_tables, tune
from gemmlab.api.results import DEFAULT_PATH
from gemmlab.cli.app import app, console, err_console, friendly
from gemmlab.cli.sweep import EXIT_FAILED, EXIT_INTERRUPTED, DbOption

dispatch_app = typer.Typer(no_args_is_help=True, help="The dispatcher: tune its picks per shape, show them.")
app.add_typer(dispatch_app, name="dispatch")


def parse_dtypes(text: str | None) -> list[str] | None:
    """'fp32, bf16' -> ['fp32', 'bf16'] (the tuner names them); None keeps the suite's."""
    if text is None:
        return None
    return [part for part in text.replace(" ", "").split(",") if part]


@dispatch_app.command("tune")
@friendly
def tune_cmd(
    suite: Annotated[str, typer.Option(help="quick (a few minutes on one GPU) or full.")] = "quick",
    dtype: Annotated[
        str | None,
        typer.Option(
            help="Element types, comma-separated: fp32, bf16, bf16-out, fp8, fp8-bf16 (default: the suite's)."
        ),
    ] = None,
    db: DbOption = DEFAULT_PATH,
    suite_file: Annotated[
        Path | None, typer.Option("--suite-file", help="A shapes.toml (default: the suite gemmlab ships).")
    ] = None,
    per_rung: Annotated[
        int | None, typer.Option(min=1, help="Configurations tried per rung and shape (default: 3).")
    ] = None,
    rungs: Annotated[
        str | None, typer.Option(help="Rungs to try on every shape, comma-separated (default: each class's).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Tune shapes again that have a pick.")] = False,
    budget_seconds: Annotated[
        float | None, typer.Option("--budget-seconds", min=0.0, help="Start no shape after this many seconds.")
    ] = None,
    shape_seconds: Annotated[
        float | None,
        typer.Option(
            "--shape-seconds",
            min=0.0,
            help="Seconds of timing per shape, compiling not counted (default: 10; 0: no limit).",
        ),
    ] = None,
) -> None:
    """Tune the dispatcher on the shape suite: per shape, verify and time a handful of rungs and configurations
    beside cuBLAS, and store the fastest verified one for this GPU."""
    # An unknown suite or element type, or no GPU, is refused before the database is created.
    tuned = tune(
        suite, dtypes=parse_dtypes(dtype), db=db, suite_file=suite_file, per_rung=per_rung,
        rungs=[r.strip() for r in rungs.split(",") if r.strip()] if rungs else None, force=force,
        budget_seconds=budget_seconds, shape_seconds=shape_seconds,
        on_candidate=lambda label: err_console.print(f"[dim]{label}[/]"),
    )  # fmt: skip
    summary = tuned.summary
    for line in summary.lines():
        alarm = line.startswith(("REJECTED", "FAILED"))
        (err_console if alarm else console).print(f"[red]{line}[/]" if alarm else line, highlight=False)
    console.print(picks_table(tuned.picks, tuned.gpu_name, console.width))
    console.print(f"stored in {db}", highlight=False)
    if summary.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    if summary.rejected or summary.failed:
        raise typer.Exit(EXIT_FAILED)


@dispatch_app.command("show")
@friendly
def show_cmd(
    db: DbOption = DEFAULT_PATH,
    gpu: Annotated[str | None, typer.Option(help="The GPU's name as stored (default: every GPU's picks).")] = None,
    shipped: Annotated[
        bool, typer.Option("--shipped", help="Print the tables gemmlab ships (per GPU) instead of the database's.")
    ] = False,
) -> None:
    """Print the stored picks: per GPU, element type and shape, the kernel, its time and its share of cuBLAS."""
    stored = [] if shipped else picks(db, gpu) if Path(db).is_file() else []
    if not stored:
        tables = [t for t in shipped_tables() if gpu is None or t.gpu_name == gpu]
        if not shipped:
            err_console.print(f"no picks stored in {db}; the tables gemmlab ships follow (`gemmlab dispatch tune` "
                              "on a GPU adds its own).", highlight=False)  # fmt: skip
        if not tables:
            err_console.print(f"gemmlab ships no table for {gpu}." if gpu else "gemmlab ships no table.")
        for table in tables:
            title = f"{table.gpu_name}, shipped (measured {table.measured})"
            console.print(picks_table(list(table.picks), title, console.width))
        return
    for name in dict.fromkeys(p.gpu_name for p in stored):
        console.print(picks_table([p for p in stored if p.gpu_name == name], name, console.width))


@dispatch_app.command("rank")
@friendly
def rank_cmd(
    m: Annotated[int, typer.Argument(min=1, help="Rows of A and C.")],
    n: Annotated[int, typer.Argument(min=1, help="Columns of B and C.")],
    k: Annotated[int, typer.Argument(min=1, help="Columns of A, rows of B.")],
    dtype: Annotated[str, typer.Option(help="fp32, bf16, bf16-out, fp8 or fp8-bf16.")] = "fp32",
    gpu: Annotated[
        str | None, typer.Option(help="A GPU gemmlab ships a table for (no GPU needed); default: this one's.")
    ] = None,
    db: Annotated[Path | None, typer.Option(help="A database whose tuned picks correct the model too.")] = None,
    top: Annotated[int, typer.Option(min=1, help="Candidates to print.")] = 10,
) -> None:
    """How the dispatcher chooses for one shape: its choice and why, and the cost model's ranking of the
    candidates, with each one's predicted time, its parts and the measurement that corrects it."""
    ranking = rank(m, n, k, dtype, gpu=gpu, db=db)
    choice = ranking.choice
    settings = " ".join(f"{key}={value}" for key, value in (choice.spec.config or {}).items())
    console.print(f"{ranking.dtype} {ranking.shape} on {ranking.gpu_name}: {choice.kernel} {settings}\n"
                  f"  {choice.reason}: {choice.why()}", highlight=False)  # fmt: skip
    console.print(ranking_table(ranking, top, console.width))


# Below this console width, rank's parts of each prediction go into the candidate's cell.
RANK_WIDE = 100


def ranking_table(ranking: Ranking, top: int, width: int | None = None) -> Table:
    """The model's ranking as a table for a console ``width`` wide: the
    predicted time and its parts in columns, or, on a narrow console, the parts
    on a line of the candidate's cell, so that no figure is cut."""
    wide = width is None or width >= RANK_WIDE
    table = Table(title=f"the cost model's ranking ({len(ranking.ranked)} candidates, {ranking.picks} picks "
                  "correcting it)")  # fmt: skip
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("candidate, and what corrects its time", overflow="fold")
    parts = ("compute us", "memory us", "waves", "C share", "factor")
    for header in ("predicted us", *(parts if wide else ())):
        table.add_column(header, justify="right", no_wrap=True)
    for place, found in enumerate(ranking.ranked[:top], start=1):
        p, c = found.prediction, found.candidate
        figures = (f"{p.compute_us:.1f}", f"{p.memory_us:.1f}", f"{p.waves:g}", f"{100 * p.padded_share:.0f}%",
                   f"x{found.correction.factor:.2f}")  # fmt: skip
        settings = " ".join(f"{key}={value}" for key, value in c.config.items())
        who = f"{escape(c.kernel)}\n[dim]{escape(settings)}\n{escape(found.correction.basis)}[/]"
        if not wide:
            who += "\n[dim]" + ", ".join(f"{h} {v}" for h, v in zip(parts, figures, strict=True)) + "[/]"
        table.add_row(str(place), who, f"{found.us:.1f}", *(figures if wide else ()))
    return table


# A wrapping column is given at least this many characters (or its longest
# text, if shorter) when the wide layout is judged to fit.
WRAP_MIN = 16


def picks_table(picks: list[Pick], gpu_name: str, width: int | None = None) -> Table:
    """The picks of one GPU as a table for a console ``width`` wide (None: as
    wide as it takes). Every column in one row when that fits; otherwise the
    compact layout: what identifies a pick stacked in one column that wraps,
    beside the three figures. Either way a figure is never cut short."""
    cells = [_pick_cells(p) for p in picks]
    title = f"dispatcher picks on {gpu_name}"
    if width is None or _width_needed(_WIDE, cells) <= width:
        return _table(title, _WIDE, cells)
    return _table(title, _COMPACT, [_stacked(c) for c in cells])


def _pick_cells(pick: Pick) -> dict[str, str]:
    share = percent_of_cublas(pick)
    method = pick.timing_method or "-"
    if pick.cublas_timing_method and pick.cublas_timing_method != pick.timing_method:
        method += f" / cuBLAS: {pick.cublas_timing_method}"
    return {
        "dtype": pick.dtype, "shape": f"{pick.m}x{pick.n}x{pick.k}", "kernel": pick.kernel,
        "config": pick.config.text, "time": f"{pick.median_ms:.4f}",
        "cublas": f"{pick.cublas_ms:.4f}" if pick.cublas_ms else "-",
        "share": f"{share:.1f}%" if share else "-", "method": method,
    }  # fmt: skip


def _stacked(cells: dict[str, str]) -> dict[str, str]:
    """The compact layout's cells: the pick's identity, configuration and timing method on lines of one cell."""
    identity = escape(f"{cells['dtype']} {cells['shape']}\n{cells['kernel']}")
    return {**cells, "pick": f"{identity}\n[dim]{escape(cells['config'])}\n{escape(cells['method'])}[/]"}


@dataclass(frozen=True)
class _Column:
    header: str
    key: str  # the cell's key in _pick_cells
    wraps: bool = False  # False: kept whole on one line (the figures, and what a pick is looked up by)
    figure: bool = False  # right-aligned


_WIDE = (
    _Column("dtype", "dtype"), _Column("shape", "shape"), _Column("kernel", "kernel"),
    _Column("configuration", "config", wraps=True), _Column("time [ms]", "time", figure=True),
    _Column("cuBLAS [ms]", "cublas", figure=True), _Column("% of cuBLAS", "share", figure=True),
    _Column("timed by", "method", wraps=True),
)  # fmt: skip
# In the compact layout the figures wrap too, which rich does only when the
# console is narrower than their own widths: they fold onto a second line then,
# never ending in an ellipsis.
_COMPACT = (
    _Column("pick", "pick", wraps=True), _Column("time ms", "time", wraps=True, figure=True),
    _Column("cuBLAS ms", "cublas", wraps=True, figure=True), _Column("% cuBLAS", "share", wraps=True, figure=True),
)  # fmt: skip


def _width_needed(columns: tuple[_Column, ...], cells: list[dict[str, str]]) -> int:
    """The console width ``columns`` need for ``cells`` with nothing cut: a
    column that does not wrap as wide as its longest text, one that wraps
    WRAP_MIN wide (or as its longest word or text, where that decides); in
    rich's box, one space each side of a cell and a rule between columns."""
    total = 1
    for column in columns:
        texts = [column.header, *(row[column.key] for row in cells)]
        if column.wraps:
            longest_word = max(cell_len(word) for text in texts for word in text.split())
            width = max(longest_word, min(WRAP_MIN, max(map(cell_len, texts))))
        else:
            width = max(map(cell_len, texts))
        total += width + 3
    return total


def _table(title: str, columns: tuple[_Column, ...], cells: list[dict[str, str]]) -> Table:
    table = Table(title=title)
    for column in columns:
        table.add_column(
            escape(column.header),
            justify="right" if column.figure else "left",
            no_wrap=not column.wraps,
            overflow="fold",
        )
    for row in cells:
        table.add_row(*(row[column.key] if column.key == "pick" else escape(row[column.key]) for column in columns))
    return table
