"""The experiments of the source documents, as data, and `reproduce`.

Each experiment is a few series (kernels x sizes x block edges, with a
variant and a way to turn a size into a shape); :meth:`Experiment.points`
expands them to sweep points and leaves out, with the reason, the
combinations a kernel cannot take (e.g. ``tiled`` with edge 22 at size 128).
An experiment whose kernels are not all in the catalogue yet says so and is
skipped.

Time budget (all six on one H100/H200 in well under ten minutes):

- every point's timed series is capped at ``REPRODUCE_MAX_SECONDS`` (the
  runner then stops repeating, keeping at least 3 repetitions);
- points that :func:`gemmlab.sweep.predicted_ms` expects to take over half a
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

from gemmlab import backends
from gemmlab.core.errors import GemmlabError, NoGPUError, ProfilerError, UnknownName, unknown_name
from gemmlab.core.shapes import Shape
from gemmlab.results.store import Store
from gemmlab.studies.sweep import E2E, SweepPoint, SweepSummary, plan, sweep

REPRODUCE_MAX_SECONDS = 1.0
REPRODUCE_REPS = 20
# Profiling stops after this many profiler errors in a row.
PROFILER_GIVE_UP = 3


def square(kernel: str, size: int) -> Shape:
    return Shape.square(size)


def matrix_or_vector(kernel: str, size: int) -> Shape:
    """The Brno lecture's shapes: ``size`` x ``size`` matrices for copies and
    transposes (rows x columns, K unused), the same number of elements as one
    vector for vecadd."""
    if kernel == "vecadd":
        return Shape(1, size * size, 1)
    return Shape(size, size, 1)


@dataclass(frozen=True)
class Series:
    """kernels x sizes x block edges, measured one way.

    ``block_edges=None``: each kernel's own documented edges. ``max_size``
    leaves out larger sizes, with ``max_size_reason``.
    """

    kernels: tuple[str, ...]
    sizes: tuple[int, ...]
    block_edges: tuple[int, ...] | None = None
    variant: str = ""
    dtype: str | None = None
    shape: Callable[[str, int], Shape] = square
    max_size: int | None = None
    max_size_reason: str = ""


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    source_doc: str
    series: tuple[Series, ...]
    reference: str | None = None  # the published figures, under shared/reference/
    notes: tuple[str, ...] = ()

    @property
    def kernels(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(k for s in self.series for k in s.kernels))

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(sorted({n for s in self.series for n in s.sizes}))

    @property
    def block_edges(self) -> tuple[int, ...]:
        return tuple(sorted({e for s in self.series for e in (s.block_edges or ())}))

    def missing_kernels(self) -> list[str]:
        """Kernels of this experiment that no backend serves (yet)."""
        missing = []
        for kernel in self.kernels:
            try:
                backends.for_kernel(kernel)
            except UnknownName:
                missing.append(kernel)
        return missing

    def plan(
        self, sizes: Sequence[int] | None = None, reps: int = REPRODUCE_REPS
    ) -> tuple[list[SweepPoint], list[tuple[str, str]]]:
        """The points to run, and the combinations left out with the reason.
        ``sizes`` replaces every series' sizes (a quick check on small ones)."""
        points: list[SweepPoint] = []
        left_out: list[tuple[str, str]] = []
        for s in self.series:
            for size in sizes if sizes is not None else s.sizes:
                if s.max_size is not None and size > s.max_size:
                    left_out += [(f"{k} {size}", s.max_size_reason) for k in s.kernels]
                    continue
                for kernel in s.kernels:
                    found, refused = plan(
                        [kernel], [s.shape(kernel, size)], s.block_edges, s.dtype, variant=s.variant, reps=reps
                    )
                    points += found
                    left_out += refused
        return points, left_out

    def points(self, sizes: Sequence[int] | None = None, reps: int = REPRODUCE_REPS) -> list[SweepPoint]:
        return self.plan(sizes, reps)[0]


POZNAN = "Poznan 2014 course report (GeForce GT 240)"
KURSK_SIZES = (256, 512, 1024, 2048)

