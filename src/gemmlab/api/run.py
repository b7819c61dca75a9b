"""One kernel run, the same from Python and from `gemmlab run`: which
configuration runs (given, tuned on this GPU, declared, or the catalogue's
default), a user's kernel isolated in the watchdog's worker, the CPU
baselines, and the dispatcher's pick for `gemmlab run best`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gemmlab import backends
from gemmlab.api.catalogue import no_block_edge
from gemmlab.api.kernels import Kernel, kernel
from gemmlab.api.results import DEFAULT_PATH, Comparison, Result
from gemmlab.core.errors import ConstraintError, DeclarationError
from gemmlab.core.shapes import Shape

if TYPE_CHECKING:
    from gemmlab.backends.base import HostBackend
    from gemmlab.kernels.spec import KernelSpec
    from gemmlab.measure.run import RunResult

# The host's timed series stops near this many seconds (at least 3 calls), as a GPU run's does.
HOST_SERIES_S = 10.0
# A CPU baseline predicted to take longer than this a call is announced first.
LONG_HOST_RUN_S = 10.0


def run(
    which: str | Path | Kernel,
    size: int | None = None,
    *,
    m: int | None = None,
    n: int | None = None,
    k: int | None = None,
    block: int | None = None,
    dtype: str | None = None,
    vs: Sequence[str | Path | Kernel] = (),
    reps: int = 20,
    flush_l2: bool = False,
    seed: int | None = None,
    baseline: bool = True,
    db: str | Path = DEFAULT_PATH,
    tuned: bool = True,
    config: dict[str, int] | None = None,
    timeout: float | None = None,
) -> Result | Comparison:
    """Run a kernel once on a shape: verified against a float64 reference and
    timed beside its library, as `gemmlab run` does. ``size``: a square shape;
    or ``m``, ``n``, ``k``. ``vs``: other kernels run on the same shape (each
    with its default block edge and the first kernel's element type); a
    :class:`Comparison` then. A kernel tuned on this GPU (`gemmlab tune`, into
    ``db``) runs with its tuned configuration unless ``tuned=False``;
    ``config`` gives the first kernel's parameters instead. A user's kernel
    runs in a worker process, stopped after ``timeout`` seconds as a hang."""
    shape = _shape(size, m, n, k)
    kernels = [kernel(which), *map(kernel, vs)]
    measured = run_kernels([k.spec for k in kernels], shape, block, dtype, db=db, tuned=tuned, config=config,
                           timeout=timeout, reps=reps, flush_l2=flush_l2, seed=seed, baseline=baseline)  # fmt: skip
    wrapped = [Result({**r.to_dict(), "config_source": source}) for r, source in measured]
    return Comparison(wrapped) if vs else wrapped[0]


def run_kernels(specs: Sequence[KernelSpec], shape: Shape, block: int | None, dtype: str | None, *,
                db: str | Path = DEFAULT_PATH, tuned: bool = True, config: dict[str, int] | None = None,
                timeout: float | None = None, **options: Any) -> list[tuple[RunResult, str | None]]:  # fmt: skip
    """Each kernel of ``specs`` run on ``shape``, with where its configuration
    came from (None for a kernel without one). The first takes ``block``,
    ``dtype`` and ``config``; the others their default edges and the first's
    element type. ``options``: reps, flush_l2, seed, baseline."""
    from gemmlab.measure import watchdog

    refuse_block(specs[0].id, block, specs[0].block_edges, specs[0].max_edge)
    chosen = [configured(spec, shape, db, dtype if i == 0 else None, tuned, config if i == 0 else None)
              for i, spec in enumerate(specs)]  # fmt: skip
    results: list[tuple[RunResult, str | None]] = []
    with watchdog.Worker() as worker:
        for i, (spec, source) in enumerate(chosen):
            edge, kind = (block, dtype) if i == 0 else (None, results[0][0].dtype)
            result = run_one(worker, spec, shape, edge, kind, timeout, **options)
            results.append((result, source if result.config else None))
    return results


def configured(spec: KernelSpec, shape: Shape, db: str | Path, dtype: str | None, tuned: bool = True,
               given: dict[str, int] | None = None) -> tuple[KernelSpec, str]:  # fmt: skip
    """The entry to run for ``spec`` and where its configuration comes from:
    the configuration ``given`` over the kernel's default, else the one
    `gemmlab tune` chose on this GPU for the size's class (unless ``tuned`` is
    False), else a declaration as written or the catalogue's own."""
    from gemmlab.studies.tune import search, stored_tuned_spec

    if given is not None:
        return search(spec.id).variant(given), "given"
    stored = stored_tuned_spec(spec.id, shape, db, dtype) if tuned else None
    if stored is not None:
        return stored, "tuned"
    return spec, "declaration" if spec.declaration is not None else "catalogue default"


