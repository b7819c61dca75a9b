"""The kernel catalogue: everything the runner, compiler, occupancy table,
profiler and reports need to know about a kernel, as data.

Adding a kernel means writing one ``.cu`` file under ``kernels/`` and one
:class:`KernelSpec` entry below; no ``if``/``elif`` chain elsewhere changes.
"""

from __future__ import annotations

import importlib
import math
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

from gemmlab.errors import ConstraintError, DeviceLimitError, UnknownName, unknown_name
from gemmlab.problems import MATMUL, Problem

Dim3 = tuple[int, int, int]

# The tensor-core types name tag structs of kernels/tensor/tc_common.cuh: bf16
# and fp16 are stored as 16-bit patterns, tf32 as ordinary float32. Their C is
# float32, except for "bfloat16-out": bfloat16 inputs, FP32 accumulation,
# bfloat16 C.
DTYPE_CTYPES = {
    "float32": "float", "float64": "double", "int32": "int",
    "bfloat16": "gl_bf16", "float16": "gl_fp16", "tf32": "gl_tf32", "bfloat16-out": "gl_bf16_out",
}  # fmt: skip
# Bytes of one element of the inputs.
DTYPE_ITEMSIZE = {"float32": 4, "float64": 8, "int32": 4, "bfloat16": 2, "float16": 2, "tf32": 4, "bfloat16-out": 2}
# Bytes of one element of C, where it is not an input element.
C_ITEMSIZE = {"bfloat16": 4, "float16": 4, "tf32": 4, "bfloat16-out": 2}


def c_itemsize(dtype: str) -> int:
    return C_ITEMSIZE.get(dtype, DTYPE_ITEMSIZE[dtype])


# Kernels index with 32-bit ints; keep every matrix below 2^31 elements.
MAX_INDEX = 2**31 - 1
# gridDim.y and gridDim.z are limited to 65535 on every architecture since 1.0
# (CUDA C Programming Guide, "Technical Specifications per Compute Capability").
MAX_GRID_YZ = 65535


@dataclass(frozen=True)
class Shape:
    """A problem size. Matmul: C (m x n) = A (m x k) . B (k x n)."""

    m: int
    n: int
    k: int

    @classmethod
    def square(cls, n: int) -> Shape:
        return cls(n, n, n)

    @property
    def is_square(self) -> bool:
        return self.m == self.n == self.k

    def __str__(self) -> str:
        return str(self.m) if self.is_square else f"{self.m}x{self.n}x{self.k}"


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
    source: str  # path under gemmlab/kernels/
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
    # kernel's structure (the documents' CGMA).
    cgma: Callable[[Shape, int], float] = lambda s, b: 1.0
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
        args.extend(str(v) for v in self.template_extra)
        return ", ".join(args)

    def name_expression(self, dtype: str, block_edge: int) -> str:
        return f"{self.function}<{self.template_args(dtype, block_edge)}>"

    def source_text(self) -> str:
        """The kernel's CUDA source with its local headers inlined."""
        return kernel_source(self.source)

    def default_block_edge(self) -> int:
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
                found.append(
                    f"the block edge {block_edge} is outside 1..{self.max_edge} "
                    f"({self.max_edge}x{self.max_edge} threads is the most a block may have)"
                )
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

    def check(self, shape: Shape, block_edge: int, dtype: str) -> None:
        """Raise :class:`ConstraintError` naming every broken requirement."""
        problems = self.violations(shape, block_edge, dtype)
        if problems:
            # The advice follows what was broken: a dtype, a block edge, or the shape.
            fixes = []
            if dtype not in self.dtypes:
                fixes.append(f"Use --dtype {' or '.join(self.dtypes)}.")
            bad_edge = self.takes_block_edge and not 1 <= block_edge <= self.max_edge
            if bad_edge:
                fixes.append(f"Use a block edge from 1 to {self.max_edge}.")
            alt = self.any_size_alternative
            if len(problems) > len(fixes) and alt != self.id:
                fixes.append(f"Pick a size that meets it, or use `{alt}`, which takes any M, N, K.")
            fix = " ".join(fixes)
            raise ConstraintError(
                f"{self.id} cannot run {shape} (block edge {block_edge}): {'; '.join(problems)}.", fix
            )


