"""`gemmlab run`: one kernel, verified and timed beside its library."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from gemmlab.cli.app import (
    BlockOpt,
    DtypeOpt,
    KernelArg,
    KOpt,
    MOpt,
    NOpt,
    SizeOpt,
    app,
    console,
    emit_json,
    err_console,
    friendly,
    parse_shape,
)
from gemmlab.kernels import catalogue
from gemmlab.results.store import DEFAULT_PATH
from gemmlab.studies.tune import config_label, stored_tuned_spec


@app.command()
@friendly
def run(
    kernel_id: KernelArg,
    size: SizeOpt = None,
    m: MOpt = None,
    n: NOpt = None,
    k: KOpt = None,
    block: BlockOpt = None,
    dtype: DtypeOpt = None,
    reps: Annotated[int, typer.Option(min=1, help="Timed repetitions.")] = 20,
    flush_l2: Annotated[bool, typer.Option("--flush-l2", help="Evict the L2 cache before each repetition.")] = False,
    seed: Annotated[int | None, typer.Option(help="Random seed (default: fresh inputs).")] = None,
    db: Annotated[
        Path, typer.Option("--db", help="Results database to read tuned configurations from.")
    ] = DEFAULT_PATH,
    no_tuned: Annotated[
        bool, typer.Option("--no-tuned", help="Use the catalogue's default configuration, not the tuned one.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Run one kernel: verify it against a float64 reference, time it, compare with cuBLAS.

    A kernel tuned on this GPU (`gemmlab tune`) runs with its stored configuration for the size's class.
    """
    from gemmlab.measure.run import run as run_kernel

    # Every product needs K (matmul, the FP32 ladder, the tensor cores); the memory lab's kernels do not.
    needs_k = catalogue.get(kernel_id).problem.metric != "gbs"
    shape = parse_shape(size, m, n, k, needs_k)
    spec = None if no_tuned else stored_tuned_spec(kernel_id, shape, db, dtype)
    result = run_kernel(kernel_id, shape, block, dtype, reps=reps, flush_l2=flush_l2, seed=seed, spec=spec)
    config_source = ("tuned" if spec else "catalogue default") if result.config else None
    if as_json:
        emit_json({**result.to_dict(), "config_source": config_source})
        return
    console.print(result_table(result, config_source))
    for w in result.warnings:
        err_console.print(f"[yellow]warning:[/] {w}")


def result_table(r: Any, config_source: str | None = None) -> Table:
    t = r.timing
    table = Table(title=f"{r.kernel}  {r.shape}  block edge {r.block_edge or '-'}  {r.dtype}  on {r.device['name']}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    memory_bound = r.metric == "gbs"
    headline = ("GB/s (read + written)", f"{r.gbytes_per_s:,.1f}") if memory_bound else ("GFLOPS", f"{r.gflops:,.1f}")
    error = "exact" if r.error == 0 else f"{r.error:.2e}"
    rows = [
        ("time (median) [ms]", f"{t.median_ms:.4f}"),
        ("time min / max [ms]", f"{t.min_ms:.4f} / {t.max_ms:.4f}"),
        ("repetitions", str(t.reps)),
        headline,
        ("check against the reference", f"{error} (tolerance {r.tolerance:.0e})"),
        ("grid x block", f"{r.grid} x {r.block}"),
        ("registers / static smem", f"{r.resources.registers} / {r.resources.smem_bytes} B"),
    ]
    if r.config:
        rows.append((f"configuration ({config_source})" if config_source else "configuration", config_label(r.config)))
    if r.baseline_timing is not None:
        lib = r.baseline_gbytes_per_s if memory_bound else r.baseline_gflops
        rows += [(f"{r.baseline_name} {headline[0]}", f"{lib:,.1f}"),
                 ("ratio to library", f"{r.ratio_to_baseline:.1%}")]  # fmt: skip
    for row in rows:
        table.add_row(*row)
    return table
