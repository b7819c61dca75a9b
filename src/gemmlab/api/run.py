"""One kernel run from Python, with the policy `gemmlab run` has."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gemmlab.api.kernels import Kernel, kernel
from gemmlab.api.results import Comparison, Result
from gemmlab.core.errors import DeclarationError
from gemmlab.core.shapes import Shape


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
) -> Result | Comparison:
    """Run a kernel once on a shape: verified against a float64 reference and
    timed beside its library. ``size``: a square shape; or ``m``, ``n``, ``k``.
    ``vs``: other kernels run on the same shape (each with its default block
    edge and the first kernel's element type); a :class:`Comparison` then."""
    from gemmlab.measure.run import run as run_kernel

    shape = _shape(size, m, n, k)
    first = kernel(which)
    results = [run_kernel(first.id, shape, block, dtype, reps=reps, flush_l2=flush_l2, seed=seed,
                          baseline=baseline, spec=first.spec)]  # fmt: skip
    for other in map(kernel, vs):
        results.append(run_kernel(other.id, shape, None, results[0].dtype, reps=reps, flush_l2=flush_l2,
                                  seed=seed, baseline=baseline, spec=other.spec))  # fmt: skip
    wrapped = [Result(r.to_dict()) for r in results]
    return Comparison(wrapped) if vs else wrapped[0]


def _shape(size: int | None, m: int | None, n: int | None, k: int | None) -> Shape:
    if size is not None and not (m or n or k):
        return Shape.square(size)
    if size is None and m and n and k:
        return Shape(m, n, k)
    raise DeclarationError(
        "a run needs one square size or all of m, n and k.", "Give run(kernel, 1024) or run(kernel, m=.., n=.., k=..)."
    )
