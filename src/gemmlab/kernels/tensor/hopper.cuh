// Shared by the Hopper rungs (sm_90a): the tensor map type, mbarriers, TMA
// tile loads (plain and multicast to a cluster) and stores, wgmma and its shared-memory
// descriptors, and setmaxnreg (clusters: ../cluster.cuh). Inline PTX, as in tc_common.cuh.
//
// Tiles: the TMA unit writes a box of ROWS x 64 16-bit elements (ROWS x 32
// tf32) with its 128-byte swizzle: row r occupies bytes 128 r .. 128 r + 127,
// its 16-byte chunk c stored at chunk c ^ (r % 8). wgmma reads the same layout
// when its descriptor says "128-byte swizzle, K-major, 8-row groups 1024
// bytes apart"; every stage starts on a 1024-byte boundary so that the swizzle
// pattern lines up with the descriptor's.

#include "tc_common.cuh"
#include "../cluster.cuh"

// The driver's CUtensorMap: 128 opaque bytes, built on the host
// (cuTensorMapEncodeTiled, through cuda.core) and passed by value as a
// __grid_constant__ parameter, so the TMA unit can read it from parameter memory.
struct __align__(64) CUtensorMap { unsigned long long opaque[16]; };

// One swizzled row of a tile: the span of the 128-byte swizzle, which the
// tensor maps (SWIZZLE_128B), wgmma_desc's mode bits and put_pair_swizzled's
// XOR also encode. Not a template argument: no value but this one works
// without changing all of those. Python states it once as ROW_BYTES
// (problems/tensor.py); tests/test_tensor.py checks that the two agree.
constexpr int TMA_ROW_BYTES = 128;

// --- mbarriers: a 64-bit counter in shared memory with a phase bit --------------
//
// What each helper orders (PTX ISA, "mbarrier" and "Memory Consistency Model";
// docs/synchronisation.md holds the argument kernel by kernel):
// - mbar_arrive, mbar_expect_bytes: the default semantics, .release at .cta
//   scope: the thread's earlier memory operations are ordered before the
//   arrival for threads of this block that observe the phase complete.
// - mbar_arrive_cluster: the same default (.release.cta) on a barrier of either
//   block of the cluster. Across blocks a .cta-scope release is not a
//   synchronisation in the model; the kernels use it only to say "my reads of
//   the stage are finished", and those reads are wgmma's, in the async proxy,
//   finished at wgmma.wait_group before the arrive is issued. No release of
//   any scope orders async-proxy reads; completion does. So the scope does
//   not matter for that hazard, and .cluster would only add a wait for the
//   thread's global stores (measured: half speed).
// - mbar_wait: try_wait.parity with the default .acquire at .cta scope. Once
//   it returns, the phase has completed: every arrival of it was made, and
//   every byte a cp.async.bulk announced to it (complete_tx, the copy engine's
//   own count, whichever block issued the copy) has landed in this block's
//   shared memory and is visible to the waiting thread. Parity names a phase
//   only modulo 2: each ring keeps a barrier at most one phase ahead of any
//   thread that waits on it (the full/empty alternation guarantees it).
// - init_ring: fence.mbarrier_init.release.cluster orders the mbarrier.init
//   before the caller's next block (or cluster) barrier, so that neither the
//   other block's threads nor the copy engine can see an uninitialised barrier.

__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(arrivals) : "memory");
}

// Arrive and announce `bytes` more to come from the copy engine in this phase.
__device__ __forceinline__ void mbar_expect_bytes(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
}

// Each barrier operation also takes the barrier's shared-window address (a
// u32, as smem_u32 gives it), for loops that compute it once: the conversion
// from a generic pointer reads the block's place in its cluster, which ptxas
// does not hoist out of a loop.
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) { mbar_arrive(smem_u32(bar)); }

