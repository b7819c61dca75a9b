"""`gemmlab stress`: kernels checked on random shapes in processes that share the GPU.

A command of its own rather than `check --stress`: check's options (the
sanitizer tools, their processes) mean nothing here, and stress's (time,
launches, load, seeds) mean nothing to the sanitizer."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from gemmlab.api.results import DEFAULT_PATH
from gemmlab.api.stress import DEFAULT_PROCESSES, LAUNCHES_PER_DRAW, MAX_DIM, StressResult, replay_draw, stress
from gemmlab.cli.app import DbOption, app, console, emit_json, err_console, friendly
from gemmlab.core.errors import GemmlabError, VerificationError

# How many failed draws are listed below the table; all of them are stored.
LISTED_FAILURES = 20


@app.command("stress")
@friendly
def stress_cmd(
    kernel_ids: Annotated[
        list[str] | None,
        typer.Argument(help="Kernels (default: those that synchronise across blocks or through memory)."),
    ] = None,
    processes: Annotated[int, typer.Option(min=1, help="Worker processes sharing the GPU.")] = DEFAULT_PROCESSES,
    load: Annotated[bool, typer.Option("--load", help="One more process running a large cuBLAS GEMM.")] = False,
    seconds: Annotated[float | None, typer.Option(min=1, help="Stop after this long.")] = None,
    launches: Annotated[int | None, typer.Option(min=1, help="Stop after this many launches of each kernel.")] = None,
    launches_per_draw: Annotated[int, typer.Option(min=1, help="Checked launches per random shape.")] = (
        LAUNCHES_PER_DRAW
    ),
    seed: Annotated[int, typer.Option(help="Process p draws with seed SEED + p.")] = 0,
    max_dim: Annotated[int, typer.Option(min=1, help="Largest M, N or K drawn.")] = MAX_DIM,
    replay: Annotated[
        str | None, typer.Option(metavar="SEED:DRAW", help="Check one stored draw of one kernel again, alone.")
    ] = None,
    db: DbOption = DEFAULT_PATH,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Check kernels on random shapes in several processes at once, with --load beside them; store every wrong result.

    Each draw, a shape the kernel accepts, is launched --launches-per-draw times, each launch from a poisoned output
    and checked. Without --seconds or --launches, it runs for 60 seconds.
    """
    if replay is not None:
        _replay(kernel_ids or [], replay, max_dim, launches_per_draw)
        return
    result = stress(kernel_ids, processes=processes, load=load, seconds=seconds, launches=launches,
                    launches_per_draw=launches_per_draw, seed=seed, max_dim=max_dim, db=db)  # fmt: skip
    if as_json:
        emit_json({"summaries": [s.row() for s in result.summaries], "failures": result.failures,
                   "load_gemms": result.load_gemms, "load_error": result.load_error, "seconds": result.seconds,
                   "run_id": result.run_id, "interrupted": result.interrupted})  # fmt: skip
    else:
        _print(result, db)
    if result.load_error:
        err_console.print(f"warning: the load stopped early: {result.load_error}", highlight=False, markup=False)
    if result.interrupted:
        from gemmlab.cli.sweep import EXIT_INTERRUPTED  # here, so that sweep keeps its place in --help

        err_console.print("interrupted: the draws finished before Ctrl-C are stored.", highlight=False)
        raise typer.Exit(EXIT_INTERRUPTED)
    if not result.clean:
        raise VerificationError(
            f"{len(result.failures)} of the stress run's draws failed (wrong, fault, hang or error); "
            f"they are stored in {db} (run {result.run_id}).",
            "Replay one alone with `gemmlab stress KERNEL --replay SEED:DRAW --max-dim N` (the values listed above).",
        )


def _print(result: StressResult, db: Path) -> None:
    table = Table(title=f"stress: {result.seconds:.0f} s, {result.summaries[0].processes} processes, "
                        f"{result.load_gemms} load GEMMs")  # fmt: skip
    for col in ("kernel", "launches", "wrong", "faults", "hangs", "errors", "shapes"):
        table.add_column(col)
    for s in result.summaries:
        bad = [s.wrong, s.faults, s.hangs, s.errors]
        table.add_row(s.kernel, str(s.launches), *(f"[red]{v}[/]" if v else "[green]0[/]" for v in bad), str(s.shapes))
    console.print(table)
    for row in result.failures[:LISTED_FAILURES]:
        err_console.print(
            f"{row['kind']}: {row['kernel']} {row['m']}x{row['n']}x{row['k']} edge {row['block_edge']} {row['dtype']}"
            f" (process {row['process']}); replay: --replay {row['seed']}:{row['draw']} --max-dim {row['max_dim']}",
            highlight=False,
            markup=False,
        )
    console.print(f"results in {db} (run {result.run_id})", highlight=False)


def _replay(kernel_ids: list[str], text: str, max_dim: int, launches: int) -> None:
    if len(kernel_ids) != 1:
        raise GemmlabError("--replay checks one kernel's draw.", "Name exactly one kernel with --replay SEED:DRAW.")
    try:
        seed, index = (int(part) for part in text.split(":"))
    except ValueError:
        raise GemmlabError(
            f"--replay takes SEED:DRAW, two whole numbers, not {text!r}.",
            "Copy them from the stress run's list of failures, e.g. --replay 3:41.",
        ) from None
    point, error = replay_draw(kernel_ids[0], seed, index, max_dim=max_dim, launches=launches)
    console.print(f"{point.label(0).rsplit(' (', 1)[0]}: {launches} launches, largest relative error {error:.2e}",
                  highlight=False)  # fmt: skip
