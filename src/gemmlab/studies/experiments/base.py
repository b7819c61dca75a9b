"""What an experiment is: its series, the published figures it is compared
with, and the layout of its report section.

Each experiment is a few series (kernels x sizes x block edges, with a
variant and a way to turn a size into a shape); :meth:`Experiment.points`
expands them to sweep points and leaves out, with the reason, the
combinations a kernel cannot take (e.g. ``tiled`` with edge 22 at size 128).
An experiment whose kernels are not all in the catalogue yet says so and is
skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gemmlab import backends
from gemmlab.core.errors import UnknownName
from gemmlab.core.shapes import Shape
from gemmlab.studies.points import SweepPoint, plan
from gemmlab.studies.reference import Published

REPRODUCE_REPS = 20


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
class PlotSpec:
    """One plot of a report section: a kind from ``report.plots.PLOTS`` and its
    options (named as that plot function's keyword arguments). A name, not the
    function, so that studies/ does not import the report."""

    kind: str
    options: tuple[tuple[str, Any], ...] = ()


def plot(kind: str, **options: Any) -> PlotSpec:
    return PlotSpec(kind, tuple(options.items()))


# Which published metric (reference.METRICS) sits beside which of the
# report's metrics (report.model.METRICS keys), unless a layout says otherwise.
DEFAULT_PUBLISHED = {"time": "time_ms", "gflops": "gflops", "bandwidth": "gbs", "gips": "gips", "cgma_measured": "cgma"}


@dataclass(frozen=True)
class Layout:
    """What an experiment's report section shows: its heading, its plots (a
    roofline is added wherever the data allow one), which published metric
    sits beside which of ours, and the document's GPU for a second occupancy
    table."""

    title: str
    plots: tuple[PlotSpec, ...]
    published_metrics: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_PUBLISHED))
    document_cc: str | None = None


@dataclass(frozen=True, eq=False)
class Experiment:
    """One experiment of a source document. ``published`` is the part of the
    document's figures it re-runs (None only where the document printed no
    measurements); ``published`` and ``layout`` have no default, so an
    experiment cannot be written without deciding both."""

    name: str
    title: str
    source_doc: str
    series: tuple[Series, ...]
    published: Published | None
    layout: Layout
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
