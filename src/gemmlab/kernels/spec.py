"""What a kernel is, as data: its source, launch geometry, constraints and
models (FLOPs, bytes, analytic CGMA). Everything downstream (runner,
compiler, occupancy table, profiler, reports) reads a kernel through a
:class:`KernelSpec`; a :class:`Point` is one runnable configuration of it."""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from gemmlab.core.dtypes import DTYPE_CTYPES, DTYPE_ITEMSIZE, c_itemsize
from gemmlab.core.errors import CompileError, ConstraintError, DeviceLimitError
from gemmlab.core.shapes import MAX_GRID_YZ, MAX_INDEX, MAX_THREADS_PER_BLOCK, Dim3, Shape
from gemmlab.core.text import read_text
from gemmlab.problems.base import Problem
from gemmlab.problems.matmul import MATMUL

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable  # Python 3.11+, and only read by type checkers


@dataclass(frozen=True)
class Constraint:
    """One requirement a kernel places on a shape and block edge.

    ``violation`` returns ``None`` when the point is fine, otherwise a sentence
    naming the requirement that failed (with the numbers).
    """

    description: str
    violation: Callable[[Shape, int], str | None]


def multiple_of(dim: str, factor: Callable[[int], int], what: str) -> Constraint:
    """``dim`` ('m', 'n' or 'k') must be a multiple of ``factor(block_edge)``."""

    def check(shape: Shape, block_edge: int) -> str | None:
        value, f = getattr(shape, dim), factor(block_edge)
        if value % f:
            return f"{dim.upper()} = {value} is not a multiple of {what} ({f})"
        return None

    return Constraint(f"{dim.upper()} a multiple of {what}", check)


def at_most(dim: str, limit: int, why: str) -> Constraint:
    def check(shape: Shape, block_edge: int) -> str | None:
        value = getattr(shape, dim)
        if value > limit:
            return f"{dim.upper()} = {value} is over {limit} ({why})"
        return None

    return Constraint(f"{dim.upper()} <= {limit} ({why})", check)


def edge_multiple_of(factor: int) -> Constraint:
    def check(shape: Shape, block_edge: int) -> str | None:
        if block_edge % factor:
            return f"the block edge {block_edge} is not a multiple of {factor}"
        return None

    return Constraint(f"block edge a multiple of {factor}", check)


def grid_fits(rows_dim: str, per_block: Callable[[int], int]) -> Constraint:
    """gridDim.y (the blocks along ``rows_dim``) may not exceed 65535."""

    def check(shape: Shape, block_edge: int) -> str | None:
        blocks = math.ceil(getattr(shape, rows_dim) / per_block(block_edge))
        if blocks > MAX_GRID_YZ:
            return (
                f"{rows_dim.upper()} = {getattr(shape, rows_dim)} needs {blocks} blocks in "
                f"grid y, over the limit of {MAX_GRID_YZ}; use a larger block edge"
            )
        return None

    return Constraint(f"at most {MAX_GRID_YZ} blocks along {rows_dim.upper()}", check)


