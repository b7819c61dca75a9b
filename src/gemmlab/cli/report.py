"""`gemmlab report`: tables, plots and an HTML page of the stored results."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gemmlab.api.report import DEFAULT_OUT, write_report
from gemmlab.api.results import DEFAULT_PATH
from gemmlab.cli.app import app, console, friendly


@app.command()
@friendly
def report(
    db: Annotated[Path, typer.Option(help="The results database.")] = DEFAULT_PATH,
    out: Annotated[Path, typer.Option(help="Directory to write (a previous report there is replaced).")] = DEFAULT_OUT,
    experiments: Annotated[
        str | None,
        typer.Option(help="Comma-separated experiments, `stress` for the stress runs (default: all stored)."),
    ] = None,
    occupancy: Annotated[
        bool,
        typer.Option(
            "--occupancy/--no-occupancy",
            help="Add theoretical occupancy tables (from the compiles stored with the runs; kernels of a database "
            "older than that are compiled now).",
        ),
    ] = True,
) -> None:
    """Write the report: tables and plots beside the documents' figures, and one index.html that opens offline.

    Per experiment, tables (sizes x block edges) with the documents' figures beside ours; sections of their own
    for distributed results and stress runs. The database is only read: nothing is written beside it."""
    names = [name.strip() for name in experiments.split(",") if name.strip()] if experiments else None
    index = write_report(db, out, names, occupancy=occupancy)
    console.print(f"Report written: {index}")
