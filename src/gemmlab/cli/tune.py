"""`gemmlab tune`: search the configurations of a kernel of the FP32 or the
tensor-core ladder, or a user's kernel's declared parameters, on this GPU and store the fastest verified one per size
class and element type (see gemmlab.studies.tune)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from gemmlab.api.results import DEFAULT_PATH
from gemmlab.api.tune import DEFAULT_SIZES, MIN_REPS, TuneSummary, config_label, resolved_dtype, tune
from gemmlab.cli.app import app, console, err_console, friendly
from gemmlab.cli.sweep import EXIT_FAILED, EXIT_INTERRUPTED, DbOption, parse_ints


@app.command("tune")
@friendly
def tune_cmd(
    kernel_id: Annotated[
        str,
        typer.Argument(
            help="A kernel of the FP32 or tensor-core ladder (sgemm_*, tc_*; see `gemmlab kernels`), or your "
            "declaration's path (its \\[parameters] are searched)."
        ),
    ],
    sizes: Annotated[
        str, typer.Option(help="Square sizes N, comma-separated; sizes of one size class are scored together.")
    ] = ",".join(map(str, DEFAULT_SIZES)),
    dtype: Annotated[
        str | None,
        typer.Option(help="The element type to tune for (default: the kernel's first); each is tuned apart."),
    ] = None,
    db: DbOption = DEFAULT_PATH,
    budget_seconds: Annotated[
        float | None,
        typer.Option(
            "--budget-seconds",
            min=0.0,
            help="Stop starting candidates after this many seconds; the best is chosen among those measured.",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Measure candidates again even if they are stored.")] = False,
    reps: Annotated[int, typer.Option(min=MIN_REPS, help="Timed repetitions per candidate (median).")] = 20,
) -> None:
    """Tune a kernel for this GPU: compile, verify and time every configuration, keep the fastest per size class.

    `gemmlab run` then uses the configuration stored for this GPU and element type (--no-tuned: catalogue default).
    A second run resumes: stored candidates are skipped.
    """
    # A kernel outside the ladders, or an element type it lacks, is refused before the sizes are read;
    # that and a machine without a GPU before the database is created.
    dtype = resolved_dtype(kernel_id, dtype)
    summary = tune(kernel_id, parse_ints(sizes, "sizes"), dtype=dtype, db=db, budget_seconds=budget_seconds,
                   force=force, reps=reps, console=err_console)  # fmt: skip
    _print(summary)
    console.print(f"stored in {db}", highlight=False)
    if summary.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    if summary.rejected or summary.failed:
        raise typer.Exit(EXIT_FAILED)


def _print(summary: TuneSummary) -> None:
    for line in summary.lines():
        alarm = line.startswith(("REJECTED", "FAILED"))
        style = "red" if alarm else "yellow" if line.startswith(("interrupted", "time budget", "no verified")) else None
        text = f"[{style}]{line}[/]" if style else line
        (err_console if style else console).print(text, highlight=False, soft_wrap=True)
    if not summary.best:
        return
    table = Table(title=f"{summary.kernel} ({summary.dtype}) tuned on {summary.gpu_name} (cc {summary.cc})")
    for col in ("size class", "shapes", "configuration", "GFLOPS", "vs default", "vs cuBLAS"):
        table.add_column(col, justify="right" if col in ("GFLOPS", "vs default", "vs cuBLAS") else "left")
    for t in summary.best.values():
        gain = f"{t.gain_over_default:.2f}x" if t.gain_over_default else "n/a"
        ratio = f"{t.ratio_to_cublas:.1%}" if t.ratio_to_cublas else "n/a"
        table.add_row(t.size_class, " ".join(map(str, t.shapes)), config_label(t.config), f"{t.gflops:,.0f}", gain,
                      ratio)  # fmt: skip
    console.print(table)
