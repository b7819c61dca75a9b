"""Sweeps: run many points, store each as soon as it is measured, resume.
The points come from :func:`gemmlab.studies.points.plan`.

A point is stored in its own transaction the moment its run ends, so a sweep
killed at any instant loses at most the point in flight, and running the same
sweep again skips what is stored (``force`` re-runs it). Points a kernel
cannot take are listed and skipped; a point whose result fails verification
(or that meets any error but a missing GPU or an unusable database) is
reported as a failure and stored as one (:meth:`Store.add_failure`, with its
kind and reason), and the sweep goes on; the next run measures it again.

A user's kernel (and every GPU point with ``isolate``) runs in the watchdog's
child process (:mod:`gemmlab.measure.watchdog`): a kernel that faults or hangs
is stopped there, stored as a failure of kind "fault" or "hang", and the next
point runs in a fresh child. The catalogue's kernels run in this process,
where they cost no process start and no pickling of results.

The runner is injectable: ``runner(kernel, shape, block_edge, dtype, *,
reps, warmup, max_seconds, variant)`` (and ``config``, for a point that sets
a user's kernel's parameters: :attr:`SweepPoint.runner_options`) returns a RunResult, a result dict, or a
list of them (an end-to-end point gives one row per kind of host memory).
The default, :func:`measure_point`, asks the kernel's backend
(:func:`gemmlab.backends.for_kernel`): a host backend measures the point
itself, a GPU kernel goes to :func:`gemmlab.measure.run.run`, or with
``variant="e2e"`` to :mod:`gemmlab.measure.endtoend`.

``after_point(point, rows)``, where given, follows every point that is in the
store (measured now or before) with its rows as :meth:`Store.rows` gives them:
`sweep --profile` profiles each point there (:class:`gemmlab.studies.reproduce.Profiler`).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gemmlab import backends
from gemmlab.backends.base import HostBackend
from gemmlab.core.errors import (
    ConstraintError,
    DeviceLimitError,
    GemmlabError,
    KernelStopped,
    NoGPUError,
    StoreError,
    VerificationError,
    failure_text,
)
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.measure import watchdog
from gemmlab.store.rows import compile_row, result_row
from gemmlab.store.store import Store
from gemmlab.studies.points import E2E, SweepPoint, kernel_backend, timed_point, variant_spec

if TYPE_CHECKING:
    from gemmlab.studies.scale import Pool

Runner = Callable[..., Any]


@dataclass
class SweepSummary:
    done: list[str] = field(default_factory=list)
    skipped_existing: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (point, why)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (point, what went wrong)
    interrupted: bool = False
    total: int = 0
    run_id: int | None = None  # the run that holds what this sweep stored (None: it stored nothing)

    def lines(self) -> list[str]:
        """The summary in words, one line each."""
        out = [f"{len(self.done)} measured and stored, {len(self.skipped_existing)} already stored"]
        out += [f"refused: {point}: {why}" for point, why in self.refused]
        out += [f"FAILED: {point}: {what}" for point, what in self.failed]
        if self.interrupted:
            left = self.total - len(self.done) - len(self.skipped_existing) - len(self.refused) - len(self.failed)
            out.append(
                f"interrupted: {len(self.done)} points stored in this run, {left} not run; "
                "run the same command again to resume (stored points are skipped)."
            )
        return out


# -- running ----------------------------------------------------------------


def measure_point(
    kernel: str,
    shape: Shape,
    block_edge: int,
    dtype: str,
    *,
    reps: int = 20,
    warmup: int = 2,
    max_seconds: float = 10.0,
    variant: str = "",
    config: Mapping[str, int] | None = None,
) -> Any:
    """The default runner: host kernels through their backend, GPU kernels
    (kernel time or end to end) through gemmlab's runner; ``config``: the
    parameters the point sets (:func:`variant_spec`)."""
    backend = backends.for_kernel(kernel)
    if isinstance(backend, HostBackend):
        return backend.measure(kernel, shape, dtype, reps=reps, max_seconds=max_seconds)
    if variant == E2E:
        from gemmlab.measure import endtoend

        if config:
            raise ValueError("an end-to-end point runs the kernel as declared; it takes no configuration")

        return endtoend.measure(kernel, shape, block_edge, dtype, reps=reps, warmup=warmup, max_seconds=max_seconds)
    if variant:
        raise ValueError(f"unknown point variant {variant!r}")
    from gemmlab.measure.run import run

    spec = variant_spec(kernel, config) if config else None
    return run(kernel, shape, block_edge, dtype, reps=reps, warmup=warmup, max_seconds=max_seconds, spec=spec)


def run_record(command_line: str | None = None) -> dict:
    """Where the sweep runs: this host, and the GPU when there is one."""
    from gemmlab.core import gpu
    from gemmlab.core.environment import host_record

    host = host_record()
    record = {
        "gemmlab_version": host["gemmlab_version"],
        "git_revision": host["git_revision"],
        "cpu": host["cpu"],
        "python": host["python"],
        "command_line": command_line if command_line is not None else shlex.join(sys.argv),
    }
    try:
        info = gpu.describe(0)
    except GemmlabError:
        return record
    record.update(
        gpu_name=info.name,
        cc=f"{info.cc[0]}.{info.cc[1]}",
        sm_clock_mhz=info.sm_clock_mhz,
        memory_clock_mhz=info.memory_clock_mhz,
        driver_version=info.driver_version,
        runtime_version=info.runtime_version,
    )
    record["nvrtc_version"] = local_nvrtc_version()
    return record


def local_nvrtc_version() -> str | None:
    """The version of the NVRTC this process compiles with; None without the NVRTC wheel."""
    try:
        from gemmlab.backends.nvrtc import nvrtc_version

        return nvrtc_version()
    except Exception:  # no NVRTC wheel (or one that cannot load): the version stays unknown
        return None


def compiles_of(results: list[Any]) -> list[dict]:
    """The compiles behind a point's results, one per distinct compile (the
    pinned and pageable rows of an end-to-end point share one), as the store
    keeps them with the run (:meth:`Store.add_compiles`): what the report's
    occupancy tables read later instead of compiling again."""
    found = [row for r in results if (row := compile_row(r, None)) is not None]
    if not found:
        return []
    version = local_nvrtc_version()
    unique = {tuple(row[key] for key in ("kernel", "block_edge", "dtype", "config", "arch")): row for row in found}
    return [{**row, "nvrtc_version": version} for row in unique.values()]


def sweep(
    points: Iterable[SweepPoint | tuple],
    store: Store,
    experiment: str | None = None,
    *,
    force: bool = False,
    runner: Runner | None = None,
    progress: bool = True,
    max_seconds: float = 2.0,
    run_info: dict | None = None,
    console: Any = None,
    after_point: Callable[[SweepPoint, list[dict]], None] | None = None,
    isolate: bool | None = None,
    timeout: float | None = None,
    pool: Pool | None = None,
) -> SweepSummary:
    """Run and store every point not stored yet; see the module's docstring.

    ``points`` are SweepPoints or (kernel, shape, block_edge, dtype) tuples;
    ``runner`` defaults to :func:`measure_point`.
    ``max_seconds`` caps each point's timed series (at least 3 repetitions).
    ``isolate``: True runs every GPU point in the watchdog's worker, False
    none; None (the default) the points of users' kernels when the runner is
    the default one (an injected runner runs in this process unless asked).
    ``timeout``: the worker's time limit per point in seconds (default:
    :func:`gemmlab.measure.watchdog.point_time_limit`). A runner for isolated
    points must pickle (a module-level function or a partial of one).
    Ctrl-C stops after storing what is done; the summary says so
    (``interrupted``) and the same call resumes.
    ``pool``: run the points not stored yet on a Dask pool's workers
    (:mod:`gemmlab.studies.scale`) instead, and store each as it comes back.
    """
    if isolate is None and runner is not None:
        isolate = False  # an injected runner (a test's fake) runs here unless asked
    runner = runner or measure_point
    todo = [p if isinstance(p, SweepPoint) else timed_point(*p) for p in points]
    summary = SweepSummary(total=len(todo))
    run_ids: list[int] = []

    def run_id() -> int:  # one run record for everything this call stores, made at the first
        if not run_ids:
            run_ids.append(store.start_run(run_info if run_info is not None else run_record()))
            summary.run_id = run_ids[0]
        return run_ids[0]

    bar = _Progress(len(todo), console) if progress else None

    def stored_before(p: SweepPoint) -> bool:
        """Whether ``p`` is in the store already (then it is skipped, and counted so)."""
        if force or not all(store.has_point(experiment, key) for key in p.keys()):
            return False
        summary.skipped_existing.append(p.label)
        if after_point:
            after_point(p, store.point_rows(experiment, p.keys()))
        if bar:
            bar.advance("already stored")
        return True

    def failed(p: SweepPoint, exc: Exception) -> None:
        """A point that did not give a figure: refused, or a failure stored as one."""
        if isinstance(exc, (ConstraintError, DeviceLimitError)):
            summary.refused.append((p.label, exc.cause))
            if bar:
                bar.advance("refused", note=f"refused: {p.label}: {exc.cause}")
            return
        # A bug met on one point should not cost the rest of a long unattended
        # run either: it is reported and stored as a failure (and the command exits non-zero).
        what = failure_text(exc)
        summary.failed.append((p.label, what))
        for failure in failure_rows(p, exc):
            store.add_failure(run_id(), experiment, failure)
        if bar:
            bar.advance("FAILED", note=f"[red]FAILED[/]: {p.label}: {what}")

    def measured(p: SweepPoint, result: Any) -> None:
        results = result if isinstance(result, list) else [result]
        rows = [_with_analytic_cgma(result_row(r)) for r in results]
        store.add_results(run_id(), experiment, rows)
        store.add_compiles(run_id(), compiles_of(results))
        summary.done.append(p.label)
        if after_point:
            after_point(p, store.point_rows(experiment, p.keys()))
        if bar:
            bar.advance(headline(rows[0]))

    worker = watchdog.Worker()
    try:
        if pool is not None:
            left = [p for p in todo if not stored_before(p)]
            for p, answer in _pool_answers(left, pool, runner, max_seconds, timeout):
                if isinstance(answer, Exception):
                    failed(p, answer)
                else:
                    measured(p, answer)
            return summary
        for p in todo:
            if bar:
                bar.start(p.label)
            if stored_before(p):
                continue
            try:
                result = _measured(p, runner, worker if _isolated(p, isolate) else None, max_seconds, timeout)
            except (NoGPUError, StoreError):
                raise  # the same for every point that follows
            except Exception as exc:
                failed(p, exc)
                continue
            measured(p, result)
    except KeyboardInterrupt:
        summary.interrupted = True
    finally:
        worker.close()
        if bar:
            bar.stop()
    return summary


def _isolated(point: SweepPoint, isolate: bool | None) -> bool:
    """Whether ``point`` runs in the watchdog's worker: any GPU kernel with
    ``isolate`` True, none with False, a user's kernel with None; host kernels
    never (they cannot hang the GPU)."""
    if backends.on_host(point.kernel) or isolate is False:
        return False
    return isolate or catalogue.get(point.kernel).declaration is not None


def _measured(point: SweepPoint, runner: Runner, worker: watchdog.Worker | None, max_seconds: float,
              timeout: float | None) -> Any:  # fmt: skip
    """The runner's answer for ``point``: in this process, or in ``worker``
    with a time limit (a user's kernel is named there by its declaration's path)."""
    options = {"reps": point.reps, "warmup": point.warmup, "max_seconds": max_seconds, "variant": point.variant,
               **point.runner_options}  # fmt: skip
    if worker is None:
        return runner(point.kernel, point.shape, point.block_edge, point.dtype, **options)
    limit = timeout or watchdog.point_time_limit(point.kernel, point.shape, point.block_edge, reps=point.reps,
                                                 warmup=point.warmup, max_seconds=max_seconds)  # fmt: skip
    kernel = catalogue.reference(point.kernel)
    return worker.call(point.label, limit, runner, kernel, point.shape, point.block_edge, point.dtype, **options)


# -- running on a Dask pool (gemmlab.studies.scale) ---------------------------
#
# Each point runs in a Dask worker process, which is its isolation: a fault that
# ends the process costs that point only (stored as a fault), and the nanny starts
# a fresh worker; a GPU point past its time limit has its worker's process ended
# the same way (stored as a hang). This process alone writes the store, as each
# answer comes back.


def _pool_answers(points: list[SweepPoint], pool: Pool, runner: Runner, max_seconds: float,
                  timeout: float | None = None) -> Iterator[tuple[SweepPoint, Any]]:  # fmt: skip
    """Each point with its runner's answer, or the exception it met, as they
    finish on the pool's workers; a GPU point past its time limit (``timeout``,
    or the watchdog's for the point) is stopped there and met a hang."""
    # A user's kernel is named by its declaration's path in another process (as in the watchdog's child).
    items = [(p, catalogue.reference(p.kernel)) for p in points]
    run = functools.partial(_run_on_worker, runner=runner, max_seconds=max_seconds)

    def limit(item: tuple[SweepPoint, str]) -> float | None:
        point = item[0]
        if backends.on_host(point.kernel):
            return None
        return timeout or watchdog.point_time_limit(point.kernel, point.shape, point.block_edge, reps=point.reps,
                                                    warmup=point.warmup, max_seconds=max_seconds)  # fmt: skip

    for (point, _), outcome in pool.map(run, items, key=lambda item: item[0].label, limit_s=limit):
        if outcome.ok:
            yield point, outcome.value
            continue
        if outcome.hung:
            yield (
                point,
                KernelStopped(
                    "hang",
                    f"hang: {point.label} {outcome.error}.",
                    "If the point is only slow, give it more time with --timeout SECONDS.",
                ),
            )
            continue
        exc = outcome.exception
        if isinstance(exc, (NoGPUError, StoreError)):
            raise exc  # the same for every point that follows
        if not isinstance(exc, Exception) or type(exc).__name__ == "KilledWorker":
            exc = KernelStopped(
                "fault",
                f"fault: {point.label}: {outcome.error}.",
                "Run `gemmlab check` on the kernel (compute-sanitizer) to find the faulting access and its line.",
            )
        yield point, exc


