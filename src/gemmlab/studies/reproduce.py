"""`gemmlab reproduce`: run the documents' experiments into the store, and
profile their points (the one profiling path of `reproduce --profile` and
`sweep --profile`).

Time budget (all six on one H100/H200 in well under ten minutes):

- every point's timed series is capped at ``REPRODUCE_MAX_SECONDS`` (the
  runner then stops repeating, keeping at least 3 repetitions);
- points that :func:`gemmlab.studies.sweep.predicted_ms` expects to take over half a
  second per launch (int32 at 4096 with 1x1 or 2x2 blocks, tiled with edge 1
  at 2048...) get 3 repetitions and a single warm-up;
- the single-thread naive CPU loop runs up to N = 1024 only: at 2048 it takes
  minutes (the Kursk paper: 103 s on a Core i7 4770), and its trend is plain
  from the three smaller sizes. The cache-blocked loop and BLAS run at all
  four sizes. Give ``sizes`` explicitly to change that.

Measured: all six experiments (210 points, 260 rows) took 79 s on an H200;
the longest points are tiled_i32 at 4096 with edge 1 (3.6 s a launch) and
cpu_naive at 1024 (3.8 s a call).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gemmlab import backends
from gemmlab.core.errors import GemmlabError, NoGPUError, ProfilerError
from gemmlab.core.shapes import Shape
from gemmlab.store.store import Store
from gemmlab.studies.experiments import select
from gemmlab.studies.experiments.base import REPRODUCE_REPS, Experiment
from gemmlab.studies.points import SweepPoint
from gemmlab.studies.sweep import SweepSummary, compiles_of, sweep

if TYPE_CHECKING:
    from gemmlab.studies.scale import Pool

REPRODUCE_MAX_SECONDS = 1.0
# Profiling stops after this many profiler errors in a row.
PROFILER_GIVE_UP = 3


@dataclass
class Outcome:
    """What reproducing one experiment did."""

    experiment: Experiment
    status: str  # "done", "not built yet", "interrupted"
    missing: list[str] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)
    summary: SweepSummary | None = None


def reproduce(
    requested: Sequence[str] | None,
    store: Store,
    *,
    sizes: Sequence[int] | None = None,
    force: bool = False,
    runner: Callable[..., object] | None = None,
    progress: bool = True,
    reps: int = REPRODUCE_REPS,
    max_seconds: float = REPRODUCE_MAX_SECONDS,
    run_info: dict | None = None,
    on_start: Callable[[Experiment, int], None] | None = None,
    pool: Pool | None = None,
) -> list[Outcome]:
    """Run the experiments into ``store`` (resuming: stored points are skipped).

    Stops after an experiment that was interrupted (Ctrl-C).
    ``on_start(experiment, n_points)`` is called before each sweep.
    ``pool``: run each experiment's points on a Dask pool's workers (:mod:`gemmlab.studies.scale`).
    """
    outcomes = []
    chosen = select(requested)
    if run_info is None and any(not e.missing_kernels() for e in chosen):
        from gemmlab.studies.sweep import run_record

        run_info = run_record()  # once: every experiment of this call shares the description
    for experiment in chosen:
        missing = experiment.missing_kernels()
        if missing:
            outcomes.append(Outcome(experiment, "not built yet", missing=missing))
            continue
        points, left_out = experiment.plan(sizes, reps)
        if on_start:
            on_start(experiment, len(points))
        summary = sweep(points, store, experiment.name, force=force, runner=runner, progress=progress,
                        max_seconds=max_seconds, run_info=run_info, pool=pool)  # fmt: skip
        if summary.run_id is not None and experiment.layout.document_cc:
            store.add_compiles(summary.run_id, document_compiles(experiment.layout.document_cc, points))
        outcome = Outcome(experiment, "interrupted" if summary.interrupted else "done", [], left_out, summary)
        outcomes.append(outcome)
        if summary.interrupted:
            break
    return outcomes


def document_compiles(document_cc: str, points: Sequence[SweepPoint]) -> list[dict]:
    """The compiles the report's table of the document's GPU uses, made while
    measuring and stored with the run: each catalogue kernel and block edge of
    ``points`` for :func:`gemmlab.measure.kernel_occupancy.compile_arch_for`
    of ``document_cc`` (sm_75 for the 2014 report's 1.2, older than any NVRTC
    target). A compile that fails is left out; the report then compiles it
    itself, and says so."""
    from gemmlab.backends.nvrtc import compile_kernel
    from gemmlab.kernels import catalogue
    from gemmlab.measure.kernel_occupancy import compile_arch_for

    arch = compile_arch_for(document_cc)
    wanted = dict.fromkeys((p.kernel, p.block_edge, p.dtype) for p in points
                           if p.config is None and p.kernel in catalogue.kernel_ids())  # fmt: skip
    results = []
    for kernel, edge, dtype in wanted:
        spec = catalogue.get(kernel)
        try:
            compiled = compile_kernel(spec, edge, dtype, spec.compile_arch(arch))
        except (GemmlabError, ImportError):
            continue
        results.append({"kernel": kernel, "block_edge": edge, "dtype": dtype, "config": spec.config,
                        "arch": compiled.arch, "resources": compiled.resources})  # fmt: skip
    return compiles_of(results)


@dataclass
class ProfileSummary:
    profiled: int = 0
    already: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (point, what went wrong)
    stopped: str | None = None  # the profiler error that ended profiling

    def lines(self) -> list[str]:
        """The summary in words, one line each."""
        out = [f"{self.profiled} profiled, {self.already} already profiled"]
        out += [f"not profiled: {point}: {what}" for point, what in self.failed if what != self.stopped]
        if self.stopped:
            alike = sum(what == self.stopped for _, what in self.failed)
            out.append(
                f"profiling stopped after {alike} points failed alike: {self.stopped} "
                "The timings are stored; run the same command with --profile again to profile them."
            )
        return out


class Profiler:
    """Profiles stored GPU points and attaches the metrics to their rows: the one
    code path of `reproduce --profile` (an experiment's rows at a time) and
    `sweep --profile` (each point's rows as soon as they are stored).

    ``profile_point(kernel_id, shape, block_edge, dtype)`` returns a dict of
    metrics (or an object with ``to_dict()``), see ``Store.update_profile``.
    The pinned and pageable rows of an end-to-end point share the kernel, so
    they share the profile. Points already profiled are skipped unless
    ``force``. A point whose profile fails is listed and skipped; after
    PROFILER_GIVE_UP profiler errors in a row (a missing or broken profiler
    fails every point the same way) profiling stops for good, and
    ``summary.stopped`` says why. ``ceilings`` (the ``peak_gflops_measured``
    and ``bandwidth_gbs_measured`` of this run, on GPU ``gpu_name``) go to the
    runs of profiled rows that have none (see ``Store.fill_ceilings``).
    """

    def __init__(
        self,
        profile_point: Callable[..., object],
        *,
        force: bool = False,
        ceilings: dict | None = None,
        gpu_name: str | None = None,
    ) -> None:
        self.profile_point = profile_point
        self.force = force
        self.ceilings = ceilings or {}
        self.gpu_name = gpu_name
        self.summary = ProfileSummary()
        self._failures_in_a_row = 0

    def profile(self, store: Store, rows: list[dict]) -> ProfileSummary:
        """Profile the GPU points of ``rows`` (stored rows); returns what this call did,
        which is also added to ``summary``."""
        groups: dict[tuple, list[dict]] = {}
        for row in rows:
            if not backends.on_host(row["kernel"]):
                key = (row["kernel"], row["m"], row["n"], row["k"], row["block_edge"], row["dtype"])
                groups.setdefault(key, []).append(row)
        done = ProfileSummary()
        for (kernel, m, n, k, edge, dtype), point_rows in groups.items():
            if self.summary.stopped:
                break
            if not self.force and all(r["profile_json"] is not None for r in point_rows):
                done.already += 1
                continue
            try:
                metrics = self.profile_point(kernel, Shape(m, n, k), edge, dtype)
            except NoGPUError:
                raise
            except GemmlabError as exc:
                done.failed.append((f"{kernel} {Shape(m, n, k)} b{edge} {dtype}", str(exc)))
                self._failures_in_a_row += 1
                if isinstance(exc, ProfilerError) and self._failures_in_a_row >= PROFILER_GIVE_UP:
                    self.summary.stopped = done.stopped = str(exc)
                continue
            self._failures_in_a_row = 0
            data = metrics.to_dict() if hasattr(metrics, "to_dict") else dict(metrics)  # type: ignore[call-overload]
            for row in point_rows:
                store.update_profile(row["id"], data)
            store.fill_ceilings(sorted({r["run_id"] for r in point_rows}), self.gpu_name, self.ceilings)
            done.profiled += 1
        self.summary.profiled += done.profiled
        self.summary.already += done.already
        self.summary.failed += done.failed
        return done


def profile_experiment(
    store: Store, experiment: str, profile_point: Callable[..., object], *, force: bool = False
) -> ProfileSummary:
    """Profile every stored GPU point of ``experiment`` once (see :class:`Profiler`)."""
    return Profiler(profile_point, force=force).profile(store, store.rows(experiment))
