// tc_small: the Hopper mainloop on small tiles, for problems with too few
// 128 x 256 tiles to fill the GPU (squares of 256 to 2048, M of 64 to 256
// against a large N and K). A block computes BM x BN of C (BM = 64 or 128:
// one or two wgmma consumer warpgroups; BN = 64 or 128: the N of one wgmma)
// over one of SPLITS slices of K, fed by one producer warp through a short
// ring of TMA stages (full/empty barriers, as tc_warpspecialized).
// Source: not from the documents. Launch: grid (ceil(ceil(M / BM) / PAIR) x
// PAIR x SPLITS, ceil(N / BN)); BM / 64 x 128 + 32 threads; dynamic shared
// memory: STAGES x (BM + BN) x 128 bytes + the barriers; with PAIR x SPLITS >
// 1, clusters of PAIR x SPLITS blocks along x: the slices of one tile (and of
// the pair's second tile); the B tensor map's box BN / PAIR rows. The blocks
// of a tile's column run next to each other (x before y), so a slab of B meets
// its tile rows while it is in L2. PAIR_COLS = 2 (SPLITS = PAIR = 1): grid
// (ceil(ceil(N / BN) / 2) x 2, ceil(M / BM)), clusters of the 2 column tiles
// along x, the A tensor map's box BM / 2 rows. A and B are TMA tensor maps; C
// a pointer of its type (float32, or bfloat16 rounded to nearest even). Any M and N; K x element size a
// multiple of 16 bytes.
// Idea: at 512 x 512 x 512 the 128 x 128 tiles of tc_wgmma are 16 blocks on
// 132 SMs, each walking all 8 k-tiles in turn; cuBLAS's kernel is in the same
// place (3.7 us on an H100, about what 16 SMs take for 8 k-tiles of 0.29 us
// and a prologue). 64 x 64 tiles make 64 blocks, and two slices of K 128,
// each walking 4 k-tiles. The slices' partial tiles are added through
// distributed shared memory, not a global workspace: each block of the
// cluster leaves its float32 partial in its own (idle) ring, and block z
// adds the SPLITS partials of its share of the tile's columns, in slice order
// (the same bits whichever block finishes first), and stores them.
// Predicted (docs/tensor-ladder.md): 512: about 2.5 us, 135-155% of cuBLAS;
// 1024: 3.5-4 us, 160-180%; 128 x 4096 x 4096 (bound by its bytes): about
// 11-13 us, 110-130%.
// PAIR = 2: two vertically adjacent row tiles share their B (the same
// columns, the same slice of K) as tc_cluster's blocks do: a cluster holds
// PAIR x SPLITS blocks, rank p x SPLITS + slice for row tile p of the pair,
// and each block's producer loads half of B's BN rows and multicasts it to
// both blocks of its slice. At 4096 x 128 x 4096 the 64 row tiles each read
// all of B (1 MB) from L2; pairs halve that. The pair's cluster barriers at
// the start and the end order no memory (below): with release fences, which
// wait for memory operations, they held 16% of the pairs' warp samples. Row
// pairs lost to column pairs (below) wherever both were timed and are not
// searched (docs/tensor-ladder.md, issue 21's tenth, twelfth and thirteenth
// rounds).
// PAIR_COLS = 2 (round 13): the same for two horizontally adjacent column
// tiles sharing A (cuBLAS's clusters at 1000 and 1024): each producer loads
// half of A's BM rows, multicast to both, and its own B. At 1000 the 128 x 64
// column pair is at cuBLAS's speed on both GPUs (8.33 us on an H100, 7.68 on
// an H200). The synchronisation below is the pair's with A in B's place.
// Synchronisation (docs/synchronisation.md):
// - the ring: tc_warpspecialized's argument, with the producer a single
//   thread of the last warp and CONSUMERS arrivals on each empty barrier.
// - PAIR = 2: tc_cluster's argument (07_cluster.cu) for the pair. Start:
//   init_ring's fence.mbarrier_init.release.cluster, then a relaxed
//   barrier.cluster arrive and a wait, before anything is multicast or
//   arrived on a barrier: the fence is what makes the inits visible to the
//   other block, the barrier only says that both got there. full[s] counts
//   A_BYTES + B_BYTES, the partner's half landing with complete_tx on this
//   block's barrier (possibly before this producer's expect_tx: the phase
//   still waits for its arrival); empty[s] counts 2 x CONSUMERS, each
//   consumer warpgroup of both blocks arriving on both after
//   wgmma.wait_group; both producers issue the same n uses (the same slice
//   of K), so neither block's barrier runs a phase ahead. A producer waits
//   on empty[s] only to refill it, so the releases of the last STAGES uses
//   (use v with v + STAGES >= n) are never waited for, and are not sent.
//   Once a block's consumers have waited for every use, nothing from the
//   partner is pending into its shared memory: each use's bytes, both
//   halves, were counted on its full barrier, and each of the partner's
//   arrivals it sent was waited for by this block's producer before the
//   refill that this block's consumers then waited for. That is what the
//   partials and the bfloat16 staging below need. End: a relaxed arrive
//   after the loop, and a wait before leaving, so that no block leaves
//   while its partner's consumers still wait for a multicast it issued
//   (those have landed once the partner's consumers arrive). No memory
//   ordering is asked of either barrier, so both are relaxed.
//   A pair's second row tile may lie past M: its block still loads (zeros
//   for A) and multicasts its half of B, and stores nothing (a column pair's
//   second tile past N: zeros for B, its half of A).
// - the partials (SPLITS > 1): the producer issued exactly the tiles the
//   consumers waited for, so no TMA write into the ring is pending once every
//   consumer has left its loop; each consumer's wgmma.wait_group<0> finishes
//   its reads, its fence.proxy.async orders those async-proxy accesses before
//   its generic writes, and the consumers' bar.sync 1 lets none write the ring
//   before all have finished reading it. barrier.cluster.arrive.release /
//   wait.acquire (every thread of the cluster, the producer warp included)
//   makes every block's partial visible to the ld.shared::cluster reads of
//   the others; the second cluster barrier keeps each block's shared memory
//   alive until no block of the cluster reads it any more. It is split: each
//   thread arrives (release) once the partials it read are summed in its
//   registers, stores its share of C, and waits before leaving. The arrive's
//   fence so covers the cluster reads, not C's global stores (measured 3-5%
//   off the skinny shapes' two-slice picks, issue 21 round 11).
// - a bfloat16 C with SPLITS = 1 (staged through the ring, so that a warp
//   writes 512 contiguous bytes of C where the pair stores wrote 16-byte
//   pieces of 8 rows, half a 32-byte sector each; docs/tensor-ladder.md,
//   issue 21's fourth round): the same first steps (no TMA write pending, the
//   fence, bar.sync 1) before the consumers write the rounded tile into the
//   ring, then a second bar.sync 1 between those writes and the consumers'
//   reads of it for the copy out.
// - one launch and the next (programmatic dependent launch, 2026-11-28): the
//   runner launches this kernel with programmatic stream serialization
//   (KernelSpec.dependent_launch), so its blocks may start while the launch
//   before it on the stream still runs. Before wait_for_previous_launch
//   (griddepcontrol.wait) a block touches only its own shared memory (the
//   ring's barriers) and the cluster barrier; griddepcontrol.wait returns
//   once every grid this launch depends on has completed and its memory
//   operations are visible, so no read of A or B, and no write of C, can see
//   or overwrite anything of the launch before. launch_dependents, right
//   after, lets the next launch start its blocks in turn; that launch waits
//   at the same point for this one to complete, writes of C included, so
//   signalling early hands nothing over early. A launch without PDL (an older
//   GPU, GEMMLAB_DEPENDENT_LAUNCH=0) finds both instructions no-ops.
//   Measured on an H200 (docs/dispatch.md): 512 cubed from 3.78 to 3.15 us,
//   the bfloat16 suite's squares up to 1024 5-27 points of cuBLAS higher.

