"""One type for every tunable ladder (kernels/sgemm, kernels/tensor).

A :class:`Rung` is a kernel whose tile sizes are template parameters: its
named default configuration, the configurations a search tries, and what
follows from a configuration. A :class:`Ladder` is a family's rungs with the
family's own limits and the function that builds a catalogue entry for one
configuration. A configuration is a dict of template parameter -> value,
written by keyword (``Config(BM=128, BN=256, ...)``), never a positional tuple;
it is what KernelSpec.config, RunResult.config and the tuner store."""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from gemmlab.core.errors import ConstraintError, UnknownName
from gemmlab.core.shapes import MAX_GRID_YZ, Dim3, Shape
from gemmlab.kernels.spec import Constraint, KernelSpec

Config = dict[str, int]

# The classes of shape the dispatcher tells apart (studies/dispatch.py: shape_class), which a rung serves.
SHAPE_CLASSES = ("skinny-m", "skinny-n", "k-heavy", "few-tiles", "large")


def _no_rules(c: Config) -> list[str]:
    return []


def _no_registers(c: Config) -> int:
    return 0


def _block_tile(c: Config) -> tuple[int, int]:
    return c["BM"], c["BN"]


@dataclass(frozen=True)
class Rung:
    """One kernel of a tunable ladder. Fields a family does not use keep their defaults."""

    id: str
    source: str  # the .cu file, in its family's folder
    summary: str
    # The default configuration; its keys are the template parameters after the element type, in template order.
    default: Config
    threads: Callable[[Config], int]
    smem_bytes: Callable[[Config], int]  # shared memory per block: dynamic when dynamic_smem, else static
    cgma: Callable[[Config], float]
    rules: Callable[[Config], list[str]] = _no_rules  # the kernel's own requirements, as sentences
    # What configs() tries besides the default, each laid over the default (it names only what it changes).
    search: tuple[Config, ...] = ()
    # When search is empty: per parameter, the values whose every combination configs() tries.
    choices: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    dtypes: tuple[str, ...] = ("float32",)
    tile: Callable[[Config], tuple[int, int]] = _block_tile  # rows x columns of C per block
    block: Callable[[Config], Dim3] | None = None  # None: (threads, 1, 1)
    dynamic_smem: bool = False
    persistent: bool = False  # KernelSpec.persistent: the grid counts tiles
    dependent_launch: bool = False  # KernelSpec.dependent_launch: it waits for the launch before it (PDL)
    grid: Callable[[Config], Callable[[Shape, int], Dim3]] | None = None  # None: the family's grid
    workspace: Callable[[Config], Callable[[Shape, int], int]] | None = None  # KernelSpec.workspace_bytes
    constraints: tuple[Constraint, ...] = ()  # requirements on the shape beyond the grid's
    # Requirements on the shape that depend on the configuration (sgemm_skinny's M <= ROWS).
    shape_rules: Callable[[Config], tuple[Constraint, ...]] | None = None
    # Launch facts passed as template arguments after the configuration (KernelSpec.template_fixed).
    fixed: Mapping[str, int] = field(default_factory=dict)
    # The FP32 ladder's register estimate: accumulators and operand registers
    # per thread in the inner loop, and the most accumulators it allows.
    outputs: Callable[[Config], int] = _no_registers
    fragments: Callable[[Config], int] = _no_registers
    max_accumulators: int = 0
    # The tensor-core ladder's instructions and operands.
    sass: tuple[str, ...] = ()  # KernelSpec.sass
    archs: tuple[str, ...] = ()  # KernelSpec.archs
    min_cc: tuple[int, int] = (0, 0)
    k_bytes_multiple: int = 0  # KernelSpec.k_bytes_multiple
    tma: bool = False  # operands are TMA tensor maps (boxes of BM and BN / cluster rows)
    cluster: int = 1  # blocks per cluster, along M
    # Blocks per cluster along x that the configuration decides (tc_small's
    # slices of K sharing one tile); None: ``cluster``. Not a multicast: the
    # TMA boxes stay whole.
    cluster_size: Callable[[Config], int] | None = None
    # Blocks of a cluster that share B by TMA multicast, each loading BN / multicast
    # of its rows (tc_split_k's CLUSTER); None: ``cluster``.
    multicast: Callable[[Config], int] | None = None
    # Blocks of a cluster that share A the same way, each loading BM / multicast_a
    # of its rows (tc_small's PAIR_COLS); None: none do.
    multicast_a: Callable[[Config], int] | None = None
    # What the studies read of a rung (studies/dispatch.py and studies/stress.py derive their lists from these).
    # The shape classes (SHAPE_CLASSES) the dispatcher tries it on, each with its place among the rungs
    # of that class (1: tried first).
    serves: Mapping[str, int] = field(default_factory=dict)
    # Shape classes of ``serves`` where the dispatcher times every configuration, not the few best-filling.
    every_config: tuple[str, ...] = ()
    # The element types whose fallback it is (a shape no tuned pick takes), each with its place in that
    # dtype's order (1: tried first).
    default_for: Mapping[str, int] = field(default_factory=dict)
    # Whether its blocks (in some configuration) wait for one another or meet through memory: cluster
    # barriers, multicast, counters, a fix-up of partial tiles. Its .cu's header argues why that is safe;
    # `gemmlab stress` checks such kernels by default.
    cross_block: bool = False

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(self.default)

    def config(self, changes: Mapping[str, int] | None = None) -> Config:
        """The default with ``changes`` laid over it, in template order; UnknownName
        for a parameter the rung does not have."""
        changes = changes or {}
        unknown = set(changes) - set(self.default)
        if unknown:
            raise UnknownName(
                f"{self.id} has no parameter {', '.join(sorted(unknown))}.",
                f"Its parameters: {', '.join(self.params)}.",
            )
        return {p: changes.get(p, v) for p, v in self.default.items()}


