"""`gemmlab kernels`: the catalogue, then the CPU baselines."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from gemmlab.api import catalogue
from gemmlab.cli.app import (
    app,
    console,
    emit_json,
    friendly,
)


@app.command()
@friendly
def kernels(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """The kernel catalogue, its candidate rungs and the peer rungs, then the CPU baselines.

    The candidates are the ladders' rungs for skinny, K-heavy, small and odd
    shapes, which the dispatcher searches; the peers are Triton and CuTe DSL.
    The CPU baselines run on this host, without a GPU; cpu_naive and
    cpu_blocked need numba, the cpu extra."""
    on_gpu = catalogue.gpu_kernels()
    on_host = catalogue.cpu_baselines()
    if as_json:
        emit_json([*on_gpu, *on_host])
        return
    console.print(catalogue_table(on_gpu, f"{len(on_gpu)} GPU kernels"))
    console.print(catalogue_table(on_host, f"{len(on_host)} CPU baselines: run on this host's CPU, no GPU needed"))


def catalogue_table(rows: list[dict], title: str | None = None) -> Table:
    """The catalogue as a table that reads at 80 columns and up. An id is what a
    person copies into the next command, so it never wraps (no_wrap, and a width
    that fits the longest); the prose wraps beside it. Four columns rather than
    six: where a kernel comes from and what it needs sit under what it does, so
    no column is squeezed until its words break."""
    table = Table(title=title or f"{len(rows)} kernels")
    table.add_column("id", no_wrap=True, min_width=max(len(r["id"]) for r in rows))
    table.add_column("what it does; from; needs", ratio=1)
    table.add_column("block edges", max_width=12)  # the edges wrap between numbers
    table.add_column("dtypes", max_width=12, overflow="fold")  # one a line; bfloat16-out is the longest
    for r in rows:
        needs = "; ".join(r["constraints"]) or "any size"
        # The catalogue's words are text, not markup: "gemmlab[cpu]" stays as written.
        about = f"{escape(r['summary'])}\n[dim]from {escape(r['source_doc'])}\nneeds {escape(needs)}[/]"
        table.add_row(r["id"], about, " ".join(map(str, r["block_edges"])) or "-", "\n".join(r["dtypes"]))
    return table
