"""The dispatcher's tuning (`gemmlab dispatch tune`, and autotuning's
timing): per shape of a suite, the candidates of :func:`gemmlab.studies.dispatch.candidates`
compiled, then verified and timed beside cuBLAS through the runner, every
verified one stored (experiment ``dispatch``), and the fastest stored as the
shape's pick. What the dispatcher ran before is timed first, so that a tuning
never makes a tuned shape slower (:func:`incumbent`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gemmlab.core.errors import (
    CompileError,
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
from gemmlab.store.records import Config, Pick
from gemmlab.store.store import Store
from gemmlab.studies.candidates import Device, Runner, current_device, measure_candidate
from gemmlab.studies.costmodel import Calibration, GPUModel, Timed, timed_rows
from gemmlab.studies.dispatch import EXPERIMENT, PER_RUNG, Candidate, candidates, choose, resident
from gemmlab.studies.shipped import merged, shipped_measurements, shipped_picks
from gemmlab.studies.suite import Suite

# The seconds a shape may spend timing its candidates, so that the quick suite
# tunes in a few minutes (a candidate takes about half a second once compiled).
# Compiling is not counted: a shape's candidates are compiled first
# (:func:`compile_candidates`, COMPILE_THREADS at once), since on a fresh
# machine the large-tile rungs take seconds each to compile: counted, that left
# candidates untimed (docs/sgemm-ladder.md, "The tuner's budget").
SHAPE_SECONDS = 10.0
COMPILE_THREADS = 4


@dataclass
class DispatchSummary:
    gpu_name: str
    cc: str
    picked: list[Pick] = field(default_factory=list)  # the picks stored in the dispatch table
    already: list[str] = field(default_factory=list)  # shapes with a pick stored before
    kept: list[str] = field(default_factory=list)  # shapes whose choice before tuning stayed the fastest
    notes: list[str] = field(default_factory=list)  # rungs passed over
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (candidate at shape, why)
    rejected: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    unfilled: list[tuple[str, str]] = field(default_factory=list)  # (shape dtype, why no pick)
    out_of_budget: bool = False
    interrupted: bool = False

    def lines(self) -> list[str]:
        out = [f"on {self.gpu_name} (cc {self.cc}): {len(self.picked)} shapes tuned, "
               f"{len(self.already)} already tuned"]  # fmt: skip
        if self.kept:
            out.append(f"{len(self.kept)} of the shapes tuned kept what the dispatcher ran before (timed first, "
                       "it stayed the fastest)")  # fmt: skip
        out += [f"note: {n}" for n in dict.fromkeys(self.notes)]
        out += [f"skipped: {label}: {why}" for label, why in self.skipped]
        out += [f"REJECTED (wrong result): {label}: {why}" for label, why in self.rejected]
        out += [f"FAILED: {label}: {why}" for label, why in self.failed]
        out += [f"no pick for {where}: {why}" for where, why in self.unfilled]
        if self.out_of_budget:
            out.append("time budget spent: run again to go on (tuned shapes are skipped).")
        if self.interrupted:
            out.append("interrupted: run again to resume (tuned shapes are skipped).")
        return out


# compiler(candidates, shape, dtype, arch): compiles them into the cubin cache; failures are left for the runner.
Compiler = Callable[[Sequence[Candidate], Shape, str, str], None]


def compile_candidates(found: Sequence[Candidate], shape: Shape, dtype: str, arch: str) -> None:
    """Compile ``found`` at ``shape`` into the cubin cache, COMPILE_THREADS at
    a time, so that the runner later only loads them. NVRTC's compile call
    runs without the GIL (cuda-python's bindings release it; the CPU tests
    compile in two threads for the same reason). A candidate that does not
    compile is left for the runner, which reports it as skipped."""
    from concurrent.futures import ThreadPoolExecutor

    from gemmlab.backends.nvrtc import compile_kernel

    def build(candidate: Candidate) -> None:
        try:
            point = catalogue.point(candidate.kernel, shape, dtype=dtype, spec=candidate.spec)
            compile_kernel(point.spec, point.block_edge, point.dtype, point.spec.compile_arch(arch))
        except GemmlabError:
            pass

    if not found:
        return
    build(found[0])  # imports the compiler's modules before threads race to
    with ThreadPoolExecutor(COMPILE_THREADS) as pool:
        list(pool.map(build, found[1:]))


def tune_suite(
    suite: Suite, store: Store, *, dtypes: Sequence[str] | None = None, runner: Runner | None = None,
    device: Device | None = None, run_record: dict | None = None, per_rung: int = PER_RUNG,
    force: bool = False, budget_seconds: float | None = None, max_seconds: float = 5.0,
    rungs: Sequence[str] | None = None, on_candidate: Callable[[str], None] | None = None,
    shape_seconds: float | None = SHAPE_SECONDS, compiler: Compiler | None = None,
    picks_before: Sequence[Pick] | None = None,
) -> DispatchSummary:  # fmt: skip
    """Tune the dispatcher on every shape of ``suite`` in each of ``dtypes``
    (default: the suite's) and store the fastest verified pick per shape.
    ``device``: the GPU the picks are filed under and pruned for, default GPU 0. A shape
    with a stored pick on this GPU is skipped unless ``force``. ``rungs``:
    try these for every shape instead of its class's (each where it has the
    element type). ``shape_seconds``: start no more candidates of a shape after
    this many seconds of timing them (None: no limit). ``compiler``: compiles
    a shape's candidates before they are timed, outside that budget (default:
    :func:`compile_candidates` with the default runner, none with another).

    Tuning never makes a shape slower: what the dispatcher ran for a shape
    before (its :func:`incumbent`, chosen from ``picks_before``, default: this
    GPU's stored and shipped picks) is timed first among the candidates, in
    the same alternation, so the stored pick is at least as fast by the
    runner's own measurement; with ``rungs``, only when it is one of them."""
    device = device or current_device()
    name, cc, arch, sms = device.name, device.cc, device.arch, device.sms
    if compiler is None and runner is None:
        compiler = compile_candidates
    summary = DispatchSummary(name, cc)
    run_ids: list[int] = []
    known = known_on(store, name) if picks_before is None else Known(list(picks_before), [])
    before = known.picks
    calibration = known.calibration(device.model or GPUModel.assumed(sms))
    stored = {(p.dtype, p.shape) for p in store.picks(name)}
    start = time.monotonic()
    try:
        for dtype in dtypes or suite.dtypes:
            for entry in suite.shapes:
                if not force and (dtype, entry.shape) in stored:
                    summary.already.append(f"{entry.shape} {dtype}")
                    continue
                if budget_seconds is not None and time.monotonic() - start >= budget_seconds:
                    summary.out_of_budget = True
                    return summary
                found, notes = candidates(entry.shape, dtype, sms=sms, arch=arch, per_rung=per_rung, rungs=rungs)
                summary.notes += notes
                current = incumbent(before, entry.shape, dtype, device, calibration)
                if rungs is not None and current is not None and current.kernel not in rungs:
                    current = None  # the rungs asked for, and only those
                found = _with_incumbent(found, current)
                if compiler is not None:
                    compiler(found, entry.shape, dtype, arch)
                results = time_candidates(found, entry.shape, dtype, max(entry.reps, 10), max_seconds,
                                    runner or measure_candidate, summary, on_candidate, shape_seconds)  # fmt: skip
                if not results:
                    why = "no candidate verified" if found else "no rung of the ladders takes it"
                    summary.unfilled.append((f"{entry.shape} {dtype}", why))
                    continue
                if not run_ids:
                    run_ids.append(store.start_run({**(run_record or {}), "gpu_name": name, "cc": cc}))
                store.add_results(run_ids[0], EXPERIMENT, [r for _, r in results])
                pick = store_pick(store, run_ids[0], device, entry.shape, dtype, results)
                summary.picked.append(pick)
                if current is not None and (pick.kernel, pick.config.values) == (current.kernel, current.config):
                    summary.kept.append(f"{entry.shape} {dtype}")
    except KeyboardInterrupt:
        summary.interrupted = True
    return summary


def stored_timings(store: Store, gpu_name: str) -> list[Timed]:
    """Every candidate the tuner verified and timed on ``gpu_name``, as stored
    in ``store`` (experiment :data:`EXPERIMENT`): what corrects the model beside the picks."""
    return timed_rows(r for r in store.rows(EXPERIMENT) if r.get("gpu_name") == gpu_name)


@dataclass(frozen=True)
class Known:
    """What is measured of one GPU: its picks (tuned into a database, then the
    shipped ones for the shapes those leave) and every candidate time behind
    them, which together correct the cost model."""

    picks: list[Pick]
    timings: list[Timed]

    def calibration(self, model: GPUModel) -> Calibration:
        return Calibration.of([*self.picks, *self.timings], model, resident)


def known_on(store: Store | None, gpu_name: str, *, shipped: bool = True) -> Known:
    """``gpu_name``'s picks and timings in ``store`` (None: no database), with
    the shipped table's unless ``shipped`` is False."""
    tuned = store.picks(gpu_name) if store is not None else []
    timings = stored_timings(store, gpu_name) if store is not None else []
    if not shipped:
        return Known(tuned, timings)
    return Known(merged(tuned, shipped_picks(gpu_name)), [*timings, *shipped_measurements(gpu_name)])


def incumbent(
    picks: Sequence[Pick], shape: Shape, dtype: str, device: Device, calibration: Calibration | None = None
) -> Candidate | None:  # fmt: skip
    """What the dispatcher runs for ``shape`` on ``device`` given ``picks`` (see :func:`choose`), as a
    candidate; None where nothing takes the shape."""
    try:
        model = device.model or GPUModel.assumed(device.sms)
        chosen = choose(picks, shape, dtype, device.arch, gpu=model, calibration=calibration)
    except ConstraintError:
        return None
    return Candidate(chosen.kernel, chosen.config, chosen.spec)


def _with_incumbent(found: list[Candidate], current: Candidate | None) -> list[Candidate]:
    """``found`` with ``current`` first (once)."""
    if current is None:
        return found
    return [current, *(c for c in found if (c.kernel, c.config) != (current.kernel, current.config))]


def time_candidates(
    found: list[Candidate], shape: Shape, dtype: str, reps: int, max_seconds: float, runner: Runner,
    summary: DispatchSummary, on_candidate: Callable[[str], None] | None, shape_seconds: float | None = None,
) -> list[tuple[Candidate, Any]]:  # fmt: skip
    """Each candidate verified and timed beside cuBLAS, in order, until
    ``shape_seconds`` are spent; the ones that passed, with their results."""
    passed = []
    start = time.monotonic()
    for i, candidate in enumerate(found):
        if shape_seconds is not None and i and time.monotonic() - start >= shape_seconds:
            summary.notes.append(f"{shape} {dtype}: {len(found) - i} candidates not timed, "
                                 f"the shape's {shape_seconds:g} s spent")  # fmt: skip
            break
        label = f"{shape} {dtype} {candidate.label}"
        if on_candidate:
            on_candidate(label)
        try:
            result = runner(candidate.spec, shape, dtype=dtype, reps=reps, warmup=2, max_seconds=max_seconds,
                            baseline=True)  # fmt: skip
        except (NoGPUError, StoreError):
            raise
        except (VerificationError, KernelStopped) as exc:
            summary.rejected.append((label, exc.cause))
            continue
        except (CompileError, DeviceLimitError, ConstraintError) as exc:
            summary.skipped.append((label, exc.cause))
            continue
        except Exception as exc:
            summary.failed.append((label, failure_text(exc)))
            continue
        passed.append((candidate, result))
    return passed


def store_pick(
    store: Store, run_id: int, device: Device, shape: Shape, dtype: str, results: list[tuple[Candidate, Any]]
) -> Pick:
    """The fastest verified candidate as the shape's pick."""
    candidate, best = min(results, key=lambda found: found[1].timing.median_ms)
    base = best.baseline_timing
    pick = Pick(
        run_id=run_id, gpu_name=device.name, cc=device.cc, dtype=dtype, m=shape.m, n=shape.n, k=shape.k,
        kernel=candidate.kernel, config=Config.of(candidate.spec.config), median_ms=best.timing.median_ms,
        cublas_ms=base.median_ms if base else None, verified=True, timing_method=best.timing.method,
        cublas_timing_method=base.method if base else None,
    )  # fmt: skip
    store.set_pick(pick)
    return pick