#include "../cluster.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "epilogue.cuh"
#include "pipeline.cuh"

// A bfloat16 C of one block's BM x BN tile (SPLITS = 1), staged through the
// idle ring: each consumer thread leaves its rounded pairs in a padded
// row-major tile (rows BN x 2 + 16 bytes apart, so a warp's 8 rows of 16 bytes
// fall on distinct banks), then the consumers copy the tile out in whole
// 16-byte pieces, a warp writing 512 contiguous bytes of C where the pairs
// wrote 16-byte pieces of 8 rows. Pieces that cross N, or a C whose rows are
// not whole 16 bytes, are written element by element.
template <int CONSUMER_THREADS, int BM, int BN>
__device__ __forceinline__ void store_bf16_staged(const float (&acc)[BN / 2], unsigned char* ring, unsigned short* c,
                                                  int m, int n, int row0, int col0, int tid) {
    constexpr int PITCH = BN * 2 + 16;  // bytes between rows of the staged tile
    constexpr int PIECES = BN * 2 / 16;  // 16-byte pieces of a row
    const int r = 64 * (tid / 128) + 16 * (tid % 128 / 32) + (tid % 32) / 4;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int byte = (8 * j + 2 * (tid % 4)) * 2;
        *reinterpret_cast<unsigned*>(ring + r * PITCH + byte) = pack_bf16x2(acc[4 * j], acc[4 * j + 1]);
        *reinterpret_cast<unsigned*>(ring + (r + 8) * PITCH + byte) = pack_bf16x2(acc[4 * j + 2], acc[4 * j + 3]);
    }
    consumers_sync<CONSUMER_THREADS>();  // the whole tile is staged
    const bool vec = n % 8 == 0 && (reinterpret_cast<unsigned long long>(c) & 15) == 0;
    for (int i = tid; i < BM * PIECES; i += CONSUMER_THREADS) {
        const int row = i / PIECES, col = col0 + 8 * (i % PIECES);
        if (row0 + row >= m) continue;
        const uint4 v = *reinterpret_cast<const uint4*>(ring + row * PITCH + 16 * (i % PIECES));
        unsigned short* out = c + static_cast<long long>(row0 + row) * n + col;
        if (vec && col + 8 <= n) {
            *reinterpret_cast<uint4*>(out) = v;
        } else {
            const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                if (col + e < n) out[e] = static_cast<unsigned short>(words[e / 2] >> (16 * (e % 2)));
            }
        }
    }
}

