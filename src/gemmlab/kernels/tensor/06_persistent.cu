// tc_persistent: tc_warpspecialized with one block per SM that walks over
// many tiles of C, in an L2-friendly order.
// Source: not from the documents. Launch: as many blocks of (BM / 64 + 1) x 128
// threads as the GPU holds at once (one per SM), at most one per tile; block b
// computes tiles b, b + gridDim.x, ...
// Tiles are numbered in groups of GROUP_M tile rows, column by column inside
// a group, so the blocks running at one moment share a few rows of A and a
// few columns of B in the L2 instead of sweeping all of B.
// Should teach: with one block per tile, each block pays its own start (barrier
// set-up, the first TMA round trip) and its epilogue with the tensor cores
// idle. A persistent block's producer runs on into the next tile while the
// consumers store the last one, and its stage ring and barrier phases simply
// continue: the tile boundary disappears from the pipeline.
// Predicted: a few per cent over tc_warpspecialized at 4096 (32 x 16 = 512
// tiles of 128 x 256 on 132 SMs: 3.9 waves, whose last partial wave now
// costs less), more at sizes whose tile count is far from a multiple of 132.
// Synchronisation (inside one block; docs/synchronisation.md): tc_warpspecialized's
// full/empty ring, with `use` counted on across tiles on both sides so that
// stage and parity agree; every use is released exactly once (the last k-tile
// of a tile after wgmma.wait_group<0>). No block waits for another, so the
// resident grid (the runner launches at most as many blocks as fit at once)
// is a matter of speed, not of progress.

#include "mbarrier.cuh"
#include "tma.cuh"
#include "wgmma.cuh"
#include "epilogue.cuh"
#include "pipeline.cuh"


template <typename T, int BM, int BN, int STAGES, int GROUP_M, int PRODUCER_REGS, int CONSUMER_REGS>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1)
tc_persistent(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
              float* __restrict__ c, int m, int n, int k) {
    using S = typename T::storage;
    constexpr int BK = TMA_ROW_BYTES / sizeof(S);
    constexpr int A_BYTES = BM * TMA_ROW_BYTES, B_BYTES = BN * TMA_ROW_BYTES;
    constexpr int CONSUMERS = BM / 64;
    using Registers = RegisterSplit<PRODUCER_REGS, CONSUMER_REGS, CONSUMERS>;
    static_assert(BM % 64 == 0 && (BN == 128 || BN == 256), "64-row warpgroup slabs; N of one wgmma");
    extern __shared__ __align__(1024) unsigned char smem[];
    unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + STAGES * (A_BYTES + B_BYTES));
    unsigned long long* empty = full + STAGES;

    const int tid = threadIdx.x, group = tid / 128;
    const int tiles_m = (m + BM - 1) / BM, tiles_n = (n + BN - 1) / BN;
    const int k_tiles = (k + BK - 1) / BK;
    auto stage = [&](int s) { return smem + s * (A_BYTES + B_BYTES); };

    init_ring<STAGES>(full, empty, CONSUMERS);
    __syncthreads();

    // `use` counts k-tiles over all of this block's tiles: stage use % STAGES,
    // phase use / STAGES, the same sequence on both sides.
    if (group == 0) {
        Registers::release();
        if (tid == 0) {
            int use = 0;
            for (int tile = blockIdx.x; tile < tiles_m * tiles_n; tile += gridDim.x) {
                int tm, tn;
                tile_coords<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
                for (int t = 0; t < k_tiles; ++t, ++use) {
                    const int s = use % STAGES;
                    if (use >= STAGES) mbar_wait(&empty[s], (use / STAGES - 1) % 2);
                    mbar_expect_bytes(&full[s], A_BYTES + B_BYTES);
                    tma_load(stage(s), &a_map, &full[s], tm * BM, t * BK);
                    tma_load(stage(s) + A_BYTES, &b_map, &full[s], tn * BN, t * BK);
                }
            }
        }
    } else {
        Registers::claim();
        const int slab = group - 1, thread = tid % 128;
        int use = 0;
        for (int tile = blockIdx.x; tile < tiles_m * tiles_n; tile += gridDim.x) {
            int tm, tn;
            tile_coords<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
            float acc[BN / 2];
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
            for (int t = 0; t < k_tiles; ++t, ++use) {
                const int s = use % STAGES;
                mbar_wait(&full[s], (use / STAGES) % 2);
                wgmma_fence();
                wgmma_slice<T, BN>(acc, stage(s) + slab * 64 * TMA_ROW_BYTES, stage(s) + A_BYTES);
                wgmma_commit();
                wgmma_wait<1>();
                if (t > 0 && thread == 0) mbar_arrive(&empty[(use - 1) % STAGES]);
            }
            wgmma_wait<0>();
            // The tile's last stage is free too; the producer may already be
            // filling the others with the next tile while this one is stored.
            if (thread == 0) mbar_arrive(&empty[(use - 1) % STAGES]);
            fence_registers(acc);
            store_wgmma_tile<BN>(acc, c, m, n, tm * BM + slab * 64, tn * BN, thread);
        }
    }
}
