// sgemm_swizzle_l2: sgemm_multistage with the blocks ordered for L2 reuse
// (thread-block swizzling).
// Source: not from the documents. Launch: grid (ceil(N/BN) * GROUP_M,
// ceil(ceil(M/BM) / GROUP_M)), block as sgemm_warptile.
// Idea: blocks start roughly in order of their linear index (x fastest). In
// the row-major order of sgemm_multistage's grid, the ~2 x 132 blocks
// resident at once on an H100 cover a few whole rows of C's tiles: they share
// a few row panels of A but read every column panel of B (at N = 8192, all
// 256 MB of B's panels against a 50 MB L2). Here consecutive blocks walk down
// a column of GROUP_M tiles before moving right, so the resident blocks cover
// a GROUP_M x (264 / GROUP_M) patch of C: GROUP_M panels of A and 264 /
// GROUP_M panels of B, which stay in L2 while every block of the patch reads
// them. Fewer DRAM bytes per FLOP; the gain should be small at N = 4096 (A and
// B are 64 MB each) and grow with N.
// The mapping: block (x, y) computes tile row y * GROUP_M + x % GROUP_M and
// tile column x / GROUP_M (the order CUTLASS's threadblock swizzle and
// Triton's grouped ordering use). It is made of blockIdx and constants only,
// so the compiler can recompute it instead of holding it in registers (a
// division by the number of tile columns, as in a 1-D grid, costs two
// registers through the main loop and spills at 128). When GROUP_M does not
// divide the tile rows, the last row of groups has blocks past the bottom of
// C; they return at once.

#include "cp_async_tiles.cuh"

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int GROUP_M, int MIN_BLOCKS>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_swizzle_l2(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out,
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
    static_assert(GROUP_M >= 1, "a group is at least one row of tiles");
    __shared__ __align__(16) T a_tile[STAGES][BK][BM];  // a_tile[s][kk][r ^ a_swizzle(kk)] = A[row0 + r][k0 + kk]
    __shared__ __align__(16) T b_tile[STAGES][BK][BN];
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int lrow = (lane / 8) * 4, lcol = (lane % 8) * 4;
    const int row0 = (blockIdx.y * GROUP_M + blockIdx.x % GROUP_M) * BM;
    const int col0 = (blockIdx.x / GROUP_M) * BN;
    if (row0 >= m) {
        return;  // the whole block is past the bottom of C (no barrier reached yet)
    }
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
