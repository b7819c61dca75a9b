// The persistent FP8 rungs (tc_fp8_tma_store, tc_fp8_blockscaled_tma): the
// tensor ladder's best design (tc_tma_store: one block per SM walking tiles
// in GROUP_M-row groups, a TMA producer warpgroup and consumer warpgroups
// handing registers over by setmaxnreg, clusters of CLUSTER blocks sharing B
// by multicast, C leaving through swizzled shared-memory boxes and TMA
// stores) with FP8 wgmma and its promotion every 128 K kept.
//
// What changes against tc_fp8_wgmma is everything around the promotion,
// not the promotion itself: each consumer still issues a 128-K slice into a
// partial slab (64 x 128, 64 registers), waits for it (wgmma.wait_group 0)
// and adds it into its FP32 sums. BN = 128 holds 64 x 128 sums (64 more);
// BN = 256 holds 64 x 256 (128 more) and runs each stage in two passes of
// 128 columns through the one partial slab (192 of the 240 registers it
// claims, where two 64 x 256 slabs would need 256). The second pass reads
// A's rows of the stage again: a block loads 16 KB of A and 32 KB of B per
// 8.4 MFLOP against 16 + 16 KB per 4.2 at BN = 128 (a quarter less from
// L2), while its shared-memory traffic (TMA writes and wgmma reads) falls
// only from 160 to 144 KB per 8.4 MFLOP. Measured, BN = 256 was the round's
// gain: 8192 from 930 to 832-856 us on an H100 (docs/lowp-ladder.md, round
// 5). The slice's first wgmma overwrites the slab (scale-d 0), so the slab
// is never zeroed in the loop. A tried alternative, two partial slabs per
// consumer promoting slice t while slice t + 1 runs, makes ptxas serialise
// every wgmma (C7518, "WG.DP in divergent path"; CPU tests check that this
// kernel compiles without that message): the overlap comes from the other
// consumer warpgroup instead, as in DeepGEMM.
//
// PROMOTE_K (256: per-tensor scales only) sums two K tiles in the tensor
// cores per promotion, one wait and one add per 256 K: half the consumer's
// stalls, at twice the chain of unpromoted steps (problems/lowp.py's
// tolerance grows with it; docs/lowp-ladder.md, round 3).
//
// SCALING: SCALE_TENSOR multiplies the sums by scale_a[0] x scale_b[0] in the
// epilogue; SCALE_BLOCKS multiplies each pass's promoted partial by its K
// block's scale_a[kb][row] x scale_b[kb][pass's column block]: one FFMA per
// sum where per-tensor scales take one FADD. The factors come from shared
// memory: warp 1 of the producer warpgroup (the scale warp) copies, for
// every use of a stage, this block's BM rows of A's scales and the tile's
// blocks of B's for that K block into the stage (STAGE_SCALES floats) by
// cp.async, and each lane's cp.async.mbarrier.arrive counts on the stage's
// full barrier once its copies have landed, so neither the scale warp nor a
// consumer waits on L2 for a scale. With the consumers loading them from
// global memory the rung ran at 73% of the per-tensor rate (4096 and 8192,
// H100); staged, at 87-90% (docs/lowp-ladder.md, round 5).
//
// STAGGER = 1 (two consumers): slab 1 issues its first group only once slab
// 0's first group has completed. In phase, both consumers wait on the same
// full barrier, issue together, share the tensor cores, finish together and
// stall together for the gap G (wait, promotion, release); the tensor cores
// share themselves between the two (making slab 1 issue after slab 0, group
// by group, changed nothing), so a lag, once made, should be kept, each
// paying its G while the other has the tensor cores. Measured: 3-7% faster
// with a bfloat16 C, 1-2% slower with a float32 C, on both GPUs.
//
// Synchronisation: tc_tma_store's (kernels/tensor/08_tma_store.cu; the long
// form is in docs/synchronisation.md), with CLUSTER = 1 the plain
// tc_persistent ring. A stage is released once wgmma.wait_group 0 has
// completed the group that read it, once per use and in order, so the
// producer's parity argument is unchanged. K = 0 runs no slice: the sums are
// the zeros stored.
// Block scales: each full barrier counts 1 + 32 arrivals, the producer's
// (with its bytes) and one per scale-warp lane, which cp.async makes once
// that lane's copies into the stage are complete and visible to threads that
// then observe the phase; the consumers read a stage's scales after waiting
// on its full barrier and before releasing it. The scale warp waits on the
// stage's empty barrier exactly as the producer does (same parity), so it
// never overwrites scales a consumer may still read, and its arrivals for a
// stage's next use come only after that wait, when the phase they belong to
// is the open one.
// STAGGER = 1 adds named barrier 3 (256 threads), used once per block:
// slab 0 arrives after its first group's wait, slab 1 waits before its first
// group. Both slabs walk the same tiles and K tiles, so either both issue a
// first group or neither does (no tiles, or K = 0): one arrival and one wait
// or none, and the barrier ends idle. Slab 0's first group needs only the
// first stage, so the wait cannot deadlock; the ring's argument is untouched
// (each slab still releases each use of a stage after its own wait).

