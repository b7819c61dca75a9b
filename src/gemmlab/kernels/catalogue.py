"""The kernel catalogue: one explicit list of the kernel families, each
defined in the ``spec.py`` beside its ``.cu`` files. Adding a family means
adding it here (to LADDERS as well when its kernels are tunable); adding a
kernel means one ``.cu`` file and one entry in its family's spec.

The tunable families are ladders (gemmlab.kernels.ladder): :func:`configs`
and :func:`variant` work for any of their kernels, and the tuner searches
exactly these."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

from gemmlab.core.dtypes import DTYPE_CTYPES
from gemmlab.core.errors import DeclarationError, UnknownName, unknown_name
from gemmlab.core.shapes import MAX_INDEX, Shape
from gemmlab.kernels.doc.spec import DOC_MATMUL
from gemmlab.kernels.ladder import Config, Ladder, Rung
from gemmlab.kernels.lowp.spec import LADDER as LOWP_LADDER
from gemmlab.kernels.memory.spec import MEMORY_KERNELS
from gemmlab.kernels.peers.spec import PEERS
from gemmlab.kernels.sgemm.spec import LADDER as SGEMM_LADDER
from gemmlab.kernels.spec import KernelSpec, Point
from gemmlab.kernels.tensor.spec import LADDER as TENSOR_LADDER
from gemmlab.kernels.user import load_path

# The families whose kernels take named configurations: what `gemmlab tune` searches.
LADDERS: tuple[Ladder, ...] = (SGEMM_LADDER, TENSOR_LADDER, LOWP_LADDER)

# Every family, in the order `gemmlab kernels` lists them.
FAMILIES: tuple[tuple[KernelSpec, ...], ...] = (DOC_MATMUL, MEMORY_KERNELS, *(ladder.kernels for ladder in LADDERS))

CATALOGUE: tuple[KernelSpec, ...] = tuple(spec for family in FAMILIES for spec in family)
_BY_ID = {spec.id: spec for spec in CATALOGUE}
assert len(_BY_ID) == len(CATALOGUE), "duplicate kernel id in the catalogue"

# The peer rungs (Triton, CuTe DSL: kernels/peers): found by id like the
# catalogue's, but apart from it, since NVRTC compiles none of them and their
# libraries are optional extras. `gemmlab kernels` lists them after the catalogue.
_PEERS = {spec.id: spec for spec in PEERS}
assert not set(_PEERS) & set(_BY_ID), "a peer rung shares an id with the catalogue"


# Users' kernels (gemmlab.kernels.user, gemmlab.kernels.callables), added the
# first time a command names one by its path; from then on this process finds
# them by their id as well ("folder/stem": a catalogue id never has a slash),
# so everything downstream of the command line passes ids, whatever the
# kernel's origin.
_DECLARED: dict[str, KernelSpec] = {}
# What names a user's kernel rather than a catalogue id.
FILE_SUFFIXES = (".toml", ".cu", ".py")


def kernel_ids() -> list[str]:
    """The catalogue's ids (users' kernels are not listed)."""
    return list(_BY_ID)


def candidate_ids() -> list[str]:
    """The ladders' candidate rungs: kernels for the shapes the big tiles lose
    (skinny, K-heavy, small, odd), which the dispatcher searches and measures
    on its shape suite. They are not in the ladders' square-size tables (a
    skinny rung cannot take 4096 x 4096 x 4096), but `gemmlab run` and the
    other commands take them by id, at their default configuration."""
    return [rung.id for ladder in LADDERS for rung in ladder.candidates]


def peer_ids() -> list[str]:
    """The peer rungs' ids (kernels/peers)."""
    return list(_PEERS)


def known_ids() -> list[str]:
    """Every id :func:`get` takes without a file: the catalogue's, the candidate
    rungs' and the peer rungs' (what a misspelt id is compared with)."""
    return [*_BY_ID, *sorted(_CANDIDATES), *_PEERS]


def is_file_name(name: str) -> bool:
    """Whether a command's kernel argument is a path to a user's kernel rather than an id."""
    return name.endswith(FILE_SUFFIXES) or Path(name).is_file()


def is_declared(kernel_id: str) -> bool:
    """Whether ``kernel_id`` is the id of a user's kernel this process has read
    (see :func:`declare`): what tells a user's kernel named by its id from
    anything else, never the spelling of the id."""
    return kernel_id in _DECLARED


def get(kernel_id: str) -> KernelSpec:
    """The entry for ``kernel_id``: a catalogue id, a user's kernel by the path
    of its file (read and remembered, see :func:`declare`) or by the id it was
    remembered under. An unknown id suggests close names."""
    spec = _BY_ID.get(kernel_id) or _PEERS.get(kernel_id) or _DECLARED.get(kernel_id)
    if spec is not None:
        return spec
    if kernel_id in _CANDIDATES:
        return variant(kernel_id, {})
    if is_file_name(kernel_id):
        return declare(load_path(Path(kernel_id)))
    raise unknown_name("kernel", kernel_id, known_ids(), "`gemmlab kernels` lists every kernel.") from None


def declare(spec: KernelSpec) -> KernelSpec:
    """Remember a user's kernel under its id for the rest of the process; a
    declaration read again (edited, or declared from Python for the same file)
    replaces the one before. Two different kernel files that would share one id
    are refused: their results would mix."""
    assert spec.declaration is not None, "only users' kernels are declared"
    known = _DECLARED.get(spec.id)
    if known is not None and Path(known.source).resolve() != Path(spec.source).resolve():
        raise DeclarationError(
            f"two kernels are both called {spec.id}: {known.source} and {spec.source}.",
            "Rename one folder or file: a user's kernel is called by its folder and file name.",
        )
    _DECLARED[spec.id] = spec
    return spec