// Arrive on the barrier at the same offset in the shared memory of block
// `rank` of this cluster (which may be this block). The default semantics
// (release at CTA scope) suffice where the caller's reads are complete
// (wgmma.wait_group). An arrive with .release.cluster waits for all of the
// thread's earlier memory operations, the last tile's C stores included, to
// become visible cluster-wide; tc_cluster ran at half speed with it (see
// docs/tensor-ladder.md).
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned rank) {
    asm volatile("{\n.reg .b32 remote;\n"
                 "mapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n"
                 ::"r"(bar), "r"(rank) : "memory");
}
__device__ __forceinline__ void mbar_arrive_cluster(unsigned long long* bar, unsigned rank) {
    mbar_arrive_cluster(smem_u32(bar), rank);
}

// Thread 0 sets up the barriers of a ring of STAGES stages: full[s] completes
// on one arrival (the producer's, which announces the bytes to come) and the
// bytes; empty[s] on `releases` arrivals (none: a ring without empty
// barriers). The fence shows them to the copy engine and the cluster; the
// caller then synchronises its block (or cluster) before anyone uses them.
// A full barrier counts `fills` arrivals (1: the producer's, with the bytes it expects).
template <int STAGES>
__device__ __forceinline__ void init_ring(unsigned long long* full, unsigned long long* empty, unsigned releases,
                                          unsigned fills = 1) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], fills);
            if (releases) mbar_init(&empty[s], releases);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
}

// Wait until the phase with this parity (0 for the 1st, 3rd, ... completion) has completed.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    }
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) { mbar_wait(smem_u32(bar), parity); }

// Whether the phase with this parity has completed, without waiting: one
// test_wait, which acquires as try_wait does when it answers yes. A consumer
// asks while its tensor cores still run a group, so that a later wait (a
// loop, which ptxas will not put between a wgmma and its wait_group) only
// runs when the answer was no.
__device__ __forceinline__ bool mbar_ready(unsigned bar, unsigned parity) {
    unsigned done;
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    return done != 0;
}

// --- TMA: one instruction copies a whole box of a tensor into shared memory ------

// Box at (row, col) of a 2-D tensor (col along the contiguous dimension) into
// dst; `bar` counts the bytes as they land. Parts of the box outside the
// tensor arrive as zeros: the edges of M, N and K cost nothing.
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, unsigned long long* bar, int row, int col) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3}], [%4];\n"
                 ::"r"(smem_u32(dst)), "l"(map), "r"(col), "r"(row), "r"(smem_u32(bar)) : "memory");
}

// The same box, written to the same offset in every block of the cluster
// named in `mask`, each block's own barrier at `bar`'s offset counting it.
__device__ __forceinline__ void tma_load_multicast(void* dst, const CUtensorMap* map, unsigned long long* bar, int row,
                                                   int col, unsigned short mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                 "[%0], [%1, {%2, %3}], [%4], %5;\n"
                 ::"r"(smem_u32(dst)), "l"(map), "r"(col), "r"(row), "r"(smem_u32(bar)), "h"(mask) : "memory");
}

// One use of a stage: the k-tile at column k_col of K, this block's rows of A
// from a_row and B's BN rows from b_col, all counted on `full` (A_BYTES +
// B_BYTES). In a cluster of CLUSTER blocks sharing B, each loads its 1 /
// CLUSTER of B's rows and multicasts it to the same offset of every block's
// stage, so the other shares arrive from the neighbours.
template <int A_BYTES, int B_BYTES, int BN, int CLUSTER>
__device__ __forceinline__ void fill_stage(unsigned char* stage, unsigned long long* full, const CUtensorMap* a_map,
                                           const CUtensorMap* b_map, int a_row, int b_col, int k_col, unsigned rank) {
    mbar_expect_bytes(full, A_BYTES + B_BYTES);
    tma_load(stage, a_map, full, a_row, k_col);
    if constexpr (CLUSTER == 1) {
        tma_load(stage + A_BYTES, b_map, full, b_col, k_col);
    } else {
        tma_load_multicast(stage + A_BYTES + rank * (B_BYTES / CLUSTER), b_map, full, b_col + rank * (BN / CLUSTER),
                           k_col, (1 << CLUSTER) - 1);
    }
}

// --- TMA stores: shared memory -> a box of a tensor in global memory -------------

// Named barrier ID (1 unless told; 0 is __syncthreads') over a block's
// THREADS consumer threads: the specialised rungs' consumers meet on it
// without the producer, which may have left.
template <int THREADS, int ID = 1>
__device__ __forceinline__ void consumers_sync() {
    asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(THREADS) : "memory");
}

