"""The points of a sweep: what :func:`plan` expands kernels x shapes x block
edges (x a user's kernel's parameter values) into, each a :class:`SweepPoint`
with its repetitions planned, and the points a kernel cannot take, with the
reason. Each kernel's backend (:func:`gemmlab.backends.for_kernel`) answers
for its dtypes, block edges, violations and predicted time; nothing here
needs a GPU. :mod:`gemmlab.studies.sweep` runs and stores the points."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gemmlab import backends
from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue, user
from gemmlab.kernels.declaration.base import DeclaredSpec
from gemmlab.kernels.spec import KernelSpec
from gemmlab.store.rows import point_key

# A point variant that is measured once and stored as one row per host-memory kind.
E2E = "e2e"
E2E_ROWS = ("pinned", "pageable")

# Points predicted (by their backend's predicted_ms) slower than this get SLOW_REPS timed repetitions and one warm-up.
SLOW_MS = 500.0
SLOW_REPS = 3


@dataclass(frozen=True)
class SweepPoint:
    """One point of a sweep. ``variant``: "" (the kernel's own time) or "e2e"."""

    kernel: str
    shape: Shape
    block_edge: int = 0
    dtype: str = "float32"
    variant: str = ""
    reps: int = 20
    warmup: int = 2
    # Parameters of a user's kernel set for this point, (name, value) pairs
    # (see ``params`` in :func:`plan`); None: the kernel as declared or catalogued.
    config: tuple[tuple[str, int], ...] | None = None

    @property
    def label(self) -> str:
        edge = f" b{self.block_edge}" if self.block_edge else ""
        extra = f" {self.variant}" if self.variant else ""
        config = "".join(f" {name}={value}" for name, value in self.config or ())
        return f"{self.kernel} {self.shape}{edge}{config} {self.dtype}{extra}"

    @property
    def runner_options(self) -> dict:
        """What the runner takes beyond the common arguments: the configuration, when the point sets one."""
        return {"config": dict(self.config)} if self.config else {}

    @property
    def row_variants(self) -> tuple[str, ...]:
        return E2E_ROWS if self.variant == E2E else (self.variant,)

    def keys(self) -> list[str]:
        """The point keys of the rows this point stores: the kernel runs on its
        backend with the catalogue's configuration, or the point's own."""
        s, backend, config = self.shape, kernel_backend(self.kernel), self.run_config
        return [point_key(self.kernel, s.m, s.n, s.k, self.block_edge, self.dtype, v, backend=backend, config=config)
                for v in self.row_variants]  # fmt: skip

    @property
    def run_config(self) -> dict | None:
        """The configuration the kernel runs with: the point's own, else the catalogue's."""
        return variant_spec(self.kernel, dict(self.config)).config if self.config else kernel_config(self.kernel)


def kernel_backend(kernel_id: str) -> str:
    """The name of the backend that runs a kernel (see gemmlab.backends)."""
    return backends.for_kernel(kernel_id).name


def kernel_config(kernel_id: str) -> dict | None:
    """The configuration a sweep runs a kernel with: the catalogue's (None for a kernel without one)."""
    return None if backends.on_host(kernel_id) else catalogue.get(kernel_id).config


def variant_spec(kernel_id: str, config: Mapping[str, int]) -> KernelSpec:
    """The entry a point with its own configuration runs: a user's kernel with
    those parameters fixed (:func:`gemmlab.kernels.user.variant`), or a tunable
    catalogue kernel's variant (:func:`gemmlab.kernels.catalogue.variant`)."""
    spec = catalogue.get(kernel_id)
    if spec.declaration is not None:
        return user.variant(spec, config)
    return catalogue.variant(kernel_id, dict(config))


def parameter_configs(kernel_id: str, params: Mapping[str, Sequence[int] | None]) -> list[tuple | None]:
    """The configurations a sweep runs a user's kernel with: the product of the
    values given for its declared parameters (None for a parameter: its declared
    values). A parameter the kernel does not declare is not its to set (another
    kernel of the sweep may declare it); the edge is set by the block edges.
    [None] when nothing applies: the kernel as declared."""
    spec = _declared(kernel_id) if params else None
    declared = {p.name: p.values for p in getattr(spec, "parameters", ())}
    if spec is not None and getattr(spec, "edge", None) in params:
        raise GemmlabError(
            f"{spec.edge} is the block edge of {kernel_id}; --param does not set it.",
            f"Give its values with --blocks, e.g. --blocks {','.join(map(str, declared[spec.edge]))}.",
        )
    axes = [[(name, v) for v in (params[name] or declared[name])] for name in declared if name in params]
    if not axes:
        return [None]
    return [tuple(combo) for combo in itertools.product(*axes)]


def _declared(kernel_id: str) -> DeclaredSpec | None:
    """A user's kernel's entry; None for any other (a catalogue id, a CPU baseline, another backend's)."""
    spec = catalogue.get(kernel_id) if catalogue.is_declared(kernel_id) else None
    return spec if isinstance(spec, DeclaredSpec) else None


def check_params(kernels: Sequence[str], params: Mapping[str, Sequence[int] | None]) -> None:
    """Refuse a parameter that no kernel of the sweep declares (a typo, most often)."""
    declared = {p.name for k in kernels for p in getattr(_declared(k), "parameters", ())}
    unknown = sorted(set(params) - declared)
    if unknown:
        raise GemmlabError(
            f"No kernel of the sweep declares the parameter{'s' * (len(unknown) > 1)} {', '.join(unknown)}.",
            f"Parameters declared: {', '.join(sorted(declared)) or 'none'} (under [parameters] in a user's "
            "declaration).",
        )


def plan(
    kernels: Sequence[str],
    shapes: Sequence[Shape],
    block_edges: Sequence[int] | None = None,
    dtype: str | None = None,
    *,
    variant: str = "",
    reps: int = 20,
    params: Mapping[str, Sequence[int] | None] | None = None,
) -> tuple[list[SweepPoint], list[tuple[str, str]]]:
    """Expand kernels x shapes x block edges (x parameter values) into points, and
    list those a kernel cannot take (with the reason). ``block_edges=None``: each
    kernel's own documented edges; kernels that take no block edge get one point
    (edge 0). ``dtype=None``: each kernel's first dtype. ``params``: values of
    users' kernels' declared parameters other than the edge, each point one
    combination (see :func:`parameter_configs`). Each kernel's backend answers
    for it; unknown kernels raise UnknownName.
    """
    points: list[SweepPoint] = []
    refused: list[tuple[str, str]] = []
    ids = [backends.kernel_id(name) for name in kernels]  # a user's kernel given by its path is stored under its id
    check_params(ids, params or {})
    for kernel in ids:
        backend = backends.for_kernel(kernel)
        kind = dtype or backend.dtypes(kernel)[0]
        own_edges = backend.block_edges(kernel)
        edges = own_edges if block_edges is None or own_edges == (0,) else tuple(block_edges)
        for config in parameter_configs(kernel, params or {}):
            for shape in shapes:
                for edge in dict.fromkeys(edges):
                    problems = _violations(kernel, config, shape, edge, kind)
                    p = timed_point(kernel, shape, edge, kind, variant=variant, reps=reps, config=config)
                    if problems:
                        refused.append((p.label, "; ".join(problems)))
                    else:
                        points.append(p)
    return points, refused


def _violations(kernel: str, config: tuple | None, shape: Shape, edge: int, dtype: str) -> list[str]:
    if config is None:
        return backends.for_kernel(kernel).violations(kernel, shape, edge, dtype)
    return variant_spec(kernel, dict(config)).violations(shape, edge, dtype)


def timed_point(
    kernel: str, shape: Shape, edge: int, dtype: str, *, variant: str = "", reps: int = 20, config: tuple | None = None
) -> SweepPoint:
    """A point with its repetitions planned: slow points get few (see SLOW_MS)."""
    try:
        slow = backends.for_kernel(kernel).predicted_ms(kernel, shape, edge) > SLOW_MS
    except (GemmlabError, ValueError, ZeroDivisionError):
        slow = False
    if slow:
        return SweepPoint(kernel, shape, edge, dtype, variant, reps=min(reps, SLOW_REPS), warmup=1, config=config)
    return SweepPoint(kernel, shape, edge, dtype, variant, reps=reps, config=config)