@dataclass(frozen=True)
class Ladder:
    """A family of tunable rungs: what the catalogue lists and the tuner searches."""

    name: str  # "FP32 ladder"
    rungs: tuple[Rung, ...]
    # The family's limits (threads, shared memory, registers) a configuration of a rung breaks, as sentences.
    limits: Callable[[Rung, Config], list[str]]
    build: Callable[[Rung, Config], KernelSpec]  # the catalogue entry of a rung for one configuration
    # Rungs written after the newest stored benchmark: configs() and variant()
    # know them, the catalogue does not yet.
    candidates: tuple[Rung, ...] = ()

    def __post_init__(self) -> None:
        for rung in (*self.rungs, *self.candidates):
            unknown = {*rung.serves, *rung.every_config} - set(SHAPE_CLASSES)
            assert not unknown, f"{rung.id} serves unknown shape classes {unknown}"
            assert set(rung.every_config) <= set(rung.serves), f"{rung.id}: every_config outside the classes it serves"
        # Each class's and each dtype's rungs in an order: places 1, 2, 3, ... with none shared.
        orders = [("serves", r.serves) for r in (*self.rungs, *self.candidates)]
        orders += [("default_for", r.default_for) for r in (*self.rungs, *self.candidates)]
        for kind, key in sorted({(kind, key) for kind, places in orders for key in places}):
            found = sorted(places[key] for k, places in orders if k == kind and key in places)
            assert found == list(range(1, len(found) + 1)), f"the {self.name}'s places in {kind} {key}: {found}"

    @cached_property
    def kernels(self) -> tuple[KernelSpec, ...]:
        """The catalogue's entries: every rung but the candidates, at its default."""
        return tuple(self.build(r, r.config()) for r in self.rungs)

    @cached_property
    def _by_id(self) -> dict[str, Rung]:
        return {r.id: r for r in (*self.rungs, *self.candidates)}

    def rung(self, kernel_id: str) -> Rung:
        """The rung named ``kernel_id``; UnknownName listing the ladder's kernels otherwise."""
        try:
            return self._by_id[kernel_id]
        except KeyError:
            raise UnknownName(
                f"'{kernel_id}' is not a kernel of the {self.name}.", f"The ladder's kernels: {', '.join(self._by_id)}."
            ) from None

    def violations(self, rung: Rung, c: Config) -> list[str]:
        """Every family limit and kernel requirement the configuration breaks."""
        return self.limits(rung, c) + rung.rules(c)

    def configs(self, kernel_id: str) -> list[Config]:
        """The rung's default, then each configuration of its search (or of the
        product of its choices) that is new and breaks no rule."""
        r = self.rung(kernel_id)
        if r.search:
            candidates = [r.config(s) for s in r.search]
        else:
            values = itertools.product(*(r.choices[p] for p in r.params))
            candidates = [dict(zip(r.params, v, strict=True)) for v in values]
        found = [r.config()]
        for c in candidates:
            if c not in found and not self.violations(r, c):
                found.append(c)
        return found

    def variant(self, kernel_id: str, config: Mapping[str, int]) -> KernelSpec:
        """The entry of ``kernel_id`` built with ``config`` over its default.
        UnknownName for a parameter the rung lacks; ConstraintError naming every
        rule the result breaks."""
        r = self.rung(kernel_id)
        c = r.config(config)
        problems = self.violations(r, c)
        if problems:
            raise ConstraintError(
                f"{kernel_id} cannot take {c}: {'; '.join(problems)}.",
                f"configs('{kernel_id}') lists the configurations it takes.",
            )
        return self.build(r, c)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def needs(condition: bool, message: str) -> list[str]:
    """[] when ``condition`` holds, else the requirement it breaks, in words."""
    return [] if condition else [message]


