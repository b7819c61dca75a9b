// Epilogues of the Hopper rungs (sm_90a): a warpgroup's 64 x N accumulators
// (wgmma.cuh's fragment) to C, either stored straight from registers, guarded,
// or written into 128-byte-swizzled boxes of shared memory that TMA stores
// (tma.cuh) hand to global memory, a warpgroup at a time.
#ifndef GEMMLAB_TENSOR_EPILOGUE_CUH
#define GEMMLAB_TENSOR_EPILOGUE_CUH

#include "tc_common.cuh"
#include "tma.cuh"

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

// Consumer warpgroup `slab` alone waits for its 128 threads, on named barrier
// slab + 1 (the C-box epilogues of tc_tma_store, tc_split_tail and the
// persistent FP8 rungs, where each warpgroup stores its own boxes). A kernel
// that also meets all its consumers takes another ID for that
// (consumers_sync<THREADS, 5> in tc_split_tail).
__device__ __forceinline__ void warpgroup_sync(int slab) {
    asm volatile("bar.sync %0, 128;\n" ::"r"(slab + 1) : "memory");
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

#endif  // GEMMLAB_TENSOR_EPILOGUE_CUH
