// sgemm_cluster_split_k: sgemm_spread_copies's tile and loop with K cut into
// SPLITS slices, the slices of one tile launched as one thread-block cluster
// (sm_90 on), and their partial tiles added through distributed shared memory
// instead of a global workspace.
// Source: not from the documents; the reduction is the one tc_small does for
// the tensor cores (rung 12 of that ladder), here on the FP32 ladder's tile.
// Launch: grid (ceil(N / BN) x SPLITS x GROUPS, ceil(M / BM)), clusters of
// SPLITS blocks along x; a tile's GROUPS x SPLITS slices of K are GROUPS
// clusters (slice = group x SPLITS + rank in the cluster); 8 warps a block;
// dynamic shared memory: the larger of sgemm_spread_copies's ring and one BM x
// BN partial tile of floats; a last argument, the workspace (used only when
// GROUPS > 1): a counter per tile and rank (zero before the first launch; the
// kernel leaves them zero), then, from the next multiple of 16 bytes, a slot
// per tile, rank and group for that rank's share of its cluster's sum.
// Idea: with fewer tiles than SMs, sgemm_split_k (small tiles, the partials in
// global memory, the last block of a tile adding all of them) and
// sgemm_stream_k (the large tile, the same fix-up) leave most SMs idle while
// the few blocks that arrive last at a tile read every other block's partial
// through L2 (Nsight Compute on stream-K at 128 x 4096 x 4096 on an H100:
// docs/sgemm-ladder.md, "Rung 23, and sgemm_skinny_n's double-buffered B").
// Here every block of a tile is resident at once (a cluster is scheduled
// whole), so no block waits for a tile's last arriver: each leaves its
// partial in its own shared memory, and after one cluster barrier each block
// adds its share of the tile (1 / SPLITS of every thread's float4s) over all
// SPLITS blocks, in slice order, and stores it. The fix-up is spread over the
// tile's SPLITS SMs and goes over the SM-to-SM network, not through L2.
// Predicted (H100, written before measuring): 128 x 4096 x 4096, 128 x 256
// tiles, SPLITS = 8: 16 clusters of 8 (128 blocks, one per SM, if the GPU
// holds 16 such clusters at once: two per GPC), 32 k-tiles a block at the
// 2.78 us per k-tile of rung 16 at 4096, 89 us, plus the ring's fill (about 2
// us) and the partials (128 KB per SM written to its own shared memory and
// 128 KB read over the cluster, about 2 us): 92-96 us, 103-107% of cuBLAS's
// 98.6 us (tree 7d4fd8b). 1024 x 1024 x 16384, SPLITS = 4: 32 clusters of 4,
// 256 k-tiles a block, 712 us plus about 3, 99-101% of cuBLAS's 712.6 us.
// If the GPU holds fewer clusters than the launch has, the rest run as a
// second wave and the time nearly doubles.
// Measured (H100; docs/sgemm-ladder.md, rung 23 and its second round): the
// prediction missed. A cluster's blocks share a GPC, so an H100 or H200 holds
// 15 clusters of 8 and 30 of 4 but 66 of 2, and both shapes ran as two waves.
// Hence GROUPS: a tile's slices may also be several clusters of SPLITS
// blocks whose sums meet in global memory: each block leaves its share of its
// cluster's sum (1 / SPLITS of the tile) in a slot, and the last of a rank's
// GROUPS blocks to arrive adds them. At 128 x 4096 x 4096, 16 tiles x 4
// clusters of 2 are 128 blocks in one wave, and the fix-up a last arriver
// reads is 4 x 64 KB, not split-K's 8 x 64 KB or stream-K's nine 128 KB
// partials. The worklog has each configuration's time and the profile.
// Synchronisation (docs/synchronisation.md): inside a block, the ring as
// sgemm_spread_copies. Within a cluster: cp.async.wait_group 0 then
// __syncthreads leaves no copy into the ring pending and no warp reading it,
// so the ring may be overwritten with this block's partial;
// barrier.cluster.arrive.release / wait.acquire (every thread of the cluster)
// makes every block's partial visible to the ld.shared::cluster reads of the
// others, which go into registers; the second cluster barrier keeps each
// block's shared memory alive (and unwritten) until no block of the cluster
// reads it any more. Every block reaches both barriers: the conditions around
// them depend only on the launch's arguments. No block waits on one outside its
// cluster, and the hardware starts a cluster's blocks together, so the barriers
// cannot wait on a block that is not yet running. Between a tile's clusters
// (GROUPS > 1), sgemm_split_k's pattern: each thread's __stcg stores of its
// share, __syncthreads, thread 0's __threadfence and relaxed atomicAdd on the
// counter of its tile and rank (a release, the fence cumulative over the
// stores the barrier ordered before it); the last to arrive (its atomicAdd
// reads every other increment) fences again (acquire) and __syncthreads_or
// hands that on to its threads' __ldcg reads. Each counter reaches GROUPS once
// per launch; the last arriver zeroes it with a plain store, which the next
// launch on the stream sees through the kernel boundary. No block waits for
// another cluster (not last: exit), whatever the number resident.
// Determinism: each output is the sum of its cluster's SPLITS partials in rank
// order, and with GROUPS > 1 the sum of those GROUPS sums in group order, each
// from zero, computed by one thread: the same bits whichever block finishes
// first, and launch after launch.

