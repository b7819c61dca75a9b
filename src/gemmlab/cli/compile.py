"""`gemmlab compile`: NVRTC, and what ptxas reports."""

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
from gemmlab.core.errors import DeviceLimitError, GemmlabError
from gemmlab.kernels import catalogue, user


def _current_arch() -> str:
    from gemmlab.core import gpu

    return gpu.describe(0).arch


@app.command("compile")
@friendly
def compile_cmd(
    kernel_ids: Annotated[
        list[str] | None,
        typer.Argument(
            help="Catalogue ids or your kernels' declarations (.toml, or the .cu beside one); default: all."
        ),
    ] = None,
    arch: Annotated[str | None, typer.Option(help="Target, e.g. sm_90a, sm_80 (default: this GPU).")] = None,
    block: Annotated[list[int] | None, typer.Option(help="Block edges (default: the catalogue's).")] = None,
    dtype: Annotated[str | None, typer.Option(help="Data type (default: the kernel's first).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Compile kernels with NVRTC and show registers, shared memory, stack and spills. No GPU needed with --arch."""
    from gemmlab.backends import NVRTC
    from gemmlab.backends.nvrtc import check_target, compile_kernel, normalise_arch
    from gemmlab.backends.python import no_ahead_of_time

    # The kernels first: an unknown id is the error to report, even on a machine
    # where the default target (this GPU's) cannot be found.
    specs = [user.resolve(k) for k in kernel_ids] if kernel_ids else list(catalogue.CATALOGUE)
    target = check_target(normalise_arch(arch)) if arch else _current_arch()
    rows = []
    for spec in specs:
        if spec.backend != NVRTC:
            raise no_ahead_of_time(spec, "compile")
        try:
            spec_arch = spec.compile_arch(target)
        except DeviceLimitError:
            if kernel_ids:
                raise
            continue  # all kernels: those that cannot target this architecture are left out
        kind = dtype or spec.dtypes[0]
        if kind not in spec.dtypes:
            raise GemmlabError(f"{spec.id} has no {kind} version.", f"It takes {', '.join(spec.dtypes)}.")
        edges = (block or list(spec.block_edges)) if spec.takes_block_edge else [0]
        for edge in edges:
            if spec.takes_block_edge and not 1 <= edge <= spec.max_edge:
                raise GemmlabError(f"Block edge {edge} is outside 1..{spec.max_edge}.", "Choose a smaller edge.")
            res = compile_kernel(spec, edge, kind, spec_arch).resources
            rows.append({"kernel": spec.id, "block_edge": edge, "dtype": kind, "arch": spec_arch,
                         "registers": res.registers, "smem_bytes": res.smem_bytes, "stack_bytes": res.stack_bytes,
                         "spill_bytes": res.spill_bytes, "barriers": res.barriers})  # fmt: skip
    if as_json:
        emit_json(rows)
        return
    table = Table(title=f"NVRTC, {target}")
    for col in ("kernel", "block edge", "dtype", "registers", "static smem [B]", "stack [B]", "spills [B]"):
        table.add_column(col, justify="right" if col not in ("kernel", "dtype") else "left")
    for r in rows:
        table.add_row(r["kernel"], str(r["block_edge"] or "-"), r["dtype"], str(r["registers"]),
                      str(r["smem_bytes"]), str(r["stack_bytes"]), str(r["spill_bytes"]))  # fmt: skip
    console.print(table)
