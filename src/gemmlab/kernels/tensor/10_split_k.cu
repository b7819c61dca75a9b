// tc_split_k: tc_warpspecialized's blocks with K cut into SPLITS slices, one
// block per (tile, slice); the slices' float32 partial tiles are added, in
// slice order, by the last block of the tile to finish, which writes C in its
// type (float32, or bfloat16 rounded to nearest even).
// Source: not from the documents; the FP32 ladder's sgemm_split_k (sgemm/19)
// on the Hopper mainloop: a TMA producer warpgroup, BM / 64 wgmma consumer
// warpgroups, full/empty barriers and the setmaxnreg hand-over.
// Launch: grid N / BN x M / BM x SPLITS, (BM / 64 + 1) x 128 threads, one
// block per SM; the ring's dynamic shared memory as tc_warpspecialized. With
// CLUSTER = 2: grid M / BM (rounded up to even) x N / BN x SPLITS in clusters
// of (2, 1, 1), the B tensor map's box BN / 2 rows (shared_b_mainloop). A
// last argument, the workspace: one counter per tile (zero before the first
// launch; the kernel leaves them zero), then, from the next multiple of 16
// bytes, SPLITS partial tiles of BM x BN floats per tile.
// Idea: when C has few tiles (1024 x 1024 in 128 x 128 tiles is 64 of them;
// 128 x 4096 is 32) the GPU's 132 SMs are mostly idle however fast each block
// is. Cutting K into SPLITS slices multiplies the blocks by SPLITS for one
// extra round trip of BM x BN floats per slice through L2. Slice z takes the
// 64-deep k-tiles floor(z T / S) .. floor((z + 1) T / S) - 1 of T = ceil(K /
// 64): lengths differ by at most one; a slice is empty only when T < S (it
// then stores zeros and arrives like the others).
// Determinism: the last block adds the SPLITS partials in slice order from
// zero, its own read back like the others: C is the same bit for bit whoever
// arrives last, launch after launch.
// Predicted (docs/tensor-ladder.md): 1024 x 1024 x 16384 at 128 x 128 and
// SPLITS = 2 fills 128 of 132 SMs with blocks of K = 8192, about 90-100% of
// cuBLAS; 128 x 4096 x 4096, SPLITS = 4: 128 blocks of K = 1024.
// Synchronisation (docs/synchronisation.md): inside the block, the ring is
// tc_warpspecialized's (its header). Across blocks, as sgemm_split_k: each
// consumer thread's __stcg stores of its share of the partial, then
// bar.sync 1 over the consumers (the producer warpgroup does not take part;
// it has left its loop), then one thread's __threadfence and relaxed
// atomicAdd on the tile's counter: a release pattern whose fence is
// cumulative over the stores the barrier showed it. The last to arrive: its
// atomicAdd read a count that includes every other slice's increment, then
// its __threadfence: an acquire pattern, synchronising with each writer's
// release; it writes the verdict to shared memory and bar.sync 1 hands it,
// and the acquire, to every consumer thread's __ldcg reads. Counters: each
// reaches SPLITS exactly once per launch, so the last arriver's plain store of
// zero races with no increment of this launch; the next launch on the stream
// sees it through the kernel boundary. Slots: slice z of tile t writes only
// slot (t, z), once per launch. Progress: no block waits for another, except
// its cluster's neighbour (CLUSTER = 2), which is resident with it.
// CLUSTER = 2, inside a cluster (tc_cluster's argument, 07_cluster.cu):
// barriers initialised, fenced (fence.mbarrier_init.release.cluster) and
// shown to the neighbour by barrier.cluster before any multicast or remote
// arrive; full[s] counts this block's A and both halves of B, whichever
// producer sent them; empty[s] counts the consumers of both blocks, each
// arriving after wgmma.wait_group completed the wgmma that read the stage, so
// no multicast overwrites a stage either block still reads, and neither
// barrier can run two phases ahead of the other block's. Both blocks of a
// cluster have the same slice, hence the same number of k-tiles. A second
// barrier.cluster after the mainloop, reached by every thread of both blocks,
// follows every multicast into either block (its consumers waited for all of
// them) and every remote arrive (made before the arrive.release): after it
// nothing lands in a block's shared memory, and the fix-up, which uses no
// shared memory of the ring, is each block's own as with one block.

#include "../cluster.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "wgmma.cuh"
#include "epilogue.cuh"
#include "pipeline.cuh"
#include "slices.cuh"


