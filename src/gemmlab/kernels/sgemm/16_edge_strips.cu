// sgemm_edge_strips: sgemm_column_order on whole tiles only; a last strip of
// at most EDGE_MAX rows or columns of C goes to small blocks at the end of
// the grid instead of a row or column of nearly empty tiles.
// Source: not from the documents. Launch: grid (tiles along N, tiles along M
// + the rows of edge blocks), as edge_strips_grid in spec.py computes it;
// 8 warps, dynamic shared memory as sgemm_spread_copies. EDGE_MAX and
// EDGE_KC arrive as template arguments (spec.py's EDGE_MAX and EDGE_KC); the
// strips' code is in edge_strips.cuh, shared with sgemm_padded_b.
// Idea: at N = 4097 rung 13's 128 x 256 tiles cover C with 33 x 17 = 561
// tiles, 49 of them for one row or one column of outputs, and each of those
// costs a whole tile's FFMAs: 4.25 waves on 132 SMs, run in 5, where the
// 4096 x 4096 part alone is 512 tiles (3.88 waves, run in 4, with 16 SMs
// idle in the last). Here the tiles cover only whole multiples of BM and BN
// when what is left over (M % BM, N % BN) is a strip of 1 .. EDGE_MAX; the
// strips (the rows below, all N columns; the columns to the right, the rows
// above) are sums of K products per output on few outputs: they read all of
// B, or all of A, once, and are bound by memory, not FFMAs. Edge blocks come
// last in the grid, so they start on the SMs that the tiles' last partial
// wave leaves idle. A remainder over EDGE_MAX keeps rung 13's moved tile.
// The two strip functions are __noinline__: inlined, their code changed how
// ptxas allocated the tiles' registers (and their speed at 4095, which has no
// strip, by 2%); called, it disturbs the tiles' loops much less, though not
// always not at all (docs/sgemm-ladder.md).
// Predicted (H200, written before measuring): N = 4097 from 37.0 TFLOP/s
// (rung 15) to about 45, the speed of rung 15's guarded copies (B_VEC false,
// 45.6 at 4095), since the strips (134 MB read by 16 idle SMs at about 20
// GB/s each, 0.4 ms) fit inside the last wave (0.7 ms); N = 4096 and every
// multiple of the tile unchanged (no edge blocks).

#include "cp_async_tiles.cuh"
#include "spread_copies.cuh"
#include "edge_strips.cuh"

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int MIN_BLOCKS, int EDGE_MAX, int EDGE_KC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_edge_strips(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out, int m, int n, int k,
                  T alpha, T beta) {
    const EdgeSplit<BM, BN, (BM / WM) * (BN / WN) * 32, STAGES * BK * (BM + BN), EDGE_MAX, EDGE_KC> split(m, n);
    if (blockIdx.y >= split.tile_rows) {
        split.run((blockIdx.y - split.tile_rows) * gridDim.x + blockIdx.x, a, b, c_in, c_out, m, n, k, alpha, beta);
        return;
    }
    if (n % 4 == 0 && aligned16(b)) {
        spread_copies_body<BM, BN, BK, WM, WN, STAGES, true, true>(a, b, c_in, c_out, m, n, k, alpha, beta);
    } else {
        spread_copies_body<BM, BN, BK, WM, WN, STAGES, false, true>(a, b, c_in, c_out, m, n, k, alpha, beta);
    }
}
