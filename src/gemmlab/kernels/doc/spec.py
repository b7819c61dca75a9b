"""The documents' matmul ladder: the kernels of the Poznan, Kursk, Arequipa
and int32-lab reports, one .cu file each beside this file."""

from __future__ import annotations

import math
from collections.abc import Callable

from gemmlab.core.shapes import MAX_THREADS_PER_BLOCK, Dim3, Shape
from gemmlab.kernels.spec import KernelSpec, at_most, edge_multiple_of, grid_fits, multiple_of


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
# Shared memory of the <<<N, N>>> kernels: a whole column of B (row of A), in
# the 48 KB a block may have without opting in to more.
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
            at_most("m", MAX_THREADS_PER_BLOCK, "one thread per row of C, and a block holds at most 1024 threads"),
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
            at_most("n", MAX_THREADS_PER_BLOCK, "one thread per column of C, and a block holds at most 1024 threads"),
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
