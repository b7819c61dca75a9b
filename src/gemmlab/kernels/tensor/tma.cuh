// TMA, shared by the Hopper rungs (sm_90a): the tensor map type, the tile
// layout TMA writes and wgmma reads, tile loads (plain and multicast to a
// cluster) counted on an mbarrier, a stage's fill, and TMA stores with their
// bulk groups and the async-proxy fence. Inline PTX, as in tc_common.cuh.
//
// Tiles: the TMA unit writes a box of ROWS x 64 16-bit elements (ROWS x 32
// tf32) with its 128-byte swizzle: row r occupies bytes 128 r .. 128 r + 127,
// its 16-byte chunk c stored at chunk c ^ (r % 8). wgmma reads the same layout
// when its descriptor says "128-byte swizzle, K-major, 8-row groups 1024
// bytes apart"; every stage starts on a 1024-byte boundary so that the swizzle
// pattern lines up with the descriptor's.
#ifndef GEMMLAB_TENSOR_TMA_CUH
#define GEMMLAB_TENSOR_TMA_CUH

#include "tc_common.cuh"
#include "mbarrier.cuh"

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

#endif  // GEMMLAB_TENSOR_TMA_CUH
