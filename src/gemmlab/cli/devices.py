"""`gemmlab devices`: the GPUs and their figures."""

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


@app.command()
@friendly
def devices(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List the GPUs: name, compute capability, SMs, memory, clocks, peak FP32 rate and bandwidth."""
    from gemmlab.core import gpu

    infos = [gpu.describe(i) for i in range(gpu.device_count())]
    if as_json:
        emit_json([i.to_dict() for i in infos])
        return
    table = Table(title="GPUs")
    for col in ("#", "name", "CC", "SMs", "memory", "SM clock", "mem clock", "L2", "peak FP32", "peak BW", "driver"):
        table.add_column(col)
    for i in infos:
        table.add_row(
            str(i.index), i.name, f"{i.cc[0]}.{i.cc[1]}", str(i.sm_count), f"{i.memory_bytes / 2**30:.1f} GiB",
            f"{i.sm_clock_mhz:.0f} MHz" if i.sm_clock_mhz else "n/a",
            f"{i.memory_clock_mhz:.0f} MHz" if i.memory_clock_mhz else "n/a",
            f"{i.l2_bytes / 2**20:.0f} MiB",
            f"{i.peak_fp32_gflops / 1e3:.1f} TFLOP/s" if i.peak_fp32_gflops else "n/a",
            f"{i.peak_bandwidth_gbs:.0f} GB/s" if i.peak_bandwidth_gbs else "n/a",
            f"{i.driver_version} (runtime {i.runtime_version})",
        )  # fmt: skip
    console.print(table)
