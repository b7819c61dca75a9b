// The warp-specialised pipeline of the Hopper rungs (sm_90a): the register
// hand-over between producer and consumer warpgroups (setmaxnreg), the named
// barrier the consumers meet on, the producer that fills a ring of stages
// with TMA loads, the consumer that runs wgmma over it, and the persistent
// rungs' tile order. Built on mbarrier.cuh, tma.cuh and wgmma.cuh.
#ifndef GEMMLAB_TENSOR_PIPELINE_CUH
#define GEMMLAB_TENSOR_PIPELINE_CUH

#include "mbarrier.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

// Named barrier ID (1 unless told; 0 is __syncthreads') over a block's
// THREADS consumer threads: the specialised rungs' consumers meet on it
// without the producer, which may have left.
template <int THREADS, int ID = 1>
__device__ __forceinline__ void consumers_sync() {
    asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(THREADS) : "memory");
}

// The register hand-over between warpgroups (needs __launch_bounds__(threads,
// 1)): the producer keeps PRODUCER_REGS per thread and each of CONSUMERS
// consumers claims CONSUMER_REGS. The split arrives as template arguments, set
// once in kernels/tensor/spec.py, whose rules refuse a BM whose consumers
// would not fit; naming a member here checks the same sum at compile time.
template <int PRODUCER_REGS, int CONSUMER_REGS, int CONSUMERS>
struct RegisterSplit {
    static_assert(PRODUCER_REGS % 8 == 0 && CONSUMER_REGS % 8 == 0, "setmaxnreg takes multiples of 8 registers");
    static_assert(24 <= PRODUCER_REGS && PRODUCER_REGS <= CONSUMER_REGS && CONSUMER_REGS <= 256,
                  "setmaxnreg takes 24 to 256 registers; the producer gives, the consumers take");
    // setmaxnreg moves registers only within what the block holds from launch: 64K / threads a
    // thread in steps of 8 (168 for three warpgroups, 64,512 in all); an increase past it waits for ever.
    static constexpr int THREADS = 128 * (CONSUMERS + 1);
    static constexpr int LAUNCH_REGS = (65536 / THREADS / 8 * 8 < 248 ? 65536 / THREADS / 8 * 8 : 248) * THREADS;
    static_assert((PRODUCER_REGS + CONSUMERS * CONSUMER_REGS) * 128 <= LAUNCH_REGS,
                  "a producer and CONSUMERS consumer warpgroups must fit the registers the block holds from launch");
    __device__ __forceinline__ static void release() {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
    }
    __device__ __forceinline__ static void claim() {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));
    }
};

// The producer of a one-tile warp-specialised block (tc_warpspecialized and
// the 8-bit rungs built on it): one thread fills the ring with the block's
// `tiles` K tiles of A's rows from row0 and B's rows from col0, each use of a
// stage waiting until the consumers released the one before. A stage holds
// A_BYTES of A, then B_BYTES of B.
template <int STAGES, int A_BYTES, int B_BYTES, int BK>
__device__ __forceinline__ void produce_k_tiles(unsigned char* smem, unsigned long long* full,
                                                unsigned long long* empty, const CUtensorMap* a_map,
                                                const CUtensorMap* b_map, int row0, int col0, int tiles) {
    for (int t = 0; t < tiles; ++t) {
        const int s = t % STAGES;
        unsigned char* stage = smem + s * (A_BYTES + B_BYTES);
        // Use u of stage s (u = t / STAGES) may start once use u - 1 was released.
        if (t >= STAGES) mbar_wait(&empty[s], (t / STAGES - 1) % 2);
        mbar_expect_bytes(&full[s], A_BYTES + B_BYTES);
        tma_load(stage, a_map, &full[s], row0, t * BK);
        tma_load(stage + A_BYTES, b_map, &full[s], col0, t * BK);
    }
}

