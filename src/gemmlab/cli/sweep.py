"""`gemmlab sweep` and `gemmlab reproduce`: many points into the results database."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from gemmlab.api.results import DEFAULT_PATH, Store
from gemmlab.api.sweep import (
    experiments,
    make_profiler,
    measure_ceilings,
    ncu_missing,
    needs_gpu,
    open_pool,
    own_edges,
    plan_points,
    profile_experiments,
    run_experiments,
    run_points,
    run_record,
    write_report,
)
from gemmlab.cli.app import DbOption, app, console, err_console, friendly
from gemmlab.core.errors import GemmlabError, ProfilerError
from gemmlab.core.shapes import Shape

if TYPE_CHECKING:
    from gemmlab.api.sweep import Experiment, Pool, Profiler, SweepSummary

DEFAULT_REPORT_DIR = Path("gemmlab-report")
EXIT_FAILED = 4
# --profile was asked for and not one point could be profiled (the timings are stored).
EXIT_NOT_PROFILED = ProfilerError.exit_code
EXIT_INTERRUPTED = 130

ForceOption = Annotated[bool, typer.Option("--force", help="Run points again even if they are stored.")]
ProfileOption = Annotated[
    bool,
    typer.Option(
        "--profile",
        help="Also profile every GPU point with Nsight Compute (slow) and measure the roofline's ceilings.",
    ),
]

IsolateOption = Annotated[
    bool,
    typer.Option(
        "--isolate",
        help="Run every GPU point in a child process a fault or a hang cannot take down (users' kernels always are).",
    ),
]
TimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        min=1.0,
        help="Seconds an isolated point may take before it is stopped as a hang (default: 60, or 20 times its "
        "predicted launches if longer, plus twice --max-seconds).",
    ),
]
WorkersOption = Annotated[
    int | None,
    typer.Option(
        "--workers",
        min=1,
        help="Spread the points over a local Dask pool of N workers: one per GPU (at most the GPUs there are), "
        "or N CPU workers for CPU baselines alone. Needs gemmlab[scale].",
    ),
]
SchedulerOption = Annotated[
    str | None,
    typer.Option(
        "--scheduler",
        metavar="ADDRESS",
        help="Spread the points over a running Dask cluster (e.g. tcp://host:8786); this process alone stores them.",
    ),
]


def _whole_numbers(text: str, what: str, example: str) -> list[int]:
    """'256,512' -> [256, 512]: at least one whole number, any sign."""
    try:
        values = [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise GemmlabError(f"--{what} takes whole numbers separated by commas, not '{text}'.",
                           f"Example: --{what} {example}.") from None  # fmt: skip
    if not values:
        raise GemmlabError(f"--{what} needs at least one whole number (got '{text}').", f"Example: --{what} {example}.")
    return values


def parse_ints(text: str, what: str) -> list[int]:
    """'256,512' -> [256, 512], with a clear error for anything else."""
    values = _whole_numbers(text, what, "256,512,1024")
    if min(values) < 1:
        raise GemmlabError(f"--{what} needs positive whole numbers (got '{text}').", f"Example: --{what} 256,512.")
    return values


def parse_blocks(text: str, kernels: list[str]) -> list[int]:
    """--blocks '8,16' -> [8, 16]; an edge below 1 is refused with the edges of
    the sweep's ``kernels`` (names as given) where they are known."""
    values = _whole_numbers(text, "blocks", "16,32")
    bad = [v for v in values if v < 1]
    if bad:
        known = own_edges(kernels)
        listed = "; ".join(f"{k}: {','.join(map(str, edges))}" for k, edges in known.items())
        raise GemmlabError(
            f"--blocks {text}: a block edge counts threads along a side of the block, so it is positive; "
            f"{', '.join(map(str, bad))} {'is' if len(bad) == 1 else 'are'} not.",
            f"Give positive edges, such as each kernel's own ({listed}), or leave --blocks out to run those."
            if known
            else "Give positive edges, e.g. --blocks 16,32, or leave --blocks out to run each kernel's own.",
        )
    return values


def parse_params(texts: list[str]) -> dict[str, list[int] | None]:
    """['BK=8,16', 'WM'] -> {'BK': [8, 16], 'WM': None} (None: the declared values)."""
    params: dict[str, list[int] | None] = {}
    for text in texts:
        name, _, values = text.replace(" ", "").partition("=")
        if not name.isidentifier():
            raise GemmlabError(f"--param takes NAME=v1,v2 or NAME, not '{text}'.", "Example: --param BK=8,16.")
        if name in params:
            raise GemmlabError(
                f"--param {name} is given twice.", f"Give all of {name}'s values at once: --param {name}=8,16."
            )
        params[name] = parse_ints(values, f"param {name}=") if values else None
    return params


