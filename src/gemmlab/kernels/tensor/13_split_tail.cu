// tc_split_tail: tc_tma_store's clusters of two blocks sharing B (and its
// TMA-stored C) over the full waves of tiles, then the last, partial wave's
// tiles cut along K so that every cluster has an equal share of their
// k-tiles (a share may end in one tile and start in the next); the float32
// partials of a tile are added in K order by the last block of the tile to
// finish (tc_split_k's fix-up).
// Source: not from the documents; the "data-parallel waves, then stream-K"
// hybrid of Osama et al. (2023, Stream-K), in its simplest form.
// Launch: clusters of (2, 1, 1), as many as the GPU holds at once (G of them,
// the runner asks the driver), at most MAX_SLICES per cluster tile (2 BM x BN:
// the two blocks take vertically adjacent tiles with the same B, as in
// tc_cluster); (BM / 64 + 1) x 128 threads; the B tensor map's box BN / 2
// rows. C arrives as a tensor map and leaves as tc_tma_store's does: each
// consumer writes its 64 x BN sums box by box (64 rows x 128 bytes) into
// C_BOXES swizzled boxes of shared memory, each box stored by TMA, or all the
// slab's boxes at once where C_BOXES holds them (epilogue.cuh's store_slab).
// With U cluster tiles of T k-tiles each, cluster j computes tiles j, j + G,
// ... below W = (U / G) x G whole. The R = U - W tiles left make R x T
// k-tiles, which P = min(G, R x min(MAX_SLICES, T)) clusters share: worker w
// takes k-tiles floor(w R T / P) .. floor((w + 1) R T / P) - 1 of them,
// counted tile after tile, at most T of them (P >= R), so a piece of at most
// two tiles. A tile held by one worker alone is stored as a whole tile; the
// others go through the fix-up. MAX_SLICES = 1 is tc_tma_store's schedule.
// A last argument, the workspace: G x 2 counters (zero before the first
// launch; the kernel leaves them zero), then, from the next multiple of 16
// bytes, 2 x G x 2 partial tiles of BM x BN floats: block `rank` of worker w
// writes its piece of split tile r to slot rank x 2G + w + r (w + r grows by
// at least one from one piece to the next, in K order, and stays below
// P + R - 1 < 2G).
// Idea (round 7 of issue 21): round 6 cut the tail of tc_persistent's tiles
// into equal slices: it lost at 3000 (288 tiles) in the whole waves, which
// without B multicast run 30% slower than tc_cluster's, and it split nothing
// where the tiles were fewer than the blocks (1536: 72 tiles of 128 x 256 on
// 132 SMs, half the GPU idle). Here the waves are tc_tma_store's, and the tail
// is shared whatever its size: 1536's 36 cluster tiles of 24 k-tiles become
// 66 pieces of 13.
// Synchronisation (docs/synchronisation.md has the long form):
// - Inside a cluster: tc_cluster's (07_cluster.cu), and tc_tma_store's for
//   the boxes of C (08_tma_store.cu: a box is rewritten only once the store
//   that last read it is done reading; each writer's fence.proxy.async and a
//   warpgroup barrier come before the store). Both blocks of a cluster
//   walk the same items (whole tiles, then the same pieces of K), so every
//   stage is filled and released by both in the same order, and `use` counts
//   on across items on both sides; every use is released exactly once, the
//   last of an item after wgmma.wait_group<0>. The final barrier.cluster,
//   reached by every thread of both blocks, keeps a block's shared memory
//   alive until the neighbour's multicasts and arrivals into it are done.
// - Across clusters, only the split tiles: tc_split_k's argument per tile
//   and block row (counter r x 2 + rank, `pieces` arrivals): each consumer
//   thread's __stcg stores of its share of the partial, bar.sync 5 over the
//   consumers (1 and 2 are the warpgroups' own, for the boxes), then one
//   thread's __threadfence and relaxed atomicAdd (a release pattern); the
//   block whose add returns pieces - 1 fences again (acquire), publishes the
//   verdict in shared memory, and bar.sync 5 passes it and the ordering to
//   the consumers' __ldcg reads, which add the pieces from zero in K order
//   (the same bits whoever is last).
// - A block has at most two pieces of split tiles, so its verdict word is
//   written at most twice: the second write, by one thread after the first
//   bar.sync 5 of the second fix-up, follows every consumer's read of the
//   first verdict (each read it before reaching that barrier).
// - A block whose rows all lie past M takes no part: every block of that
//   rank sharing the tile does the same, so the counter sees none of them.
// - Counters: each reaches `pieces` once per launch; the last arriver's plain
//   zero races with no increment of this launch, and the next launch sees it
//   through the kernel boundary. Slots: each written once per launch.
// - Progress: no block waits for a block of another cluster; a block that is
//   not last moves on.