// The same producer over a slice of K (tc_split_k, tc_small): K tiles
// t_begin .. t_end - 1, use u = t - t_begin of stage u % STAGES. Why not one
// helper: each loop is the one its rungs were written and measured with, and
// either loop in the other's place compiles to other SASS.
template <int STAGES, int A_BYTES, int B_BYTES, typename Load>
__device__ __forceinline__ void produce_k_slice_with(unsigned char* smem, unsigned long long* full,
                                                     unsigned long long* empty, int t_begin, int t_end, Load load) {
    for (int t = t_begin, u = 0; t < t_end; ++t, ++u) {
        const int s = u % STAGES;
        unsigned char* stage = smem + s * (A_BYTES + B_BYTES);
        if (u >= STAGES) mbar_wait(&empty[s], (u / STAGES - 1) % 2);
        mbar_expect_bytes(&full[s], A_BYTES + B_BYTES);
        load(stage, &full[s], t);  // the copies of k-tile t, A_BYTES + B_BYTES into this block's stage
    }
}

template <int STAGES, int A_BYTES, int B_BYTES, int BK>
__device__ __forceinline__ void produce_k_slice(unsigned char* smem, unsigned long long* full,
                                                unsigned long long* empty, const CUtensorMap* a_map,
                                                const CUtensorMap* b_map, int row0, int col0, int t_begin,
                                                int t_end) {
    produce_k_slice_with<STAGES, A_BYTES, B_BYTES>(
        smem, full, empty, t_begin, t_end, [&](unsigned char* stage, unsigned long long* bar, int t) {
            tma_load(stage, a_map, bar, row0, t * BK);
            tma_load(stage + A_BYTES, b_map, bar, col0, t * BK);
        });
}

// A consumer warpgroup's side of produce_k_slice's ring (or produce_k_tiles',
// t_begin = 0): slice(a_rows, b_rows) issues the wgmma of its 64-row slab of
// each stage, one group kept in flight, and release(v) is called by every
// thread of the warpgroup once wgmma.wait_group<1> says the wgmma that read
// use v (counted from t_begin) has completed. Returns with every group
// complete; the last use is not released (a one-tile block is done with the
// ring). The caller fences its accumulators.
template <int STAGES, int A_BYTES, int B_BYTES, typename Slice, typename Release>
__device__ __forceinline__ void consume_k_ring(unsigned char* smem, unsigned long long* full, int slab, int t_begin,
                                               int t_end, Slice slice, Release release) {
    auto stage = [&](int s) { return smem + s * (A_BYTES + B_BYTES); };
    for (int t = t_begin, u = 0; t < t_end; ++t, ++u) {
        const int s = u % STAGES;
        mbar_wait(&full[s], (u / STAGES) % 2);
        wgmma_fence();
        slice(stage(s) + slab * 64 * TMA_ROW_BYTES, stage(s) + A_BYTES);
        wgmma_commit();
        // Use u's group may still run; use u - 1's has finished: release its stage.
        wgmma_wait<1>();
        if (u > 0) release(u - 1);
    }
    wgmma_wait<0>();
}

// consume_k_ring with 16-bit (or FP8) wgmma into float32 acc, fenced on return.
template <typename Inputs, int BN, int STAGES, int A_BYTES, int B_BYTES, typename Release>
__device__ __forceinline__ void consume_k_slice_with(float (&acc)[BN / 2], unsigned char* smem,
                                                     unsigned long long* full, int slab, int t_begin, int t_end,
                                                     Release release) {
    consume_k_ring<STAGES, A_BYTES, B_BYTES>(
        smem, full, slab, t_begin, t_end,
        [&](const unsigned char* a_rows, const unsigned char* b_rows) { wgmma_slice<Inputs, BN>(acc, a_rows, b_rows); },
        release);
    fence_registers(acc);
}

// consume_k_slice_with releasing each use on this block's empty barrier (one
// arrival per warpgroup, by its thread 0).
template <typename Inputs, int BN, int STAGES, int A_BYTES, int B_BYTES>
__device__ __forceinline__ void consume_k_slice(float (&acc)[BN / 2], unsigned char* smem, unsigned long long* full,
                                                unsigned long long* empty, int slab, int thread, int t_begin,
                                                int t_end) {
    consume_k_slice_with<Inputs, BN, STAGES, A_BYTES, B_BYTES>(acc, smem, full, slab, t_begin, t_end, [&](int v) {
        if (thread == 0) mbar_arrive(&empty[v % STAGES]);
    });
}

