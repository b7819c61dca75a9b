"""`gemmlab occupancy`: NVIDIA's occupancy calculator, raw or for a catalogue kernel."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from gemmlab.cli.app import app, console, emit_json, friendly
from gemmlab.core.errors import GemmlabError
from gemmlab.measure.occupancy import OccupancyResult, occupancy_table, theoretical_occupancy


@app.command()
@friendly
def occupancy(
    kernel_id: Annotated[
        str | None,
        typer.Argument(
            help="A catalogue kernel or your kernel's declaration (.toml, or its .cu); omit for the raw form."
        ),
    ] = None,
    block: Annotated[list[int] | None, typer.Option(help="Block edges (default: the catalogue's).")] = None,
    arch: Annotated[str | None, typer.Option(help="Target such as sm_90a (default: this GPU).")] = None,
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
    """Theoretical occupancy: active blocks, warps and threads per SM, and what limits them."""
    if kernel_id is None:
        if cc is None or threads is None:
            raise GemmlabError(
                "The raw form needs --cc and --threads.",
                "Example: gemmlab occupancy --cc 9.0 --threads 256 --regs 32 --smem 4096, or name a kernel.",
            )
        result = theoretical_occupancy(cc, threads, regs, smem, dynamic_smem=dynamic_smem, carveout=carveout)
        columns = [(f"{threads} threads", result)]
        title = f"Occupancy, compute capability {cc}"
    else:
        from gemmlab.backends import NVRTC
        from gemmlab.backends.python import no_ahead_of_time
        from gemmlab.core.shapes import Shape
        from gemmlab.kernels.user import resolve
        from gemmlab.measure.kernel_occupancy import compile_arch_for, kernel_occupancy

        spec = resolve(kernel_id)
        if spec.backend != NVRTC:
            raise no_ahead_of_time(spec, "occupancy")
        target = arch or (compile_arch_for(cc) if cc else _current_arch())
        columns = kernel_occupancy(spec, target, block, Shape.square(size), carveout=carveout, cc=cc)
        title = f"Occupancy of {spec.id}, {target} compile" + (f", rules of compute capability {cc}" if cc else "")
    if as_json:
        if kernel_id is None:
            emit_json(columns[0][1].to_dict())
        else:
            emit_json([{"block": label, **r.to_dict()} for label, r in columns])
        return
    console.print(render_table(title, columns))


def render_table(title: str, columns: list[tuple[str, OccupancyResult]]) -> Table:
    table = Table(title=title)
    table.add_column("")
    for label, _ in columns:
        table.add_column(label, justify="right")
    table.add_column("device limit", justify="right", style="dim")
    for label, cells in occupancy_table(columns):
        table.add_row(label, *cells)
    return table


def _current_arch() -> str:
    from gemmlab.core import gpu

    return gpu.describe(0).arch
