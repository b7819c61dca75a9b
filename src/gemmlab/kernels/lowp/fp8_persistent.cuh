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
// 5). BN = 192 (per-tensor scales) runs one pass of m64n192k32 into a 64 x
// 192 slab, 96 + 96 registers: a third fewer gaps per FLOP than BN = 256
// and whole waves at 8192; 1-2.5% faster there with a bfloat16 C, slower at
// 4096 (round 6). BN = 144 (cuBLASLt's tile at 8192) is the same in 144
// columns; it measured 72-87% of cuBLASLt (round 7) and stays out of the
// search. The slice's first wgmma overwrites the slab (scale-d 0), so the slab
// is never zeroed in the loop. A tried alternative, two partial slabs per
// consumer promoting slice t while slice t + 1 runs, makes ptxas serialise
// every wgmma (C7518, "WG.DP in divergent path"; CPU tests check that this
// kernel compiles without that message): the overlap comes from the other
// consumer warpgroup instead, as in DeepGEMM.
//
// The gap: between a group's completion and the next group's issue the
// tensor cores have nothing of this consumer's, so (one K tile a group, and
// no stagger with block scales: EARLY) only the promotion runs there. The next
// group's descriptors are made, and its stages asked for with one
// test_wait each, while the tensor cores still run the current group; the
// wait loop, when the answer was no, comes after the adds (a loop between a
// wgmma and its wait_group makes ptxas serialise them). cuBLASLt's FP8
// kernel does the same (its try-wait comes before the group's wait). Before,
// 25 integer instructions and a blocking try_wait sat in the gap. Measured
// (H100 and H200, docs/lowp-ladder.md round 6): per-tensor scales, bfloat16
// C 2-5% faster, float32 C unchanged; block scales 4-6.5% faster.
// The descriptors themselves live in uniform registers: the warpgroup index
// is read once through a shuffle from lane 0, which ptxas knows to be the
// same in every lane, so everything derived from it (a consumer's rows of A)
// is uniform too. Before, each QGMMA took four R2UR moves of its descriptors
// from vector registers, in the gap. Measured (H200, round 10): 2-5% faster
// at 4096 and 8192 in most configurations, 9-10% at BN = 128.
//
// PROMOTE_K (256: per-tensor scales only) sums two K tiles in the tensor
// cores per promotion, one wait and one add per 256 K: half the consumer's
// stalls, at twice the chain of unpromoted steps (problems/lowp.py's
// tolerance grows with it; docs/lowp-ladder.md, round 3).
//
// SCALING: SCALE_TENSOR multiplies the sums by scale_a[0] x scale_b[0] in the
// epilogue, SCALE_ROWCOL each by scale_a[row] x scale_b[col] (read from global
// memory once a tile, 0 past M or N); SCALE_BLOCKS multiplies each pass's promoted partial by its K
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
// the zeros stored. EARLY's test_wait acquires, as try_wait does, when it
// answers yes (the phase has completed: the stage's bytes are visible); a no
// leads to the usual wait before the group is issued, so no group is issued
// on a stage whose phase this thread has not seen complete.
// Block scales: each full barrier counts 1 + 32 arrivals, the producer's
// (with its bytes) and one per scale-warp lane, which cp.async makes once
// that lane's copies into the stage are complete and visible to threads that
// then observe the phase; the consumers read a stage's scales after waiting
// on its full barrier. Overwriting them is guarded by a third barrier per
// stage, scales_free[s] (this block's CONSUMERS x 4 warps): once a warp's
// lanes have read the stage's scales for its last pass, __syncwarp orders
// their reads before lane 0's arrive (release) on scales_free[s], and the
// scale warp waits on it (acquire) with the parity the producer uses on
// empty[s] before its copies for the stage's next use. (Until round 6 the
// scale warp waited on empty[s], which one lane of warp 0 releases: the
// reads of the warpgroup's other lanes were not ordered before it.) Its
// arrivals on full[s] for the next use come after that wait, which follows
// every local consumer's observation of the current phase, so the phase
// they belong to is the open one.
// STAGGER = 1 adds named barrier 3 (256 threads), used once per block:
// slab 0 arrives after its first group's wait, slab 1 waits before its first
// group. Both slabs walk the same tiles and K tiles, so either both issue a
// first group or neither does (no tiles, or K = 0): one arrival and one wait
// or none, and the barrier ends idle. Slab 0's first group needs only the
// first stage, so the wait cannot deadlock; the ring's argument is untouched
// (each slab still releases each use of a stage after its own wait).

