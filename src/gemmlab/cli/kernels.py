"""`gemmlab kernels`: the catalogue."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from gemmlab.cli.app import (
    app,
    console,
    emit_json,
    friendly,
)
from gemmlab.kernels import catalogue


@app.command()
@friendly
def kernels(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """The kernel catalogue."""
    rows = [
        {
            "id": s.id,
            "source_doc": s.source_doc,
            "summary": s.summary,
            "source": s.source,
            "block_edges": list(s.block_edges),
            "dtypes": list(s.dtypes),
            "constraints": s.needs,
        }
        for s in catalogue.CATALOGUE
    ]
    if as_json:
        emit_json(rows)
        return
    table = Table(title=f"{len(rows)} kernels")
    for col in ("id", "what it does", "from", "block edges", "dtypes", "needs"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["id"], r["summary"], r["source_doc"], " ".join(map(str, r["block_edges"])) or "-",
                      " ".join(r["dtypes"]), "; ".join(r["constraints"]) or "any size")  # fmt: skip
    console.print(table)
