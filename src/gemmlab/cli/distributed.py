"""`gemmlab distributed`: the distributed GEMM ladder (docs/distributed.md),
one process per GPU started by torchrun, each algorithm verified and timed,
the results stored as runs of the "distributed" experiment and written as JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from gemmlab.api.distributed import check_launch, keep_results, run_ladder, scalings, setup, work_folder
from gemmlab.api.results import DEFAULT_PATH
from gemmlab.cli.app import app, console, err_console, friendly
from gemmlab.core.errors import GemmlabError
from gemmlab.core.outputs import check_output, is_stdout

ALGORITHMS_HELP = (
    "Comma-separated: allgather_gemm, collective_matmul, summa, gemm_reduce_scatter, cublasmp "
    "(default: the four rungs)."
)
CPU_HELP = "CPU processes over gloo: checks the algorithms; the times mean nothing."
OUT_HELP = (
    "Write every row (with comm, GEMM, overlap) as JSON here (- for standard output); "
    "checked before the run, its missing folders created."
)


def parse_ints(text: str, flag: str) -> list[int]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise GemmlabError(f"{flag} {text!r} is not a list of positive whole numbers.", f"Example: {flag} 1,2.")
    return [int(p) for p in parts]


def parse_scalings(text: str) -> list[str]:
    known = scalings()
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names or set(names) - set(known):
        raise GemmlabError(f"--scaling {text!r}: each must be one of {', '.join(known)}.",
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
    out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None,
    db: Annotated[Path, typer.Option("--db", help="Results database (SQLite), created on first use.")] = DEFAULT_PATH,
    work_dir: Annotated[
        Path | None, typer.Option("--work-dir", help="Where the ranks' logs go (default: a new temporary folder).")
    ] = None,
    timeout: Annotated[float, typer.Option(min=1.0, help="Seconds one launch may take.")] = 900.0,
) -> None:
    """Run the distributed GEMM ladder on this host's GPUs, one process per GPU, verified and timed.

    All-gather then GEMM, the ring-overlapped collective matmul, SUMMA and GEMM + reduce-scatter, each timed
    whole, communication alone and GEMM alone (docs/distributed.md)."""
    counts = parse_ints(gpus, "--gpus")
    chosen_scalings, wanted = parse_scalings(scaling), parse_ints(sizes, "--sizes")
    ranks_setup = setup(algorithms, grid=grid, panels=panels, warmup=warmup, reps=reps, seed=seed, local=local,
                        cpu=cpu)  # fmt: skip
    if out is not None and not is_stdout(out):
        check_output(out, example="rows.json")  # now, not after a run of many minutes
    check_launch(counts, cpu=cpu)
    # With the rows on standard output, what is said for people goes to standard error.
    show = err_console if out is not None and is_stdout(out) else console
    folder = work_folder(work_dir)
    show.print(f"ranks' logs in {folder}", highlight=False)
    found, rows = run_ladder(ranks_setup, counts, folder, chosen_scalings, wanted, timeout_s=timeout)
    show.print(_table(rows))
    document = {"setup": ranks_setup.to_json(), "gpus": counts, "rows": rows}
    show.print(keep_results(found, document, db, out, folder), highlight=False)
    if not all(row["verified"] for row in rows):
        raise typer.Exit(1)


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
