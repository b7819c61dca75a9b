"""`gemmlab occupancy`: NVIDIA's occupancy calculator, raw or for kernels."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from gemmlab.api.catalogue import gpu_kernel
from gemmlab.api.compile import (
    KernelOccupancy,
    OccupancyColumn,
    kernel_occupancy,
    occupancy_rows,
    occupancy_target,
    raw_occupancy,
)
from gemmlab.cli import batch
from gemmlab.cli.app import app, console, emit_json, friendly
from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape

# The row of a kernel's table that says why an edge has no figures.
OVER_THE_LIMIT = "Over the device's limit"
REASON_WIDTH = 24


@app.command()
@friendly
def occupancy(
    kernel_ids: Annotated[
        list[str] | None,
        typer.Argument(
            help="Catalogue kernels or your kernels' declarations (.toml, or the .cu); omit for the raw form."
        ),
    ] = None,
    block: Annotated[list[int] | None, typer.Option(help="Block edges (default: the catalogue's).")] = None,
    arch: Annotated[
        str | None, typer.Option(help="Target such as sm_90a (default: this GPU's, or sm_90 without a GPU).")
    ] = None,
    size: Annotated[int, typer.Option(help="Size for kernels whose block depends on it.")] = 1024,
    cc: Annotated[
        str | None, typer.Option(help="Compute capability, e.g. 9.0 (with a kernel: apply its rules to the compile).")
    ] = None,
    threads: Annotated[int | None, typer.Option(help="Raw form: threads per block.")] = None,
    regs: Annotated[int, typer.Option(help="Raw form: registers per thread.")] = 0,
    smem: Annotated[int, typer.Option(help="Raw form: static shared memory per block [B].")] = 0,
    dynamic_smem: Annotated[int, typer.Option(help="Dynamic shared memory per block [B].")] = 0,
    carveout: Annotated[
        int | None, typer.Option(min=0, max=100, help="Shared-memory carve-out preference [%].")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Theoretical occupancy: active blocks, warps and threads per SM, and what limits them.

    A block edge the device cannot hold at all is a column that says so; the other edges are worked as usual.
    """
    if not kernel_ids:
        if cc is None or threads is None:
            raise GemmlabError(
                "The raw form needs --cc and --threads.",
                "Example: gemmlab occupancy --cc 9.0 --threads 256 --regs 32 --smem 4096, or name a kernel.",
            )
        column = raw_occupancy(cc, threads, regs, smem, dynamic_smem=dynamic_smem, carveout=carveout)
        if as_json:
            emit_json(_json_cells(column))
        else:
            console.print(render_table(f"Occupancy, compute capability {cc}", [column]))
        return
    target, note = occupancy_target(arch, cc)
    found: list[dict] = []

    def one(name: str) -> None:
        spec = gpu_kernel(name, "occupancy")
        table = kernel_occupancy(spec, target, cc, block, Shape.square(size), carveout)
        if as_json:
            found.extend({"kernel": table.kernel, "block": c.label, **_json_cells(c)} for c in table.columns)
        else:
            console.print(render_table(_title(table), table.columns))

    statuses = batch.each(kernel_ids, one)
    if as_json and found:
        emit_json(found)
    batch.finish(statuses, [note] if note else [])


def _title(table: KernelOccupancy) -> str:
    rules = f", rules of compute capability {table.cc}" if table.cc else ""
    return f"Occupancy of {table.kernel}, {table.arch} compile{rules}"


def _json_cells(column: OccupancyColumn) -> dict:
    if column.refusal is not None:
        return {"over_limit": str(column.refusal)}
    return column.result.to_dict()  # type: ignore[union-attr]


def render_table(title: str, columns: list[OccupancyColumn]) -> Table:
    """The calculator's rows, a column per block edge and the device's limits
    last; an edge the device cannot hold shows '-' and, in a row of its own, why."""
    table = Table(title=title)
    table.add_column("")
    for column in columns:
        # Narrow enough that a refusal's sentence wraps rather than widening its column.
        table.add_column(column.label, justify="right", max_width=REASON_WIDTH)
    table.add_column("device limit", justify="right", style="dim")
    for label, cells in occupancy_rows(columns):
        figures = iter(cells[:-1])
        table.add_row(label, *(next(figures) if c.result is not None else "-" for c in columns), cells[-1])
    if any(c.refusal is not None for c in columns):
        reasons = [f"[red]{escape(c.refusal.cause)}[/]" if c.refusal is not None else "" for c in columns]
        table.add_row(OVER_THE_LIMIT, *reasons, "")
    return table