// The same consumer with promotion (tc_fp8_wgmma with PROMOTE = 1,
// tc_fp8_blockscaled): the 4 wgmma steps of each k-tile into a fresh
// partial slab, waited for at once (wgmma.wait_group<0>), so that thread 0
// releases the stage on this block's empty barrier before the partial is
// added into float32 registers. promote(t), called before the wait for k-tile
// t (a rung reads its scales meanwhile), returns add(part), which adds the
// partial. Returns with every group complete; the caller fences its sums.
template <typename T, int BN, int STAGES, int A_BYTES, int B_BYTES, typename Promote>
__device__ __forceinline__ void consume_k_promoted(unsigned char* smem, unsigned long long* full,
                                                   unsigned long long* empty, int slab, int thread, int tiles,
                                                   Promote promote) {
    auto stage = [&](int s) { return smem + s * (A_BYTES + B_BYTES); };
    for (int t = 0; t < tiles; ++t) {
        const int s = t % STAGES;
        const auto add = promote(t);
        mbar_wait(&full[s], (t / STAGES) % 2);
        float part[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) part[i] = 0.f;
        wgmma_fence();
        wgmma_slice<T, BN>(part, stage(s) + slab * 64 * TMA_ROW_BYTES, stage(s) + A_BYTES);
        wgmma_commit();
        wgmma_wait<0>();
        fence_registers(part);
        if (thread == 0) mbar_arrive(&empty[s]);
        add(part);
    }
    wgmma_wait<0>();
}

// The block of a one-tile warp-specialised rung (tc_warpspecialized and the
// 8-bit rungs built on it), BM x BN of C from `tiles` K tiles: a ring of
// STAGES stages of A_BYTES of A then B_BYTES of B in `smem`, its full and
// empty barriers after the stages; thread 0 sets them up and the block
// synchronises. Warpgroup 0 gives its registers away and one of its threads
// fills the ring (produce_k_tiles); each of the BM / 64 consumer warpgroups
// claims its registers and runs consume(full, empty, slab, thread): `slab`
// its 64 rows of the block tile, `thread` its 0 .. 127.
template <int BM, int BN, int BK, int STAGES, int PRODUCER_REGS, int CONSUMER_REGS, typename Consume>
__device__ __forceinline__ void warp_specialized_tile(unsigned char* smem, const CUtensorMap* a_map,
                                                      const CUtensorMap* b_map, int row0, int col0, int tiles,
                                                      Consume consume) {
    constexpr int A_BYTES = BM * TMA_ROW_BYTES, B_BYTES = BN * TMA_ROW_BYTES;
    constexpr int CONSUMERS = BM / 64;
    using Registers = RegisterSplit<PRODUCER_REGS, CONSUMER_REGS, CONSUMERS>;
    unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + STAGES * (A_BYTES + B_BYTES));
    unsigned long long* empty = full + STAGES;
    const int tid = threadIdx.x, group = tid / 128;

    init_ring<STAGES>(full, empty, CONSUMERS);
    __syncthreads();

    if (group == 0) {
        Registers::release();
        if (tid == 0)
            produce_k_tiles<STAGES, A_BYTES, B_BYTES, BK>(smem, full, empty, a_map, b_map, row0, col0, tiles);
    } else {
        Registers::claim();
        consume(full, empty, group - 1, tid % 128);
    }
}

// Persistent rungs: tile number -> (tile row, tile column), numbered GROUP_M
// tile rows at a time and column by column inside a group.
template <int GROUP_M>
__device__ __forceinline__ void tile_coords(int tile, int tiles_m, int tiles_n, int& tm, int& tn) {
    const int per_group = GROUP_M * tiles_n;
    const int first = (tile / per_group) * GROUP_M;
    const int rows = min(tiles_m - first, GROUP_M);
    tm = first + (tile % per_group) % rows;
    tn = (tile % per_group) / rows;
}

#endif  // GEMMLAB_TENSOR_PIPELINE_CUH