// CLUSTER = 2: the two blocks of a cluster are vertically adjacent tiles of
// one slice (grid x runs along M); each block's producer loads half of their
// common B strip and multicasts it into both, and a stage is free only once
// the consumers of both blocks released it (tc_cluster's ring, 07_cluster.cu).
// Called by every thread of the block once the ring's barriers exist in both
// blocks (init_ring, then cluster_sync); returns when the cluster is
// quiescent: every multicast byte into this block and every arrival on its
// barriers has landed.
template <typename Inputs, int BN, int STAGES, int A_BYTES, int B_BYTES, int BK, int CLUSTER>
__device__ __forceinline__ void shared_b_mainloop(float (&acc)[BN / 2], unsigned char* smem, unsigned long long* full,
                                                  unsigned long long* empty, const CUtensorMap* a_map,
                                                  const CUtensorMap* b_map, int row0, int col0, int t_begin,
                                                  int t_end, int group, int tid) {
    const unsigned rank = cluster_rank();
    auto stage = [&](int s) { return smem + s * (A_BYTES + B_BYTES); };
    if (group == 0) {
        if (tid == 0) {
            for (int t = t_begin, u = 0; t < t_end; ++t, ++u) {
                const int s = u % STAGES;
                if (u >= STAGES) mbar_wait(&empty[s], (u / STAGES - 1) % 2);
                // Own A, both halves of B.
                fill_stage<A_BYTES, B_BYTES, BN, CLUSTER>(stage(s), &full[s], a_map, b_map, row0, col0, t * BK, rank);
            }
        }
    } else {
        const int slab = group - 1, thread = tid % 128;
        for (int t = t_begin, u = 0; t < t_end; ++t, ++u) {
            const int s = u % STAGES;
            mbar_wait(&full[s], (u / STAGES) % 2);
            wgmma_fence();
            wgmma_slice<Inputs, BN>(acc, stage(s) + slab * 64 * TMA_ROW_BYTES, stage(s) + A_BYTES);
            wgmma_commit();
            wgmma_wait<1>();
            // Lane `peer` releases the previous stage in block `peer` (both at once).
            if (u > 0 && thread < CLUSTER) mbar_arrive_cluster(&empty[(u - 1) % STAGES], thread);
        }
        wgmma_wait<0>();
        fence_registers(acc);
    }
    cluster_sync();  // stay until the neighbour's multicasts and arrivals into this block are done
}

template <typename T, int BM, int BN, int STAGES, int SPLITS, int CLUSTER, int PRODUCER_REGS, int CONSUMER_REGS>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1)
tc_split_k(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
           typename T::c_storage* __restrict__ c, int m, int n, int k, void* workspace) {
    using S = typename T::storage;
    constexpr int BK = TMA_ROW_BYTES / sizeof(S);
    constexpr int A_BYTES = BM * TMA_ROW_BYTES, B_BYTES = BN * TMA_ROW_BYTES;
    constexpr int CONSUMERS = BM / 64;
    using Registers = RegisterSplit<PRODUCER_REGS, CONSUMER_REGS, CONSUMERS>;
    static_assert(BM % 64 == 0 && (BN == 128 || BN == 256), "64-row warpgroup slabs; N of one wgmma");
    static_assert(SPLITS >= 2, "one slice is tc_warpspecialized");
    static_assert(CLUSTER == 1 || (CLUSTER == 2 && (B_BYTES / CLUSTER) % 1024 == 0),
                  "one block, or two sharing B in halves that start on 1024-byte boundaries");
    extern __shared__ __align__(1024) unsigned char smem[];
    unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + STAGES * (A_BYTES + B_BYTES));
    unsigned long long* empty = full + STAGES;
    __shared__ int last_arrival;

    const int tid = threadIdx.x, group = tid / 128;
    // One block: x runs along N. A cluster of two: x runs along M, so that a
    // cluster's blocks are vertically adjacent and need the same B.
    const int row0 = (CLUSTER == 1 ? blockIdx.y : blockIdx.x) * BM;
    const int col0 = (CLUSTER == 1 ? blockIdx.x : blockIdx.y) * BN;
    const int tile = blockIdx.y * gridDim.x + blockIdx.x, slice = blockIdx.z;
    const int k_tiles = (k + BK - 1) / BK;
    const int t_begin = static_cast<int>(static_cast<long long>(slice) * k_tiles / SPLITS);
    const int t_end = static_cast<int>(static_cast<long long>(slice + 1) * k_tiles / SPLITS);
    if constexpr (CLUSTER == 1) {
        init_ring<STAGES>(full, empty, CONSUMERS);
        __syncthreads();

        if (group == 0) {
            Registers::release();
            if (tid == 0)
                produce_k_slice<STAGES, A_BYTES, B_BYTES, BK>(smem, full, empty, &a_map, &b_map, row0, col0,
                                                              t_begin, t_end);
            return;  // the fix-up is the consumers' alone (bar.sync 1 counts only them)
        }
        Registers::claim();
    } else {
        init_ring<STAGES>(full, empty, CLUSTER * CONSUMERS);  // a stage is free when both blocks released it
        cluster_sync();  // the neighbour's barriers exist before anything is multicast or arrived on them
        if (group == 0)
            Registers::release();
        else
            Registers::claim();
    }
    const int slab = group - 1, thread = tid % 128;
    const int me = tid - 128;  // 0 .. CONSUMERS x 128 - 1
    float acc[BN / 2] = {};
    if constexpr (CLUSTER == 1) {
        consume_k_slice<typename T::inputs, BN, STAGES, A_BYTES, B_BYTES>(acc, smem, full, empty, slab, thread,
                                                                          t_begin, t_end);
    } else {
        shared_b_mainloop<typename T::inputs, BN, STAGES, A_BYTES, B_BYTES, BK, CLUSTER>(
            acc, smem, full, empty, &a_map, &b_map, row0, col0, t_begin, t_end, group, tid);
        if (group == 0) return;  // the fix-up is the consumers' alone (bar.sync 1 counts only them)
    }

    unsigned* arrivals = static_cast<unsigned*>(workspace);
    const int tiles = gridDim.x * gridDim.y;
    float4* partials = reinterpret_cast<float4*>(static_cast<char*>(workspace) + (tiles * 4 + 15) / 16 * 16);
    const long long first = static_cast<long long>(tile) * SPLITS;  // the tile's slots
    if (!add_slices<BM, BN, CONSUMERS>(acc, partials, first, &arrivals[tile], last_arrival, slice, SPLITS, me)) return;
    store_wgmma_tile<BN>(acc, c, m, n, row0 + slab * 64, col0, thread);
}