def run_one(worker: Any, spec: KernelSpec, shape: Shape, edge: int | None, kind: str | None,
            timeout: float | None, **options: Any) -> RunResult:  # fmt: skip
    """One kernel's result; a user's kernel runs in the watchdog's worker, so
    that a fault or a hang ends with a message naming it, not a frozen terminal."""
    from gemmlab.kernels import catalogue, user
    from gemmlab.measure import watchdog
    from gemmlab.measure.run import run as run_kernel
    from gemmlab.measure.run import run_declared

    if spec.declaration is None:
        return run_kernel(spec.id, shape, edge, kind, spec=spec, **options)
    reps = options.get("reps", 20)
    limit = timeout or watchdog.point_time_limit(spec.id, shape, edge, reps=reps, warmup=2, max_seconds=10)
    label = f"{spec.id} {shape}" + (f" b{edge}" if edge else "")
    # The worker reads the declaration again; a tuned configuration goes with it as values.
    values = user.all_values(spec) if spec is not catalogue.get(spec.id) else None
    return worker.call(label, limit, run_declared, catalogue.reference(spec.id), values, shape, edge, kind, **options)


def refuse_block(kernel_id: str, block: int | None, edges: tuple[int, ...], max_edge: int = 0) -> None:
    """ConstraintError for a block edge that cannot apply: to a kernel without
    one (``edges`` empty), or an edge below 1, which no kernel takes."""
    if block is None:
        return
    if not edges:
        raise no_block_edge(kernel_id)
    if block < 1:
        raise ConstraintError(
            f"--block {block}: a block edge counts threads along a side of the block, so it is positive.",
            f"{kernel_id} takes block edges from 1 to {max_edge}; its listed ones are {', '.join(map(str, edges))}.",
        )


def host_backend(name: str) -> HostBackend | None:
    """The backend that runs ``name`` on the host (a CPU baseline), or None for
    a GPU kernel. An id is looked up as sweep looks it up (backends.for_kernel),
    so a misspelt one is compared with every id, the CPU baselines' too; a
    user's file is left to catalogue.get, which reads it."""
    from gemmlab.backends.base import HostBackend
    from gemmlab.kernels import catalogue

    if catalogue.is_file_name(name):
        return None
    backend = backends.for_kernel(name)
    return backend if isinstance(backend, HostBackend) else None


def on_host(name: str) -> bool:
    """Whether ``name`` is a CPU baseline."""
    return backends.on_host(name)


def host_seconds(backend: HostBackend, kernel_id: str, shape: Shape, dtype: str) -> float | None:
    """The seconds one call of a CPU baseline is predicted to take, where that
    is over :data:`LONG_HOST_RUN_S` and the point will run; None otherwise."""
    seconds = backend.predicted_ms(kernel_id, shape, 0) / 1e3
    if seconds > LONG_HOST_RUN_S and not backend.violations(kernel_id, shape, 0, dtype):
        return seconds
    return None


def measure_on_host(backend: HostBackend, kernel_id: str, shape: Shape, dtype: str, reps: int,
                    seed: int | None) -> dict:  # fmt: skip
    """A CPU baseline verified against the float64 reference and timed on this host, as a sweep measures it."""
    return backend.measure(kernel_id, shape, dtype, reps=reps, max_seconds=HOST_SERIES_S, seed=seed)


def best(shape: Shape, dtype: str | None, db: str | Path, reps: int) -> tuple[Any, RunResult]:
    """The dispatcher's pick for ``shape`` (`gemmlab dispatch tune`), run,
    verified and timed beside cuBLAS: (the pick, its result)."""
    from gemmlab.api.matmul import dispatch
    from gemmlab.measure.run import run as run_kernel
    from gemmlab.studies.suite import dtype_name

    kind = dtype_name(dtype or "float32")
    choice, spec = dispatch(shape, kind, Path(db))
    return choice, run_kernel(choice.kernel, shape, None, kind, spec=spec, reps=reps)


def config_label(config: dict) -> str:
    """A configuration as `gemmlab run` prints it: KEY=VALUE, space-separated."""
    from gemmlab.studies.tune import config_label as label

    return label(config)


def kernels_seen_text(names: Sequence[str], limit: int = 4) -> str:
    """The kernels the timed calls ran, each once, in the order they first ran."""
    from gemmlab.measure.activity import distinct

    return distinct(names, limit=limit)


def _shape(size: int | None, m: int | None, n: int | None, k: int | None) -> Shape:
    if size is not None and not (m or n or k):
        return Shape.square(size)
    if size is None and m and n and k:
        return Shape(m, n, k)
    raise DeclarationError(
        "a run needs one square size or all of m, n and k.", "Give run(kernel, 1024) or run(kernel, m=.., n=.., k=..)."
    )