#include "../cluster.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "wgmma.cuh"
#include "epilogue.cuh"
#include "pipeline.cuh"
#include "slices.cuh"

constexpr int CLUSTER = 2;

// The schedule, the same in every thread of a cluster: what cluster `j` of
// `clusters` computes as its item `i` (0, 1, ...): a tile and its k-tiles
// [t_begin, t_end), and, for a tile of the tail, its number r among them.
struct TailPlan {
    int waves, rest, workers, k_tiles, plan_tiles;
    long long work;  // the tail's k-tiles, tile after tile

    __device__ TailPlan(int units, int clusters, int k_tiles_, int max_slices) : k_tiles(k_tiles_) {
        waves = units / clusters;
        rest = units - waves * clusters;
        plan_tiles = max(k_tiles, 1);  // K = 0: one empty piece a tile, each stored whole (zeros)
        workers = min(clusters, rest * min(max_slices, plan_tiles));
        work = static_cast<long long>(rest) * plan_tiles;
    }
    // The first of worker w's k-tiles of the tail (w = workers: the end).
    __device__ long long start(int w) const { return w * work / workers; }
    // The worker whose share holds the tail's k-tile x.
    __device__ int owner(long long x) const { return static_cast<int>(((x + 1) * workers + work - 1) / work - 1); }

    __device__ bool item(int j, int clusters, int i, int& tile, int& t_begin, int& t_end, int& r) const {
        if (i < waves) {
            tile = j + i * clusters;
            t_begin = 0;
            t_end = k_tiles;
            r = -1;
            return true;
        }
        if (j >= workers) return false;
        const long long lo = start(j), hi = start(j + 1);
        const int piece = i - waves;  // 0: where the share starts; 1: the next tile, if it reaches it
        r = static_cast<int>(lo / plan_tiles) + piece;
        const long long tile_lo = static_cast<long long>(r) * plan_tiles;
        if (piece > 1 || tile_lo >= hi) return false;
        tile = waves * clusters + r;
        t_begin = static_cast<int>(max(lo, tile_lo) - tile_lo);
        t_end = static_cast<int>(min(hi, tile_lo + plan_tiles) - tile_lo);
        t_end = min(t_end, k_tiles);  // K = 0: an empty range
        t_begin = min(t_begin, t_end);
        return true;
    }
};

template <typename T, int BM, int BN, int STAGES, int GROUP_M, int MAX_SLICES, int C_BOXES, int PRODUCER_REGS,
          int CONSUMER_REGS, int C_BOX_ROWS>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1)