// One launch and the next: the runner launches this kernel with programmatic
// dependent launch on compute capability 9.0 and newer, so its blocks may
// start while the launch before it runs. Its first statement waits for that
// launch to complete (griddepcontrol.wait: its memory operations visible);
// nothing in global memory, workspace included, is touched before it
// (docs/synchronisation.md).

#include "../cluster.cuh"
#include "arrivals.cuh"
#include "cp_async_tiles.cuh"
#include "spread_copies.cuh"
#include "../dependent_launch.cuh"

template <int BM, int BN, int BK, int WM, int WN, int STAGES, int SPLITS, int GROUPS, bool B_VEC>
__device__ __forceinline__ void cluster_split_k_body(const float* __restrict__ a, const float* __restrict__ b,
                                                     const float* c_in, float* c_out, int m, int n, int k,
                                                     float alpha, float beta, void* workspace) {
    using Loop = SpreadLoop<BM, BN, BK, WM, WN, STAGES, B_VEC>;
    constexpr int THREADS = Loop::THREADS, N_SUB = Loop::N_SUB, TM = Loop::TM, TN = Loop::TN;
    constexpr int VECS = TM * N_SUB;                           // float4s of a thread's accumulators
    constexpr int SHARE_MAX = (VECS + SPLITS - 1) / SPLITS;  // the most float4s a rank adds
    static_assert(SPLITS >= 2 && SPLITS <= 8 && VECS >= SPLITS,
                  "a cluster of 2 to 8 slices, each adding a share of every thread's float4s");
    static_assert(GROUPS >= 1, "at least one cluster per tile");
    const Loop loop;
    const int tid = loop.tid;
    const int rank = blockIdx.x % SPLITS;                  // the block's rank in its cluster
    const int group = (blockIdx.x / SPLITS) % GROUPS;      // which of the tile's clusters
    const int tile_col = blockIdx.x / (SPLITS * GROUPS);
    const int slice = group * SPLITS + rank;  // of the tile's SPLITS x GROUPS slices of K
    // The block owns rows row_owned .. + BM - 1 and columns col_owned .. + BN - 1
    // of C; a tile crossing M or N moves inside them (as in sgemm_spread_copies),
    // and the block stores only the outputs it owns.
    const int row_owned = blockIdx.y * BM, col_owned = tile_col * BN;
    const bool inside = m >= BM && n >= BN;
    const int row0 = inside ? min(row_owned, m - BM) : row_owned;
    const int col0 = inside ? min(col_owned, n - BN) : col_owned;
    const int k_tiles = (k + BK - 1) / BK;
    constexpr int SLICES = SPLITS * GROUPS;
    const int kb = static_cast<int>(static_cast<long long>(slice) * k_tiles / SLICES);
    const int ke = static_cast<int>(static_cast<long long>(slice + 1) * k_tiles / SLICES);
    float acc[TM][TN] = {};
    if (kb < ke) {  // a slice is empty only when K has fewer k-tiles than slices
        const SectorPlan<BM, BN, BK, B_VEC> plan(row0, col0, n, k, tid);
        loop.run(acc, plan, a, b, row0, col0, m, n, k, kb, ke, min(ke, inside ? k / BK : 0));
    }
    cp_async_wait<0>();
    __syncthreads();  // no copy into the ring pending, no warp reading it: it takes the partial
    // This slice's partial, float4 v of thread t at partial[v THREADS + t]: a warp's
    // stores and loads are whole 512-byte runs.
    float4* partial = reinterpret_cast<float4*>(&loop.a_tiles[0][0][0]);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int s = 0; s < N_SUB; ++s) {
            partial[(i * N_SUB + s) * THREADS + tid] =
                make_float4(acc[i][4 * s], acc[i][4 * s + 1], acc[i][4 * s + 2], acc[i][4 * s + 3]);
        }
    }
    cluster_sync();  // every rank's partial written, and visible across the cluster
    // This block's share: float4s v_lo .. v_hi - 1 of every thread (shares differ by
    // at most one when SPLITS does not divide VECS), added over the cluster's ranks
    // in rank order into registers.
    const int v_lo = rank * VECS / SPLITS, v_hi = (rank + 1) * VECS / SPLITS;
    float4 sums[SHARE_MAX];
