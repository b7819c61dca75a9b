// tc_mma_pipeline: tc_mma fed by a ring of STAGES cp.async stages, as
// sgemm_multistage did for the FP32 ladder: tiles t + 1 .. t + STAGES - 1 are
// on their way while tile t is computed, and cp.async writes shared memory
// without passing through registers.
// Source: not from the documents. Launch: as tc_mma, with STAGES x
// (BM + BN) x 64 x 2 bytes of dynamic shared memory (over 48 KB: the
// runner opts in). K a multiple of 8, any M and N; bf16 and fp16.
// Should teach: on tc_mma the tensor cores wait for every load; with the
// ring they wait only when global memory falls behind by STAGES - 1 tiles.
// Predicted: most of mma.sync's reach on Hopper, which is well under the
// wgmma peak: mma.sync is the Ampere instruction, and on an H100/H200 it
// feeds the matrix units at a fraction of wgmma's rate.
// The loop keeps one commit group per tile (empty near the end), so
// "at most STAGES - 2 groups pending" always means "tile t has arrived".

#include "mma_tiles.cuh"

template <typename T, int BM, int BN, int WM, int WN, int STAGES>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
tc_mma_pipeline(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b, float* __restrict__ c,
                int m, int n, int k) {
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    constexpr int STAGE = (BM + BN) * MMA_BK;  // elements per stage: the A tile, then the B tile
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles tile the block tile");
    static_assert(STAGES >= 2, "at least one tile in flight while one is computed");
    extern __shared__ __align__(128) unsigned short ring[];

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tiles = (k + MMA_BK - 1) / MMA_BK;
    float acc[WM / 16][WN / 8][4] = {};

    auto issue = [&](int t) {
        if (t < tiles) {
            unsigned short* stage = ring + (t % STAGES) * STAGE;
            copy_tile_async<BM, THREADS>(stage, a, row0, m, t * MMA_BK, k, tid);
            copy_tile_async<BN, THREADS>(stage + BM * MMA_BK, b, col0, n, t * MMA_BK, k, tid);
        }
        cp_async_commit();
    };

#pragma unroll
    for (int t = 0; t < STAGES - 1; ++t) issue(t);
    for (int t = 0; t < tiles; ++t) {
        cp_async_wait<STAGES - 2>();
        // Everyone's copies of tile t have landed, and everyone is done with
        // tile t - 1, whose stage the next issue overwrites.
        __syncthreads();
        issue(t + STAGES - 1);
        const unsigned short* stage = ring + (t % STAGES) * STAGE;
        mma_warp_tile<T, WM, WN>(acc, stage, stage + BM * MMA_BK, wrow, wcol, lane);
    }
    store_warp_tile<WM, WN>(acc, c, m, n, row0 + wrow, col0 + wcol, lane);
}