tc_split_tail(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
              const __grid_constant__ CUtensorMap c_map, int m, int n, int k, void* workspace) {
    using S = typename T::storage;
    using C = typename T::c_storage;
    constexpr int BK = TMA_ROW_BYTES / sizeof(S);
    constexpr int A_BYTES = BM * TMA_ROW_BYTES, B_BYTES = BN * TMA_ROW_BYTES;
    constexpr int CONSUMERS = BM / 64;
    using Registers = RegisterSplit<PRODUCER_REGS, CONSUMER_REGS, CONSUMERS>;
    static_assert(BM % 64 == 0 && (BN == 128 || BN == 192 || BN == 256), "64-row warpgroup slabs; N of one wgmma");
    static_assert((B_BYTES / CLUSTER) % 1024 == 0, "each block's half of B starts on a 1024-byte boundary");
    static_assert(MAX_SLICES >= 1, "at least one slice");
    static_assert(C_BOX_ROWS == 64, "a box of C holds the 64 rows of one warpgroup's sums");
    constexpr int C_BOX_BYTES = C_BOX_ROWS * TMA_ROW_BYTES;
    constexpr int FIXUP_BARRIER = 5;  // all consumers; 1 and 2 are the warpgroups' own (warpgroup_sync)
    extern __shared__ __align__(1024) unsigned char smem[];
    // The ring, then each consumer's C boxes (1024-byte aligned: the swizzle's period), then the barriers.
    unsigned char* boxes = smem + STAGES * (A_BYTES + B_BYTES);
    unsigned long long* full = reinterpret_cast<unsigned long long*>(boxes + CONSUMERS * C_BOXES * C_BOX_BYTES);
    unsigned long long* empty = full + STAGES;
    __shared__ int last_arrival;

    const int tid = threadIdx.x, group = tid / 128;
    const unsigned rank = cluster_rank();
    const int tiles_m = (m + CLUSTER * BM - 1) / (CLUSTER * BM), tiles_n = (n + BN - 1) / BN;
    const int j = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;
    const TailPlan plan(tiles_m * tiles_n, clusters, (k + BK - 1) / BK, MAX_SLICES);
    auto stage = [&](int s) { return smem + s * (A_BYTES + B_BYTES); };

    init_ring<STAGES>(full, empty, CLUSTER * CONSUMERS);
    cluster_sync();  // the neighbour's barriers exist before anything is multicast or arrived on them

    if (group == 0) {
        Registers::release();
        if (tid == 0) {
            int use = 0, tile, t_begin, t_end, r;
            for (int i = 0; plan.item(j, clusters, i, tile, t_begin, t_end, r); ++i) {
                int tm, tn;
                tile_coords<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
                for (int t = t_begin; t < t_end; ++t, ++use) {
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
        const int me = tid - 128;  // 0 .. CONSUMERS x 128 - 1
        unsigned char* my_boxes = boxes + slab * C_BOXES * C_BOX_BYTES;
        auto release = [&](int s) {
            if (thread < CLUSTER) mbar_arrive_cluster(&empty[s], thread);
        };
        int stored = 0;  // boxes this warpgroup has handed to the copy engine
        // This warpgroup's 64 x BN sums to C at (row, col), as tc_tma_store stores them.
        auto store_tile = [&](const float (&acc)[BN / 2], int row, int col) {
            if (row >= m) return;  // a cluster's tile row past M: nothing to store
            store_slab<BN, C, C_BOXES, C_BOX_BYTES>(&c_map, my_boxes, stored, slab, thread, row, col,
                                                    [&](int box, unsigned char* out) {
                                                        write_wgmma_box<BN, C>(acc, out, box, thread);
                                                    });
        };
        unsigned* arrivals = static_cast<unsigned*>(workspace);
        float4* partials =
            reinterpret_cast<float4*>(static_cast<char*>(workspace) + (gridDim.x * 4 + 15) / 16 * 16);
        int use = 0, tile, t_begin, t_end, r;
        for (int i = 0; plan.item(j, clusters, i, tile, t_begin, t_end, r); ++i) {
            int tm, tn;
            tile_coords<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
            float acc[BN / 2];
#pragma unroll
            for (int x = 0; x < BN / 2; ++x) acc[x] = 0.f;
            for (int t = t_begin; t < t_end; ++t, ++use) {
                const int s = use % STAGES;
                mbar_wait(&full[s], (use / STAGES) % 2);
                wgmma_fence();
                wgmma_slice<typename T::inputs, BN>(acc, stage(s) + slab * 64 * TMA_ROW_BYTES, stage(s) + A_BYTES);
                wgmma_commit();
                wgmma_wait<1>();
                if (t > t_begin) release((use - 1) % STAGES);
            }
            wgmma_wait<0>();
            if (t_end > t_begin) release((use - 1) % STAGES);
            fence_registers(acc);
            const int block_row = (CLUSTER * tm + rank) * BM;
            if (r >= 0) {
                // A tile of the tail: held whole by this worker, or one piece of it.
                const long long tile_lo = static_cast<long long>(r) * plan.plan_tiles;
                const int first = plan.owner(tile_lo), pieces = plan.owner(tile_lo + plan.plan_tiles - 1) - first + 1;
                if (pieces > 1) {
                    if (block_row >= m) continue;  // rows past M: this rank's pieces of the tile all skip
                    const long long slots = static_cast<long long>(rank) * gridDim.x + first + r;
                    if (!add_slices<BM, BN, CONSUMERS, FIXUP_BARRIER>(acc, partials, slots,
                                                                      &arrivals[r * CLUSTER + rank], last_arrival,
                                                                      j - first, pieces, me))
                        continue;
                }
            }
            store_tile(acc, block_row + slab * 64, tn * BN);
        }
        // Shared memory must outlive the copy engine's reads of it.
        if (thread == 0) bulk_wait_read<0>();
    }
    // Stay until the neighbour is done: its last multicasts and arrivals land in this block's shared memory.
    cluster_sync();
}
