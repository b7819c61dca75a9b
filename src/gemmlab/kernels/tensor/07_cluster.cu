// tc_cluster: tc_persistent with blocks in clusters of two along M that share
// their B tile through TMA multicast. The two blocks of a cluster compute
// vertically adjacent tiles (rows 2 i and 2 i + 1 of tiles, one column), which
// need the same BN x K strip of B: each block's producer loads half of that
// strip once and the copy engine writes it into the shared memory of both.
// Source: not from the documents. Launch: clusters of (2, 1, 1), as many as
// the GPU holds at once (a cluster's blocks must sit in one GPC, so that can
// be fewer than SMs / 2: the runner asks the driver), blocks as in
// tc_persistent; the B tensor map's box is BN / 2 rows.
// Should teach: a block's stage may now be written by its neighbour, so
// "stage s is free" must mean free in both blocks: every consumer releases
// the stage on the empty barrier of both blocks (a remote arrive through the
// cluster's shared-memory window), and each producer waits for all four
// consumers before multicasting into it. Clusters start and finish together
// (barrier.cluster), so no block exits while its neighbour may still write to it.
// Predicted: B traffic from L2 halves; a few per cent where L2 bandwidth,
// not the tensor cores, sets the pace.
// Synchronisation (docs/synchronisation.md has the long form):
// - Start: thread 0 inits, fence.mbarrier_init.release.cluster, then
//   barrier.cluster arrive.release / wait.acquire: the neighbour's barriers
//   exist before anything is multicast or arrived on them.
// - full[s] counts A_BYTES + B_BYTES: this block's A and B half, and the
//   neighbour's B half, multicast with complete_tx on this block's barrier at
//   the same offset. Those bytes may land before this producer's expect_tx;
//   the tx-count dips below zero, but the phase cannot complete while the
//   producer's arrival is missing. The consumers' try_wait (acquire) returns
//   once all the bytes have landed and are visible.
// - empty[s] counts 2 x CONSUMERS arrivals: every consumer warpgroup of both
//   blocks, each after wgmma.wait_group has completed the wgmma that read the
//   stage. The arrive is .release.cta: the reads it vouches for are async-proxy
//   reads that no release orders; their completion, before the arrive is issued,
//   is what keeps a multicast from overwriting a stage still being read.
// - No phase aliasing: the neighbour can multicast use u + STAGES of stage s
//   only after this block's consumers released use u, which they did after
//   this block's full[s] completed use u; so a barrier is never two phases ahead.
// - End: barrier.cluster again. A block's shared memory receives only
//   (a) multicast bytes, all of which its own consumers waited for, and
//   (b) the neighbour consumers' arrivals, made before the neighbour's
//   arrive.release; so after the wait nothing more lands and the block may exit.
// - Across clusters nothing is shared: a grid larger than the resident one
//   only runs in more waves.

#include "../cluster.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "wgmma.cuh"
#include "epilogue.cuh"
#include "pipeline.cuh"

constexpr int CLUSTER = 2;

template <typename T, int BM, int BN, int STAGES, int GROUP_M, int PRODUCER_REGS, int CONSUMER_REGS>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1)
tc_cluster(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
           float* __restrict__ c, int m, int n, int k) {
    using S = typename T::storage;
    constexpr int BK = TMA_ROW_BYTES / sizeof(S);
    constexpr int A_BYTES = BM * TMA_ROW_BYTES, B_BYTES = BN * TMA_ROW_BYTES;
    constexpr int CONSUMERS = BM / 64;
    using Registers = RegisterSplit<PRODUCER_REGS, CONSUMER_REGS, CONSUMERS>;
    static_assert(BM % 64 == 0 && (BN == 128 || BN == 256), "64-row warpgroup slabs; N of one wgmma");
    static_assert((B_BYTES / CLUSTER) % 1024 == 0, "each block's half of B starts on a 1024-byte boundary");
    extern __shared__ __align__(1024) unsigned char smem[];
    unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + STAGES * (A_BYTES + B_BYTES));
    unsigned long long* empty = full + STAGES;

    const int tid = threadIdx.x, group = tid / 128;
    const unsigned rank = cluster_rank();
    // Tiles of the cluster: 2 BM rows x BN columns; cluster j walks j, j + clusters, ...
    const int tiles_m = (m + CLUSTER * BM - 1) / (CLUSTER * BM), tiles_n = (n + BN - 1) / BN;
    const int first = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;
    const int k_tiles = (k + BK - 1) / BK;
    auto stage = [&](int s) { return smem + s * (A_BYTES + B_BYTES); };

    init_ring<STAGES>(full, empty, CLUSTER * CONSUMERS);
    // The neighbour's barriers must exist before anything is multicast or arrived on them.
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
                    // This block's A, the whole of B (half from each block of the cluster).
                    fill_stage<A_BYTES, B_BYTES, BN, CLUSTER>(stage(s), &full[s], &a_map, &b_map,
                                                              (CLUSTER * tm + rank) * BM, tn * BN, t * BK, rank);
                }
            }
        }
    } else {
        Registers::claim();
        const int slab = group - 1, thread = tid % 128;
        // Lane `peer` of the first warp arrives on block `peer`'s barrier: the
        // arrivals leave as one instruction instead of one after the other.
        auto release = [&](int s) {
            if (thread < CLUSTER) mbar_arrive_cluster(&empty[s], thread);
        };
        int use = 0;
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
                wgmma_slice<T, BN>(acc, stage(s) + slab * 64 * TMA_ROW_BYTES, stage(s) + A_BYTES);
                wgmma_commit();
                wgmma_wait<1>();
                if (t > 0) release((use - 1) % STAGES);
            }
            wgmma_wait<0>();
            release((use - 1) % STAGES);
            fence_registers(acc);
            store_wgmma_tile<BN>(acc, c, m, n, (CLUSTER * tm + rank) * BM + slab * 64, tn * BN, thread);
        }
    }
    // Stay until the neighbour is done: its last arrivals land in this block's shared memory.
    cluster_sync();
}
