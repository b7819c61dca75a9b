"""`gemmlab distributed`: the distributed GEMM ladder (docs/distributed.md),
one process per GPU started by torchrun, each algorithm verified and timed,
the results stored as runs of the "distributed" experiment and written as JSON."""

from __future__ import annotations

import itertools
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from gemmlab.cli.app import app, console, err_console, friendly
from gemmlab.core.errors import GemmlabError, StoreError
from gemmlab.core.outputs import OutputError, check_output, is_stdout, write_text
from gemmlab.results.store import DEFAULT_PATH, Store

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
    from gemmlab.studies.distributed import launch, plan

    counts = parse_ints(gpus, "--gpus")
    scalings, wanted = parse_scalings(scaling), parse_ints(sizes, "--sizes")
    setup = plan.Setup(
        algorithms=plan.parse_algorithms(algorithms), points=(), grid=grid, panels_per_block=panels,
        warmup=warmup, reps=reps, seed=seed, local=_local(local), device="cpu" if cpu else "cuda",
    )  # fmt: skip
    if out is not None and not is_stdout(out):
        check_output(out, example="rows.json")  # now, not after a run of many minutes
    launch.require_torch()
    if not cpu:
        from gemmlab.core import gpu

        launch.check_gpus(counts, gpu.device_count())
    # With the rows on standard output, what is said for people goes to standard error.
    show = err_console if out is not None and is_stdout(out) else console
    folder = work_dir or Path(tempfile.mkdtemp(prefix="gemmlab-distributed-"))
    show.print(f"ranks' logs in {folder}", highlight=False)
    found = launch.run_ladder(setup, counts, folder, scalings, wanted, timeout_s=timeout)
    rows = launch.with_scaling([row for world in counts for row in found[world]])
    show.print(_table(rows))
    document = {"setup": setup.to_json(), "gpus": counts, "rows": rows}
    show.print(keep_results(found, document, db, out, folder), highlight=False)
    if not all(row["verified"] for row in rows):
        raise typer.Exit(1)


def keep_results(found: dict[int, list[dict]], document: dict, db: Path, out: Path | None, work_dir: Path) -> str:
    """Store the rows (``found``: {GPU count: its rows}) and write ``document``
    to ``out``; say where they went. A run takes minutes, so neither failure
    loses it: rows the database refuses (locked, read-only, newer) are kept in
    a file the StoreError names (:func:`_set_aside`); an ``out`` that cannot be
    written is an OutputError that says the rows are stored all the same."""
    text = json.dumps(document, indent=1)
    try:
        _store(db, found)
    except StoreError as refused:
        raise StoreError(
            f"Storing the rows failed: {refused.cause}",
            f"{refused.fix} All {len(document['rows'])} rows are kept in {_set_aside(text, out, work_dir)}; "
            "no gemmlab command loads that file into a database, so run again to store them.",
        ) from None
    if out is None:
        return f"stored in {db}"
    try:
        written = _write_out(out, text)
    except OutputError as exc:
        raise OutputError(exc.cause, f"{exc.fix} The rows are stored in {db} all the same.") from None
    return f"stored in {db}, rows in {written}"


def _write_out(out: Path, text: str) -> str:
    """Write the rows to --out: a file, or standard output for ``-``."""
    if is_stdout(out):
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return "standard output"
    return str(write_text(out, text))


def _set_aside(text: str, out: Path | None, work_dir: Path) -> str:
    """Where rows the database refused are kept: --out if it is a file and
    can be written, else a new JSON file in the current folder, else (that
    folder cannot be written either) the ranks' own answers in the work folder."""
    if out is not None:
        try:
            written = _write_out(out, text)
        except OutputError:
            pass
        else:
            if not is_stdout(out):  # rows on a terminal or in a pipe are not kept: set them aside as well
                return f"{written} (JSON, as --out writes it)"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path, again = Path(f"gemmlab-distributed-{stamp}.json"), itertools.count(2)
    while path.exists():  # never over an earlier run's rows
        path = Path(f"gemmlab-distributed-{stamp}-{next(again)}.json")
    try:
        return f"{write_text(path, text)} (JSON, as --out writes it)"
    except OutputError:
        return f"the ranks' answers ({work_dir}/<P>gpu/rank0.json)"


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
