// tc_int8_mma: tc_mma_pipeline in int8. mma.sync.m16n8k32 multiplies 8-bit
// integers and sums them in int32: twice the K of the 16-bit instruction in
// the same registers and the same bytes of shared memory, and an exact result.
// Source: not from the documents (the int32 lab's course, on the tensor cores).
// Launch: (BM / WM) x (BN / WN) warps per block, one block per BM x BN tile
// of C; STAGES x (BM + BN) x 128 bytes of dynamic shared memory. K a multiple
// of 16 (16-byte rows) and under 2^17 (int32 sums of products up to 2^14),
// any M and N. sm_80 and newer.
// Should teach: the tile machinery of the 16-bit rungs carries over byte for
// byte (mma8.cuh says why); what changes is the instruction and what C holds.
// Predicted: on an H100, mma.sync is the Ampere path: tc_mma_pipeline's
// fraction of the wgmma rate, doubled by the doubled K per instruction
// (docs/lowp-ladder.md has the arithmetic). Measurement: pending a GPU run.

#include "mma8.cuh"

template <typename T, int BM, int BN, int WM, int WN, int STAGES>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
tc_int8_mma(const signed char* __restrict__ a, const signed char* __restrict__ b, int* __restrict__ c, int m, int n,
            int k) {
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles tile the block tile");
    extern __shared__ __align__(128) unsigned char ring[];

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    int acc[WM / 16][WN / 8][4] = {};

    cp_async_ring<BM, BN, STAGES, THREADS>(
        ring, reinterpret_cast<const unsigned char*>(a), reinterpret_cast<const unsigned char*>(b), row0, col0, m, n,
        k, [&](int, const unsigned char* a_tile, const unsigned char* b_tile) {
            mma8_warp_tile<T, WM, WN>(acc, a_tile, b_tile, wrow, wcol, lane);
        });
#pragma unroll
    for (int i = 0; i < WM / 16; ++i)
#pragma unroll
        for (int j = 0; j < WN / 8; ++j) {
            const int r = row0 + wrow + 16 * i + lane / 4, cc = col0 + wcol + 8 * j + 2 * (lane % 4);
            store_int_pair(c, m, n, r, cc, acc[i][j][0], acc[i][j][1]);
            store_int_pair(c, m, n, r + 8, cc, acc[i][j][2], acc[i][j][3]);
        }
}
