// sgemm_multistage: sgemm_double_buffer with STAGES buffers in a ring, so
// STAGES - 1 tiles are in flight while one is computed.
// Source: not from the documents. Launch: as sgemm_warptile (static shared
// memory: STAGES x BK x (BM + BN) floats, at most 48 KB without the opt-in
// attribute: 3 stages at BK = 16 or 5 at BK = 8 with 128 x 128 tiles).
// Idea: with two stages, the copy of tile t + 1 has one tile's compute time
// to arrive; when a tile is computed faster than global memory answers (a
// load from DRAM takes several hundred to a thousand cycles under load), the
// warps stall at the wait. With STAGES buffers, tile t + STAGES - 1 is issued while tile t
// is computed, so each copy has STAGES - 1 tiles of compute to hide behind.
// The loop keeps one commit group per tile (empty near the end) so that
// "wait until at most STAGES - 2 groups are pending" always means "tile t is
// in":
//   prologue: issue tiles 0 .. STAGES - 2;
//   loop t:   wait_group(STAGES - 2); barrier; issue tile t + STAGES - 1 into
//             stage (t - 1) % STAGES, which everyone finished reading before
//             the barrier; compute tile t from stage t % STAGES.
// With STAGES = 2 this is sgemm_double_buffer exactly.

#include "cp_async_tiles.cuh"

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int MIN_BLOCKS>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_multistage(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out,
                    int m, int n, int k, T alpha, T beta) {
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    constexpr int M_SUB = WM / 16, N_SUB = WN / 32;
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles tile the block tile");
    static_assert(WM % 16 == 0 && WN % 32 == 0, "a warp tile is whole 16 x 32 sub-tiles");
    static_assert(BM % 32 == 0 && BN % 4 == 0 && BK % 4 == 0, "rows of whole float4s; a_swizzle needs BM % 32 == 0");
    static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
                  "every thread copies the same number of float4s of each tile");
    static_assert(STAGES >= 2, "at least one tile in flight while one is computed");
    __shared__ __align__(16) T a_tile[STAGES][BK][BM];  // a_tile[s][kk][r ^ a_swizzle(kk)] = A[row0 + r][k0 + kk]
    __shared__ __align__(16) T b_tile[STAGES][BK][BN];
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int lrow = (lane / 8) * 4, lcol = (lane % 8) * 4;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool b_vec = n % 4 == 0 && aligned16(b);
    const bool c_vec = n % 4 == 0 && aligned16(c_in) && aligned16(c_out);
    const int tiles = (k + BK - 1) / BK;
    T acc[M_SUB * 4][N_SUB * 4] = {};

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < tiles) {
            load_tiles<BM, BN, BK, THREADS>(a_tile[s], b_tile[s], a, b, row0, col0, s * BK, m, n, k, b_vec, tid);
        }
        cp_async_commit();
    }
    for (int t = 0; t < tiles; ++t) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();  // tile t is in for everyone; everyone is done with tile t - 1
        const int ahead = t + STAGES - 1;
        if (ahead < tiles) {
            const int s = ahead % STAGES;
            load_tiles<BM, BN, BK, THREADS>(a_tile[s], b_tile[s], a, b, row0, col0, ahead * BK, m, n, k, b_vec,
                                            tid);
        }
        cp_async_commit();
        compute_tile<BM, BN, BK, M_SUB, N_SUB>(a_tile[t % STAGES], b_tile[t % STAGES], acc, wrow, wcol, lrow,
                                               lcol);
    }
#pragma unroll
    for (int i = 0; i < M_SUB * 4; ++i) {
        const int row = row0 + wrow + (i / 4) * 16 + lrow + i % 4;
#pragma unroll
        for (int s = 0; s < N_SUB; ++s) {
            const float4 v = make_float4(acc[i][4 * s], acc[i][4 * s + 1], acc[i][4 * s + 2], acc[i][4 * s + 3]);
            store4(c_in, c_out, row, col0 + wcol + s * 32 + lcol, m, n, v, alpha, beta, c_vec);
        }
    }
}
