// tc_mma: tc_wmma with the fragments made explicit. mma.sync.m16n8k16 names
// which lane holds which element, so the kernel chooses the shared-memory
// layout itself: 16-byte loads from global memory, a 128-byte XOR swizzle
// that keeps ldmatrix free of bank conflicts, and ldmatrix.x4 to fill four
// 8 x 8 fragments with one instruction.
// Source: not from the documents. Launch: (BM / WM) x (BN / WN) warps per
// block, one block per BM x BN tile of C; K a multiple of 8 (16-byte rows),
// any M and N. bf16 and fp16 (tf32 elements are 32-bit: tc_wmma or the
// Hopper rungs).
// Should teach: with WMMA the compiler picks a layout blind; here ldmatrix
// reads a swizzled tile in one pass per 8 x 8 matrix, and the operand traffic
// per mma drops (a warp's A fragment serves WN / 8 mma instructions).
// Predicted: several times tc_wmma, still far below the peak, because every
// tile is loaded, then waited for, then computed: nothing overlaps.

#include "mma_tiles.cuh"

// ROWS rows of a 64-deep slice of A (or B) from global memory into a swizzled
// tile, 16 bytes per load; rows past `rows` and chunks past K are zeros.
// K % 8 == 0, so a 16-byte chunk is either wholly inside K or wholly outside.
template <int ROWS, int THREADS>
__device__ __forceinline__ void load_tile(unsigned short* tile, const unsigned short* src, int row0, int rows, int k0,
                                          int k, int tid) {
    constexpr int CHUNKS = MMA_BK / 8;  // 16-byte chunks per tile row
    static_assert((ROWS * CHUNKS) % THREADS == 0, "equal shares of the copies");
#pragma unroll
    for (int i = tid; i < ROWS * CHUNKS; i += THREADS) {
        const int r = i / CHUNKS, ch = i % CHUNKS;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (row0 + r < rows && k0 + 8 * ch < k)
            v = *reinterpret_cast<const uint4*>(src + static_cast<long long>(row0 + r) * k + k0 + 8 * ch);
        *reinterpret_cast<uint4*>(tile + swizzled_at<unsigned short>(r, ch)) = v;
    }
}

template <typename T, int BM, int BN, int WM, int WN>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
tc_mma(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b, float* __restrict__ c,
       int m, int n, int k) {
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles tile the block tile");
    __shared__ __align__(128) unsigned short a_tile[BM * MMA_BK];
    __shared__ __align__(128) unsigned short b_tile[BN * MMA_BK];

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[WM / 16][WN / 8][4] = {};

    for (int k0 = 0; k0 < k; k0 += MMA_BK) {
        load_tile<BM, THREADS>(a_tile, a, row0, m, k0, k, tid);
        load_tile<BN, THREADS>(b_tile, b, col0, n, k0, k, tid);
        __syncthreads();
        mma_warp_tile<T, WM, WN>(acc, a_tile, b_tile, wrow, wcol, lane);
        __syncthreads();
    }
    store_warp_tile<WM, WN>(acc, c, m, n, row0 + wrow, col0 + wcol, lane);
}
