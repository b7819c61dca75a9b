"""`gemmlab compile`: NVRTC, and what ptxas reports."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from gemmlab.api.catalogue import gpu_kernel
from gemmlab.api.compile import catalogue_for, chosen_target, compiled
from gemmlab.cli import batch
from gemmlab.cli.app import app, console, emit_json, friendly
from gemmlab.core.errors import ConstraintError


@app.command("compile")
@friendly
def compile_cmd(
    kernel_ids: Annotated[
        list[str] | None,
        typer.Argument(
            help="Catalogue ids or your kernels' declarations (.toml, or the .cu beside one); default: all."
        ),
    ] = None,
    arch: Annotated[
        str | None, typer.Option(help="Target, e.g. sm_90a, sm_80 (default: this GPU's, or sm_90 without a GPU).")
    ] = None,
    block: Annotated[list[int] | None, typer.Option(help="Block edges (default: the catalogue's).")] = None,
    dtype: Annotated[str | None, typer.Option(help="Data type (default: the kernel's first).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Compile kernels with NVRTC and show registers, shared memory, stack and spills. No GPU needed.

    Each kernel named gets a status; one that fails does not stop the others. With no kernel named, every
    catalogue kernel that NVRTC can compile for the target is compiled, and one line names those left out.
    """
    target, note = chosen_target(arch)
    names, left_out = (kernel_ids, "") if kernel_ids else catalogue_for(target, block, dtype)
    if not names:
        raise ConstraintError(f"No catalogue kernel compiles for {target} with these options.", left_out)
    statuses = batch.each(names, lambda name: compiled(gpu_kernel(name, "compile"), target, block, dtype))
    rows = [row for status in statuses if status.value is not None for row in status.value]  # those that compiled
    # No rows when every kernel failed: then their errors alone.
    if rows and as_json:
        emit_json(rows)
    elif rows:
        console.print(_table(target, rows))
    batch.finish(statuses, [line for line in (left_out, note) if line])


def _table(target: str, rows: list[dict]) -> Table:
    table = Table(title=f"NVRTC, {target}")
    # A narrow terminal folds a long kernel name onto a second line and never cuts a name or a figure.
    # The headers are short enough that 80 columns hold the table with room for the name.
    table.add_column("kernel", overflow="fold")
    for col in ("edge", "dtype", "registers", "smem [B]", "stack [B]", "spills [B]"):
        table.add_column(col, justify="left" if col == "dtype" else "right", overflow="fold")
    for r in rows:
        table.add_row(r["kernel"], str(r["block_edge"] or "-"), r["dtype"], str(r["registers"]),
                      str(r["smem_bytes"]), str(r["stack_bytes"]), str(r["spill_bytes"]))  # fmt: skip
    return table