def reference(kernel_id: str) -> str:
    """What names ``kernel_id`` in another process (a watchdog's child, the
    profiler's target): a user's kernel's declaration as an absolute path,
    otherwise the id itself."""
    spec = _BY_ID.get(kernel_id) or _DECLARED.get(kernel_id)
    if spec is not None and spec.declaration is not None:
        return str(spec.declaration.resolve())
    return kernel_id


def point(
    kernel_id: str,
    shape: Shape,
    block_edge: int | None = None,
    dtype: str | None = None,
    *,
    spec: KernelSpec | None = None,
) -> Point:
    """Resolve defaults and check every constraint; raise a clear error otherwise.

    ``spec``: an entry to use instead of the catalogue's (a tuned configuration,
    see :func:`variant`)."""
    spec = spec or get(kernel_id)
    if dtype is None:
        dtype = spec.dtypes[0]
    elif dtype not in DTYPE_CTYPES:
        raise UnknownName(f"Unknown dtype '{dtype}'.", f"Use one of {', '.join(spec.dtypes)} for {spec.id}.")
    if not spec.takes_block_edge:
        block_edge = 0
    elif block_edge is None:
        block_edge = spec.default_block_edge()
    if spec.violations(shape, block_edge, dtype):
        spec.check(shape, block_edge, dtype, size_fix(spec, shape, dtype))
    return Point(spec, shape, block_edge, dtype)


def size_fix(spec: KernelSpec, shape: Shape, dtype: str) -> str:
    """The advice for a shape ``spec`` cannot take. It names another kernel only
    after checking that kernel takes the shape: the spec's any-size alternative,
    else another of that alternative's family. A shape over the 32-bit index
    limit that every GPU kernel shares gets that limit and the largest square."""
    if max(shape.m * shape.k, shape.k * shape.n, shape.m * shape.n) > MAX_INDEX:
        return (
            "No GPU kernel takes it: each indexes with 32-bit ints, so A, B and C may have at most 2^31 - 1 "
            f"elements each (the largest square size is {math.isqrt(MAX_INDEX)})."
        )
    if spec.any_size_alternative == spec.id:  # no other kernel does this one's work: its rule is the advice
        return "Pick a size that meets it."
    taker = next(_takers(spec.any_size_alternative, shape, dtype, spec.id), None)
    if taker is None:
        alternative = spec.any_size_alternative
        return f"Pick a size that meets it; neither `{alternative}` nor its family takes this shape in {dtype}."
    other, edge = taker
    how = f"`{other.id}`" if edge == other.default_block_edge() else f"`{other.id}` with --block {edge}"
    return f"Pick a size that meets it, or use {how}, which takes this shape."


def _takers(alternative: str, shape: Shape, dtype: str, leaving_out: str) -> Iterator[tuple[KernelSpec, int]]:
    """The kernels of ``alternative``'s family but ``leaving_out`` that take
    ``shape`` in ``dtype``, ``alternative`` first, each with the first block
    edge it takes it at (its default tried first)."""
    family = next((f for f in (*FAMILIES, PEERS) if any(s.id == alternative for s in f)), ())
    for other in sorted(family, key=lambda s: s.id != alternative):
        if other.id == leaving_out:
            continue
        edges = sorted(other.block_edges or (0,), key=lambda e: e != other.default_block_edge())
        edge = next((e for e in edges if not other.violations(shape, e, dtype)), None)
        if edge is not None:
            yield other, edge


def rungs(*, candidates: bool = True) -> list[Rung]:
    """Every ladder's rungs in the catalogue's order, each ladder's candidate
    rungs after its own (``candidates=False``: the catalogue's alone). The
    studies' lists are these filtered by a rung's facts (Rung.serves,
    default_for, every_config, cross_block)."""
    return [rung for ladder in LADDERS for rung in (*ladder.rungs, *(ladder.candidates if candidates else ()))]


# Every rung of every ladder, candidates included, by kernel id.
_LADDER_OF = {rung.id: ladder for ladder in LADDERS for rung in (*ladder.rungs, *ladder.candidates)}
_CANDIDATES = frozenset(rung.id for ladder in LADDERS for rung in ladder.candidates)


def ladder(kernel_id: str) -> Ladder:
    """The ladder ``kernel_id`` is a rung of; UnknownName, listing every tunable kernel, otherwise."""
    try:
        return _LADDER_OF[kernel_id]
    except KeyError:
        kernels = "; ".join(f"the {lad.name}'s {', '.join(r.id for r in lad.rungs)}" for lad in LADDERS)
        raise unknown_name("tunable kernel", kernel_id, _LADDER_OF, f"Tunable kernels: {kernels}.") from None


def configs(kernel_id: str) -> list[Config]:
    """Every configuration of a tunable kernel's search that meets its limits and rules; the default first."""
    return ladder(kernel_id).configs(kernel_id)


def variant(kernel_id: str, config: Config) -> KernelSpec:
    """The entry of a tunable kernel built with ``config`` (parameters not given
    keep their defaults); ConstraintError names every reason it cannot be built."""
    return ladder(kernel_id).variant(kernel_id, config)