// Consumer warpgroup `slab` alone waits for its 128 threads, on named barrier
// slab + 1 (the C-box epilogues of tc_tma_store, tc_split_tail and the
// persistent FP8 rungs, where each warpgroup stores its own boxes). A kernel
// that also meets all its consumers takes another ID for that
// (consumers_sync<THREADS, 5> in tc_split_tail).
__device__ __forceinline__ void warpgroup_sync(int slab) {
    asm volatile("bar.sync %0, 128;\n" ::"r"(slab + 1) : "memory");
}

// The copy engine reads shared memory through the "async proxy": writes that
// threads made to it must be fenced before a TMA store may see them. Each
// writing thread fences its own writes; a barrier then orders the fences before
// the one thread that issues the store.
__device__ __forceinline__ void fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Box at (row, col) of a 2-D tensor (col along the contiguous dimension) from
// src; the parts of the box outside the tensor are not written.
__device__ __forceinline__ void tma_store(const CUtensorMap* map, const void* src, int row, int col) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
                 ::"l"(map), "r"(col), "r"(row), "r"(smem_u32(src)) : "memory");
}

// The stores this thread issued since the last commit form one group.
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

// Wait until at most PENDING of this thread's store groups are still reading
// their shared memory (their writes to global memory may still be under way).
template <int PENDING>
__device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(PENDING) : "memory");
}

// Two adjacent outputs into row `row`, byte `byte` of a 128-byte-swizzled box
// (16-byte chunk c of row r stored at chunk c ^ (r % 8)): float32, or
// bfloat16 rounded to nearest even (cvt packs its first operand high).
template <typename C>
__device__ __forceinline__ void put_pair_swizzled(unsigned char* box, int row, int byte, float v0, float v1) {
    unsigned char* p = box + row * TMA_ROW_BYTES + (((byte / 16) ^ (row % 8)) * 16) + byte % 16;
    if constexpr (sizeof(C) == 4) {
        *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
    } else {
        *reinterpret_cast<unsigned*>(p) = pack_bf16x2(v0, v1);
    }
}

// The first column of box `box` of a warpgroup's 64 x N accumulators, boxes
// of 128 bytes of C (BOX_COLS columns): box x BOX_COLS, except that where N is
// not a whole number of boxes (N = 144) the last box ends at N and overlaps
// the one before it. The overlap's columns are written twice, with the same
// values by the same warpgroup, and a TMA store writes nothing outside its box.
template <int N, typename C>
__device__ __forceinline__ constexpr int box_first_col(int box) {
    constexpr int BOX_COLS = TMA_ROW_BYTES / sizeof(C);
    static_assert(N >= BOX_COLS && N % 8 == 0, "a box inside the tile, whole 8-column groups");
    return box * BOX_COLS < N - BOX_COLS ? box * BOX_COLS : N - BOX_COLS;
}

// Boxes of C per warpgroup: N / BOX_COLS, one more where the last overlaps.
template <int N, typename C>
__device__ constexpr int wgmma_boxes() {
    constexpr int BOX_COLS = TMA_ROW_BYTES / sizeof(C);
    return (N + BOX_COLS - 1) / BOX_COLS;
}

// Box `box` of a warpgroup's 64 x N accumulators (columns box_first_col(box)
// .. , laid out as for store_wgmma_tile) into a 64 x 128-byte box of
// shared memory, in the swizzle a tensor map with SWIZZLE_128B reads. A warp
// writes 8 rows x 32 bytes per instruction; the swizzle puts row pairs on
// distinct banks, so that is two wavefronts, the fewest for 256 bytes.
template <int N, typename C>
__device__ __forceinline__ void write_wgmma_box(const float (&d)[N / 2], unsigned char* box_mem, int box,
                                                int thread) {
    constexpr int GROUPS = TMA_ROW_BYTES / sizeof(C) / 8;  // 8-column groups of a box
    const int r = 16 * (thread / 32) + (thread % 32) / 4;
    const int first = box_first_col<N, C>(box) / 8;
#pragma unroll
    for (int g = 0; g < GROUPS; ++g) {
        const int j = first + g;
        const int byte = (8 * g + 2 * (thread % 4)) * static_cast<int>(sizeof(C));
        put_pair_swizzled<C>(box_mem, r, byte, d[4 * j], d[4 * j + 1]);
        put_pair_swizzled<C>(box_mem, r + 8, byte, d[4 * j + 2], d[4 * j + 3]);
    }
}

