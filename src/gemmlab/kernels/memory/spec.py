"""The memory-bound lab: vector addition, copies and transposes, measured in GB/s.

The 2014 Brno lecture measured these on a GTX 280 (4000 x 4000 floats) to
show what coalescing and shared-memory bank conflicts cost; the copies are
the ceiling each transpose is held against. Here they are catalogue kernels
like the matmuls, run by the same runner, with ``metric="gbs"``.

Shapes reuse :class:`~gemmlab.core.shapes.Shape`. The copies and transposes
take an m x n row-major matrix (the transpose writes n x m); ``k`` is not
used (give 1). The vector additions work on m * n elements, so
``Shape(1, n, 1)`` is a vector of length n; ``k`` is not used either. Every
kernel takes any shape.

Bandwidth counts the bytes a kernel must read and write once each
(``KernelSpec.min_elems_moved`` times the item size): 2 m n elements for a
copy or transpose, 3 m n for a vector addition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.spec import KernelSpec, edge_multiple_of, grid_fits
from gemmlab.problems.base import Problem
from gemmlab.problems.memory import COPY, TRANSPOSE, VECADD

if TYPE_CHECKING:
    pass

BRNO = "Brno 2014 lecture (GTX 280)"
MODERN = "gemmlab, for current GPUs (not in the documents)"
FLOATS = ("float32", "float64")
# Tile edges of the tiled kernels and block edges of the one-element-per-thread
# ones. 64 is not the lecture's: on an H200 a 64 x 64 tile moved by 64 x 8
# threads takes the padded transpose from 84% to 92% of the copy ceiling at
# 16384 x 16384 (benchmarks/results/2026-11-21_h200_transpose-explore.json).
TILE_EDGES = (16, 32, 64)
# One thread per element: a B x B block holds at most 1024 threads.
SQUARE_BLOCK_EDGES = (16, 32)
# Threads per block of the 1-D kernels.
THREADS_1D = 256
# Elements each thread of a *_vec4 kernel moves (ELEMS_PER_THREAD in 07_vec4.cu).
VEC4_ELEMS = 4


def thread_rows(tile: int) -> int:
    """Rows of threads in a tiled block: at most 8, so TILE x 8 for the
    lecture's 32 x 32 tile (each thread moves 4 rows) and 64 x 8 for a 64-tile
    (8 rows each: more loads in flight per thread, which is what the 64-tile
    gains); 16 x 4 for a 16-tile. The kernels take it as their ROWS template
    parameter, so this is the one place that chooses it."""
    return min(8, tile // 4)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class TiledSpec(KernelSpec):
    """A tiled kernel templated on <T, TILE, ROWS>: the block edge is TILE, and
    ``thread_rows`` gives ROWS for both the compiler and the launch."""

    thread_rows: Callable[[int], int] = thread_rows

    def template_args(self, dtype: str, block_edge: int) -> str:
        return f"{super().template_args(dtype, block_edge)}, {self.thread_rows(block_edge)}"


# --- the catalogue entries ---------------------------------------------------


def _tile_grid(s: Shape, b: int) -> Dim3:
    """One block per b x b tile of the input, partial tiles at the edges included."""
    return (_cdiv(s.n, b), _cdiv(s.m, b), 1)


def _grid_1d(elems_per_thread: int) -> Callable[[Shape, int], Dim3]:
    return lambda s, b: (_cdiv(s.m * s.n, THREADS_1D * elems_per_thread), 1, 1)


_BLOCK_1D = lambda s, b: (THREADS_1D, 1, 1)
_SQUARE_BLOCK = lambda s, b: (b, b, 1)
_TILED_BLOCK = lambda s, b: (b, thread_rows(b), 1)
# gridDim.y counts tiles down the m rows of the input.
_ROWS_FIT = grid_fits("m", lambda b: b)
_NO_FLOPS = lambda s: 0
_NO_CGMA = lambda s, b: 0.0
_MATRIX_ELEMS = lambda s: 2 * s.m * s.n
_VECADD_ELEMS = lambda s: 3 * s.m * s.n


def _one_per_thread(kernel_id: str, source: str, problem: Problem, summary: str) -> KernelSpec:
    """copy and transpose_naive: a B x B block, one element per thread; the kernel
    reads B from blockDim, so one build serves every edge."""
    return KernelSpec(
        id=kernel_id,
        source=source,
        function=kernel_id,
        source_doc=BRNO,
        summary=summary,
        dtypes=FLOATS,
        block_edges=SQUARE_BLOCK_EDGES,
        grid=_tile_grid,
        block=_SQUARE_BLOCK,
        constraints=(_ROWS_FIT,),
        flops=_NO_FLOPS,
        min_elems_moved=_MATRIX_ELEMS,
        cgma=_NO_CGMA,
        any_size_alternative=kernel_id,
        problem=problem,
        templated_on_edge=False,
    )


def _tiled(kernel_id: str, source: str, problem: Problem, summary: str, source_doc: str = BRNO) -> TiledSpec:
    """A TILE x TILE tile through shared memory, moved by TILE x thread_rows(TILE) threads."""
    return TiledSpec(
        id=kernel_id,
        source=source,
        function=kernel_id,
        source_doc=source_doc,
        summary=summary,
        dtypes=FLOATS,
        block_edges=TILE_EDGES,
        grid=_tile_grid,
        block=_TILED_BLOCK,
        thread_rows=thread_rows,
        constraints=(edge_multiple_of(4), _ROWS_FIT),
        flops=_NO_FLOPS,
        min_elems_moved=_MATRIX_ELEMS,
        cgma=_NO_CGMA,
        any_size_alternative=kernel_id,
        max_edge=max(TILE_EDGES),
        problem=problem,
    )


def _one_dim(
    kernel_id: str,
    source: str,
    problem: Problem,
    summary: str,
    elems_per_thread: int,
    elems_moved: Callable[[Shape], int],
    source_doc: str,
) -> KernelSpec:
    """A 1-D grid of 256-thread blocks over m * n elements; no block edge."""
    return KernelSpec(
        id=kernel_id,
        source=source,
        function=kernel_id,
        source_doc=source_doc,
        summary=summary,
        dtypes=FLOATS,
        block_edges=(),
        grid=_grid_1d(elems_per_thread),
        block=_BLOCK_1D,
        flops=_NO_FLOPS,
        min_elems_moved=elems_moved,
        cgma=_NO_CGMA,
        any_size_alternative=kernel_id,
        problem=problem,
        templated_on_edge=False,
    )


MEMORY_KERNELS: tuple[KernelSpec, ...] = (
    _one_dim(
        "vecadd", "memory/01_vecadd.cu", VECADD,
        "c = a + b, one element per thread, bounds check: any length", 1, _VECADD_ELEMS, BRNO,
    ),
    _one_per_thread(
        "copy", "memory/02_copy.cu", COPY,
        "copy of an m x n matrix, one element per thread: coalesced reads and writes",
    ),
    _one_per_thread(
        "transpose_naive", "memory/03_transpose_naive.cu", TRANSPOSE,
        "transpose with copy's indexing: coalesced reads, writes m elements apart",
    ),
    _tiled(
        "copy_tiled", "memory/04_copy_tiled.cu", COPY,
        "copy through a shared-memory tile, TILE x TILE/4 threads, 4 rows per thread",
    ),
    _tiled(
        "transpose_tiled", "memory/05_transpose_tiled.cu", TRANSPOSE,
        "transpose through a shared-memory tile: coalesced both ways, bank conflicts on the column read",
    ),
    _tiled(
        "transpose_tiled_padded", "memory/06_transpose_tiled_padded.cu", TRANSPOSE,
        "transpose_tiled with a [TILE][TILE+1] tile: the padding column removes the bank conflicts",
    ),
    _tiled(
        "transpose_tiled_diagonal", "memory/08_transpose_tiled_diagonal.cu", TRANSPOSE,
        "transpose_tiled_padded with blocks renumbered along diagonals against DRAM partition camping",
        MODERN,
    ),
    _one_dim(
        "copy_vec4", "memory/07_vec4.cu", COPY,
        "copy with 16-byte loads and stores (float4 / double2), 4 elements per thread, any length",
        VEC4_ELEMS, _MATRIX_ELEMS, MODERN,
    ),
    _one_dim(
        "vecadd_vec4", "memory/07_vec4.cu", VECADD,
        "vecadd with 16-byte loads and stores (float4 / double2), 4 elements per thread, any length",
        VEC4_ELEMS, _VECADD_ELEMS, MODERN,
    ),
    _tiled(
        "transpose_tiled_vec4", "memory/07_vec4.cu", TRANSPOSE,
        "transpose_tiled_padded reading its tile with 16-byte loads (scalar where rows are unaligned)",
        MODERN,
    ),
)  # fmt: skip
