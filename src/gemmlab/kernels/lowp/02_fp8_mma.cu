// tc_fp8_mma: tc_int8_mma in FP8 (e4m3 or e5m2) with scales. The tensor
// cores sum one tile's 128 K into fresh registers; the kernel then adds that
// partial sum into FP32 accumulators ("promotion"), times the K block's
// scales when the scaling is by blocks (a tile is exactly one 128-wide scale
// block). Per-tensor and per-row/column scales multiply C in the epilogue.
// Source: not from the documents; the scaling modes are those of
// torch._scaled_mm and DeepGEMM. Launch: as tc_int8_mma, plus scale_a and
// scale_b (problems/lowp.py lays them out; SCALING, the last configuration
// argument, says how: 0 per tensor, 1 per row/column, 2 by blocks). K a
// multiple of 16, any M and N. sm_89 and newer (FP8 mma.sync).
// Should teach: FP8 values are meaningless without their scales; where the
// scales change along K they cannot wait for the epilogue, and the promotion
// that applies them also keeps the tensor cores' short sums short.
// Predicted: tc_int8_mma's rate less the promotion's FP32 work, a few per
// cent (WM x WN / 32 FMAs per thread per tile against 4 x (WM / 16) x
// (WN / 8) mma.sync). Measurement: pending a GPU run.

#include "mma8.cuh"

template <typename T, int BM, int BN, int WM, int WN, int STAGES, int SCALING>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
tc_fp8_mma(const unsigned char* __restrict__ a, const unsigned char* __restrict__ b, float* __restrict__ c,
           const float* __restrict__ scale_a, const float* __restrict__ scale_b, int m, int n, int k) {
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles tile the block tile");
    static_assert(TILE_K == SCALE_BLOCK, "one tile is one K block of the scales");
    static_assert(SCALING >= SCALE_TENSOR && SCALING <= SCALE_BLOCKS, "a scaling mode of types8.cuh");
    extern __shared__ __align__(128) unsigned char ring[];

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int row0 = blockIdx.y * BM + wrow, col0 = blockIdx.x * BN + wcol;  // this warp's corner of C
    float acc[WM / 16][WN / 8][4] = {};

    cp_async_ring<BM, BN, STAGES, THREADS>(
        ring, a, b, blockIdx.y * BM, blockIdx.x * BN, m, n, k,
        [&](int t, const unsigned char* a_tile, const unsigned char* b_tile) {
            float part[WM / 16][WN / 8][4] = {};
            mma8_warp_tile<T, WM, WN>(part, a_tile, b_tile, wrow, wcol, lane);
#pragma unroll
            for (int i = 0; i < WM / 16; ++i)
#pragma unroll
                for (int j = 0; j < WN / 8; ++j)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {  // rows g and g + 8; columns 2 (lane % 4) + {0, 1} share a block
                        const int r = row0 + 16 * i + lane / 4 + 8 * h, cc = col0 + 8 * j + 2 * (lane % 4);
                        const float f =
                            SCALING == SCALE_BLOCKS ? block_scale(scale_a, scale_b, m, n, t, r, cc) : 1.f;
                        acc[i][j][2 * h] += f * part[i][j][2 * h];
                        acc[i][j][2 * h + 1] += f * part[i][j][2 * h + 1];
                    }
        });
#pragma unroll
    for (int i = 0; i < WM / 16; ++i)
#pragma unroll
        for (int j = 0; j < WN / 8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = row0 + 16 * i + lane / 4 + 8 * h, cc = col0 + 8 * j + 2 * (lane % 4);
                store_pair(c, m, n, r, cc, acc[i][j][2 * h] * epilogue_scale<SCALING>(scale_a, scale_b, m, n, r, cc),
                           acc[i][j][2 * h + 1] * epilogue_scale<SCALING>(scale_a, scale_b, m, n, r, cc + 1));
            }
}
