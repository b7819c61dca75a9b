"""`gemmlab export`: the stored results as a file for other tools."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from gemmlab.api import results
from gemmlab.cli.app import app, console, friendly
from gemmlab.core.errors import StoreError
from gemmlab.results.store import DEFAULT_PATH


class Format(str, Enum):
    csv = "csv"
    parquet = "parquet"


OutOpt = Annotated[Path | None, typer.Option(help="The file to write (default: results.csv or results.parquet).")]
FormatOpt = Annotated[
    Format | None, typer.Option("--format", help="csv, or parquet (the parquet extra); default: from --out's suffix.")
]


@app.command("export")
@friendly
def export(
    db: Annotated[Path, typer.Option(help="The results database.")] = DEFAULT_PATH,
    out: Annotated[
        Path | None, typer.Option(help="The file to write (default: results.csv or results.parquet).")
    ] = None,
    format: Annotated[
        Format | None,
        typer.Option("--format", help="csv, or parquet (the parquet extra); default: from --out's suffix."),
    ] = None,
    experiment: Annotated[str | None, typer.Option(help="One experiment's results (default: all).")] = None,
) -> None:
    """Write the stored results as CSV or Parquet: one row per measured point, every stored column."""
    kind = format or (Format.parquet if out is not None and out.suffix == ".parquet" else Format.csv)
    target = out or Path(f"results.{kind.value}")
    stored = results(db, experiment)
    if not stored.rows:
        raise StoreError(
            f"{db} holds no results" + (f" of experiment '{experiment}'." if experiment else "."),
            "Leave out --experiment to export every result, or measure some first (`gemmlab reproduce`).",
        )
    written = stored.to_parquet(target) if kind is Format.parquet else stored.to_csv(target)
    console.print(f"wrote {len(stored)} results ({len(stored.columns())} columns) to {written}", highlight=False)