EXPERIMENTS: tuple[Experiment, ...] = (
    Experiment(
        name="poznan-group1",
        title="Single block, naive and tiled float32 matmul, sizes 176-528",
        source_doc=POZNAN + ", versions 1-3",
        series=(Series(("single_block", "naive", "tiled"), (176, 352, 528), (8, 16, 22)),),
        reference="poznan2014_gt240.csv",
    ),
    Experiment(
        name="poznan-group2",
        title="Tiled matmul with prefetching and 2x2 outputs per thread, sizes 128-640",
        source_doc=POZNAN + ", versions 3-5",
        series=(
            Series(
                ("tiled", "tiled_prefetch_reg", "tiled_prefetch_smem", "tiled_2x2"), (128, 256, 384, 512, 640), (8, 16)
            ),
        ),
        reference="poznan2014_gt240.csv",
    ),
    Experiment(
        name="int32-lab",
        title="int32 GEMM, naive and shared-memory kernels, block edge 1-32",
        source_doc="2023 int32 GEMM lab report",
        series=(
            Series(("naive_i32", "tiled_i32"), (256, 512, 1024, 4096), (1, 2, 4, 8, 16, 32)),
            Series(
                ("cpu_blocked",),
                (256, 512, 1024, 4096),
                dtype="int32",
                max_size=1024,
                max_size_reason="the single-thread CPU loop at 4096 takes about a minute; it stops at 1024",
            ),
        ),
        reference="int32lab_gemm.csv",
        notes=("The report's CPU comparison is a sentence, not a number; cpu_blocked (int32) stands in for it.",),
    ),
    Experiment(
        name="brno-transpose",
        title="Vector addition, copies and transposes in GB/s, 4000x4000 and a matrix far larger than L2",
        source_doc="Brno 2014 lecture (GeForce GTX 280)",
        series=(
            Series(("vecadd",), (4000, 16384), shape=matrix_or_vector),
            Series(
                ("copy", "transpose_naive", "copy_tiled", "transpose_tiled", "transpose_tiled_padded"),
                (4000, 16384),
                (16, 32),
                shape=matrix_or_vector,
            ),
        ),
        reference="brno2014_transpose_gtx280.csv",
        notes=("16384 x 16384 float32 is 1 GiB per matrix, many times any GPU's L2, so the inputs stream from DRAM.",),
    ),
    Experiment(
        name="arequipa-any-size",
        title="Tiled matmul with zero-filled edges on sizes that are not multiples of the tile",
        source_doc="Arequipa 2017 lab report",
        series=(Series(("tiled_any_size",), (1000, 1023, 1025), (8, 16, 32)),),
    ),
    Experiment(
        name="kursk-cpu-gpu",
        title="CPU against GPU with the copies counted: P = 2N^3 / (t_in + t_kernel + t_out)",
        source_doc="Kursk 2014 paper (GTS 450, GTX 770)",
        series=(
            Series(("naive_uncoalesced",), KURSK_SIZES, (32,), variant=E2E),
            Series(("col_buffered", "row_buffered"), KURSK_SIZES, variant=E2E),
            Series(("tiled",), KURSK_SIZES, (1, 2, 4, 8, 16, 32), variant=E2E),
            Series(("blocked_x4",), KURSK_SIZES, (4, 8, 16, 32), variant=E2E),
            Series(
                ("cpu_naive",),
                KURSK_SIZES,
                max_size=1024,
                max_size_reason="the single-thread naive loop at 2048 takes minutes (the paper: 103 s); "
                "it stops at 1024",
            ),
            Series(("cpu_blocked", "cpu_blas"), KURSK_SIZES),
        ),
        reference="kursk2014_cpu_gpu.csv",
        notes=(
            "GPU rows are end to end: variant 'pinned' and 'pageable' (host memory), median_ms the kernel alone.",
            "col_buffered and row_buffered launch one thread per row or column, so they stop at N = 1024.",
        ),
    ),
)
_BY_NAME = {e.name: e for e in EXPERIMENTS}


def names() -> list[str]:
    return list(_BY_NAME)


def get(name: str) -> Experiment:
    try:
        return _BY_NAME[name]
    except KeyError:
        listing = f"`gemmlab reproduce --list` shows all {len(_BY_NAME)}."
        raise unknown_name("experiment", name, _BY_NAME, listing, cutoff=0.4) from None


def select(requested: Sequence[str] | None) -> list[Experiment]:
    """The named experiments (all of them for none), each checked before any runs."""
    return [get(n) for n in requested] if requested else list(EXPERIMENTS)


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
) -> list[Outcome]:
    """Run the experiments into ``store`` (resuming: stored points are skipped).

    Stops after an experiment that was interrupted (Ctrl-C).
    ``on_start(experiment, n_points)`` is called before each sweep.
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
                        max_seconds=max_seconds, run_info=run_info)  # fmt: skip
        outcome = Outcome(experiment, "interrupted" if summary.interrupted else "done", [], left_out, summary)
        outcomes.append(outcome)
        if summary.interrupted:
            break
    return outcomes


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
