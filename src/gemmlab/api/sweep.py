"""Sweeps from Python and from the command line: kernels x shapes x block
edges, each point stored as soon as it is measured (:func:`sweep`, `gemmlab
sweep`), and the source documents' experiments run into the store with their
report (`gemmlab reproduce`).

The Python function and `gemmlab sweep` take the same two steps:
:func:`plan_points` (the points, those a kernel cannot take with the reason,
and a missing GPU said before anything is stored) and :func:`run_points`
(every point not stored yet, measured and stored, each profiled right after
it when a profiler is given). The command line adds what only it offers: a
Dask pool (:func:`open_pool`) and Nsight Compute's profiles beside the
roofline's ceilings (:func:`~gemmlab.measure.ncu.command.ncu_missing`, :func:`measure_ceilings`,
:func:`make_profiler`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gemmlab import backends
from gemmlab.api.kernels import Kernel, kernel
from gemmlab.api.results import Sweep
from gemmlab.core.errors import DeclarationError, GemmlabError, NoGPUError
from gemmlab.core.shapes import Shape
from gemmlab.measure.ncu.command import ncu_missing
from gemmlab.store.store import DEFAULT_PATH, Store
from gemmlab.studies.points import SweepPoint
from gemmlab.studies.sweep import SweepSummary

if TYPE_CHECKING:
    from gemmlab.studies.experiments.base import Experiment
    from gemmlab.studies.reproduce import Outcome, Profiler
    from gemmlab.studies.scale import Pool

__all__ = [
    "Plan",
    "SweepPoint",
    "SweepSummary",
    "experiments",
    "make_profiler",
    "measure_ceilings",
    "ncu_missing",
    "needs_gpu",
    "open_pool",
    "own_edges",
    "plan_points",
    "profile_experiments",
    "run_experiments",
    "run_points",
    "run_record",
    "sweep",
    "write_report",
]


def sweep(
    kernels: Sequence[str | Path | Kernel],
    sizes: Iterable[int] | None = None,
    *,
    shapes: Iterable[tuple[int, int, int]] | None = None,
    blocks: Sequence[int] | None = None,
    dtype: str | None = None,
    db: str | Path = DEFAULT_PATH,
    experiment: str | None = None,
    force: bool = False,
    reps: int = 20,
    max_seconds: float = 2.0,
    progress: bool = False,
) -> Sweep:
    """Kernels x shapes x block edges, every point stored in ``db`` as it is
    measured; calling it again resumes (stored points are skipped, ``force``
    measures them again). ``sizes``: square shapes; ``shapes``: (M, N, K)s."""
    wanted = [Shape.square(s) for s in sizes or ()] + [Shape(*s) for s in shapes or ()]
    if not wanted:
        raise DeclarationError("a sweep needs sizes or shapes.", "Give sizes=[256, 512] or shapes=[(M, N, K)].")
    # The CPU baselines have no spec; every other kernel is named by its id from here on.
    names = [k if isinstance(k, str) and backends.on_host(k) else kernel(k).id for k in kernels]
    planned = plan_points(names, wanted, blocks, dtype, reps=reps)
    with Store.open(db) as store:
        summary = run_points(planned.points, store, experiment, force=force, progress=progress,
                             max_seconds=max_seconds)  # fmt: skip
    summary.refused[:0] = planned.refused
    return Sweep(summary, Path(db), experiment, [p.kernel for p in planned.points])


@dataclass
class Plan:
    """A sweep's points, and those its kernels cannot take."""

    points: list[SweepPoint]
    refused: list[tuple[str, str]]  # (point, why)

    @property
    def on_gpu(self) -> bool:
        return needs_gpu(p.kernel for p in self.points)


def plan_points(
    kernels: Sequence[str],
    shapes: Sequence[Shape],
    blocks: Sequence[int] | None = None,
    dtype: str | None = None,
    *,
    reps: int = 20,
    params: Mapping[str, Sequence[int] | None] | None = None,
) -> Plan:
    """Kernels (ids, CPU baselines or users' declarations' paths) x shapes x
    block edges (None: each kernel's own) x users' declared parameters'
    values (:func:`gemmlab.studies.points.plan`). A plan with GPU points on a
    machine without a GPU raises NoGPUError here: every one of them would fail
    alike, so it is said before the database is created or any CPU point is measured."""
    from gemmlab.core import gpu
    from gemmlab.studies.points import plan

    points, refused = plan(kernels, shapes, blocks, dtype, reps=reps, params=params)
    planned = Plan(points, refused)
    if planned.on_gpu:
        gpu.cupy()
    return planned


def run_points(
    points: Sequence[SweepPoint],
    store: Store,
    experiment: str | None = None,
    *,
    force: bool = False,
    max_seconds: float = 2.0,
    progress: bool = True,
    console: Any = None,
    run_info: dict | None = None,
    profiler: Profiler | None = None,
    isolate: bool | None = None,
    timeout: float | None = None,
    pool: Pool | None = None,
) -> SweepSummary:
    """Measure and store every point of ``points`` not in ``store`` yet
    (:func:`gemmlab.studies.sweep.sweep`: ``isolate`` None runs users' kernels
    in the watchdog's worker, True every GPU point). ``profiler``: each point's
    rows are profiled as soon as they are stored, or found stored."""
    from gemmlab.studies.sweep import sweep as measure_and_store

    def profile_stored(point: SweepPoint, rows: list[dict]) -> None:
        if profiler is not None:
            profiler.profile(store, rows)

    return measure_and_store(points, store, experiment, force=force, progress=progress, max_seconds=max_seconds,
                             console=console, run_info=run_info, after_point=profile_stored if profiler else None,
                             isolate=isolate, timeout=timeout, pool=pool)  # fmt: skip


