// tc_fp8_blockscaled: tc_fp8_wgmma with DeepGEMM's scales: one per row of A
// per 128-wide K block (1 x 128), one per 128 x 128 block of B. A scale that
// changes along K cannot wait for the epilogue: each 128-K tile's partial
// sum leaves the tensor cores and is added into FP32 registers times
// scale_a[kb][row] x scale_b[kb][column block]. That is tc_fp8_wgmma's
// promotion, now required rather than chosen, so this rung has no PROMOTE:
// the scales of a K block exist only for the partial sum of that block.
// Source: not from the documents; the scaling of DeepSeek-V3 and DeepGEMM.
// Launch: as tc_fp8_wgmma with BN = 128 (a tile's columns share one block of
// B's scales); scale_a holds ceil(K / 128) x M floats and scale_b
// ceil(K / 128) x ceil(N / 128), K block first (problems/lowp.py).
// Should teach: fine-grained scales cost little when their block is the
// tile's K: two loads of scale_a and one of scale_b per thread per tile, and
// BN / 2 multiply-adds more than plain promotion.
// Predicted: within a few per cent of tc_fp8_wgmma with PROMOTE = 1 (the
// issue's target: 90% of the per-tensor rate). Measurement: pending a GPU run.
// Synchronisation: tc_fp8_wgmma's with PROMOTE = 1.

#include "../tensor/tma.cuh"
#include "../tensor/wgmma.cuh"
#include "../tensor/pipeline.cuh"
#include "wgmma8.cuh"

template <typename T, int BM, int BN, int STAGES, int PRODUCER_REGS, int CONSUMER_REGS>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1)
tc_fp8_blockscaled(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                   float* __restrict__ c, const float* __restrict__ scale_a, const float* __restrict__ scale_b, int m,
                   int n, int k) {
    constexpr int BK = TMA_ROW_BYTES;
    constexpr int A_BYTES = BM * TMA_ROW_BYTES, B_BYTES = BN * TMA_ROW_BYTES;
    static_assert(BM % 64 == 0 && BN == SCALE_BLOCK, "64-row warpgroup slabs; one block of B's scales per tile");
    static_assert(BK == SCALE_BLOCK, "one tile is one K block of the scales");
    extern __shared__ __align__(1024) unsigned char smem[];
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tiles = (k + BK - 1) / BK;
    warp_specialized_tile<BM, BN, BK, STAGES, PRODUCER_REGS, CONSUMER_REGS>(
        smem, &a_map, &b_map, row0, col0, tiles,
        [&](unsigned long long* full, unsigned long long* empty, int slab, int thread) {
            // This thread's two rows of C (the accumulator fragment's g and g + 8) and the tile's first column.
            const int row = row0 + slab * 64 + 16 * (thread / 32) + (thread % 32) / 4;
            float acc[BN / 2] = {};
            consume_k_promoted<T, BN, STAGES, A_BYTES, B_BYTES>(smem, full, empty, slab, thread, tiles, [&](int t) {
                // The K block's scales, read while the tensor cores work (0 for rows past M: nothing is stored there).
                const float lo = block_scale(scale_a, scale_b, m, n, t, row, col0);
                const float hi = block_scale(scale_a, scale_b, m, n, t, row + 8, col0);
                return [&acc, lo, hi](const float (&part)[BN / 2]) {
#pragma unroll
                    for (int j = 0; j < BN / 8; ++j) {
                        acc[4 * j] += lo * part[4 * j];
                        acc[4 * j + 1] += lo * part[4 * j + 1];
                        acc[4 * j + 2] += hi * part[4 * j + 2];
                        acc[4 * j + 3] += hi * part[4 * j + 3];
                    }
                };
            });
            fence_registers(acc);
            store_wgmma_scaled<SCALE_BLOCKS, BN>(acc, c, scale_a, scale_b, m, n, row0 + slab * 64, col0, thread);
        });
}
