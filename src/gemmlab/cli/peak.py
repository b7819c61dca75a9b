"""`gemmlab peak`: this GPU's measured peak rates (FP32 FFMA, mma.sync,
wgmma; see gemmlab.measure.peak) beside the nominal rates at the clock they ran at,
stored in the results database."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from gemmlab.api.peak import measure
from gemmlab.api.results import DEFAULT_PATH
from gemmlab.cli.app import app, console, emit_json, err_console, friendly
from gemmlab.cli.sweep import DbOption


@app.command("peak")
@friendly
def peak_cmd(
    dtype: Annotated[
        list[str] | None,
        typer.Option(
            help="Element types to measure: float32 (FFMA), bfloat16, float16, tf32, int8, e4m3, e5m2, e5m2xe4m3 "
            "(default: all)."
        ),
    ] = None,
    db: DbOption = DEFAULT_PATH,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Measure this GPU's peak rates: FP32 FFMA and the tensor-core instructions (mma.sync, Hopper's wgmma).

    Each instruction runs alone for a second, so that the clock settles under load; then 10 launches are timed.
    The SM clock is read after each, and the nominal rate at that clock is shown beside the measured one.
    """
    # An unknown element type, or no GPU, is refused before the database is created.
    found = measure(dtype, db)
    peaks = found.measured
    if as_json:
        emit_json([p.to_dict() for p in peaks])
        return
    # The instruction's name starts with its family's (fma, mma.sync, wgmma).
    table = Table(title=f"Measured peaks on {found.gpu_name}; nominal: the rated rate at that SM clock")
    for col in ("instruction", "dtype", "TFLOP/s", "SM clock", "nominal", "of nominal"):
        table.add_column(col, justify="left" if col in ("instruction", "dtype") else "right", overflow="fold")
    for p in peaks:
        table.add_row(
            p.instruction, p.dtype, f"{p.gflops / 1e3:,.1f}",
            f"{p.sm_clock_after_mhz:.0f} MHz" if p.sm_clock_after_mhz else "n/a",
            f"{p.nominal_gflops / 1e3:,.1f}" if p.nominal_gflops else "n/a",
            f"{p.ratio_to_nominal:.1%}" if p.ratio_to_nominal else "n/a",
        )  # fmt: skip
    console.print(table)
    for family, why in found.left_out:
        console.print(f"not measured: {family}: {why}", highlight=False)
    for p in peaks:
        for w in p.warnings:
            err_console.print(f"[yellow]warning:[/] {p.family} {p.dtype}: {w}", highlight=False)
    console.print(f"stored in {db}", highlight=False)
