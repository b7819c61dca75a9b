"""Autotuning the FP32 and tensor-core ladders: on this GPU, try every
configuration a rung accepts and keep the fastest one that verifies, per size
class and element type.

The search
----------
The tunable kernels are the rungs of the catalogue's ladders
(:data:`gemmlab.kernels.catalogue.LADDERS`). Each ladder gives the tuner the
same two methods (:class:`gemmlab.kernels.ladder.Ladder`):
``configs(kernel_id)``, the configurations to try, and
``variant(kernel_id, config)``, a catalogue entry of its own for each. A candidate goes through the runner like
any kernel: compiled with NVRTC, checked against the device's limits, verified
against the float64 reference after the warm-up and again after the timed
launches, and timed (median of ``reps`` CUDA event timings, at least
:data:`MIN_REPS`). A candidate that does not compile, exceeds the device's
limits or cannot take the shape is *skipped*; one whose result is wrong is
*rejected*. Neither can be chosen. cuBLAS is timed once per shape, with the
first candidate that verifies there, for the ratio.

Candidates are taken configuration by configuration, each at every shape asked
for, the catalogue's default first: a search cut short by the time budget has
compared the same configurations (all but perhaps the last) in every size
class, the default among them.

Element types
-------------
The FP32 ladder runs float32 only; a tensor-core rung runs each of its
``dtypes`` (bfloat16, float16, tf32) and is tuned for each apart: tf32 moves
twice the bytes of a 16-bit type per element and runs its MMAs at half the
rate, so the tile and the number of stages that keep the tensor cores fed need
not be the same. A search is for one element type (the kernel's first by
default), and nothing measured for one is used for another.

Size classes
------------
One configuration is kept per (GPU, kernel, element type, size class). The
class comes from the largest of M, N and K (:func:`size_class`): ``small`` up
to 1024, ``medium`` up to 4096, ``large`` beyond. The best configuration moves
with the size: at 1024 a 128 x 128 tile gives 64 blocks for an H100's 132 SMs,
so what keeps the few blocks busy matters; at 4096 and beyond every
configuration fills the GPU many times over and the work of one block
decides. Shapes of one call that fall into the same class are
scored together: a configuration must verify at all of them, and the
geometric mean of its GFLOPS ranks it.

The database
------------
Two tables of the results database (:mod:`gemmlab.store.store` describes
them and creates them with its other tables), written and read through
:class:`~gemmlab.store.store.Store` methods, each write one transaction:

- ``tuned_candidates`` (:meth:`~gemmlab.store.store.Store.add_candidate`):
  every candidate is stored the moment it is known, with its ``status``: ``ok``
  (with its figures), ``rejected`` or ``skipped`` (with the ``reason``). A
  second run skips every stored candidate, so a search stopped by Ctrl-C or a
  killed process resumes where it was; ``force`` measures again. A candidate
  that meets an unexpected error is not stored, so it is tried again.
- ``tuned`` (:meth:`~gemmlab.store.store.Store.set_tuned`): the chosen
  configuration per (GPU, kernel, element type, size class). ``gemmlab run``
  reads it (:func:`tuned_spec`).

Configurations are stored as the results table stores them
(:class:`gemmlab.store.records.Config`): JSON with sorted keys, every
parameter of the kernel's template.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gemmlab.core.environment import now_utc
from gemmlab.core.errors import (
    CompileError,
    ConstraintError,
    DeviceLimitError,
    GemmlabError,
    KernelStopped,
    NoGPUError,
    StoreError,
    UnknownName,
    VerificationError,
    failure_text,
)
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue, user
from gemmlab.kernels.spec import KernelSpec
from gemmlab.measure import watchdog
from gemmlab.store.records import Config, config_text
from gemmlab.store.store import Store
from gemmlab.studies.candidates import Device, Runner, current_device, measure_candidate

# The upper bound of each size class on max(M, N, K); anything above is "large".
SIZE_CLASS_LIMITS = (("small", 1024), ("medium", 4096))
LARGE = "large"
DEFAULT_SIZES = (1024, 4096, 8192)  # one of each class
# The median of fewer timings is not worth ranking configurations on.
MIN_REPS = 10

OK, REJECTED, SKIPPED = "ok", "rejected", "skipped"


@dataclass(frozen=True)
class Search:
    """What the tuner needs of a tunable kernel, whatever it is: a rung of a
    catalogue ladder, or a user's kernel, whose configurations are the product
    of its declared parameters' values (the edge's included)."""

    kernel: str  # the id results are filed under
    dtypes: tuple[str, ...]
    params: tuple[str, ...]  # in the order people read them
    default: Callable[[], dict]
    configs: Callable[[], list[dict]]
    variant: Callable[[dict], KernelSpec]


def search(kernel: str) -> Search:
    """The search of ``kernel`` (a catalogue id, or a user's kernel by path or id);
    UnknownName, listing every tunable kernel, for a catalogue kernel outside the
    ladders, and a clear error for a user's kernel without parameters."""
    if _is_users(kernel):
        return _user_search(catalogue.get(kernel))
    ladder = catalogue.ladder(kernel)
    rung = ladder.rung(kernel)
    return Search(kernel, rung.dtypes, rung.params, rung.config, lambda: ladder.configs(kernel),
                  lambda config: ladder.variant(kernel, config))  # fmt: skip


def _is_users(kernel: str) -> bool:
    """Whether ``kernel`` names a user's kernel: the path of its file, or the id
    of one this process has read."""
    return catalogue.is_file_name(kernel) or catalogue.is_declared(kernel)


def _user_search(spec: KernelSpec) -> Search:
    parameters = getattr(spec, "parameters", ())
    if not parameters:
        raise ConstraintError(
            f"{spec.id} declares no parameters, so there is nothing to tune.",
            "Declare the values to try under [parameters] in its declaration (docs/user-kernels.md).",
        )
    names = tuple(p.name for p in parameters)

    def configs() -> list[dict]:
        everything = [dict(zip(names, v, strict=True)) for v in itertools.product(*(p.values for p in parameters))]
        default = user.all_values(spec)
        return [default, *(c for c in everything if c != default)]

    return Search(spec.id, spec.dtypes, names, lambda: user.all_values(spec), configs,
                  lambda config: user.variant(spec, config))  # fmt: skip


def search_space(kernel: str, shapes: Sequence[Shape], dtype: str | None = None) -> list[dict]:
    """The configurations worth trying at ``shapes``. A ladder's, as its rules give
    them; a user's kernel's, those whose entry builds and takes at least one of
    the shapes (its declaration's accepts and the launch limits: the rest would
    only be skipped)."""
    found = search(kernel)
    if not _is_users(kernel):
        return found.configs()
    kind = dtype or found.dtypes[0]
    kept = []
    for config in found.configs():
        try:
            spec = found.variant(config)
        except GemmlabError:
            continue
        if any(not spec.violations(s, spec.default_block_edge(), kind) for s in shapes):
            kept.append(config)
    return kept


def default_config(kernel_id: str) -> dict:
    """The configuration of the catalogue's entry (a user's kernel: as declared)."""
    return search(kernel_id).default()


def resolved_dtype(kernel_id: str, dtype: str | None = None) -> str:
    """``dtype``, or the kernel's first when None; ConstraintError for an element type it has no version of."""
    dtypes = search(kernel_id).dtypes
    if dtype is None:
        return dtypes[0]
    if dtype not in dtypes:
        raise ConstraintError(f"{kernel_id} has no {dtype} version (it takes {', '.join(dtypes)}).",
                              f"Use --dtype {' or '.join(dtypes)}.")  # fmt: skip
    return dtype


def size_class(shape: Shape) -> str:
    """'small', 'medium' or 'large', from the largest of M, N and K (see the module's docstring)."""
    edge = max(shape.m, shape.n, shape.k)
    return next((name for name, limit in SIZE_CLASS_LIMITS if edge <= limit), LARGE)


def config_label(config: dict) -> str:
    return " ".join(f"{name}={value}" for name, value in config.items())


def config_json(kernel_id: str, config: dict) -> str:
    """The stored form of a configuration: every parameter (those not given
    keep their defaults), as :func:`~gemmlab.store.records.config_text` writes
    it. A configuration the kernel cannot take raises ConstraintError. A user's
    kernel's configuration is every declared parameter, the edge's included."""
    found = search(kernel_id)
    spec = found.variant(config)
    if spec.declaration is not None:
        return config_text(user.all_values(spec))
    return config_text(spec.config)


@dataclass(frozen=True)
class Tuned:
    """The configuration chosen for one size class."""

    kernel: str
    dtype: str
    size_class: str
    config: dict
    gflops: float  # geometric mean over the shapes
    ratio_to_cublas: float | None
    default_gflops: float | None  # the catalogue default's, on the same shapes
    shapes: tuple[Shape, ...]

    @property
    def gain_over_default(self) -> float | None:
        return self.gflops / self.default_gflops if self.default_gflops else None


@dataclass
class TuneSummary:
    kernel: str
    dtype: str
    gpu_name: str
    cc: str
    total: int = 0  # configurations x shapes
    measured: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (candidate, why)
    rejected: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    best: dict[str, Tuned] = field(default_factory=dict)  # by size class
    unchosen: list[str] = field(default_factory=list)  # size classes with no verified configuration
    interrupted: bool = False
    out_of_budget: bool = False

    @property
    def not_run(self) -> int:
        done = len(self.measured) + len(self.already) + len(self.skipped) + len(self.rejected) + len(self.failed)
        return self.total - done

    def lines(self) -> list[str]:
        """The summary in words, one line each."""
        out = [f"{self.kernel} ({self.dtype}) on {self.gpu_name}: {len(self.measured)} candidates measured and "
               f"stored, {len(self.already)} already stored"]  # fmt: skip
        out += [f"skipped: {label}: {why}" for label, why in self.skipped]
        out += [f"REJECTED (wrong result): {label}: {why}" for label, why in self.rejected]
        out += [f"FAILED: {label}: {what}" for label, what in self.failed]
        if self.out_of_budget:
            out.append(f"time budget spent: {self.not_run} candidates not run; the best is chosen among the others "
                       "(run again to go on: stored candidates are skipped).")  # fmt: skip
        if self.interrupted:
            out.append(f"interrupted: {self.not_run} candidates not run and nothing chosen; "
                       "run the same command again to resume (stored candidates are skipped).")  # fmt: skip
        out += [f"no verified configuration for {name} sizes" for name in self.unchosen]
        return out


def tune(
    kernel_id: str,
    sizes: Sequence[int | Shape],
    store: Store,
    *,
    dtype: str | None = None,
    budget_seconds: float | None = None,
    force: bool = False,
    reps: int = 20,
    warmup: int = 2,
    max_seconds: float = 5.0,
    configs: Sequence[dict] | None = None,
    runner: Runner | None = None,
    device: Device | None = None,
    progress: bool = True,
    console: Any = None,
) -> TuneSummary:
    """Search ``kernel_id``'s configurations at ``sizes`` (square N, or Shapes)
    in element type ``dtype`` (default: the kernel's first) on this GPU and
    store the best per size class; see the module's docstring.

    ``budget_seconds``: stop starting candidates once this much time is spent
    (stored candidates cost nothing). ``configs``: the candidates (default:
    the family's ``configs``). ``max_seconds`` caps one candidate's timed
    series: the runner times fewer than ``reps`` only launches longer than
    ``max_seconds / reps``, and fewer than MIN_REPS only launches over
    ``max_seconds / MIN_REPS`` (0.5 s at the defaults, far above any rung
    at 8192). ``runner`` defaults to
    :func:`~gemmlab.studies.candidates.measure_candidate`; ``device`` (tuned
    configurations are filed under its name) to GPU 0. Ctrl-C stops after
    storing what is measured, chooses nothing, and the same call resumes.
    """
    dtype = resolved_dtype(kernel_id, dtype)  # UnknownName for a kernel outside the ladders
    found = search(kernel_id)
    kernel_id = found.kernel  # a user's kernel given by its path is filed under its id
    if reps < MIN_REPS:
        raise GemmlabError(f"Tuning needs at least {MIN_REPS} timed repetitions (got {reps}).",
                           f"Use --reps {MIN_REPS} or more.")  # fmt: skip
    shapes = list(dict.fromkeys(s if isinstance(s, Shape) else Shape.square(s) for s in sizes))
    if not shapes or min(min(s.m, s.n, s.k) for s in shapes) < 1:
        raise GemmlabError("Tuning needs positive sizes.", "Example: --sizes 1024,4096.")
    device = device or current_device()
    watched = runner is None and catalogue.get(kernel_id).declaration is not None
    with contextlib.ExitStack() as stack:
        if watched:  # a user's candidates run in the watchdog's worker: a fault or a hang is stopped and rejected
            runner = _watched_runner(stack.enter_context(watchdog.Worker()), kernel_id)
        return _tune(kernel_id, shapes, store, found, dtype, budget_seconds, force, reps, warmup, max_seconds,
                     configs, runner or measure_candidate, device, progress, console)  # fmt: skip


def _watched_runner(worker: Any, kernel_id: str) -> Runner:
    """A runner that measures a user's candidate in ``worker``: the declaration's
    path and the candidate's values go to it, under the watchdog's time limit."""
    from gemmlab.measure.run import run_declared

    reference = catalogue.reference(kernel_id)

    def runner(spec: KernelSpec, shape: Shape, *, dtype: str, reps: int, warmup: int, max_seconds: float,
               baseline: bool) -> Any:  # fmt: skip
        limit = watchdog.point_time_limit(kernel_id, shape, spec.default_block_edge(), reps=reps, warmup=warmup,
                                          max_seconds=max_seconds)  # fmt: skip
        values = user.all_values(spec)
        return worker.call(f"{kernel_id} {shape}", limit, run_declared, reference, values, shape, None, dtype,
                           reps=reps, warmup=warmup, max_seconds=max_seconds, baseline=baseline)  # fmt: skip

    return runner


def _tune(
    kernel_id: str, shapes: list[Shape], store: Store, found: Search, dtype: str, budget_seconds: float | None,
    force: bool, reps: int, warmup: int, max_seconds: float, configs: Sequence[dict] | None, runner: Runner,
    device: Device, progress: bool, console: Any,
) -> TuneSummary:  # fmt: skip
    """:func:`tune` once its kernel, shapes, runner and device are settled."""
    gpu_name, cc = device.name, device.cc
    candidates = [config_json(kernel_id, c) for c in (configs or search_space(kernel_id, shapes, dtype))]

    todo = [(c, s) for c in dict.fromkeys(candidates) for s in shapes]
    stored = set() if force else _stored(store, gpu_name, kernel_id, dtype)
    pending = [(c, s) for c, s in todo if (c, s) not in stored]
    summary = TuneSummary(kernel_id, dtype, gpu_name, cc, total=len(todo))
    summary.already = [_label(kernel_id, c, s) for c, s in todo if (c, s) in stored]
    best_seen = _best_seen(store, gpu_name, kernel_id, dtype) if not force else {}
    timed_cublas: set[Shape] = set()

    def record(config: str, shape: Shape, status: str, **values: Any) -> None:
        store.add_candidate({"gpu_name": gpu_name, "cc": cc, "kernel": kernel_id, "dtype": dtype,
                             "size_class": size_class(shape), "m": shape.m, "n": shape.n, "k": shape.k,
                             "config": config, "status": status, "date": now_utc(), **values})  # fmt: skip

    bar = _Progress(len(pending), budget_seconds, console) if progress else None
    start = time.monotonic()
    try:
        for config, shape in pending:
            if budget_seconds is not None and time.monotonic() - start >= budget_seconds:
                summary.out_of_budget = True
                break
            label = _label(kernel_id, config, shape)
            if bar:
                bar.start(label)
            spec = found.variant(Config(config).values)
            try:
                result = runner(spec, shape, dtype=dtype, reps=reps, warmup=warmup, max_seconds=max_seconds,
                                baseline=shape not in timed_cublas)  # fmt: skip
            except (NoGPUError, StoreError):
                raise  # the same for every candidate that follows
            except (VerificationError, KernelStopped) as exc:  # a wrong answer, a fault or a hang
                record(config, shape, REJECTED, reason=exc.cause)
                summary.rejected.append((label, exc.cause))
                if bar:
                    bar.advance("rejected", note=f"[red]rejected[/] (wrong result): {label}: {exc.cause}")
                continue
            except (CompileError, DeviceLimitError, ConstraintError) as exc:
                record(config, shape, SKIPPED, reason=exc.cause)
                summary.skipped.append((label, exc.cause))
                if bar:
                    bar.advance("skipped", note=f"[dim]skipped: {label}: {exc.cause}[/]")
                continue
            except Exception as exc:
                what = failure_text(exc)
                summary.failed.append((label, what))
                if bar:
                    bar.advance("FAILED", note=f"[red]FAILED[/]: {label}: {what}")
                continue
            if result.baseline_gflops is not None:
                timed_cublas.add(shape)
            record(config, shape, OK, median_ms=result.timing.median_ms, gflops=result.gflops,
                   baseline_gflops=result.baseline_gflops, error=result.error)  # fmt: skip
            summary.measured.append(label)
            best_seen[shape] = max(best_seen.get(shape, 0.0), result.gflops)
            if bar:
                bar.advance(f"{result.gflops / 1e3:.1f} TFLOP/s", best=best_seen[shape] / 1e3)
    except KeyboardInterrupt:
        summary.interrupted = True
    finally:
        if bar:
            bar.stop()
    if not summary.interrupted:
        _choose(store, summary, shapes, default=config_json(kernel_id, default_config(kernel_id)))
    return summary


def best_config(rows: Sequence[dict], shapes: Sequence[Shape]) -> tuple[str, float] | None:
    """The configuration with the highest geometric-mean GFLOPS over ``shapes``
    among those with a verified row (``status`` ok) at every one of them, and
    that mean; None if no configuration has all. Ties go to the first seen."""
    scores = _scores(rows, shapes)
    if not scores:
        return None
    config = max(scores, key=lambda c: scores[c])
    return config, scores[config]


def tuned_spec(
    kernel_id: str, shape: Shape, store: Store, device_name: str, dtype: str | None = None
) -> KernelSpec | None:
    """The entry of ``kernel_id`` tuned on ``device_name`` in element type
    ``dtype`` (default: the kernel's first) for ``shape``'s size class, or None
    when none is stored. A stored configuration this gemmlab's kernel no longer
    accepts is ignored (None). Reads a read-only file from before results
    schema v5 as it is (see :meth:`gemmlab.store.store.Store.tuned_config`)."""
    dtype = resolved_dtype(kernel_id, dtype)
    found = store.tuned_config(device_name, kernel_id, dtype, size_class(shape))
    if found is None:
        return None
    try:
        return search(kernel_id).variant(Config(found).values)
    except (GemmlabError, ValueError):
        return None


def stored_tuned_spec(kernel_id: str, shape: Shape, db: str | Path, dtype: str | None = None) -> KernelSpec | None:
    """What `gemmlab run` uses: the entry tuned for this GPU and ``dtype``
    (default: the kernel's first) from ``db``; None for a kernel outside the
    ladders or when ``db`` does not exist (nothing is created: the file is
    opened read-only)."""
    if not Path(db).is_file():
        return None
    try:
        search(kernel_id)
    except (UnknownName, ConstraintError):
        return None
    with Store.open(db, readonly=True) as store:
        return tuned_spec(kernel_id, shape, store, current_device().name, dtype)


# -- plumbing -------------------------------------------------------------------


def _label(kernel_id: str, config: str, shape: Shape) -> str:
    return f"{shape} {config_label(_in_template_order(kernel_id, config))}"


def _in_template_order(kernel_id: str, config: str) -> dict:
    """A stored configuration (sorted keys) with its parameters in the kernel's
    template order, the order people read them in (see config_label)."""
    values = Config(config).values
    ordered = {name: values[name] for name in search(kernel_id).params if name in values}
    return ordered | values


def _stored(store: Store, gpu_name: str, kernel_id: str, dtype: str) -> set[tuple[str, Shape]]:
    return {(r["config"], Shape(r["m"], r["n"], r["k"])) for r in store.candidates(gpu_name, kernel_id, dtype)}


def _ok_rows(store: Store, gpu_name: str, kernel_id: str, dtype: str) -> list[dict]:
    return store.candidates(gpu_name, kernel_id, dtype, OK)


def _best_seen(store: Store, gpu_name: str, kernel_id: str, dtype: str) -> dict[Shape, float]:
    found: dict[Shape, float] = {}
    for r in _ok_rows(store, gpu_name, kernel_id, dtype):
        shape = Shape(r["m"], r["n"], r["k"])
        found[shape] = max(found.get(shape, 0.0), r["gflops"])
    return found


def _scores(rows: Sequence[dict], shapes: Sequence[Shape]) -> dict[str, float]:
    """Geometric-mean GFLOPS per configuration verified at every shape."""
    per_config: dict[str, dict[Shape, float]] = {}
    for r in rows:
        shape = Shape(r["m"], r["n"], r["k"])
        if r["status"] == OK and shape in shapes:
            per_config.setdefault(r["config"], {})[shape] = r["gflops"]
    return {c: _geomean(list(g.values())) for c, g in per_config.items() if len(g) == len(set(shapes))}


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if all(v > 0 for v in values) else 0.0


def _choose(store: Store, summary: TuneSummary, shapes: list[Shape], default: str) -> None:
    """Pick and store the best configuration of each size class among the stored candidates."""
    rows = _ok_rows(store, summary.gpu_name, summary.kernel, summary.dtype)
    # cuBLAS per shape: the latest figure stored (any configuration timed it beside itself).
    cublas = {Shape(r["m"], r["n"], r["k"]): r["baseline_gflops"] for r in rows if r["baseline_gflops"]}
    for name in dict.fromkeys(size_class(s) for s in shapes):
        group = [s for s in shapes if size_class(s) == name]
        chosen = best_config(rows, group)
        if chosen is None:
            summary.unchosen.append(name)
            continue
        config, gflops = chosen
        ratio = None
        if all(s in cublas for s in group):
            ratio = _geomean([_gflops_at(rows, config, s) / cublas[s] for s in group])
        tuned = Tuned(summary.kernel, summary.dtype, name, _in_template_order(summary.kernel, config), gflops, ratio,
                      _scores(rows, group).get(default), tuple(group))  # fmt: skip
        summary.best[name] = tuned
        store.set_tuned({"gpu_name": summary.gpu_name, "cc": summary.cc, "kernel": summary.kernel,
                         "dtype": summary.dtype, "size_class": name, "config": config, "gflops": gflops,
                         "ratio_to_cublas": ratio, "default_gflops": tuned.default_gflops,
                         "shapes": json.dumps([[s.m, s.n, s.k] for s in group]), "date": now_utc()})  # fmt: skip


def _gflops_at(rows: Sequence[dict], config: str, shape: Shape) -> float:
    return next(r["gflops"] for r in rows if r["config"] == config and Shape(r["m"], r["n"], r["k"]) == shape)


class _Progress:
    """A rich progress bar: the candidate, its TFLOP/s, the best so far at its
    shape, and the time left (the budget's, when it runs out first)."""

    def __init__(self, total: int, budget_seconds: float | None, console: Any = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[figure]}"),
            TextColumn("{task.fields[left]}"),
            console=console or Console(stderr=True),
        )
        self._task = self._progress.add_task("", total=total, figure="", left="")
        self._total = total
        self._done = 0
        self._budget = budget_seconds
        self._start = time.monotonic()
        self._progress.start()

    def start(self, label: str) -> None:
        self._progress.update(self._task, description=label)

    def advance(self, figure: str, best: float | None = None, note: str | None = None) -> None:
        if note:
            self._progress.console.print(note, highlight=False)
        self._done += 1
        text = f"last: {figure}" + (f", best: {best:.1f} TFLOP/s" if best else "")
        self._progress.update(self._task, advance=1, figure=text, left=self._left())

    def _left(self) -> str:
        spent = time.monotonic() - self._start
        left = spent / self._done * (self._total - self._done)
        if self._budget is not None and self._budget - spent < left:
            return f"budget: {max(0.0, self._budget - spent):.0f} s left"
        return f"about {left:.0f} s left"

    def stop(self) -> None:
        self._progress.stop()
