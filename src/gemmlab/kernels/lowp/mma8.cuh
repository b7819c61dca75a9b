// Shared by the lowp ladder's mma.sync rungs (tc_int8_mma, tc_fp8_mma): the
// 8-bit mma.sync, the cp.async ring of swizzled tiles, and the warp tile's
// inner product. The tiles, their copies and the warp tile's ldmatrix steps
// are the 16-bit rungs' (tensor/mma_tiles.cuh), for the reason that follows.
//
// mma.sync.m16n8k32 with 8-bit inputs places its fragments byte for byte as
// m16n8k16 places 16-bit ones (PTX ISA, "Matrix Fragments for mma.m16n8k32"):
// A register 0 holds row g = lane / 4 at bytes 4 (lane % 4) .. + 3 of the
// first 16 bytes of K, register 1 row g + 8, registers 2 and 3 the same rows
// 16 bytes further; B register 0 holds column g at the same bytes, register 1
// 16 bytes further. So the tensor ladder's tiles serve unchanged: a tile row
// is 128 bytes of K (128 elements here, 64 there), its 16-byte chunk c stored
// at chunk c ^ (row % 8), and ldmatrix.x4 reads 8 x 16-byte matrices whatever
// the bytes hold. C's fragment is the same too: c[0..1] row g, c[2..3] row
// g + 8, columns 2 (lane % 4) + {0, 1}.

#include "types8.cuh"
#include "../tensor/mma_tiles.cuh"

constexpr int TILE_K = 128;  // 8-bit elements per tile row: 128 bytes, and one block of FP8 scales

// D (16 x 8) += A (16 x 32) . B (32 x 8), one warp; fragments as above.
template <typename T>
__device__ __forceinline__ void mma_16832(typename T::acc (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1);

template <>
__device__ __forceinline__ void mma_16832<gl_s8>(int (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma_16832<gl_e4m3>(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma_16832<gl_e5m2>(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// tc_mma_pipeline's ring: STAGES stages of (BM + BN) x 128 bytes, one commit
// group per tile (empty past the end), so "at most STAGES - 2 groups pending"
// means "tile t has landed". body(t, a_tile, b_tile) runs once per tile of
// 128 K, with every thread's copies of it visible.
template <int BM, int BN, int STAGES, int THREADS, typename Body>
__device__ __forceinline__ void cp_async_ring(unsigned char* ring, const unsigned char* a, const unsigned char* b,
                                              int row0, int col0, int m, int n, int k, Body body) {
    constexpr int STAGE = (BM + BN) * TILE_K;
    static_assert(STAGES >= 2, "at least one tile in flight while one is computed");
    const int tid = threadIdx.x, tiles = (k + TILE_K - 1) / TILE_K;
    auto issue = [&](int t) {
        if (t < tiles) {
            unsigned char* stage = ring + (t % STAGES) * STAGE;
            copy_tile_async<BM, THREADS>(stage, a, row0, m, t * TILE_K, k, tid);
            copy_tile_async<BN, THREADS>(stage + BM * TILE_K, b, col0, n, t * TILE_K, k, tid);
        }
        cp_async_commit();
    };
#pragma unroll
    for (int t = 0; t < STAGES - 1; ++t) issue(t);
    for (int t = 0; t < tiles; ++t) {
        cp_async_wait<STAGES - 2>();
        // Everyone's copies of tile t have landed, and everyone is done with
        // tile t - 1, whose stage the next issue overwrites.
        __syncthreads();
        issue(t + STAGES - 1);
        const unsigned char* stage = ring + (t % STAGES) * STAGE;
        body(t, stage, stage + BM * TILE_K);
    }
}

// One warp's WM x WN piece of C over one 128-deep tile: 4 steps of k = 32
// (32 bytes, two chunks, as the 16-bit rungs' k = 16), each (WM / 16) x
// (WN / 8) mma.sync instructions, on tc_mma's ldmatrix addresses.
template <typename T, int WM, int WN>
__device__ __forceinline__ void mma8_warp_tile(typename T::acc (&acc)[WM / 16][WN / 8][4],
                                               const unsigned char* a_tile, const unsigned char* b_tile, int wrow,
                                               int wcol, int lane) {
    warp_tile_steps<WM, WN>(acc, a_tile, b_tile, wrow, wcol, lane,
                            [](typename T::acc (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
                                mma_16832<T>(d, a, b0, b1);
                            });
}