@app.command("sweep")
@friendly
def sweep_cmd(
    kernels: Annotated[
        str,
        typer.Option(help="Kernels, comma-separated: catalogue ids, cpu_naive, ..., or your declarations' paths."),
    ],
    sizes: Annotated[str, typer.Option(help="Square sizes N, comma-separated.")],
    blocks: Annotated[
        str | None, typer.Option(help="Block edges, comma-separated (default: each kernel's documented edges).")
    ] = None,
    dtype: Annotated[str | None, typer.Option(help="float32, int32, ... (default: each kernel's first).")] = None,
    db: DbOption = DEFAULT_PATH,
    force: ForceOption = False,
    reps: Annotated[int, typer.Option(min=1, help="Timed repetitions per point.")] = 20,
    max_seconds: Annotated[
        float, typer.Option(min=0.0, help="Cap on each point's timed series, in seconds (at least 3 repetitions).")
    ] = 2.0,
    profile: ProfileOption = False,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            help="A user's kernel's declared parameter (not its edge) to sweep: NAME=v1,v2, or NAME for its declared "
            "values; repeat for more (every combination runs).",
        ),
    ] = None,
    isolate: IsolateOption = False,
    timeout: TimeoutOption = None,
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
) -> None:
    """Run kernels x sizes x block edges and store every point; a second run resumes where the first stopped.

    A user's kernel runs with its parameters as declared (the edge from --blocks); --param sweeps the others.
    With --workers or --scheduler the points run on Dask workers, each worker process a point's isolation.
    """
    kernel_ids = [k for k in kernels.replace(" ", "").split(",") if k]
    shapes = [Shape.square(n) for n in parse_ints(sizes, "sizes")]
    edges = parse_blocks(blocks, kernel_ids) if blocks else None
    # Without a GPU, a plan with GPU points is refused here, before the database is created.
    planned = plan_points(kernel_ids, shapes, edges, dtype, reps=reps, params=parse_params(param or []))
    on_gpu = planned.on_gpu
    for label, why in planned.refused:
        err_console.print(f"[dim]skipped: {label}: {why}[/]", highlight=False)
    if profile and not on_gpu:
        console.print("--profile: nothing to profile (CPU baselines only).", highlight=False)
    with Store.open(db) as store, _pool(workers, scheduler, on_gpu) as pool:
        run_info = run_record() if profile and on_gpu else None
        profiler = _profiler(force, run_info) if run_info is not None else None
        # isolate None: the worker runs users' kernels only.
        summary = run_points(planned.points, store, force=force, max_seconds=max_seconds, console=err_console,
                             run_info=run_info, profiler=profiler, isolate=isolate or None, timeout=timeout,
                             pool=pool)  # fmt: skip
    _print_summary(summary)
    if profiler:
        _print_profile_summary(profiler)
    console.print(f"results in {db}", highlight=False)
    _exit_for(summary.interrupted, bool(summary.failed), not_profiled=profile and on_gpu and _none_profiled(profiler))


def _pool(workers: int | None, scheduler: str | None, on_gpu: bool) -> AbstractContextManager[Pool | None]:
    """The Dask pool the points run on, said; none (today's one point after another here) without either option."""
    pool = open_pool(workers, scheduler, on_gpu)
    if pool is None:
        return nullcontext()
    console.print(f"running on {pool.describe()}", highlight=False)
    return pool


@app.command()
@friendly
def reproduce(
    experiment_names: Annotated[
        list[str] | None, typer.Argument(metavar="[EXPERIMENT]...", help="Experiments to run (default: all).")
    ] = None,
    db: DbOption = DEFAULT_PATH,
    out: Annotated[Path, typer.Option("--out", help="Folder for the report.")] = DEFAULT_REPORT_DIR,
    list_only: Annotated[bool, typer.Option("--list", help="List the experiments and exit.")] = False,
    force: ForceOption = False,
    profile: ProfileOption = False,
    sizes: Annotated[
        str | None, typer.Option(help="Replace every experiment's sizes, e.g. 256 for a quick check.")
    ] = None,
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
) -> None:
    """Re-run the source documents' experiments on this machine and write the report beside their figures."""
    chosen = experiments(experiment_names)
    if list_only:
        _print_experiments(chosen)
        return
    size_list = parse_ints(sizes, "sizes") if sizes else None

    def announce(experiment: Experiment, n_points: int) -> None:
        console.rule(f"{experiment.name}: {experiment.title} ({n_points} points)")

    on_gpu = needs_gpu(k for e in chosen for k in e.kernels)
    with Store.open(db) as store, _pool(workers, scheduler, on_gpu) as pool:
        run_info = run_record()  # once: every experiment of this call shares the description
        profiler = _profiler(force, run_info) if profile else None
        outcomes = run_experiments(chosen, store, sizes=size_list, force=force, run_info=run_info,
                                   on_start=announce, pool=pool)  # fmt: skip
        failed = False
        for outcome in outcomes:
            name = outcome.experiment.name
            if outcome.status == "not built yet":
                console.print(f"{name}: not built yet ({', '.join(outcome.missing)} not in the catalogue); skipped.")
                continue
            console.print(f"[bold]{name}[/]", highlight=False)
            for label, why in outcome.left_out:
                console.print(f"  [dim]left out: {label}: {why}[/]", highlight=False)
            if outcome.summary is not None:
                _print_summary(outcome.summary, indent="  ")
                failed = failed or bool(outcome.summary.failed)
        if outcomes and outcomes[-1].status == "interrupted":
            _exit_for(True, failed)
        measured = [o.experiment.name for o in outcomes if o.status == "done"]
        if profiler:
            profile_experiments(profiler, store, measured, on_start=_say_profiling)
            _print_profile_summary(profiler)
    if measured:
        _write_report(db, out, measured)
    _exit_for(False, failed, not_profiled=profile and bool(measured) and _none_profiled(profiler))


