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
    """The kernel catalogue, its candidate rungs, then the peer rungs.

    The candidates are the ladders' rungs for skinny, K-heavy, small and odd
    shapes, which the dispatcher searches; the peers are Triton and CuTe DSL."""
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
        for s in (
            *catalogue.CATALOGUE,
            *(catalogue.get(i) for i in catalogue.candidate_ids()),
            *(catalogue.get(i) for i in catalogue.peer_ids()),
        )
    ]
    if as_json:
        emit_json(rows)
        return
    console.print(catalogue_table(rows))


def catalogue_table(rows: list[dict]) -> Table:
    """The catalogue as a table that reads at 80 columns and up. An id is what a
    person copies into the next command, so it never wraps (no_wrap, and a width
    that fits the longest); the prose wraps beside it. Four columns rather than
    six: where a kernel comes from and what it needs sit under what it does, so
    no column is squeezed until its words break."""
    table = Table(title=f"{len(rows)} kernels")
    table.add_column("id", no_wrap=True, min_width=max(len(r["id"]) for r in rows))
    table.add_column("what it does; from; needs", ratio=1)
    table.add_column("block edges", max_width=12)  # the edges wrap between numbers
    table.add_column("dtypes", max_width=12, overflow="fold")  # one a line; bfloat16-out is the longest
    for r in rows:
        needs = "; ".join(r["constraints"]) or "any size"
        about = f"{r['summary']}\n[dim]from {r['source_doc']}\nneeds {needs}[/]"
        table.add_row(r["id"], about, " ".join(map(str, r["block_edges"])) or "-", "\n".join(r["dtypes"]))
    return table