// The SPLITS partials of this block's share of the tile (float4 columns
// slice x VECS / SPLITS onwards of every consumer thread's accumulators),
// added in slice order into `sums`. `partial`: this block's partial, the same
// offset in every block of the cluster; the tile's slices are ranks
// first_rank .. first_rank + SPLITS - 1 of the cluster.
template <int CONSUMER_THREADS, int VECS, int SPLITS>
__device__ __forceinline__ void add_slices(const float4* partial, float4 (&sums)[VECS / SPLITS], int slice, int me,
                                           unsigned first_rank) {
#pragma unroll
    for (int i = 0; i < VECS / SPLITS; ++i) {
        const int v = slice * (VECS / SPLITS) + i;
        sums[i] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int z = 0; z < SPLITS; ++z) {
            const float4 p = load_cluster_float4(partial + v * CONSUMER_THREADS + me, first_rank + z);
            sums[i].x += p.x;
            sums[i].y += p.y;
            sums[i].z += p.z;
            sums[i].w += p.w;
        }
    }
}

// add_slices' sums stored: float4 v of a thread is wgmma's 8-column group v
// (store_wgmma_tile's layout), in the 64 tile rows from `row`.
template <int VECS, int SPLITS, typename C>
__device__ __forceinline__ void store_slices(const float4 (&sums)[VECS / SPLITS], C* c, int m, int n, int row,
                                             int col0, int slice, int me) {
    const int thread = me % 128;
    const int r = row + 16 * (thread / 32) + (thread % 32) / 4;
#pragma unroll
    for (int i = 0; i < VECS / SPLITS; ++i) {
        const int cc = col0 + 8 * (slice * (VECS / SPLITS) + i) + 2 * (thread % 4);
        store_pair(c, m, n, r, cc, sums[i].x, sums[i].y);
        store_pair(c, m, n, r + 8, cc, sums[i].z, sums[i].w);
    }
}