def _profiler(force: bool, run_info: dict) -> Profiler | None:
    """The profiler of this run, with the device's ceilings measured into ``run_info``;
    None, after saying why, when Nsight Compute is missing (the timings go on)."""
    missing = ncu_missing()
    if missing is not None:
        err_console.print(f"[yellow]--profile[/]: {escape(str(missing))}", highlight=False, soft_wrap=True)
        err_console.print("Profiling is off; the timings are measured and stored without it.", highlight=False)
        return None
    console.print("measuring the roofline's ceilings (cuBLAS SGEMM, device-to-device copy)...", highlight=False)
    failure = measure_ceilings(run_info)
    if failure is not None:
        err_console.print(f"[yellow]no ceilings[/]: {escape(str(failure) or type(failure).__name__)}; the report "
                          "will have no roofline plot.", highlight=False, soft_wrap=True)  # fmt: skip
    else:
        peak, bandwidth = run_info["peak_gflops_measured"], run_info["bandwidth_gbs_measured"]
        console.print(f"  {peak:,.0f} GFLOP/s, {bandwidth:,.0f} GB/s", highlight=False)
    return make_profiler(force, run_info)


def _say_profiling(experiment: str) -> None:
    console.print(f"profiling {experiment} with Nsight Compute...", highlight=False)


def _none_profiled(profiler: Profiler | None) -> bool:
    """Nothing could be profiled: no profiler, or not one point profiled now or before."""
    return profiler is None or profiler.summary.profiled + profiler.summary.already == 0


def _print_profile_summary(profiler: Profiler) -> None:
    for line in profiler.summary.lines():
        if line.startswith(("not profiled", "profiling stopped")):
            err_console.print(f"  [yellow]{escape(line)}[/]", highlight=False, soft_wrap=True)
        else:
            console.print(f"  {line}", highlight=False)


def _write_report(db: Path, out: Path, names: list[str]) -> None:
    index = write_report(db, out, names)
    if index is None:
        console.print(f"The report is not built yet; the results are in {db}.", highlight=False)
        return
    console.print(f"report: {index}", highlight=False)


def _print_summary(summary: SweepSummary, indent: str = "") -> None:
    for line in summary.lines():
        style = "red" if line.startswith("FAILED") else "yellow" if line.startswith("interrupted") else None
        text = f"[{style}]{line}[/]" if style else line
        (err_console if style else console).print(indent + text, highlight=False, soft_wrap=True)


def _exit_for(interrupted: bool, failed: bool, not_profiled: bool = False) -> None:
    if interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    if failed:
        raise typer.Exit(EXIT_FAILED)
    if not_profiled:
        raise typer.Exit(EXIT_NOT_PROFILED)


def _print_experiments(chosen: list[Experiment]) -> None:
    for e in chosen:
        missing = e.missing_kernels()
        status = f"not built yet: {', '.join(missing)} not in the catalogue" if missing else f"{len(e.points())} points"
        console.print(f"[bold]{e.name}[/]  ({status})", highlight=False)
        console.print(f"  {e.title}", highlight=False)
        console.print(f"  from: {e.source_doc}", highlight=False)
        edges = " ".join(map(str, e.block_edges)) or "-"
        console.print(
            f"  kernels: {', '.join(e.kernels)}; sizes: {' '.join(map(str, e.sizes))}; block edges: {edges}",
            highlight=False,
        )
        for note in e.notes:
            console.print(f"  [dim]{note}[/]", highlight=False)
