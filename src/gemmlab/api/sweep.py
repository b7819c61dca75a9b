"""A sweep from Python: kernels x shapes x block edges, stored as measured."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from gemmlab import backends
from gemmlab.api.kernels import Kernel, kernel
from gemmlab.api.results import Sweep
from gemmlab.core.errors import DeclarationError
from gemmlab.core.shapes import Shape
from gemmlab.results.store import DEFAULT_PATH, Store


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
    from gemmlab.studies.points import plan
    from gemmlab.studies.sweep import sweep as run_sweep

    wanted = [Shape.square(s) for s in sizes or ()] + [Shape(*s) for s in shapes or ()]
    if not wanted:
        raise DeclarationError("a sweep needs sizes or shapes.", "Give sizes=[256, 512] or shapes=[(M, N, K)].")
    # The CPU baselines have no spec; every other kernel is named by its id from here on.
    names = [k if isinstance(k, str) and backends.on_host(k) else kernel(k).id for k in kernels]
    points, refused = plan(names, wanted, blocks, dtype, reps=reps)
    with Store.open(db) as store:
        summary = run_sweep(points, store, experiment, force=force, progress=progress, max_seconds=max_seconds)
    summary.refused[:0] = refused
    return Sweep(summary, Path(db), experiment, [p.kernel for p in points])
