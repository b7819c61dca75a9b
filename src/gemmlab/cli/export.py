"""`gemmlab export`: the stored results as a file for other tools."""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from gemmlab.api import Results, results
from gemmlab.api.results import DEFAULT_PATH
from gemmlab.cli.app import app, console, err_console, friendly
from gemmlab.core.errors import StoreError
from gemmlab.core.outputs import OutputError, check_output, is_stdout


class Format(str, Enum):
    csv = "csv"
    parquet = "parquet"


OutOpt = Annotated[
    Path | None,
    typer.Option(
        help="The file to write (default: results.csv or results.parquet), its missing folders created; "
        "- for standard output."
    ),
]
FormatOpt = Annotated[
    Format | None, typer.Option("--format", help="csv, or parquet (the parquet extra); default: from --out's suffix.")
]


@app.command("export")
@friendly
def export(
    db: Annotated[Path, typer.Option(help="The results database.")] = DEFAULT_PATH,
    out: OutOpt = None,
    format: FormatOpt = None,
    experiment: Annotated[str | None, typer.Option(help="One experiment's results (default: all).")] = None,
) -> None:
    """Write the stored results as CSV or Parquet: one row per measured point, every stored column.

    The file is written whole or not at all: an export that fails leaves the old file as it was."""
    kind = format or (Format.parquet if out is not None and out.suffix == ".parquet" else Format.csv)
    target = out or Path(f"results.{kind.value}")
    to_stdout = is_stdout(target)
    if to_stdout and kind is Format.parquet and sys.stdout.isatty():
        raise OutputError(
            "Parquet is binary, and standard output is a terminal.",
            "Send it to a program or a file (`gemmlab export --format parquet --out - | ...`), or give --out a file.",
        )
    if not to_stdout:
        check_output(target, example=f"results.{kind.value}")
    stored = results(db, experiment)
    if not stored.rows:
        raise StoreError(
            f"{db} holds no results" + (f" of experiment '{experiment}'." if experiment else "."),
            "Leave out --experiment to export every result, or measure some first (`gemmlab reproduce`).",
        )
    summary = f"{len(stored)} results ({len(stored.columns())} columns)"
    if to_stdout:
        _to_stdout(stored, kind)
        # The data has standard output to itself: what was written is said on standard error.
        err_console.print(f"wrote {summary} to standard output", highlight=False)
        return
    written = stored.to_parquet(target) if kind is Format.parquet else stored.to_csv(target)
    console.print(f"wrote {summary} to {written}", highlight=False)


def _to_stdout(stored: Results, kind: Format) -> None:
    try:
        if kind is Format.csv:
            stored.write_csv(sys.stdout)
            sys.stdout.flush()
        else:
            sys.stdout.flush()
            stored.write_parquet(sys.stdout.buffer)
            sys.stdout.buffer.flush()
    except BrokenPipeError:
        # The reader stopped early (`| head`). Python would print a traceback
        # when it flushes standard output on the way out; point it at nothing.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(1) from None
