// tc_tma_store: tc_cluster whose consumers hand C to the copy engine too.
// Each consumer warpgroup writes its 64 x BN accumulators into shared memory,
// box by box (64 rows x 128 bytes: 32 float32 or 64 bfloat16 columns), in the
// same 128-byte swizzle the loads use, and one thread issues a TMA store of
// the box; C_BOXES boxes per warpgroup take turns. Where C_BOXES holds the
// whole slab (bfloat16 C at BN = 192: three boxes), the warpgroup writes every
// box, fences once and hands all of them over together (epilogue.cuh's
// store_slab, which the FP8 rungs share). Where BN is not a whole
// number of boxes (BN = 144), the last box ends at BN and overlaps the one
// before it: the columns they share are stored twice, with the same values.
// BM = 192 gives a block three consumer warpgroups (192 x 192 tiles, cuBLAS's
// at 3000 cubed), with the register split of kernels/tensor/spec.py's
// THREE_CONSUMER_SPLIT (32 + 3 x 160) in PRODUCER_REGS and CONSUMER_REGS.
// Source: not from the documents. Launch: as tc_cluster; C arrives as a TMA
// tensor map (boxes of C_BOX_ROWS = 64 rows x 128 bytes, the last template
// argument, set in kernels/tensor/spec.py) instead of a pointer. The element
// type tag says what C holds: float32, or bfloat16 (gl_bf16_out: the float32
// sums rounded to nearest even in the epilogue, half the bytes to write).
// Should teach: the shared memory written by threads ("generic proxy") must
// be fenced (fence.proxy.async) before the copy engine ("async proxy") reads
// it, and a box may be rewritten only once the store that read it has
// finished reading (cp.async.bulk.wait_group.read). The stores leave as 8 KB
// boxes of whole 128-byte lines, the edges of M and N clipped by the copy
// engine, with no address arithmetic or bounds test per element.
// Predicted: about tc_cluster's speed with float32 C (the epilogue is a few
// per cent of a tile's time at 4096 and the stores were already
// asynchronous); a few per cent faster with bfloat16 C, which halves the
// 64 MB of C written at 4096 (about 1.4% of the 0.19 ms at 3.3 TB/s).
// Synchronisation: the load ring, the cluster barriers and their argument are
// tc_cluster's (see its header). The C boxes are this block's own, never
// multicast into. Per box: thread 0's cp.async.bulk.wait_group.read<C_BOXES - 1>
// returns once the store that last read this box has finished reading it;
// bar.sync (named, the warpgroup's 128 threads) orders that before the
// warpgroup's writes. Each thread's fence.proxy.async.shared::cta orders its
// generic writes before async-proxy reads; the second bar.sync orders all 128
// fences before thread 0 issues the TMA store. With the whole slab in boxes,
// the same per tile: thread 0's wait_group.read<0> (the last tile's stores
// done reading), bar.sync, every box written, one fence per thread, bar.sync,
// then thread 0 issues all the stores as one group. Before exit, wait_group.read<0>:
// no store still reads shared memory when the block leaves (their global
// writes complete before the grid does). docs/synchronisation.md.

#include "../cluster.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "wgmma.cuh"
#include "epilogue.cuh"
#include "pipeline.cuh"

constexpr int CLUSTER = 2;

template <typename T, int BM, int BN, int STAGES, int GROUP_M, int C_BOXES, int PRODUCER_REGS, int CONSUMER_REGS,
          int C_BOX_ROWS>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1)