#pragma unroll
    for (int q = 0; q < SHARE_MAX; ++q) {
        sums[q] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (v_lo + q < v_hi) {
#pragma unroll
            for (int z = 0; z < SPLITS; ++z) {
                const float4 p = load_cluster_float4(partial + (v_lo + q) * THREADS + tid, z);
                sums[q].x += p.x;
                sums[q].y += p.y;
                sums[q].z += p.z;
                sums[q].w += p.w;
            }
        }
    }
    cluster_sync();  // no block leaves (or reuses its shared memory) while another reads it
    if constexpr (GROUPS > 1) {
        // The tile's GROUPS clusters meet in global memory: each block leaves its
        // share of its cluster's sum in its slot, and the last of the GROUPS blocks
        // of one rank to arrive (a counter per tile and rank) adds the GROUPS shares
        // in group order, its own read back like the others, and stores them.
        const int tile = blockIdx.y * (gridDim.x / SLICES) + tile_col;
        const int tiles = gridDim.y * (gridDim.x / SLICES);
        unsigned* arrivals = static_cast<unsigned*>(workspace);
        float4* slots = reinterpret_cast<float4*>(static_cast<char*>(workspace) + (tiles * SPLITS * 4 + 15) / 16 * 16);
        float4* share_slots = slots + static_cast<long long>(tile * SPLITS + rank) * GROUPS * SHARE_MAX * THREADS;
#pragma unroll
        for (int q = 0; q < SHARE_MAX; ++q) {
            if (v_lo + q < v_hi) {
                __stcg(share_slots + (group * SHARE_MAX + q) * THREADS + tid, sums[q]);
            }
        }
        __syncthreads();  // every thread's share is stored
        if (!arrive_last(&arrivals[tile * SPLITS + rank], GROUPS)) {  // the last of the rank's groups goes on
            return;
        }
#pragma unroll
        for (int q = 0; q < SHARE_MAX; ++q) {
            sums[q] = make_float4(0.f, 0.f, 0.f, 0.f);
            if (v_lo + q < v_hi) {
#pragma unroll 1
                for (int g = 0; g < GROUPS; ++g) {
                    const float4 p = __ldcg(share_slots + (g * SHARE_MAX + q) * THREADS + tid);
                    sums[q].x += p.x;
                    sums[q].y += p.y;
                    sums[q].z += p.z;
                    sums[q].w += p.w;
                }
            }
        }
    }
    const bool c_vec = n % 4 == 0 && aligned16(c_in) && aligned16(c_out);
#pragma unroll
    for (int q = 0; q < SHARE_MAX; ++q) {
        const int v = v_lo + q;  // acc[i][4 s .. 4 s + 3] of every slice
        const int i = v / N_SUB, s = v % N_SUB;
        const int row = row0 + loop.wrow + (i / 4) * 16 + loop.lrow + i % 4;
        if (v < v_hi && row >= row_owned) {
            store4_from(c_in, c_out, row, col0 + loop.wcol + s * 32 + loop.lcol, col_owned, m, n, sums[q], alpha,
                        beta, c_vec);
        }
    }
}

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int SPLITS, int GROUPS>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, 1)
sgemm_cluster_split_k(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out, int m, int n,
                      int k, T alpha, T beta, void* workspace) {
    wait_for_previous_launch();  // nothing of A, B, C or the workspace touched before (PDL)
    if (n % 4 == 0 && aligned16(b)) {
        cluster_split_k_body<BM, BN, BK, WM, WN, STAGES, SPLITS, GROUPS, true>(a, b, c_in, c_out, m, n, k, alpha,
                                                                               beta, workspace);
    } else {
        cluster_split_k_body<BM, BN, BK, WM, WN, STAGES, SPLITS, GROUPS, false>(a, b, c_in, c_out, m, n, k, alpha,
                                                                                beta, workspace);
    }
}
