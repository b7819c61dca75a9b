"""`gemmlab distributed`: the distributed GEMM ladder (docs/distributed.md),
one process per GPU started by torchrun, each algorithm verified and timed,
the results stored as runs of the "distributed" experiment and written as JSON."""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from gemmlab.cli.app import app, console, friendly
from gemmlab.core.errors import GemmlabError
from gemmlab.results.store import DEFAULT_PATH, Store

ALGORITHMS_HELP = (
    "Comma-separated: allgather_gemm, collective_matmul, summa, gemm_reduce_scatter, cublasmp "
    "(default: the four rungs)."
)
CPU_HELP = "CPU processes over gloo: checks the algorithms; the times mean nothing."


def parse_ints(text: str, flag: str) -> list[int]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise GemmlabError(f"{flag} {text!r} is not a list of positive whole numbers.", f"Example: {flag} 1,2.")
    return [int(p) for p in parts]


def parse_scalings(text: str) -> list[str]:
    from gemmlab.studies.distributed.plan import SCALINGS

    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names or set(names) - set(SCALINGS):
        raise GemmlabError(f"--scaling {text!r}: each must be one of {', '.join(SCALINGS)}.",
                           "Example: --scaling strong,weak.")  # fmt: skip
    return names


@app.command("distributed")
@friendly
def distributed_cmd(
    gpus: Annotated[str, typer.Option(help="GPU counts, one launch each, comma-separated (e.g. 1,2).")] = "2",
    algorithms: Annotated[str | None, typer.Option(help=ALGORITHMS_HELP)] = None,
    sizes: Annotated[str, typer.Option(help="Sizes, comma-separated (bf16 inputs).")] = "4096",
    scaling: Annotated[str, typer.Option(help="strong (fixed product), weak (fixed per GPU), or both.")] = "strong",
    grid: Annotated[str | None, typer.Option(help="SUMMA's grid RxC (default: the squarest).")] = None,
    panels: Annotated[int, typer.Option(min=1, help="SUMMA's panels per lcm(R, C)-th of K.")] = 1,
    reps: Annotated[int, typer.Option(min=1, help="Timed repetitions per algorithm and half.")] = 10,
    warmup: Annotated[int, typer.Option(min=0, help="Untimed repetitions before each timing.")] = 3,
    seed: Annotated[int, typer.Option(help="Seed of the inputs (the same on every rank).")] = 0,
    local: Annotated[str, typer.Option(help="Local GEMM: gemmlab (gemmlab.matmul) or torch.")] = "gemmlab",
    cpu: Annotated[bool, typer.Option("--cpu", help=CPU_HELP)] = False,
    out: Annotated[Path | None, typer.Option(help="Write every row (with comm, GEMM, overlap) as JSON here.")] = None,
    db: Annotated[Path, typer.Option("--db", help="Results database (SQLite), created on first use.")] = DEFAULT_PATH,
    work_dir: Annotated[
        Path | None, typer.Option("--work-dir", help="Where the ranks' logs go (default: a new temporary folder).")
    ] = None,
    timeout: Annotated[float, typer.Option(min=1.0, help="Seconds one launch may take.")] = 900.0,
) -> None:
    """Run the distributed GEMM ladder on this host's GPUs, one process per GPU, verified and timed.

    All-gather then GEMM, the ring-overlapped collective matmul, SUMMA and GEMM + reduce-scatter, each timed
    whole, communication alone and GEMM alone (docs/distributed.md)."""
    from gemmlab.studies.distributed import launch, plan

    counts = parse_ints(gpus, "--gpus")
    setup = plan.Setup(
        algorithms=plan.parse_algorithms(algorithms), points=(), grid=grid, panels_per_block=panels,
        warmup=warmup, reps=reps, seed=seed, local=_local(local), device="cpu" if cpu else "cuda",
    )  # fmt: skip
    launch.require_torch()
    if not cpu:
        from gemmlab.core import gpu

        launch.check_gpus(counts, gpu.device_count())
    folder = work_dir or Path(tempfile.mkdtemp(prefix="gemmlab-distributed-"))
    console.print(f"ranks' logs in {folder}", highlight=False)
    found = launch.run_ladder(setup, counts, folder, parse_scalings(scaling), parse_ints(sizes, "--sizes"),
                              timeout_s=timeout)  # fmt: skip
    rows = launch.with_scaling([row for world in counts for row in found[world]])
    _store(db, found)
    if out:
        out.write_text(json.dumps({"setup": setup.to_json(), "gpus": counts, "rows": rows}, indent=1))
    console.print(_table(rows))
    console.print(f"stored in {db}" + (f", rows in {out}" if out else ""), highlight=False)
    if not all(row["verified"] for row in rows):
        raise typer.Exit(1)


def _local(text: str) -> str:
    if text not in ("gemmlab", "torch"):
        raise GemmlabError(f"--local {text!r} is neither gemmlab nor torch.", "Use --local gemmlab or --local torch.")
    return text


def _store(db: Path, found: dict[int, list[dict]]) -> None:
    """One run per launch, one row per algorithm and point."""
    from gemmlab.studies.distributed import launch
    from gemmlab.studies.sweep import run_record

    with Store.open(db) as store:
        for world, rows in found.items():
            run_id = store.start_run(run_record(shlex.join(sys.argv) + f"  # launch over {world}"))
            store.add_results(run_id, launch.EXPERIMENT, [launch.store_row(row) for row in rows])


def _table(rows: list[dict]) -> Table:
    table = Table(title="distributed GEMM (bf16 in, fp32 out)")
    for name in ("algorithm", "GPUs", "scaling", "M x N x K", "ms", "TFLOP/s/GPU", "comm ms", "GEMM ms", "overlap",
                 "scaling eff.", "error", "local GEMM"):  # fmt: skip
        table.add_column(name)
    for r in rows:
        table.add_row(
            r["algorithm"] + (f" {r['grid']}" if r.get("grid") else ""), str(r["gpus"]), r["scaling"],
            f"{r['m']}x{r['n']}x{r['k']}", f"{r['median_ms']:.3f}", f"{r['tflops_per_gpu']:.1f}",
            f"{r['comm_ms']:.3f}", f"{r['gemm_ms']:.3f}", _pct(r["overlap_efficiency"]), _pct(r["scaling_efficiency"]),
            f"{r['error']:.2e}" + ("" if r["verified"] else " WRONG"), r["local_gemm"],
        )  # fmt: skip
    return table


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"