#include "../cluster.cuh"
#include "../tensor/mbarrier.cuh"
#include "../tensor/tma.cuh"
#include "../tensor/wgmma.cuh"
#include "../tensor/epilogue.cuh"
#include "../tensor/pipeline.cuh"
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
    constexpr int C_BOX_BYTES = C_BOX_ROWS * TMA_ROW_BYTES;
    constexpr int SLICES = PROMOTE_K / BK;  // K tiles summed in the tensor cores per promotion
    static_assert(PROMOTE_K == BK || PROMOTE_K == 2 * BK, "promotion every 128 or 256 K");
    static_assert(SLICES == 1 || SCALING != SCALE_BLOCKS, "block scales change every 128 K: promote every 128");
    // Passes over a stage, each into the one partial slab: of 128 columns
    // (BN = 128 or 256), or one of BN (BN = 144 or 192, per-tensor scales).
    constexpr int PASS_N = BN == 144 || BN == 192 ? BN : SCALE_BLOCK, PASSES = BN / PASS_N, PART = PASS_N / 2;
    static_assert((BM == 64 || BM == 128) && (BN == 128 || BN == 144 || BN == 192 || BN == 256),
                  "64 x BN sums and a 64 x 128 (BN = 144, 192: 64 x BN) partial slab per warpgroup");
    static_assert(BK == SCALE_BLOCK && PASSES * PASS_N == BN, "a stage is whole passes");
    static_assert(SCALING != SCALE_BLOCKS || PASS_N == SCALE_BLOCK, "with block scales a pass is one block of them along N");
    static_assert(CLUSTER == 1 || CLUSTER == 2, "clusters of one or two blocks along M");
    static_assert((B_BYTES / CLUSTER) % 1024 == 0, "each block's share of B starts on a 1024-byte boundary");
    static_assert(C_BOX_ROWS == 64, "a box of C holds the 64 rows of one warpgroup's sums");
    static_assert(STAGGER == 0 || (STAGGER == 1 && CONSUMERS == 2), "a stagger takes two consumers");
    // The ring, then each consumer's C boxes (1024-byte aligned: the swizzle's period), then (block
    // scales) each stage's scales, then the barriers.
    constexpr int STAGE_SCALES = SCALING == SCALE_BLOCKS ? BM + 4 : 0;  // A's rows, then up to 4 of B's blocks
    static_assert(PASSES <= 4, "a stage holds the scales of at most 4 blocks of B's columns");
    constexpr int FULL_OFFSET = STAGES * (A_BYTES + B_BYTES) + CONSUMERS * C_BOXES * C_BOX_BYTES + STAGES * STAGE_SCALES * 4;
    unsigned char* boxes = smem + STAGES * (A_BYTES + B_BYTES);
    float* scales = reinterpret_cast<float*>(boxes + CONSUMERS * C_BOXES * C_BOX_BYTES);
    unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + FULL_OFFSET);
    unsigned long long* empty = full + STAGES;
    // Block scales: scales_free[s] completes when this block's consumer warps
    // have all read the stage's scales (one arrival a warp); the scale warp
    // waits on it, not on empty[s], before copying the next use's scales in.
    unsigned long long* scales_free = empty + STAGES;

    // The warpgroup as the same value in every lane (a shuffle from lane 0): ptxas then keeps
    // what depends on it, the consumers' wgmma descriptors, in uniform registers.
    const int tid = threadIdx.x, group = __shfl_sync(0xffffffff, tid / 128, 0);
    // Blocks walk the tiles in pairs of M-adjacent tiles: a cluster's two
    // blocks, or, with per-tensor scales, a float32 C, CLUSTER = 1 and an even
    // number of BM-row tiles, blocks 2i and 2i + 1 of the grid. Measured with
    // CLUSTER = 1 against one tile a block in GROUP_M order (docs/lowp-ladder.md,
    // round 7): float32 C 0-5.4% faster on an H100 and an H200 (BN = 192 at
    // 8192: 827-828 us, 98.4% of cuBLASLt); bfloat16 C within 1.4% either way,
    // so not there. Not with block scales: the extra registers made ptxas spill.
    constexpr bool PAIRS = CLUSTER == 1 && SCALING == SCALE_TENSOR && sizeof(C) == 4;
    const int pair = CLUSTER > 1 ? CLUSTER : PAIRS && (m + BM - 1) / BM % 2 == 0 ? 2 : 1;
    const unsigned rank = CLUSTER > 1 ? cluster_rank() : PAIRS ? blockIdx.x % pair : 0;
    const int tiles_m = (m + pair * BM - 1) / (pair * BM), tiles_n = (n + BN - 1) / BN;
    const int clusters = gridDim.x / pair;  // pairs (clusters) walking the tiles
    // An odd grid's last block has no partner (CLUSTER = 1 only): it takes no tiles.
    const int first = !PAIRS || blockIdx.x < clusters * pair ? blockIdx.x / pair : tiles_m * tiles_n;
    // Whole promotions of K tiles: with SLICES = 2 and an odd count the last
    // tile lies wholly past K, which TMA fills with zeros (adding nothing).
    const int k_tiles = (k + PROMOTE_K - 1) / PROMOTE_K * SLICES;
    const int b_blocks = (n + SCALE_BLOCK - 1) / SCALE_BLOCK;  // B's blocks of scales along N
    auto stage = [&](int s) { return smem + s * (A_BYTES + B_BYTES); };

    // Block scales: a stage is full once its bytes have landed and the scale warp's 32 lanes' copies have.
    if (SCALING == SCALE_BLOCKS && tid == 0) {
        for (int s = 0; s < STAGES; ++s) mbar_init(&scales_free[s], CONSUMERS * 4);  // init_ring's fence covers these
    }
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
                                                              (pair * tm + rank) * BM, tn * BN, t * BK, rank);
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
                const int row = (pair * tm + rank) * BM + lane, col = tn * BN + lane * SCALE_BLOCK;
                const float* a_rows = scale_a + row;                 // K block 0's scales of this lane's rows
                const float* b_block = scale_b + col / SCALE_BLOCK;  // and of its block of B's columns
                for (int t = 0; t < k_tiles; ++t, ++use, a_rows += m, b_block += b_blocks) {
                    const int s = use % STAGES;
                    if (use >= STAGES) mbar_wait(&scales_free[s], (use / STAGES - 1) % 2);
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
        // The ring as shared-window addresses and descriptors, made once: stage
        // s's barriers lie 8 s bytes on, its operands STAGE_DESC s descriptor
        // units on. (Converting a generic pointer reads the block's place in its
        // cluster; in the loop that was 25 integer instructions a stage between
        // a group's completion and the next group's issue.)
        const unsigned ring = smem_u32(smem), full_at = ring + FULL_OFFSET, empty_at = full_at + 8 * STAGES;
        const unsigned scales_free_at = empty_at + 8 * STAGES;  // block scales only
        const unsigned a_desc = wgmma_desc_low(ring) + slab * 64 * TMA_ROW_BYTES / 16;
        const unsigned b_desc = wgmma_desc_low(ring) + A_BYTES / 16;
        constexpr unsigned STAGE_DESC = (A_BYTES + B_BYTES) / 16, PASS_DESC = PASS_N * TMA_ROW_BYTES / 16;
        auto release = [&](int s) {
            if constexpr (CLUSTER == 1) {
                if (thread == 0) mbar_arrive(empty_at + 8 * s);
            } else {
                if (thread < CLUSTER) mbar_arrive_cluster(empty_at + 8 * s, thread);
            }
        };
        // The uses u .. u + SLICES - 1 of the ring (a group; use u is stage u %
        // STAGES in phase u / STAGES) are full: without waiting (ready), or waiting (wait).
        auto group_ready = [&](unsigned u) {
            bool ready = true;
#pragma unroll
            for (int i = 0; i < SLICES; ++i) ready &= mbar_ready(full_at + 8 * ((u + i) % STAGES), (u + i) / STAGES % 2);
            return ready;
        };
        auto group_wait = [&](unsigned u) {
#pragma unroll
            for (int i = 0; i < SLICES; ++i) mbar_wait(full_at + 8 * ((u + i) % STAGES), (u + i) / STAGES % 2);
        };
        unsigned use = 0;     // this consumer's next K tile, counted over all of its tiles
        // Whether the next group is prepared early (below): not with two K tiles
        // a group, nor with block scales and a stagger, where the registers ran
        // out (ptxas spilled 52 bytes at BN = 256).
        constexpr bool EARLY = SLICES == 1 && !(SCALING == SCALE_BLOCKS && STAGGER == 1);
        int stored = 0;       // boxes this warpgroup has handed to the copy engine
        bool opening = true;  // STAGGER: this consumer's first group is still to come
        for (int tile = first; tile < tiles_m * tiles_n; tile += clusters) {
            int tm, tn;
            tile_coords<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
            const int row = (pair * tm + rank) * BM + slab * 64;  // this warpgroup's first row of C
            float acc[BN / 2], part[PART];
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
#pragma unroll
            for (int i = 0; i < PART; ++i) part[i] = 0.f;
            // Pass p (columns PASS_N p ..) of the group at `use` into `part`
            // (the first step overwrites it). Its stages are full: a barrier
            // wait (a loop) between wgmmas on the same registers makes ptxas
            // serialise them (C7518), so the waits come before, never between.
            // a, b: the low words of the descriptors of the group's first K
            // tile for pass p; with EARLY made (`descriptors`) before the wait
            // that precedes this issue, so that between a group's completion
            // and the next one's issue only the promotion runs.
            auto issue = [&](int p, unsigned a, unsigned b) {
                if constexpr (STAGGER) {
                    if (slab == 1 && opening) stagger_wait();
                }
                wgmma_fence();
                wgmma_fp8_fresh_slice<In, true, PASS_N>(part, a, b);
#pragma unroll
                for (int i = 1; i < SLICES; ++i) {
                    const unsigned at = STAGE_DESC * ((use + i) % STAGES);
                    wgmma_fp8_fresh_slice<In, false, PASS_N>(part, a_desc + at, b_desc + at + p * PASS_DESC);
                }
                wgmma_commit();
            };
            auto descriptors = [&](unsigned u, int p, unsigned& a, unsigned& b) {
                const unsigned at = STAGE_DESC * (u % STAGES);
                a = a_desc + at;
                b = b_desc + at + p * PASS_DESC;
                if constexpr (EARLY) asm volatile("" : "+r"(a), "+r"(b));  // here, not past the next wait
            };
            // Pass p of the group at `use` has completed: its partial joins the
            // FP32 sums of its columns, and after the last pass the group's
            // stages are free.
            // Block scales: this K block's factors of the thread's two rows in pass p's columns,
            // read from the stage while the tensor cores still run the pass (the stage is full:
            // its group was issued after the wait on its full barrier), and before this warp's
            // arrival on scales_free. A's two factors are read once a stage, B's once a pass.
            float a_lo = 1.f, a_hi = 1.f, lo = 1.f, hi = 1.f;
            auto read_scales = [&](int p) {
                if constexpr (SCALING == SCALE_BLOCKS) {
                    const float* stage_scales = scales + use % STAGES * STAGE_SCALES;
                    if (p == 0) {
                        a_lo = stage_scales[slab * 64 + r];
                        a_hi = stage_scales[slab * 64 + r + 8];
                    }
                    const float b = stage_scales[BM + p];
                    lo = a_lo * b;
                    hi = a_hi * b;
                }
            };
            auto promote = [&](int p) {
                fence_registers(part);
                if (p == PASSES - 1) {
#pragma unroll
                    for (int i = 0; i < SLICES; ++i) release((use + i) % STAGES);
                }
                float* sums = acc + PART * p;
                if constexpr (SCALING == SCALE_BLOCKS) {
#pragma unroll
                    for (int j = 0; j < 16; ++j) {
                        sums[4 * j] = fmaf(lo, part[4 * j], sums[4 * j]);
                        sums[4 * j + 1] = fmaf(lo, part[4 * j + 1], sums[4 * j + 1]);
                        sums[4 * j + 2] = fmaf(hi, part[4 * j + 2], sums[4 * j + 2]);
                        sums[4 * j + 3] = fmaf(hi, part[4 * j + 3], sums[4 * j + 3]);
                    }
                    // Each warp tells the scale warp that its lanes' reads of
                    // the stage's scales are done (__syncwarp orders them before
                    // lane 0's arrival).
                    if (p == PASSES - 1) {
                        __syncwarp();
                        if (thread % 32 == 0) mbar_arrive(scales_free_at + 8 * (use % STAGES));
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < PART; ++i) sums[i] += part[i];
                }
            };

            // With EARLY the next group's stages are asked for while the tensor
            // cores run the last pass, with one test_wait each; a wait, if one
            // is still needed, comes once that pass has completed and been added.
            if (k_tiles > 0) group_wait(use);
            unsigned a_next, b_next;
            if constexpr (EARLY) descriptors(use, 0, a_next, b_next);
            for (int t = 0; t < k_tiles; t += SLICES) {
                const bool more = t + SLICES < k_tiles;
                bool ready = true;
#pragma unroll
                for (int p = 0; p < PASSES; ++p) {
                    if constexpr (EARLY) {
                        issue(p, a_next, b_next);
                        if (p + 1 < PASSES) {
                            descriptors(use, p + 1, a_next, b_next);
                        } else if (more) {
                            descriptors(use + SLICES, 0, a_next, b_next);
                            ready = group_ready(use + SLICES);
                        }
                    } else {
                        descriptors(use, p, a_next, b_next);
                        issue(p, a_next, b_next);
                    }
                    read_scales(p);
                    wgmma_wait<0>();
                    if constexpr (STAGGER) {
                        if (slab == 0 && opening) stagger_arrive();
                        opening = false;
                    }
                    promote(p);
                }
                use += SLICES;
                if (more && (!EARLY || !ready)) group_wait(use);
            }
            fence_registers(acc);
            if (row >= m) continue;  // a cluster's second tile row past M: nothing to store
            if constexpr (SCALING == SCALE_TENSOR) {
#pragma unroll
                for (int i = 0; i < BN / 2; ++i) acc[i] *= tensor_scale;
            } else if constexpr (SCALING == SCALE_ROWCOL) {
                // Each sum times its row's and its column's scale (epilogue_scale: 0 past M or N,
                // where the box's store writes nothing); the fragment is wgmma's, as in write_box_spread.
                // Not epilogue_scale per sum: its guarded loads are not shared between sums, and the
                // kernel compiled with 194 global loads where this one has 52 (BN = 192, bfloat16 C).
                const float* b_cols = scale_b + tn * BN + 2 * (thread % 4);
                const int b_left = n - tn * BN - 2 * (thread % 4);  // this thread's columns still inside N
                const float lo = row + r < m ? scale_a[row + r] : 0.f, hi = row + r + 8 < m ? scale_a[row + r + 8] : 0.f;
#pragma unroll
                for (int j = 0; j < BN / 8; ++j) {
                    const float f0 = 8 * j < b_left ? b_cols[8 * j] : 0.f, f1 = 8 * j + 1 < b_left ? b_cols[8 * j + 1] : 0.f;
                    acc[4 * j] *= lo * f0;
                    acc[4 * j + 1] *= lo * f1;
                    acc[4 * j + 2] *= hi * f0;
                    acc[4 * j + 3] *= hi * f1;
                }
            }
            store_slab<BN, C, C_BOXES, C_BOX_BYTES>(c_map, my_boxes, stored, slab, thread, row, tn * BN,
                                                    [&](int box, unsigned char* out) {
                                                        write_box_spread<BN, C>(acc, out, box, thread);
                                                    });
        }
        // Shared memory must outlive the copy engine's reads of it.
        if (thread == 0) bulk_wait_read<0>();
    }
    // A cluster stays until its neighbour is done: its last arrivals and multicasts land here.
    if constexpr (CLUSTER > 1) cluster_sync();
}
