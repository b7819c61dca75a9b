// sgemm_small_tile: sgemm_multistage's ring on block tiles of 32 to 64 rows
// and columns, several blocks to an SM, for the squares of 512 to 1024 that
// leave the large tiles' SMs idle.
// Source: not from the documents. Launch: one block of (BM / WM) x (BN / WN)
// warps per BM x BN tile of C (grid N / BN x M / BM); static shared memory,
// STAGES x BK x (BM + BN) floats (12 to 48 KB); MIN_BLOCKS in
// __launch_bounds__ caps the registers so that many blocks share an SM.
// Idea: at 1024 x 1024 the 128 x 256 tile of rungs 11-17 makes 32 tiles for
// 132 SMs, and rung 9's 128 x 128 makes 64: half the GPU or more has nothing to
// do, whatever each block's speed. 64 x 64 tiles make 256 blocks, 32 x 32 make
// 1024; with 4 to 16 blocks resident per SM, every SM gets work and the
// shortest wave is a small share of the whole. What the small tile costs is
// reuse: each block reads BM + BN operands per k-slice for BM x BN outputs, so a
// 64 x 64 tile reads twice the global (L2) traffic per FLOP of 128 x 128. At
// 1024 the operands (8 MB) stay in the 50 MB L2, which absorbs that.
// The pipeline, copies and arithmetic are rung 9's (k_range_loop.cuh); only
// the tiles and the occupancy target are new.
// Predicted (H100, written before measuring): 1024^3 at 64 x 64 x 16, 3 stages:
// 256 blocks of 4 warps, 2 per SM; 2 x 1024^3 FLOPs = 2.15 GFLOP at 50-60% of
// the 67 TFLOP/s FFMA peak (few warps per SM, 32 accumulators each, so the
// FFMA pipes idle behind shared-memory loads part of the time): 55-65 us,
// 33-40 TFLOP/s, against rung 9's 128 x 128 tile on 64 SMs (at most 64/132 of
// the GPU: 69% of cuBLAS on the H100). Measurement: pending GPU run.

// One launch and the next: the runner launches this kernel with programmatic
// dependent launch on compute capability 9.0 and newer, so its blocks may
// start while the launch before it runs. Its first statement waits for that
// launch to complete (griddepcontrol.wait: its memory operations visible);
// nothing in global memory, workspace included, is touched before it
// (docs/synchronisation.md).

#include "k_range_loop.cuh"
#include "../dependent_launch.cuh"

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int MIN_BLOCKS>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_small_tile(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out, int m, int n, int k,
                 T alpha, T beta) {
    wait_for_previous_launch();  // nothing of A, B, C or the workspace touched before (PDL)
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles tile the block tile");
    static_assert(WM % 16 == 0 && WN % 32 == 0, "a warp tile is whole 16 x 32 sub-tiles");
    static_assert(BM % 32 == 0 && BN % 4 == 0 && BK % 4 == 0, "rows of whole float4s; a_swizzle needs BM % 32 == 0");
    static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
                  "every thread copies the same number of float4s of each tile");
    static_assert(STAGES * BK * (BM + BN) * 4 <= 48 * 1024, "static shared memory: 48 KB at most");
    __shared__ __align__(16) T a_tile[STAGES][BK][BM];  // a_tile[s][kk][r ^ a_swizzle(kk)] = A[row0 + r][k0 + kk]
    __shared__ __align__(16) T b_tile[STAGES][BK][BN];
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int lrow = (lane / 8) * 4, lcol = (lane % 8) * 4;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool b_vec = n % 4 == 0 && aligned16(b);
    T acc[WM / 16 * 4][WN / 32 * 4] = {};
    ring_over_k_tiles<BM, BN, BK, WM, WN, STAGES, THREADS>(a_tile, b_tile, acc, a, b, row0, col0, m, n, k, 0,
                                                           (k + BK - 1) / BK, b_vec, wrow, wcol, lrow, lcol, tid);
    store_warp_tile<WM, WN>(acc, c_in, c_out, row0, col0, wrow, wcol, lrow, lcol, m, n, alpha, beta);
}