#include "wgmma8.cuh"

// STAGGER: named barrier 3 over both consumers (256 threads), as the waiting one or the arriving one.
__device__ __forceinline__ void stagger_wait() { asm volatile("bar.sync 3, 256;\n" ::: "memory"); }
__device__ __forceinline__ void stagger_arrive() { asm volatile("bar.arrive 3, 256;\n" ::: "memory"); }

// Block scales: one float from global to shared memory by cp.async, zeros where `valid` is false
// (then nothing is read), and the arrival on a stage's full barrier that lands once this thread's
// copies have (.noinc: it is one of the arrivals the barrier counts).
__device__ __forceinline__ void copy_scale(float* dst, const float* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(valid ? 4 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_async_arrive(unsigned long long* bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

// Everyone's barriers exist before anyone uses them (CLUSTER > 1: in every block of the cluster).
template <int CLUSTER>
__device__ __forceinline__ void ring_ready() {
    if constexpr (CLUSTER == 1) {
        __syncthreads();
    } else {
        cluster_sync();
    }
}

template <typename T, int SCALING, int BM, int BN, int STAGES, int GROUP_M, int CLUSTER, int C_BOXES,
          int PRODUCER_REGS, int CONSUMER_REGS, int C_BOX_ROWS, int PROMOTE_K, int STAGGER>
__device__ __forceinline__ void fp8_persistent(unsigned char* smem, const CUtensorMap* a_map,
                                               const CUtensorMap* b_map, const CUtensorMap* c_map,
                                               const float* scale_a, const float* scale_b, int m, int n, int k) {
    using In = typename T::inputs;
    using C = typename T::c_storage;
    constexpr int BK = TMA_ROW_BYTES;  // 128 FP8 elements of K: one tile, one K block of the scales
    constexpr int A_BYTES = BM * TMA_ROW_BYTES, B_BYTES = BN * TMA_ROW_BYTES;
    constexpr int CONSUMERS = BM / 64;
    using Registers = RegisterSplit<PRODUCER_REGS, CONSUMER_REGS, CONSUMERS>;
    constexpr int BOXES = wgmma_boxes<BN, C>();
    constexpr int C_BOX_BYTES = C_BOX_ROWS * TMA_ROW_BYTES;
    constexpr int SLICES = PROMOTE_K / BK;  // K tiles summed in the tensor cores per promotion
    static_assert(PROMOTE_K == BK || PROMOTE_K == 2 * BK, "promotion every 128 or 256 K");
    static_assert(SLICES == 1 || SCALING == SCALE_TENSOR, "block scales change every 128 K: promote every 128");
    constexpr int PASSES = BN / SCALE_BLOCK;  // 128-column passes over a stage, each into the one partial slab
    static_assert((BM == 64 || BM == 128) && (BN == 128 || BN == 256), "64 x BN sums and a 64 x 128 partial slab per warpgroup");
    static_assert(BK == SCALE_BLOCK && PASSES * SCALE_BLOCK == BN, "a pass is one block of the scales along K and N");
    static_assert(SCALING == SCALE_TENSOR || SCALING == SCALE_BLOCKS, "per-tensor or block scales");
    static_assert(CLUSTER == 1 || CLUSTER == 2, "clusters of one or two blocks along M");
    static_assert((B_BYTES / CLUSTER) % 1024 == 0, "each block's share of B starts on a 1024-byte boundary");
    static_assert(C_BOX_ROWS == 64, "a box of C holds the 64 rows of one warpgroup's sums");
    static_assert(STAGGER == 0 || (STAGGER == 1 && CONSUMERS == 2), "a stagger takes two consumers");
    // The ring, then each consumer's C boxes (1024-byte aligned: the swizzle's period), then (block
    // scales) each stage's scales, then the barriers.
    constexpr int STAGE_SCALES = SCALING == SCALE_BLOCKS ? BM + 4 : 0;  // A's rows, then up to 4 of B's blocks
    static_assert(PASSES <= 4, "a stage holds the scales of at most 4 blocks of B's columns");
    unsigned char* boxes = smem + STAGES * (A_BYTES + B_BYTES);
    float* scales = reinterpret_cast<float*>(boxes + CONSUMERS * C_BOXES * C_BOX_BYTES);
    unsigned long long* full = reinterpret_cast<unsigned long long*>(scales + STAGES * STAGE_SCALES);
    unsigned long long* empty = full + STAGES;

    const int tid = threadIdx.x, group = tid / 128;
    const unsigned rank = CLUSTER > 1 ? cluster_rank() : 0;
    const int tiles_m = (m + CLUSTER * BM - 1) / (CLUSTER * BM), tiles_n = (n + BN - 1) / BN;
    const int first = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;
    // Whole promotions of K tiles: with SLICES = 2 and an odd count the last
    // tile lies wholly past K, which TMA fills with zeros (adding nothing).
    const int k_tiles = (k + PROMOTE_K - 1) / PROMOTE_K * SLICES;
    const int b_blocks = (n + SCALE_BLOCK - 1) / SCALE_BLOCK;  // B's blocks of scales along N
    auto stage = [&](int s) { return smem + s * (A_BYTES + B_BYTES); };

    // Block scales: a stage is full once its bytes have landed and the scale warp's 32 lanes' copies have.
    init_ring<STAGES>(full, empty, CLUSTER * CONSUMERS, SCALING == SCALE_BLOCKS ? 1 + 32 : 1);
    ring_ready<CLUSTER>();

    if (group == 0) {
        Registers::release();
        if (tid == 0) {
            int use = 0;  // k-tiles over all of this block's tiles: stage use % STAGES, phase use / STAGES
            for (int tile = first; tile < tiles_m * tiles_n; tile += clusters) {
                int tm, tn;
                tile_coords<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
                for (int t = 0; t < k_tiles; ++t, ++use) {
                    const int s = use % STAGES;
                    if (use >= STAGES) mbar_wait(&empty[s], (use / STAGES - 1) % 2);
                    fill_stage<A_BYTES, B_BYTES, BN, CLUSTER>(stage(s), &full[s], a_map, b_map,
                                                              (CLUSTER * tm + rank) * BM, tn * BN, t * BK, rank);
                }
            }
        } else if (SCALING == SCALE_BLOCKS && tid / 32 == 1) {
            // The scale warp: for every use of a stage, cp.async copies of this block's rows of A's
            // scales and the tile's blocks of B's for that K block (zeros past M or N) into the
            // stage's scales; each lane's cp.async.mbarrier.arrive lands on the stage's full
            // barrier when its copies have, so the warp never waits for L2. It waits for a stage
            // to be free as the producer does.
            const int lane = tid % 32;
            int use = 0;
            for (int tile = first; tile < tiles_m * tiles_n; tile += clusters) {
                int tm, tn;
                tile_coords<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
                const int row = (CLUSTER * tm + rank) * BM + lane, col = tn * BN + lane * SCALE_BLOCK;
                const float* a_rows = scale_a + row;                 // K block 0's scales of this lane's rows
                const float* b_block = scale_b + col / SCALE_BLOCK;  // and of its block of B's columns
                for (int t = 0; t < k_tiles; ++t, ++use, a_rows += m, b_block += b_blocks) {
                    const int s = use % STAGES;
                    if (use >= STAGES) mbar_wait(&empty[s], (use / STAGES - 1) % 2);
                    float* dst = scales + s * STAGE_SCALES + lane;
#pragma unroll
                    for (int i = 0; i < BM; i += 32) copy_scale(dst + i, a_rows + i, row + i < m);
                    if (lane < PASSES) copy_scale(dst + BM, b_block, col < n);
                    cp_async_arrive(&full[s]);
                }
            }
        }
    } else {
        Registers::claim();
        const int slab = group - 1, thread = tid % 128;
        const int r = 16 * (thread / 32) + (thread % 32) / 4;  // this thread's rows of a slab: r and r + 8
        unsigned char* my_boxes = boxes + slab * C_BOXES * C_BOX_BYTES;
        const float tensor_scale = SCALING == SCALE_TENSOR ? scale_a[0] * scale_b[0] : 1.f;
        auto release = [&](int s) {
            if constexpr (CLUSTER == 1) {
                if (thread == 0) mbar_arrive(&empty[s]);
            } else {
                if (thread < CLUSTER) mbar_arrive_cluster(&empty[s], thread);
            }
        };
        int use = 0, stored = 0;  // stored: boxes this warpgroup has handed to the copy engine
        bool opening = true;      // STAGGER: this consumer's first group is still to come
        for (int tile = first; tile < tiles_m * tiles_n; tile += clusters) {
            int tm, tn;
            tile_coords<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
            const int row = (CLUSTER * tm + rank) * BM + slab * 64;  // this warpgroup's first row of C
            float acc[BN / 2], part[64];
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
#pragma unroll
            for (int i = 0; i < 64; ++i) part[i] = 0.f;
            // Pass p (columns 128 p ..) of K tiles t .. t + SLICES - 1 into `part` (the first
            // step overwrites it), one group.
            auto issue = [&](int t, int p) {
                if (p == 0) {
                    // Every tile of the group is in before its first wgmma: a barrier wait (a
                    // loop) between wgmmas on the same registers makes ptxas serialise them (C7518).
#pragma unroll
                    for (int i = 0; i < SLICES; ++i) {
                        const int u = use + t + i;
                        mbar_wait(&full[u % STAGES], (u / STAGES) % 2);
                    }
                }
                if constexpr (STAGGER) {
                    if (slab == 1 && opening) stagger_wait();
                }
                wgmma_fence();
#pragma unroll
                for (int i = 0; i < SLICES; ++i) {
                    unsigned char* rows = stage((use + t + i) % STAGES);
                    unsigned char* b_rows = rows + A_BYTES + p * SCALE_BLOCK * TMA_ROW_BYTES;
                    if (i == 0) {
                        wgmma_fp8_fresh_slice<In, true>(part, rows + slab * 64 * TMA_ROW_BYTES, b_rows);
                    } else {
                        wgmma_fp8_fresh_slice<In, false>(part, rows + slab * 64 * TMA_ROW_BYTES, b_rows);
                    }
                }
                wgmma_commit();
            };
            // Pass p of the group of K tiles t .. has completed: its partial joins the FP32 sums
            // of its columns, and after the last pass the group's stages are free.
            auto promote = [&](int t, int p) {
                fence_registers(part);
                // Block scales: this K block's factors of the thread's two rows in pass p's
                // columns, read from the stage before it is released.
                float lo = 1.f, hi = 1.f;
                if constexpr (SCALING == SCALE_BLOCKS) {
                    const float* stage_scales = scales + (use + t) % STAGES * STAGE_SCALES;
                    const float b = stage_scales[BM + p];
                    lo = stage_scales[slab * 64 + r] * b;
                    hi = stage_scales[slab * 64 + r + 8] * b;
                }
                if (p == PASSES - 1) {
#pragma unroll
                    for (int i = 0; i < SLICES; ++i) release((use + t + i) % STAGES);
                }
                float* sums = acc + 64 * p;
                if constexpr (SCALING == SCALE_BLOCKS) {
#pragma unroll
                    for (int j = 0; j < 16; ++j) {
                        sums[4 * j] = fmaf(lo, part[4 * j], sums[4 * j]);
                        sums[4 * j + 1] = fmaf(lo, part[4 * j + 1], sums[4 * j + 1]);
                        sums[4 * j + 2] = fmaf(hi, part[4 * j + 2], sums[4 * j + 2]);
                        sums[4 * j + 3] = fmaf(hi, part[4 * j + 3], sums[4 * j + 3]);
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < 64; ++i) sums[i] += part[i];
                }
            };

            for (int t = 0; t < k_tiles; t += SLICES) {
#pragma unroll
                for (int p = 0; p < PASSES; ++p) {
                    issue(t, p);
                    wgmma_wait<0>();
                    if constexpr (STAGGER) {
                        if (slab == 0 && opening) stagger_arrive();
                        opening = false;
                    }
                    promote(t, p);
                }
            }
            use += k_tiles;
            fence_registers(acc);
            if constexpr (SCALING == SCALE_TENSOR) {
#pragma unroll
                for (int i = 0; i < BN / 2; ++i) acc[i] *= tensor_scale;
            }
            if (row >= m) continue;  // a cluster's second tile row past M: nothing to store
#pragma unroll
            for (int box = 0; box < BOXES; ++box, ++stored) {
                unsigned char* out = my_boxes + (stored % C_BOXES) * C_BOX_BYTES;
                // The store that last read this box, C_BOXES stores ago, must be done reading it.
                if (thread == 0) bulk_wait_read<C_BOXES - 1>();
                warpgroup_sync(slab);
                write_box_spread<BN, C>(acc, out, box, thread);
                // Show the threads' writes to the copy engine before it reads them.
                fence_proxy_async_shared();
                warpgroup_sync(slab);
                if (thread == 0) {
                    tma_store(c_map, out, row, tn * BN + box_first_col<BN, C>(box));
                    bulk_commit();
                }
            }
        }
        // Shared memory must outlive the copy engine's reads of it.
        if (thread == 0) bulk_wait_read<0>();
    }
    // A cluster stays until its neighbour is done: its last arrivals and multicasts land here.
    if constexpr (CLUSTER > 1) cluster_sync();
}