@dataclass(frozen=True)
class KernelSpec:
    """A catalogue entry. Geometry and models are functions of (shape, block_edge)."""

    id: str
    source: str | Path  # str: a path under gemmlab/kernels/; Path: a file anywhere (see kernel_source)
    function: str  # the __global__ template's name
    source_doc: str
    summary: str
    dtypes: tuple[str, ...]
    block_edges: tuple[int, ...]  # the edges the documents measured; () = no block edge
    grid: Callable[[Shape, int], Dim3]
    block: Callable[[Shape, int], Dim3]
    constraints: tuple[Constraint, ...] = ()
    dynamic_smem_elems: Callable[[Shape, int], int] = lambda s, b: 0
    flops: Callable[[Shape], int] = lambda s: 2 * s.m * s.n * s.k
    # Fewest bytes the kernel must move through device memory: each input read
    # once, the output written once (element counts; multiply by the item size).
    min_elems_moved: Callable[[Shape], int] = lambda s: s.m * s.k + s.k * s.n + s.m * s.n
    # Floating-point operations per global-memory load of one thread, from the
    # kernel's structure (the documents' CGMA). None: no model (a user's kernel,
    # whose structure gemmlab does not know), shown as "n/a" rather than a guess.
    cgma: Callable[[Shape, int], float] | None = lambda s, b: 1.0
    square_only: bool = False
    any_size_alternative: str = "tiled_any_size"
    max_edge: int = 32  # block edge x block edge threads must fit in 1024
    problem: Problem = MATMUL
    templated_on_edge: bool = True
    # Further template arguments (tile sizes, threads, stages, ...), appended in
    # order after the dtype and the block edge (after the dtype alone when
    # templated_on_edge is False). One catalogue entry is one instantiation.
    template_extra: tuple[int, ...] = ()
    # Their names, in the same order (a tunable kernel's configuration).
    template_params: tuple[str, ...] = ()
    # Launch facts the kernel takes as template arguments after those, in
    # order: constants its Python rules depend on (sgemm_edge_strips's widest
    # strip), written once in its spec. Not tuned and not part of its configuration.
    template_fixed: tuple[int, ...] = ()
    # Dynamic shared memory in bytes, when it is not dynamic_smem_elems
    # elements of the dtype (stages plus barriers, say); gets the dtype too.
    dynamic_smem_bytes: Callable[[Shape, int, str], int] | None = None
    # The only architectures the kernel compiles for, when it uses
    # architecture-specific instructions (wgmma, setmaxnreg: ("sm_90a",)).
    archs: tuple[str, ...] = ()
    # The oldest compute capability it runs on (mma.sync with bf16, cp.async: (8, 0)).
    min_cc: tuple[int, int] = (0, 0)
    # When non-zero: K x the element size must be a multiple of this many bytes
    # (rows of A and B copied in 16-byte pieces, or described by a TMA tensor map).
    k_bytes_multiple: int = 0
    # The same for N x C's element size (rows of C described by a TMA tensor map).
    n_bytes_multiple: int = 0
    # Blocks per cluster (x, y, z), for kernels launched in thread-block clusters.
    cluster: Dim3 | None = None
    # A persistent kernel's grid counts its blocks' work (tiles, say); the
    # runner launches at most as many blocks (or clusters) as the device holds
    # at once, and the kernel's blocks loop over the rest. A block that only
    # starts when another ends would otherwise do its whole share late.
    persistent: bool = False
    # The kernel waits (griddepcontrol.wait) for the launches it depends on
    # before its first read or write of global memory, so the runner may
    # launch it with programmatic stream serialization (PDL) on compute
    # capability 9.0 and newer: its blocks start, and run their prologue,
    # while the launch before it on the stream drains.
    dependent_launch: bool = False
    # Scratch device memory the kernel takes as one more argument after the
    # problem's, in bytes, for a shape and the number of blocks launched (a
    # persistent kernel's is only known at launch). The runner allocates it
    # zeroed, once per set of inputs, and every launch (same shape, same grid)
    # reuses it: a kernel that counts in it must leave it fit for the next
    # launch (sgemm_stream_k puts its counters back to zero; sgemm_padded_b's
    # count on from one launch to the next).
    workspace_bytes: Callable[[Shape, int], int] | None = None
    # SASS opcodes the kernel claims to use (HMMA, HGMMA, UTMALDG, ...): the
    # harness checks its cubin for each.
    sass: tuple[str, ...] = ()
    # The kernel's arguments by name (problems/matmul.py's MATMUL_ARGUMENT_NAMES),
    # in its own order, when it is not the problem's (Prepared.args): a user's
    # kernel taking (A, B, C, n), say. None: the problem's order.
    arguments: tuple[str, ...] | None = None
    # The backend that compiles and launches it, by name (gemmlab.backends):
    # "nvrtc" for CUDA C++; a user's Python function names its own.
    backend: str = "nvrtc"
    # Where a user's kernel was declared (its TOML or Python file); None for the catalogue's.
    declaration: Path | None = None

    @property
    def config(self) -> dict[str, int] | None:
        """The named template parameters, or None for a kernel without them."""
        if not self.template_params:
            return None
        return dict(zip(self.template_params, self.template_extra, strict=True))

    def compile_arch(self, device_arch: str) -> str:
        """The architecture to compile for on a GPU (or target) ``device_arch``
        (sm_XY, or its sm_XYa variant), or DeviceLimitError when the kernel
        cannot run there."""
        plain = device_arch.rstrip("af")
        if self.archs:
            for arch in self.archs:
                if arch.rstrip("af") == plain:
                    return arch
            raise DeviceLimitError(
                f"{self.id} uses instructions of {' and '.join(self.archs)} only; the target is {device_arch}.",
                "Use a kernel without architecture-specific instructions (`gemmlab kernels` lists them).",
            )
        digits = plain[3:]
        if digits.isdigit() and (int(digits[:-1]), int(digits[-1])) < self.min_cc:
            raise DeviceLimitError(
                f"{self.id} needs compute capability {self.min_cc[0]}.{self.min_cc[1]} or newer; the target is "
                f"{device_arch}.",
                "Use a kernel for older GPUs (`gemmlab kernels` lists them).",
            )
        return device_arch

    @property
    def needs(self) -> list[str]:
        """Every requirement, in words: shape constraints, K's row pieces, architectures."""
        found = [c.description for c in self.constraints]
        if self.k_bytes_multiple:
            found.append(f"K x element size a multiple of {self.k_bytes_multiple} bytes")
        if self.n_bytes_multiple:
            found.append(f"N x C's element size a multiple of {self.n_bytes_multiple} bytes")
        if self.archs:
            found.append(f"{' or '.join(self.archs)} only")
        elif self.min_cc > (0, 0):
            found.append(f"compute capability {self.min_cc[0]}.{self.min_cc[1]}+")
        return found

    @property
    def takes_block_edge(self) -> bool:
        return bool(self.block_edges)

    def template_args(self, dtype: str, block_edge: int) -> str:
        args = [DTYPE_CTYPES[dtype]]
        if self.templated_on_edge:
            args.append(str(block_edge))
        args.extend(str(v) for v in (*self.template_extra, *self.template_fixed))
        return ", ".join(args)

    def name_expression(self, dtype: str, block_edge: int) -> str:
        return f"{self.function}<{self.template_args(dtype, block_edge)}>"

    def source_text(self, block_edge: int = 0) -> str:
        """The kernel's CUDA source with its local headers inlined, as NVRTC
        compiles it for ``block_edge`` (the catalogue's text is the same for every
        edge: the edge is a template argument)."""
        return kernel_source(self.source)

    def default_block_edge(self) -> int:
        """The edge a command runs when none is given: for the catalogue, the largest
        its documents measured, the edge those documents ran by default (the
        edges are listed in ascending order). A user's declaration names its
        default first instead, as for every parameter (gemmlab.kernels.declaration.base.DeclaredSpec)."""
        return max(self.block_edges) if self.block_edges else 0

    def threads_per_block(self, shape: Shape, block_edge: int) -> int:
        x, y, z = self.block(shape, block_edge)
        return x * y * z

    def violations(self, shape: Shape, block_edge: int, dtype: str) -> list[str]:
        """Every requirement this point breaks, as sentences (empty: it is fine)."""
        found = []
        if min(shape.m, shape.n, shape.k) < 1:
            found.append(f"sizes must be positive integers (got {shape.m}x{shape.n}x{shape.k})")
            return found
        if dtype not in self.dtypes:
            found.append(f"{self.id} has no {dtype} version (it takes {', '.join(self.dtypes)})")
        if self.square_only and not shape.is_square:
            found.append(f"{self.id} takes square matrices only")
        if self.takes_block_edge:
            if not 1 <= block_edge <= self.max_edge:
                if block_edge < 1:
                    why = "a block edge counts threads: it is at least 1"
                elif self.max_edge**2 == MAX_THREADS_PER_BLOCK:
                    why = f"{self.max_edge}x{self.max_edge} threads is the most a block may have"
                else:
                    why = f"{self.max_edge} is the largest edge {self.id} takes"
                found.append(f"the block edge {block_edge} is outside 1..{self.max_edge} ({why})")
                return found
        for n_elems, what in ((shape.m * shape.k, "A"), (shape.k * shape.n, "B"), (shape.m * shape.n, "C")):
            if n_elems > MAX_INDEX:
                found.append(f"{what} has {n_elems} elements, over the 2^31 - 1 that 32-bit indexing allows")
        found.extend(v for c in self.constraints if (v := c.violation(shape, block_edge)))
        if self.k_bytes_multiple and dtype in DTYPE_ITEMSIZE:
            per_piece = max(1, self.k_bytes_multiple // DTYPE_ITEMSIZE[dtype])
            if shape.k % per_piece:
                found.append(
                    f"K = {shape.k} is not a multiple of {per_piece}: rows of A and B ({dtype}) must be whole "
                    f"{self.k_bytes_multiple}-byte pieces"
                )
        if self.n_bytes_multiple and dtype in DTYPE_ITEMSIZE:
            per_piece = max(1, self.n_bytes_multiple // c_itemsize(dtype))
            if shape.n % per_piece:
                found.append(
                    f"N = {shape.n} is not a multiple of {per_piece}: rows of C ({c_itemsize(dtype)}-byte "
                    f"elements) must be whole {self.n_bytes_multiple}-byte pieces"
                )
        return found

    def check(self, shape: Shape, block_edge: int, dtype: str, size_fix: str = "Pick a size that meets it.") -> None:
        """Raise :class:`ConstraintError` naming every broken requirement; ``size_fix``
        is the advice for a shape it cannot take (:func:`gemmlab.kernels.catalogue.point`
        names a kernel that can take it, having checked)."""
        problems = self.violations(shape, block_edge, dtype)
        if problems:
            # The advice follows what was broken: a dtype, a block edge, or the shape.
            fixes = []
            if dtype not in self.dtypes:
                fixes.append(f"Use --dtype {' or '.join(self.dtypes)}.")
            bad_edge = self.takes_block_edge and not 1 <= block_edge <= self.max_edge
            if bad_edge:
                fixes.append(f"Use a block edge from 1 to {self.max_edge}.")
            if len(problems) > len(fixes):
                fixes.append(size_fix)
            fix = " ".join(fixes)
            edge = f" (block edge {block_edge})" if self.takes_block_edge else ""
            raise ConstraintError(f"{self.id} cannot run {shape}{edge}: {'; '.join(problems)}.", fix)


_LOCAL_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"\s*$', re.MULTILINE)


def kernel_source(source: str | Path) -> str:
    """The text of a kernel's CUDA file with every ``#include "file"`` (a path
    relative to the including file) replaced by the file's own text; a file is
    never inlined into itself, directly or through another.

    ``source``: a ``str`` is a path under the package's ``kernels/`` folder (a
    catalogue kernel); a ``Path`` is a file anywhere (a user's own kernel),
    relative to the current directory unless absolute. A user's file and its
    headers are each opened with a ``#line`` directive, and the text after an
    inlined header with another, so NVRTC's messages name the user's file and
    line; the catalogue's text is left as it is (its compiled code, which the
    directives would not change anyway, is compared across versions).

    NVRTC gets one self-contained string, so what a kernel shares with its
    neighbours lives in one header and the compile cache, keyed by this text,
    sees a change to the header as well.
    """
    if isinstance(source, Path):
        path = source.resolve()
        return _inlined(path.parent, path.name, frozenset(), mark_lines=True)
    return _inlined(resources.files("gemmlab").joinpath("kernels"), source, frozenset(), mark_lines=False)


# What a user's file may include (issue 49: `#include "../../task.toml"` in a
# graded kernel put the task's hidden seed into NVRTC's error): a quoted file
# inside the kernel's own folder, which gemmlab inlines, or a header of the CUDA
# toolkit's by a plain name in angle brackets. Anything else (a path that
# leaves the folder, an absolute one, an include computed by a macro, whose
# target NVRTC alone would resolve) is refused before NVRTC sees the text.
_ANY_INCLUDE = re.compile(r"^\s*#\s*include(?:_next)?\b(.*)$", re.MULTILINE)
_TOOLKIT_HEADER = re.compile(r"\s*<([A-Za-z0-9_][A-Za-z0-9_.+/-]*)>\s*(//.*)?$")
_QUOTED = re.compile(r'\s*"([^"]+)"\s*(//.*)?$')


def _confined(root: Path, file: Path, text: str) -> None:
    """CompileError naming the first include of ``text`` (the file ``file``)
    that could read a file outside ``root``."""
    for match in _ANY_INCLUDE.finditer(text):
        what = match.group(1)
        line = text.count("\n", 0, match.start()) + 1
        quoted, angled = _QUOTED.match(what), _TOOLKIT_HEADER.match(what)
        if quoted:
            target = (file.parent / quoted.group(1)).resolve()
            if target.is_relative_to(root):
                continue
            why = f"{quoted.group(1)!r} leads to {target}, outside the kernel's folder {root}"
        elif angled and ".." not in angled.group(1).split("/"):
            continue
        else:
            why = f"`#include{what}` is neither a file of the kernel's folder in quotes nor a CUDA header by name"
        raise CompileError(
            f"{file}:{line}: {why}.",
            "Keep every file the kernel includes in its own folder and include it by a relative path in quotes "
            '(#include "tile.cuh"), and CUDA\'s headers by name (#include <cuda_fp16.h>).',
        )


def _line_directive(line: int, file: Traversable) -> str:
    quoted = str(file).replace("\\", "\\\\").replace('"', '\\"')
    return f'#line {line} "{quoted}"\n'


def _inlined(root: Traversable, relative: str, seen: frozenset[str], *, mark_lines: bool) -> str:
    """``root/relative`` with its local includes inlined (see :func:`kernel_source`)."""
    folder = posixpath.dirname(relative)
    file = root.joinpath(relative)
    try:
        text = read_text(Path(str(file)), "kernel's source") if mark_lines else file.read_text()
    except OSError as exc:
        raise CompileError(
            f"cannot read the kernel source {file}: {exc.strerror or exc}.",
            "Check the path in the kernel's spec and in its #include lines (relative to the including file).",
        ) from None
    if mark_lines:  # a user's file: confined to its own folder
        _confined(Path(str(root)), Path(str(file)), text)

    def inline(match: re.Match) -> str:
        name = posixpath.normpath(posixpath.join(folder, match.group(1)))
        if name in seen:
            return ""
        header = _inlined(root, name, seen | {relative, name}, mark_lines=mark_lines)
        if not mark_lines:
            return header
        # The header's text replaces the #include line (the pattern may take blank
        # lines around it too); the text after the match goes on at this line.
        next_line = text.count("\n", 0, match.end()) + 2
        return header.rstrip("\n") + "\n" + _line_directive(next_line, file).rstrip("\n")

    body = _LOCAL_INCLUDE.sub(inline, text)
    return _line_directive(1, file) + body if mark_lines else body


@dataclass(frozen=True)
class Point:
    """One runnable configuration: kernel, shape, block edge, dtype."""

    spec: KernelSpec
    shape: Shape
    block_edge: int
    dtype: str

    @property
    def itemsize(self) -> int:
        return DTYPE_ITEMSIZE[self.dtype]

    @property
    def grid(self) -> Dim3:
        return self.spec.grid(self.shape, self.block_edge)

    @property
    def block(self) -> Dim3:
        return self.spec.block(self.shape, self.block_edge)

    @property
    def dynamic_smem(self) -> int:
        if self.spec.dynamic_smem_bytes is not None:
            return self.spec.dynamic_smem_bytes(self.shape, self.block_edge, self.dtype)
        return self.spec.dynamic_smem_elems(self.shape, self.block_edge) * self.itemsize

    @property
    def flops(self) -> int:
        return self.spec.flops(self.shape)

    @property
    def min_bytes(self) -> int:
        return self.spec.min_elems_moved(self.shape) * self.itemsize
