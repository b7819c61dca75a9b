// sgemm_double_buffer: sgemm_warptile whose tiles arrive by asynchronous
// copies (cp.async) into two stages of shared memory.
// Source: not from the documents; cp.async needs compute capability 8.0.
// Launch: as sgemm_warptile (static shared memory: 2 stages of BK x (BM + BN)).
// Idea: in sgemm_warptile a warp waits for its global loads (hundreds of
// cycles) before it stores them and reaches the barrier, and only other
// blocks on the SM compute meanwhile. Here the copy of tile t + 1 is issued
// straight from global to shared memory (no registers, no store
// instructions) and runs while tile t is computed:
//   wait for tile t's copies; barrier; issue tile t + 1 into the other stage;
//   compute tile t.
// The one barrier per tile serves both ends: tile t is complete for every
// thread, and every thread has finished tile t - 1, whose stage tile t + 1
// overwrites. cp.async.wait_group makes a thread's own copies visible to it;
// the barrier after it makes them visible to the block.
// Copies: B rows go in 16-byte cp.async.cg (through L2 only) when N is a
// multiple of 4, else in 4-byte pieces. A must be transposed on its way into
// shared memory, which a 16-byte copy cannot do, so it goes in 4-byte
// cp.async.ca pieces, each to its swizzled place (the float4 pattern of
// sgemm_warptile, so the same XOR keeps the stores conflict-free). Elements
// outside the matrices are zero-filled by the copy itself (src-size 0). NVRTC
// has no CUDA headers, so the PTX is written out below.

#include "cp_async_tiles.cuh"

template <typename T, int BM, int BN, int BK, int WM, int WN, int MIN_BLOCKS>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_double_buffer(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out,
                    int m, int n, int k, T alpha, T beta) {
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    constexpr int M_SUB = WM / 16, N_SUB = WN / 32;
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles tile the block tile");
    static_assert(WM % 16 == 0 && WN % 32 == 0, "a warp tile is whole 16 x 32 sub-tiles");
    static_assert(BM % 32 == 0 && BN % 4 == 0 && BK % 4 == 0, "rows of whole float4s; a_swizzle needs BM % 32 == 0");
    static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
                  "every thread copies the same number of float4s of each tile");
    __shared__ __align__(16) T a_tile[2][BK][BM];  // a_tile[s][kk][r ^ a_swizzle(kk)] = A[row0 + r][k0 + kk]
    __shared__ __align__(16) T b_tile[2][BK][BN];
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int lrow = (lane / 8) * 4, lcol = (lane % 8) * 4;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool b_vec = n % 4 == 0 && aligned16(b);
    const bool c_vec = n % 4 == 0 && aligned16(c_in) && aligned16(c_out);
    const int tiles = (k + BK - 1) / BK;
    T acc[M_SUB * 4][N_SUB * 4] = {};

    load_tiles<BM, BN, BK, THREADS>(a_tile[0], b_tile[0], a, b, row0, col0, 0, m, n, k, b_vec, tid);
    cp_async_commit();
    for (int t = 0; t < tiles; ++t) {
        cp_async_wait<0>();
        __syncthreads();  // tile t is in for everyone; everyone is done with tile t - 1
        if (t + 1 < tiles) {
            const int next = (t + 1) % 2;
            load_tiles<BM, BN, BK, THREADS>(a_tile[next], b_tile[next], a, b, row0, col0, (t + 1) * BK, m, n,
                                            k, b_vec, tid);
        }
        cp_async_commit();
        compute_tile<BM, BN, BK, M_SUB, N_SUB>(a_tile[t % 2], b_tile[t % 2], acc, wrow, wcol, lrow, lcol);
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