def _run_on_worker(item: tuple[SweepPoint, str], *, runner: Runner, max_seconds: float) -> Any:
    """A point measured in a Dask worker. An error that leaves the worker's CUDA
    context unusable ends the process, so that no later point runs in it."""
    point, kernel = item
    try:
        return _measured(dataclasses.replace(point, kernel=kernel), runner, None, max_seconds, None)
    except Exception as exc:
        if watchdog.poisoning_error(exc) is not None:
            print(f"gemmlab: {point.label}: {exc}; ending this worker's process", file=sys.stderr, flush=True)
            os._exit(70)
        raise


def failure_kind(exc: Exception) -> str:
    """How a failed point is stored (store.store.FAILURE_KINDS)."""
    if isinstance(exc, KernelStopped):
        return exc.kind
    return "wrong" if isinstance(exc, VerificationError) else "error"


def failure_rows(point: SweepPoint, exc: Exception) -> list[dict]:
    """The failure records of ``point`` (one per row it would store), with the
    kind and a reason that names the point."""
    kind, what = failure_kind(exc), failure_text(exc)
    reason = what if isinstance(exc, KernelStopped) else f"{kind}: {point.label}: {what}"
    s, spec = point.shape, None if backends.on_host(point.kernel) else catalogue.get(point.kernel)
    common = {
        "kernel": point.kernel, "m": s.m, "n": s.n, "k": s.k, "block_edge": point.block_edge, "dtype": point.dtype,
        "backend": kernel_backend(point.kernel), "config": point.run_config,
        "source": str(spec.declaration) if spec is not None and spec.declaration is not None else "",
        "kind": kind, "reason": reason,
    }  # fmt: skip
    return [dict(common, variant=v) for v in point.row_variants]