def grid_rows_fit(rows: int) -> Constraint:
    """gridDim.y (blocks of ``rows`` rows along M) may not exceed 65535."""

    def check(shape: Shape, block_edge: int) -> str | None:
        blocks = cdiv(shape.m, rows)
        if blocks > MAX_GRID_YZ:
            return f"M = {shape.m} needs {blocks} blocks of {rows} rows in grid y, over the limit of {MAX_GRID_YZ}"
        return None

    return Constraint(f"at most {MAX_GRID_YZ} blocks of {rows} rows along M", check)


def grid_y_fits(grid: Callable[[Shape, int], tuple[int, int, int]]) -> Constraint:
    """gridDim.y of ``grid`` (a kernel's grid for a shape and block edge) may not exceed 65535."""

    def check(shape: Shape, block_edge: int) -> str | None:
        rows = grid(shape, block_edge)[1]
        if rows > MAX_GRID_YZ:
            return (
                f"M = {shape.m}, N = {shape.n} needs {rows} rows of blocks in grid y, over the limit of {MAX_GRID_YZ}"
            )
        return None

    return Constraint(f"at most {MAX_GRID_YZ} rows of blocks in grid y", check)


def rungs_beside(spec_file: str, package: str) -> tuple[tuple[Rung, ...], tuple[Rung, ...]]:
    """The rungs of a ladder, read from the ``rungNN_name.py`` modules beside
    ``spec_file`` in their numbers' order, each module's ``RUNG``: those in the
    catalogue, then the candidates (a module that sets ``CANDIDATE = True``:
    written after the newest stored benchmark of its ladder). Adding a rung is
    its ``.cu``, its module and its worklog entry; the ladder finds it."""
    modules = [importlib.import_module(f"{package}.{path.stem}")
               for path in sorted(Path(spec_file).parent.glob("rung[0-9][0-9]_*.py"))]  # fmt: skip
    listed = tuple(m.RUNG for m in modules if not getattr(m, "CANDIDATE", False))
    candidates = tuple(m.RUNG for m in modules if getattr(m, "CANDIDATE", False))
    return listed, candidates