tc_tma_store(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
             const __grid_constant__ CUtensorMap c_map, int m, int n, int k) {
    using S = typename T::storage;
    using C = typename T::c_storage;
    constexpr int BK = TMA_ROW_BYTES / sizeof(S);
    constexpr int A_BYTES = BM * TMA_ROW_BYTES, B_BYTES = BN * TMA_ROW_BYTES;
    constexpr int CONSUMERS = BM / 64;
    using Registers = RegisterSplit<PRODUCER_REGS, CONSUMER_REGS, CONSUMERS>;
    static_assert(BM % 64 == 0 && (BN == 128 || BN == 144 || BN == 192 || BN == 256),
                  "64-row warpgroup slabs; N of one wgmma");
    static_assert((B_BYTES / CLUSTER) % 1024 == 0, "each block's half of B starts on a 1024-byte boundary");
    // C_BOX_ROWS (spec.py's, also the box of C's tensor map): a box takes one warpgroup's 64 rows.
    static_assert(C_BOX_ROWS == 64, "a box of C holds the 64 rows of one warpgroup's accumulators");
    constexpr int C_BOX_BYTES = C_BOX_ROWS * TMA_ROW_BYTES;
    extern __shared__ __align__(1024) unsigned char smem[];
    // The ring, then each consumer's C boxes (1024-byte aligned: the swizzle's period), then the barriers.
    unsigned char* boxes = smem + STAGES * (A_BYTES + B_BYTES);
    unsigned long long* full = reinterpret_cast<unsigned long long*>(boxes + CONSUMERS * C_BOXES * C_BOX_BYTES);
    unsigned long long* empty = full + STAGES;

    const int tid = threadIdx.x, group = tid / 128;
    const unsigned rank = cluster_rank();
    const int tiles_m = (m + CLUSTER * BM - 1) / (CLUSTER * BM), tiles_n = (n + BN - 1) / BN;
    const int first = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;
    const int k_tiles = (k + BK - 1) / BK;
    auto stage = [&](int s) { return smem + s * (A_BYTES + B_BYTES); };

    init_ring<STAGES>(full, empty, CLUSTER * CONSUMERS);
    cluster_sync();

    if (group == 0) {
        Registers::release();
        if (tid == 0) {
            int use = 0;
            for (int tile = first; tile < tiles_m * tiles_n; tile += clusters) {
                int tm, tn;
                tile_coords<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
                for (int t = 0; t < k_tiles; ++t, ++use) {
                    const int s = use % STAGES;
                    if (use >= STAGES) mbar_wait(&empty[s], (use / STAGES - 1) % 2);
                    fill_stage<A_BYTES, B_BYTES, BN, CLUSTER>(stage(s), &full[s], &a_map, &b_map,
                                                              (CLUSTER * tm + rank) * BM, tn * BN, t * BK, rank);
                }
            }
        }
    } else {
        Registers::claim();
        const int slab = group - 1, thread = tid % 128;
        unsigned char* my_boxes = boxes + slab * C_BOXES * C_BOX_BYTES;
        auto release = [&](int s) {
            if (thread < CLUSTER) mbar_arrive_cluster(&empty[s], thread);
        };
        int use = 0, stored = 0;  // stored: boxes this warpgroup has handed to the copy engine
        for (int tile = first; tile < tiles_m * tiles_n; tile += clusters) {
            int tm, tn;
            tile_coords<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
            float acc[BN / 2];
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
            for (int t = 0; t < k_tiles; ++t, ++use) {
                const int s = use % STAGES;
                mbar_wait(&full[s], (use / STAGES) % 2);
                wgmma_fence();
                wgmma_slice<typename T::inputs, BN>(acc, stage(s) + slab * 64 * TMA_ROW_BYTES, stage(s) + A_BYTES);
                wgmma_commit();
                wgmma_wait<1>();
                if (t > 0) release((use - 1) % STAGES);
            }
            wgmma_wait<0>();
            release((use - 1) % STAGES);
            fence_registers(acc);
            const int row = (CLUSTER * tm + rank) * BM + slab * 64;
            if (row >= m) continue;  // a cluster's second tile row past M: nothing to store
            store_slab<BN, C, C_BOXES, C_BOX_BYTES>(&c_map, my_boxes, stored, slab, thread, row, tn * BN,
                                                    [&](int box, unsigned char* out) {
                                                        write_wgmma_box<BN, C>(acc, out, box, thread);
                                                    });
        }
        // Shared memory must outlive the copy engine's reads of it.
        if (thread == 0) bulk_wait_read<0>();
    }
    cluster_sync();
}