def headline(row: dict) -> str:
    """The point's figure as people read it: GB/s for memory-bound kernels, else GFLOPS."""
    if row.get("metric") == "gbs":
        return f"{row.get('gbytes_per_s') or 0:,.1f} GB/s"
    text = f"{row.get('gflops') or 0:,.1f} GFLOPS"
    if row.get("e2e_gflops"):
        text += f" ({row['e2e_gflops']:,.1f} end to end, {row['host_memory']})"
    return text


def _with_analytic_cgma(row: dict) -> dict:
    """The backend's structural CGMA, stored with the row so reports need no profiler for it.
    Memory-bound kernels (metric "gbs") do no arithmetic, so they get none."""
    if row.get("cgma_analytic") is None and row.get("metric") != "gbs":
        try:
            kernel = row["kernel"]
            shape = Shape(row["m"], row["n"], row["k"])
            row["cgma_analytic"] = backends.for_kernel(kernel).analytic_cgma(kernel, shape, row["block_edge"])
        except (GemmlabError, ArithmeticError):
            pass
    return row


class _Progress:
    """A rich progress bar: the point being run, the last figure, time left."""

    def __init__(self, total: int, console: Any = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[figure]}"),
            TimeRemainingColumn(),
            console=console or Console(stderr=True),
        )
        self._task = self._progress.add_task("", total=total, figure="")
        self._progress.start()

    def start(self, label: str) -> None:
        self._progress.update(self._task, description=label)

    def advance(self, figure: str, note: str | None = None) -> None:
        if note:
            self._progress.console.print(note, highlight=False)
        self._progress.update(self._task, advance=1, figure=f"last: {figure}")

    def stop(self) -> None:
        self._progress.stop()