_LOCAL_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"\s*$', re.MULTILINE)


def kernel_source(relative: str, _seen: frozenset[str] = frozenset()) -> str:
    """The text of ``kernels/<relative>`` with every ``#include "file"`` (a path
    relative to that file) replaced by the file's own text; a file is never
    inlined into itself, directly or through another.

    NVRTC gets one self-contained string, so what a kernel shares with its
    neighbours lives in one header and the compile cache, keyed by this text,
    sees a change to the header as well.
    """
    folder = posixpath.dirname(relative)
    text = resources.files("gemmlab").joinpath("kernels", relative).read_text()

    def inline(match: re.Match) -> str:
        name = posixpath.normpath(posixpath.join(folder, match.group(1)))
        if name in _seen:
            return ""
        return kernel_source(name, _seen | {relative, name})

    return _LOCAL_INCLUDE.sub(inline, text)


def _edge(b: int) -> int:
    return b


def _two_edges(b: int) -> int:
    return 2 * b


DIVISIBLE_MN = (multiple_of("m", _edge, "the block edge"), multiple_of("n", _edge, "the block edge"))
DIVISIBLE_MNK = (*DIVISIBLE_MN, multiple_of("k", _edge, "the block edge"))
SQUARE_BLOCK: Callable[[Shape, int], Dim3] = lambda s, b: (b, b, 1)
GRID_N_BY_M: Callable[[Shape, int], Dim3] = lambda s, b: (s.n // b, s.m // b, 1)
POZNAN = "Poznan 2014 report (GT 240)"
KURSK = "Kursk 2014 paper (GTS 450, GTX 770)"
INT32_LAB = "2023 int32 GEMM lab report"
TILE_CGMA: Callable[[Shape, int], float] = lambda s, b: float(b)
# Threads and shared memory of the <<<N, N>>> kernels: one thread per row (or
# column) of C, and a whole column of B (row of A) in shared memory.
MAX_THREADS = 1024
MAX_STATIC_SMEM_ELEMS_F32 = 48 * 1024 // 4

DOC_MATMUL: tuple[KernelSpec, ...] = (
    KernelSpec(
        id="single_block",
        source="doc/01_single_block.cu",
        function="single_block",
        source_doc=POZNAN + ", version 1",
        summary="one block of b x b threads loops over every output tile; global memory only",
        dtypes=("float32",),
        block_edges=(8, 16, 22),
        grid=lambda s, b: (1, 1, 1),
        block=SQUARE_BLOCK,
        constraints=DIVISIBLE_MN,
    ),
    KernelSpec(
        id="naive",
        source="doc/02_naive.cu",
        function="naive",
        source_doc=POZNAN + ", version 2; " + KURSK,
        summary="one output per thread, global memory only, coalesced B and C",
        dtypes=("float32",),
        block_edges=(8, 16, 22, 32),
        grid=GRID_N_BY_M,
        block=SQUARE_BLOCK,
        constraints=(*DIVISIBLE_MN, grid_fits("m", _edge)),
    ),
    KernelSpec(
        id="naive_uncoalesced",
        source="doc/03_naive_uncoalesced.cu",
        function="naive_uncoalesced",
        source_doc=KURSK + ", first GPU kernel",
        summary="naive with x picking the row: strided A and C, broadcast B",
        dtypes=("float32",),
        block_edges=(32,),
        grid=lambda s, b: (s.m // b, s.n // b, 1),
        block=SQUARE_BLOCK,
        constraints=(*DIVISIBLE_MN, grid_fits("n", _edge)),
    ),
    KernelSpec(
        id="tiled",
        source="doc/04_tiled.cu",
        function="tiled",
        source_doc=POZNAN + ", version 3; " + KURSK + " (blocked)",
        summary="b x b tiles of A and B in shared memory, two barriers per tile",
        dtypes=("float32",),
        block_edges=(1, 2, 4, 8, 16, 22, 32),
        grid=GRID_N_BY_M,
        block=SQUARE_BLOCK,
        constraints=(*DIVISIBLE_MNK, grid_fits("m", _edge)),
        cgma=TILE_CGMA,
    ),
    KernelSpec(
        id="tiled_prefetch_reg",
        source="doc/05_tiled_prefetch_reg.cu",
        function="tiled_prefetch_reg",
        source_doc=POZNAN + ", version 4a",
        summary="tiled, next tiles prefetched into registers",
        dtypes=("float32",),
        block_edges=(8, 16),
        grid=GRID_N_BY_M,
        block=SQUARE_BLOCK,
        constraints=(*DIVISIBLE_MNK, grid_fits("m", _edge)),
        cgma=TILE_CGMA,
    ),
    KernelSpec(
        id="tiled_prefetch_smem",
        source="doc/06_tiled_prefetch_smem.cu",
        function="tiled_prefetch_smem",
        source_doc=POZNAN + ", version 4b",
        summary="tiled, next tiles prefetched into a second pair of shared buffers",
        dtypes=("float32",),
        block_edges=(8, 16),
        grid=GRID_N_BY_M,
        block=SQUARE_BLOCK,
        constraints=(*DIVISIBLE_MNK, grid_fits("m", _edge)),
        cgma=TILE_CGMA,
    ),
    KernelSpec(
        id="tiled_2x2",
        source="doc/07_tiled_2x2.cu",
        function="tiled_2x2",
        source_doc=POZNAN + ", version 5",
        summary="register prefetch and a 2 x 2 block of C per thread",
        dtypes=("float32",),
        block_edges=(8, 16),
        grid=lambda s, b: (s.n // (2 * b), s.m // (2 * b), 1),
        block=SQUARE_BLOCK,
        constraints=(
            multiple_of("m", _two_edges, "twice the block edge"),
            multiple_of("n", _two_edges, "twice the block edge"),
            multiple_of("k", _edge, "the block edge"),
            grid_fits("m", _two_edges),
        ),
        # Per tile a thread loads 2 elements of A and 2 of B and does 2x2xb FMAs.
        cgma=lambda s, b: 2.0 * b,
    ),
    KernelSpec(
        id="tiled_any_size",
        source="doc/08_tiled_any_size.cu",
        function="tiled_any_size",
        source_doc="Arequipa 2017 lab report",
        summary="tiled with a ceil(n/b) grid, zero-filled loads and guarded stores: any M, N, K",
        dtypes=("float32",),
        block_edges=(8, 16, 32),
        grid=lambda s, b: (math.ceil(s.n / b), math.ceil(s.m / b), 1),
        block=SQUARE_BLOCK,
        constraints=(grid_fits("m", _edge),),
        cgma=TILE_CGMA,
    ),
    KernelSpec(
        id="col_buffered",
        source="doc/09_col_buffered.cu",
        function="col_buffered",
        source_doc=KURSK + ", column-buffered",
        summary="one block per column of C, the column of B cached in shared memory (uncoalesced)",
        dtypes=("float32",),
        block_edges=(),
        grid=lambda s, b: (s.n, 1, 1),
        block=lambda s, b: (s.m, 1, 1),
        constraints=(
            at_most("m", MAX_THREADS, "one thread per row of C, and a block holds at most 1024 threads"),
            at_most("k", MAX_STATIC_SMEM_ELEMS_F32, "a column of B must fit in 48 KB of shared memory"),
        ),
        dynamic_smem_elems=lambda s, b: s.k,
        # A thread loads K elements of A and about K/M of B for 2K FLOPs.
        cgma=lambda s, b: 2 * s.k / (s.k + s.k / s.m),
        templated_on_edge=False,
        any_size_alternative="row_buffered",
    ),
    KernelSpec(
        id="row_buffered",
        source="doc/10_row_buffered.cu",
        function="row_buffered",
        source_doc=KURSK + ", row-buffered",
        summary="one block per row of C, the row of A cached in shared memory (coalesced)",
        dtypes=("float32",),
        block_edges=(),
        grid=lambda s, b: (s.m, 1, 1),
        block=lambda s, b: (s.n, 1, 1),
        constraints=(
            at_most("n", MAX_THREADS, "one thread per column of C, and a block holds at most 1024 threads"),
            at_most("k", MAX_STATIC_SMEM_ELEMS_F32, "a row of A must fit in 48 KB of shared memory"),
        ),
        dynamic_smem_elems=lambda s, b: s.k,
        cgma=lambda s, b: 2 * s.k / (s.k + s.k / s.n),
        templated_on_edge=False,
    ),
    KernelSpec(
        id="blocked_x4",
        source="doc/11_blocked_x4.cu",
        function="blocked_x4",
        source_doc=KURSK + ", blocked with 4 outputs per thread",
        summary="b x b tiles loaded by b x b/4 threads, 4 outputs per thread",
        dtypes=("float32",),
        block_edges=(4, 8, 16, 32),
        grid=GRID_N_BY_M,
        block=lambda s, b: (b, b // 4, 1),
        constraints=(edge_multiple_of(4), *DIVISIBLE_MNK, grid_fits("m", _edge)),
        # Per tile a thread loads 4 + 4 elements and does 4 x b FMAs.
        cgma=TILE_CGMA,
    ),
    KernelSpec(
        id="naive_i32",
        source="doc/02_naive.cu",
        function="naive",
        source_doc=INT32_LAB + ", naive kernel",
        summary="the naive kernel on int32 (wrap-around arithmetic)",
        dtypes=("int32",),
        block_edges=(1, 2, 4, 8, 16, 32),
        grid=GRID_N_BY_M,
        block=SQUARE_BLOCK,
        constraints=(*DIVISIBLE_MN, grid_fits("m", _edge)),
    ),
    KernelSpec(
        id="tiled_i32",
        source="doc/04_tiled.cu",
        function="tiled",
        source_doc=INT32_LAB + ", shared-memory kernel",
        summary="the tiled kernel on int32 (wrap-around arithmetic)",
        dtypes=("int32",),
        block_edges=(1, 2, 4, 8, 16, 32),
        grid=GRID_N_BY_M,
        block=SQUARE_BLOCK,
        constraints=(*DIVISIBLE_MNK, grid_fits("m", _edge)),
        cgma=TILE_CGMA,
    ),
)


# The kernel families beyond the documents: (module, the tuple of specs it exports).
_FAMILY_MODULES = (
    ("gemmlab.memory", "MEMORY_KERNELS"),
    ("gemmlab.sgemm", "SGEMM_KERNELS"),
    ("gemmlab.tensor", "TENSOR_KERNELS"),
)


def _all_kernels() -> tuple[KernelSpec, ...]:
    """Every family of kernels; each family lives in its own module.

    A family whose module is absent (a partial checkout) is left out; an error
    inside a module that is there still raises.
    """
    found = DOC_MATMUL
    for module, name in _FAMILY_MODULES:
        try:
            family = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        found += getattr(family, name)
    return found


CATALOGUE: tuple[KernelSpec, ...] = _all_kernels()
_BY_ID = {spec.id: spec for spec in CATALOGUE}
assert len(_BY_ID) == len(CATALOGUE), "duplicate kernel id in the catalogue"


def kernel_ids() -> list[str]:
    return list(_BY_ID)


def get(kernel_id: str) -> KernelSpec:
    """The catalogue entry for ``kernel_id``; an unknown id suggests close names."""
    try:
        return _BY_ID[kernel_id]
    except KeyError:
        raise unknown_name("kernel", kernel_id, _BY_ID, f"`gemmlab kernels` lists all {len(_BY_ID)}.") from None


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
    see :func:`gemmlab.sgemm.variant`)."""
    spec = spec or get(kernel_id)
    if dtype is None:
        dtype = spec.dtypes[0]
    elif dtype not in DTYPE_CTYPES:
        raise UnknownName(f"Unknown dtype '{dtype}'.", f"Use one of {', '.join(spec.dtypes)} for {spec.id}.")
    if not spec.takes_block_edge:
        block_edge = 0
    elif block_edge is None:
        block_edge = spec.default_block_edge()
    spec.check(shape, block_edge, dtype)
    return Point(spec, shape, block_edge, dtype)