// Hand a warpgroup's 64 x N slab of C to the copy engine at (row, col)
// through its C_BOXES boxes of BOX_BYTES in shared memory: write(box, mem)
// puts box `box` of the accumulators into `mem`, in the tensor map's swizzle;
// `stored` counts the boxes handed over in turns (whose box is next). Where the
// boxes hold the whole slab, every box is written, each thread fences once
// and thread 0 issues all the stores as one group; otherwise the boxes take
// turns, a fence and a store per box. The argument is in docs/synchronisation.md
// (tc_tma_store).
template <int N, typename C, int C_BOXES, int BOX_BYTES, typename Write>
__device__ __forceinline__ void store_slab(const CUtensorMap* map, unsigned char* boxes, int& stored, int slab,
                                           int thread, int row, int col, Write write) {
    constexpr int BOXES = wgmma_boxes<N, C>();
    if constexpr (C_BOXES >= BOXES) {
        if (thread == 0) bulk_wait_read<0>();  // the last slab's stores are done reading
        warpgroup_sync(slab);
#pragma unroll
        for (int box = 0; box < BOXES; ++box) write(box, boxes + box * BOX_BYTES);
        fence_proxy_async_shared();  // the writes, shown to the copy engine
        warpgroup_sync(slab);
        if (thread == 0) {
#pragma unroll
            for (int box = 0; box < BOXES; ++box) {
                tma_store(map, boxes + box * BOX_BYTES, row, col + box_first_col<N, C>(box));
            }
            bulk_commit();
        }
    } else {
#pragma unroll
        for (int box = 0; box < BOXES; ++box, ++stored) {
            unsigned char* out = boxes + (stored % C_BOXES) * BOX_BYTES;
            // The store that last read this box, C_BOXES stores ago, must be done reading it.
            if (thread == 0) bulk_wait_read<C_BOXES - 1>();
            warpgroup_sync(slab);
            write(box, out);
            fence_proxy_async_shared();  // the writes, shown to the copy engine
            warpgroup_sync(slab);
            if (thread == 0) {
                tma_store(map, out, row, col + box_first_col<N, C>(box));
                bulk_commit();
            }
        }
    }
}

// --- wgmma ------------------------------------------------------------------------

// Shared-memory matrix descriptor of a K-major tile in the layout above:
// start address (bits 0-13, in 16-byte units), leading-byte offset (unused
// with a swizzle, set to 1), stride-byte offset between 8-row groups (bits
// 32-45: 1024 bytes), swizzle mode in bits 62-63 (1: 128 bytes).
// The high word (stride-byte offset and swizzle) is the same for every tile.
constexpr unsigned long long WGMMA_DESC_HIGH = ((1024ull >> 4) << 32) | (1ull << 62);
__device__ __forceinline__ unsigned long long wgmma_desc(const void* tile) {
    const unsigned long long address = smem_u32(tile);
    return ((address & 0x3FFFF) >> 4) | (1ull << 16) | WGMMA_DESC_HIGH;
}
// The low word alone: that of a tile `bytes` further on is this plus bytes /
// 16, which lets a loop over stages keep one 32-bit word and add to it.
// WGMMA_DESC_HIGH | wgmma_desc_low(smem_u32(tile)) == wgmma_desc(tile).
__device__ __forceinline__ unsigned wgmma_desc_low(unsigned address) { return ((address & 0x3FFFF) >> 4) | (1u << 16); }

// Order this warpgroup's register accesses before the wgmma that follows.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

// Wait until at most PENDING committed groups of this warpgroup are still running.
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}