template <typename T, int BM, int BN, int STAGES, int SPLITS, int PAIR, int PAIR_COLS>
__global__ void __launch_bounds__(BM / 64 * 128 + 32)
tc_small(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
         typename T::c_storage* __restrict__ c, int m, int n, int k) {
    using S = typename T::storage;
    constexpr int BK = TMA_ROW_BYTES / sizeof(S);
    constexpr int A_BYTES = BM * TMA_ROW_BYTES, B_BYTES = BN * TMA_ROW_BYTES;
    constexpr int CONSUMERS = BM / 64, CONSUMER_THREADS = CONSUMERS * 128;
    constexpr int VECS = BN / 8;  // float4s of accumulators per consumer thread
    static_assert(BM == 64 || BM == 128, "one or two 64-row consumer warpgroups");
    static_assert(BN == 64 || BN == 128, "the N of one wgmma: 64 or 128");
    static_assert(SPLITS >= 1 && SPLITS <= 8 && VECS % SPLITS == 0,
                  "a cluster of at most 8 slices, each adding an equal share of the float4 columns");
    static_assert(SPLITS == 1 || BM * BN * 4 <= STAGES * (A_BYTES + B_BYTES), "the partial tile fits the ring");
    static_assert((PAIR == 1 || PAIR == 2) && PAIR * SPLITS <= 8, "a pair at most, in a cluster of at most 8");
    static_assert(PAIR == 1 || (B_BYTES / 2) % 1024 == 0, "each half of B starts on a 1024-byte boundary");
    static_assert(PAIR_COLS == 1 || (PAIR_COLS == 2 && PAIR == 1 && SPLITS == 1 && (A_BYTES / 2) % 1024 == 0),
                  "column pairs alone (no row pairs, no slices), each half of A on a 1024-byte boundary");
    constexpr bool PAIRED = PAIR * PAIR_COLS == 2;  // two blocks sharing an operand by multicast
    extern __shared__ __align__(1024) unsigned char smem[];
    unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + STAGES * (A_BYTES + B_BYTES));
    unsigned long long* empty = full + STAGES;

    const int tid = threadIdx.x;
    const int slice = blockIdx.x % SPLITS;  // with SPLITS > 1, also the block's rank in its cluster
    // Column pairs run along x (the pair adjacent column tiles), the others along y.
    const int row0 = (PAIR_COLS == 1 ? blockIdx.x / SPLITS : blockIdx.y) * BM;
    const int col0 = (PAIR_COLS == 1 ? blockIdx.y : blockIdx.x) * BN;
    const int k_tiles = (k + BK - 1) / BK;
    const int t_begin = static_cast<int>(static_cast<long long>(slice) * k_tiles / SPLITS);
    const int t_end = static_cast<int>(static_cast<long long>(slice + 1) * k_tiles / SPLITS);

    // A pair's tile `half`, whose blocks of this slice are ranks slice and SPLITS + slice.
    const int half = PAIR_COLS == 1 ? blockIdx.x / SPLITS % PAIR : blockIdx.x % 2;
    const unsigned first = slice, second = SPLITS + slice;
    init_ring<STAGES>(full, empty, PAIR * PAIR_COLS * CONSUMERS);
    if constexpr (!PAIRED) {
        __syncthreads();
    } else {
        // init_ring's fence.mbarrier_init orders the inits before this arrive.
        cluster_arrive_relaxed();
        cluster_wait();  // the partner's barriers exist before anything is multicast or arrived on them
    }
    wait_for_previous_launch();  // nothing of A, B or C touched before (PDL: ../dependent_launch.cuh)

    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
    if (tid >= CONSUMER_THREADS) {
        if (tid == CONSUMER_THREADS) {  // the producer: one thread of the last warp
            if constexpr (!PAIRED) {
                produce_k_slice<STAGES, A_BYTES, B_BYTES, BK>(smem, full, empty, &a_map, &b_map, row0, col0, t_begin,
                                                              t_end);
            } else {
                // The shared operand (A for column pairs, B for row pairs): half
                // `half` of its rows, multicast to the same offset of the stage in
                // both blocks of the pair; the other operand this block's own. A
                // stage is refilled once the consumers of both blocks released it.
                const unsigned short mask = (1u << first) | (1u << second);
                produce_k_slice_with<STAGES, A_BYTES, B_BYTES>(
                    smem, full, empty, t_begin, t_end, [&](unsigned char* stage, unsigned long long* bar, int t) {
                        if constexpr (PAIR_COLS == 2)
                            tma_load_multicast(stage + half * (A_BYTES / 2), &a_map, bar, row0 + half * (BM / 2),
                                               t * BK, mask);
                        else
                            tma_load(stage, &a_map, bar, row0, t * BK);
                        if constexpr (PAIR == 2)
                            tma_load_multicast(stage + A_BYTES + half * (B_BYTES / 2), &b_map, bar,
                                               col0 + half * (BN / 2), t * BK, mask);
                        else
                            tma_load(stage + A_BYTES, &b_map, bar, col0, t * BK);
                    });
            }
        }
        __syncwarp();  // the whole warp meets the cluster barriers below
        if constexpr (PAIRED && SPLITS == 1) cluster_arrive_relaxed();
    } else {
        const int slab = tid / 128, thread = tid % 128;
        if constexpr (!PAIRED) {
            consume_k_slice<typename T::inputs, BN, STAGES, A_BYTES, B_BYTES>(acc, smem, full, empty, slab, thread,
                                                                              t_begin, t_end);
        } else {
            // Each use released in both blocks of the pair (ranks first and
            // second), and only if a use STAGES later refills it: the later
            // releases would go unheard.
            const int uses = t_end - t_begin;
            consume_k_slice_with<typename T::inputs, BN, STAGES, A_BYTES, B_BYTES>(
                acc, smem, full, slab, t_begin, t_end, [&](int v) {
                    if (v < uses - STAGES && thread < 2)
                        mbar_arrive_cluster(&empty[v % STAGES], thread == 0 ? first : second);
                });
        }
        if constexpr (PAIRED && SPLITS == 1) cluster_arrive_relaxed();
        if constexpr (SPLITS == 1 && sizeof(typename T::c_storage) == 2) {
            // The ring is idle: every TMA copy the producer issued was waited for.
            fence_proxy_async_shared();  // this thread's async-proxy accesses of the ring before its writes
            consumers_sync<CONSUMER_THREADS>();
            store_bf16_staged<CONSUMER_THREADS, BM, BN>(acc, smem, c, m, n, row0, col0, tid);
        } else if constexpr (SPLITS == 1) {
            store_wgmma_tile<BN>(acc, c, m, n, row0 + slab * 64, col0, thread);
        }
    }
    if constexpr (SPLITS > 1) {
        float4* partial = reinterpret_cast<float4*>(smem);  // the ring, idle once every consumer is done
        if (tid < CONSUMER_THREADS) {
            fence_proxy_async_shared();  // this thread's async-proxy accesses of the ring before its writes
            consumers_sync<CONSUMER_THREADS>();
#pragma unroll
            for (int v = 0; v < VECS; ++v)
                partial[v * CONSUMER_THREADS + tid] = make_float4(acc[4 * v], acc[4 * v + 1], acc[4 * v + 2],
                                                                  acc[4 * v + 3]);
        }
        cluster_sync();  // every slice's partial written, and visible across the cluster
        float4 sums[VECS / SPLITS];
        if (tid < CONSUMER_THREADS) add_slices<CONSUMER_THREADS, VECS, SPLITS>(partial, sums, slice, tid, half * SPLITS);
        // The arrive's fence waits for this thread's reads of the other blocks'
        // partials, not for the stores after it.
        cluster_arrive();
        if (tid < CONSUMER_THREADS)
            store_slices<VECS, SPLITS>(sums, c, m, n, row0 + tid / 128 * 64, col0, slice, tid);
        cluster_wait();  // no block leaves while another reads its shared memory
    } else if constexpr (PAIRED) {
        cluster_wait();  // no block leaves while its partner still waits for a multicast it issued
    }
}
