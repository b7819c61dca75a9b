"""`gemmlab dispatch tune` and `gemmlab dispatch show`: the dispatcher's
picks per shape on this GPU (gemmlab.studies.dispatch), tuned on the shape
suite (benchmarks/shapes.toml); `gemmlab run best M N K` and
``gemmlab.matmul`` read them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from gemmlab.cli.app import app, console, err_console, friendly
from gemmlab.cli.sweep import EXIT_FAILED, EXIT_INTERRUPTED, DbOption
from gemmlab.results.store import DEFAULT_PATH, Store

dispatch_app = typer.Typer(no_args_is_help=True, help="The dispatcher: tune its picks per shape, show them.")
app.add_typer(dispatch_app, name="dispatch")


def parse_dtypes(text: str | None) -> list[str] | None:
    """'fp32,bf16' -> ['float32', 'bfloat16']; None keeps the suite's."""
    from gemmlab.studies.suite import dtype_name

    if text is None:
        return None
    return [dtype_name(part) for part in text.replace(" ", "").split(",") if part]


@dispatch_app.command("tune")
@friendly
def tune_cmd(
    suite: Annotated[str, typer.Option(help="quick (a few minutes on one GPU) or full.")] = "quick",
    dtype: Annotated[
        str | None, typer.Option(help="Element types, comma-separated: fp32, bf16, bf16-out (default: the suite's).")
    ] = None,
    db: DbOption = DEFAULT_PATH,
    suite_file: Annotated[
        Path | None, typer.Option("--suite-file", help="A shapes.toml (default: the checkout's benchmarks/).")
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
    from gemmlab.studies import dispatch
    from gemmlab.studies.suite import load_suite
    from gemmlab.studies.sweep import run_record

    loaded = load_suite(suite, suite_file)
    dtypes = parse_dtypes(dtype)
    device = dispatch.current_device()  # NoGPUError before the database is created
    with Store.open(db) as store:
        summary = dispatch.tune_suite(
            loaded, store, dtypes=dtypes, device=device, run_record=run_record(),
            per_rung=per_rung or dispatch.PER_RUNG, force=force, budget_seconds=budget_seconds,
            rungs=[r.strip() for r in rungs.split(",") if r.strip()] if rungs else None,
            on_candidate=lambda label: err_console.print(f"[dim]{label}[/]"),
            shape_seconds=dispatch.SHAPE_SECONDS if shape_seconds is None else shape_seconds or None,
        )  # fmt: skip
        picks = store.picks(device[0])
    for line in summary.lines():
        alarm = line.startswith(("REJECTED", "FAILED"))
        (err_console if alarm else console).print(f"[red]{line}[/]" if alarm else line, highlight=False)
    console.print(picks_table(picks, device[0]))
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
) -> None:
    """Print the stored picks: per GPU, element type and shape, the kernel, its time and its share of cuBLAS."""
    with Store.open(db, readonly=True) as store:
        picks = store.picks(gpu)
    if not picks:
        err_console.print(f"no picks stored in {db}; run `gemmlab dispatch tune` on a GPU.", highlight=False)
        return
    for name in dict.fromkeys(p["gpu_name"] for p in picks):
        console.print(picks_table([p for p in picks if p["gpu_name"] == name], name))


def picks_table(picks: list[dict], gpu_name: str) -> Table:
    from gemmlab.studies.dispatch import percent_of_cublas

    table = Table(title=f"dispatcher picks on {gpu_name}")
    # The configuration and the timing method wrap on a narrow terminal; the
    # columns a reader looks a pick up by never do.
    for col in ("dtype", "shape", "kernel", "configuration", "time [ms]", "cuBLAS [ms]", "% of cuBLAS", "timed by"):
        wraps = col in ("configuration", "timed by")
        table.add_column(col, justify="right" if "ms" in col or "%" in col else "left", no_wrap=not wraps)
    for p in picks:
        share = percent_of_cublas(p)
        cublas = f"{p['cublas_ms']:.4f}" if p["cublas_ms"] else "-"
        method = p["timing_method"] or "-"
        if p["cublas_timing_method"] and p["cublas_timing_method"] != p["timing_method"]:
            method += f" / cuBLAS: {p['cublas_timing_method']}"
        table.add_row(p["dtype"], f"{p['m']}x{p['n']}x{p['k']}", p["kernel"], p["config"], f"{p['median_ms']:.4f}",
                      cublas, f"{share:.1f}%" if share else "-", method)  # fmt: skip
    return table