// The accumulators must not be touched by ordinary code while a wgmma that
// writes them runs; this tells the compiler they may change "now".
template <int REGS>
__device__ __forceinline__ void fence_registers(float (&d)[REGS]) {
#pragma unroll
    for (int i = 0; i < REGS; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D (64 x N, float32, across the 4 warps of a warpgroup) += A (64 x K_STEP) .
// B (N x K_STEP)^T, both read from shared memory through their descriptors.
// Thread t of the warpgroup holds, for each 8 columns j: d[4j], d[4j + 1] at
// row 16 (t / 32) + (t % 32) / 4, columns 8 j + 2 (t % 4) + {0, 1}, and
// d[4j + 2], d[4j + 3] eight rows below. K_STEP is 32 bytes of a row: 16
// bf16/fp16 elements or 8 tf32. The specialisations are at the end of this file.
template <typename T, int N>
__device__ __forceinline__ void wgmma(float (&d)[N / 2], unsigned long long da, unsigned long long db);

// One 64-deep (128-byte) slice of a stage: 4 wgmma steps, each 32 bytes further along K.
template <typename T, int N>
__device__ __forceinline__ void wgmma_slice(float (&d)[N / 2], const void* a_rows, const void* b_rows) {
    const unsigned long long da = wgmma_desc(a_rows), db = wgmma_desc(b_rows);
#pragma unroll
    for (int step = 0; step < TMA_ROW_BYTES / 32; ++step) wgmma<T, N>(d, da + 2 * step, db + 2 * step);
}

// Store a warpgroup's 64 x N accumulators to C (float32, or bfloat16 bits) at (row, col), guarded.
template <int N, typename C>
__device__ __forceinline__ void store_wgmma_tile(const float (&d)[N / 2], C* c, int m, int n, int row, int col,
                                                 int thread) {
    const int r = row + 16 * (thread / 32) + (thread % 32) / 4;
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
        const int cc = col + 8 * j + 2 * (thread % 4);
        store_pair(c, m, n, r, cc, d[4 * j], d[4 * j + 1]);
        store_pair(c, m, n, r + 8, cc, d[4 * j + 2], d[4 * j + 3]);
    }
}

// --- warp-specialised rungs --------------------------------------------------------

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

// A consumer warpgroup's side of produce_k_slice's ring: wgmma of its 64-row
// slab of each stage into acc, one group kept in flight, and release(v) called
// by every thread of the warpgroup once wgmma.wait_group<1> says the wgmma
// that read use v (counted from t_begin) has completed. Returns with every
// group complete and acc fenced; the last use is not released (a one-tile
// block is done with the ring).
template <typename Inputs, int BN, int STAGES, int A_BYTES, int B_BYTES, typename Release>
__device__ __forceinline__ void consume_k_slice_with(float (&acc)[BN / 2], unsigned char* smem,
                                                     unsigned long long* full, int slab, int t_begin, int t_end,
                                                     Release release) {
    auto stage = [&](int s) { return smem + s * (A_BYTES + B_BYTES); };
    for (int t = t_begin, u = 0; t < t_end; ++t, ++u) {
        const int s = u % STAGES;
        mbar_wait(&full[s], (u / STAGES) % 2);
        wgmma_fence();
        wgmma_slice<Inputs, BN>(acc, stage(s) + slab * 64 * TMA_ROW_BYTES, stage(s) + A_BYTES);
        wgmma_commit();
        wgmma_wait<1>();
        if (u > 0) release(u - 1);
    }
    wgmma_wait<0>();
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

// --- the wgmma instructions, one per element type and N ---------------------------

// Inline PTX takes no arrays, so the accumulators are listed operand by
// operand: the text "%0, ..., %31" and the constraints "+f"(d[0]) ... "+f"(d[31]),
// then longer lists of 64, 72, 96 and 128 (N = 128, 144, 192, 256). Written once here, used by every wrapper below.
#define GL_TEXT_32 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define GL_TEXT_64 GL_TEXT_32 ", " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define GL_TEXT_72 GL_TEXT_64 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define GL_TEXT_96 GL_TEXT_64 ", " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define GL_TEXT_128 GL_TEXT_96 ", " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define GL_OUT_32(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define GL_OUT_64(d) GL_OUT_32(d), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define GL_OUT_72(d) GL_OUT_64(d), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71])
#define GL_OUT_96(d) GL_OUT_64(d), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define GL_OUT_128(d) GL_OUT_96(d), \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// One wrapper: REGS accumulators named by TEXT/OUT, the two descriptors and the
// scale-d flag (always 1: D += A . B; the accumulators start at zero) after
// them, and the instruction's trailing immediates (scale-a, scale-b and, for
// 16-bit types, transpose-a and transpose-b: both K-major, no transpose).
#define GL_WGMMA(TAG, N, TEXT, OUT, DESC_A, DESC_B, SCALE, INSTRUCTION, IMMEDIATES)                           \
    template <>                                                                                             \
    __device__ __forceinline__ void wgmma<TAG, N>(float (&d)[N / 2], unsigned long long da,                \
                                                  unsigned long long db) {                                \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE ", 0;\n" INSTRUCTION " {" TEXT "}, " DESC_A  \
                     ", " DESC_B ", p, " IMMEDIATES ";\n}\n"                                                \
                     : OUT(d)                                                                               \
                     : "l"(da), "l"(db), "r"(1));                                                           \
    }
#define GL_WGMMA_64(TAG, INSTRUCTION, IMMEDIATES) \
    GL_WGMMA(TAG, 64, GL_TEXT_32, GL_OUT_32, "%32", "%33", "%34", INSTRUCTION, IMMEDIATES)
#define GL_WGMMA_128(TAG, INSTRUCTION, IMMEDIATES) \
    GL_WGMMA(TAG, 128, GL_TEXT_64, GL_OUT_64, "%64", "%65", "%66", INSTRUCTION, IMMEDIATES)
#define GL_WGMMA_144(TAG, INSTRUCTION, IMMEDIATES) \
    GL_WGMMA(TAG, 144, GL_TEXT_72, GL_OUT_72, "%72", "%73", "%74", INSTRUCTION, IMMEDIATES)
#define GL_WGMMA_192(TAG, INSTRUCTION, IMMEDIATES) \
    GL_WGMMA(TAG, 192, GL_TEXT_96, GL_OUT_96, "%96", "%97", "%98", INSTRUCTION, IMMEDIATES)
#define GL_WGMMA_256(TAG, INSTRUCTION, IMMEDIATES) \
    GL_WGMMA(TAG, 256, GL_TEXT_128, GL_OUT_128, "%128", "%129", "%130", INSTRUCTION, IMMEDIATES)

// N = 64: tc_small's narrow tiles.
GL_WGMMA_64(gl_bf16, "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", "1, 1, 0, 0")
GL_WGMMA_64(gl_fp16, "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", "1, 1, 0, 0")
GL_WGMMA_64(gl_tf32, "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32", "1, 1")
GL_WGMMA_128(gl_bf16, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", "1, 1, 0, 0")
GL_WGMMA_256(gl_bf16, "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", "1, 1, 0, 0")
GL_WGMMA_128(gl_fp16, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", "1, 1, 0, 0")
GL_WGMMA_256(gl_fp16, "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16", "1, 1, 0, 0")
GL_WGMMA_128(gl_tf32, "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32", "1, 1")
GL_WGMMA_256(gl_tf32, "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32", "1, 1")
// N = 192: tiles of 128 x 192 (3000 cubed: 384 tiles, 2.9 waves of 132, where 128 x 256 makes 2.2).
GL_WGMMA_192(gl_bf16, "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16", "1, 1, 0, 0")
GL_WGMMA_192(gl_fp16, "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16", "1, 1, 0, 0")
GL_WGMMA_192(gl_tf32, "wgmma.mma_async.sync.aligned.m64n192k8.f32.tf32.tf32", "1, 1")
// N = 144: tiles of 128 x 144 (1536 cubed: 6 x 11 clusters of two, the 132 SMs once, where 128 x 192 fills 96).
GL_WGMMA_144(gl_bf16, "wgmma.mma_async.sync.aligned.m64n144k16.f32.bf16.bf16", "1, 1, 0, 0")
GL_WGMMA_144(gl_fp16, "wgmma.mma_async.sync.aligned.m64n144k16.f32.f16.f16", "1, 1, 0, 0")
GL_WGMMA_144(gl_tf32, "wgmma.mma_async.sync.aligned.m64n144k8.f32.tf32.tf32", "1, 1")