def needs_gpu(kernels: Iterable[str]) -> bool:
    """Whether any of ``kernels`` runs on the GPU (anything but the CPU baselines)."""
    return any(not backends.on_host(k) for k in kernels)


def own_edges(kernels: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """The block edges each kernel documents, by id; kernels without an edge, or
    that cannot be found (the sweep's plan names those), are left out."""
    found = {}
    for name in kernels:
        try:
            kernel_id = backends.kernel_id(name)
            edges = backends.for_kernel(kernel_id).block_edges(kernel_id)
        except GemmlabError:
            continue
        if edges != (0,):
            found[kernel_id] = edges
    return found


def run_record() -> dict:
    """What describes this run (the command line, the machine, the versions),
    made once per command so that everything it stores shares it."""
    from gemmlab.studies.sweep import run_record as record

    return record()


def open_pool(workers: int | None, scheduler: str | None, on_gpu: bool) -> Pool | None:
    """The Dask pool the points run on, opened (the caller closes it, or uses
    it in a ``with``): the running cluster at ``scheduler``, else a local one of
    ``workers`` (one per GPU, at most the GPUs there are; CPU workers when no
    point needs a GPU); None (today's one point after another here) without either option."""
    if workers is None and scheduler is None:
        return None
    from gemmlab.core import gpu
    from gemmlab.studies.scale import Pool

    if scheduler is not None:
        pool = Pool(scheduler)
    else:
        assert workers is not None  # without a scheduler, the number of workers was given
        pool = Pool(gpus=min(workers, gpu.device_count())) if on_gpu else Pool(gpus=0, cpu_workers=workers)
    pool.open()
    return pool


# -- profiling: `sweep --profile` and `reproduce --profile` --------------------


def measure_ceilings(run_info: dict) -> Exception | None:
    """Measure the roofline's ceilings (cuBLAS SGEMM's rate, a device-to-device
    copy's bandwidth) into ``run_info``; None when they were, else the error
    that stopped them. A missing GPU is raised."""
    from gemmlab.measure import roofline

    try:
        peak, bandwidth = roofline.measure_ceilings()
    except NoGPUError:
        raise
    except Exception as exc:  # an optional figure: its failure (out of memory, say) must not cost the run
        return exc
    run_info.update(peak_gflops_measured=peak, bandwidth_gbs_measured=bandwidth)
    return None


def make_profiler(force: bool, run_info: dict) -> Profiler:
    """The profiler of this run: Nsight Compute on each stored GPU point, the
    rows given the ceilings measured into ``run_info`` (:func:`measure_ceilings`)."""
    from gemmlab.measure.ncu import command as ncu
    from gemmlab.store.store import CEILING_FIELDS
    from gemmlab.studies.reproduce import Profiler

    ceilings = {key: run_info.get(key) for key in CEILING_FIELDS}
    return Profiler(ncu.profile_point, force=force, ceilings=ceilings, gpu_name=run_info.get("gpu_name"))


# -- the documents' experiments: `gemmlab reproduce` ---------------------------


def experiments(names: Sequence[str] | None = None) -> list[Experiment]:
    """The experiments named (None: all of studies/experiments/), in their order;
    UnknownName, with the close names, for one that is not there."""
    from gemmlab.studies.experiments import select

    return select(names)


def run_experiments(
    chosen: Sequence[Experiment],
    store: Store,
    *,
    sizes: Sequence[int] | None = None,
    force: bool = False,
    run_info: dict | None = None,
    on_start: Callable[[Experiment, int], None] | None = None,
    pool: Pool | None = None,
) -> list[Outcome]:
    """Run ``chosen`` into ``store``, resuming (:func:`gemmlab.studies.reproduce.reproduce`);
    ``sizes`` replaces every experiment's. Stops after one that was interrupted."""
    from gemmlab.studies.reproduce import reproduce

    return reproduce([e.name for e in chosen], store, sizes=sizes, force=force, run_info=run_info,
                     on_start=on_start, pool=pool)  # fmt: skip


def profile_experiments(
    profiler: Profiler, store: Store, names: Sequence[str], on_start: Callable[[str], None] | None = None
) -> None:
    """Profile the stored GPU points of each experiment of ``names`` (``on_start(name)``
    before each), until the profiler stops for good."""
    for name in names:
        if profiler.summary.stopped:
            break
        if on_start:
            on_start(name)
        profiler.profile(store, store.rows(name))


def write_report(db: Path, out: Path, names: Sequence[str]) -> Path | None:
    """The report of the experiments ``names`` from ``db``, written into
    ``out``: its index page; None where gemmlab.report is not built yet (the
    results stay in ``db``)."""
    try:
        from gemmlab.report import write_report as write
    except ModuleNotFoundError as exc:
        if exc.name != "gemmlab.report":
            raise
        return None
    return write(db, out, list(names))
