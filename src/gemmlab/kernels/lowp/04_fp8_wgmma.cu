// tc_fp8_wgmma: tc_int8_wgmma in FP8 (e4m3 or e5m2), with per-tensor or
// per-row/column scales applied in the epilogue, and a choice the 16-bit
// rungs never had to make: PROMOTE. Hopper's FP8 wgmma adds its products into
// the accumulator with about 14 significant bits, not FP32's 24 (DeepSeek-V3,
// section 3.3.2). With PROMOTE = 1 each consumer runs the 4 wgmma steps of a
// 128-K tile into a fresh partial slab, waits for them, and adds the partial
// into FP32 registers: the tensor cores' short sums stay 128 K long. With
// PROMOTE = 0 the tensor cores sum all of K, as the 16-bit rungs do.
// Source: not from the documents; promotion as in DeepGEMM and CUTLASS's
// "fast accumulation off". Launch: as tc_int8_wgmma, plus scale_a and scale_b;
// SCALING (0 per tensor, 1 per row/column) and PROMOTE are configuration
// arguments. PROMOTE needs BN = 128 (two 64 x 128 slabs per thread).
// Should teach: the error of PROMOTE = 0 grows with K (tests/test_gpu_lowp.py
// shows both); promotion costs a wgmma wait per tile, which the second
// consumer warpgroup hides by computing while the first promotes.
// Predicted: PROMOTE = 0 near twice tc_int8_wgmma's per-byte work, i.e. the
// same share of its 1979 TFLOP/s peak; PROMOTE = 1 some 10% below
// (docs/lowp-ladder.md). Measurement: pending a GPU run.
// Synchronisation: tc_int8_wgmma's; with PROMOTE a consumer releases each
// stage once wgmma.wait_group<0> says the wgmma that read it has completed.

#include "../tensor/tma.cuh"
#include "../tensor/wgmma.cuh"
#include "../tensor/pipeline.cuh"
#include "wgmma8.cuh"

template <typename T, int BM, int BN, int STAGES, int SCALING, int PROMOTE, int PRODUCER_REGS, int CONSUMER_REGS>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1)
tc_fp8_wgmma(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
             float* __restrict__ c, const float* __restrict__ scale_a, const float* __restrict__ scale_b, int m, int n,
             int k) {
    constexpr int BK = TMA_ROW_BYTES;
    constexpr int A_BYTES = BM * TMA_ROW_BYTES, B_BYTES = BN * TMA_ROW_BYTES;
    static_assert(BM % 64 == 0 && (BN == 128 || BN == 256), "64-row warpgroup slabs; N of one wgmma");
    static_assert(SCALING == SCALE_TENSOR || SCALING == SCALE_ROWCOL, "block scales: tc_fp8_blockscaled");
    static_assert(!PROMOTE || BN == 128, "two 64 x BN slabs per thread fit only for BN = 128");
    extern __shared__ __align__(1024) unsigned char smem[];
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tiles = (k + BK - 1) / BK;
    warp_specialized_tile<BM, BN, BK, STAGES, PRODUCER_REGS, CONSUMER_REGS>(
        smem, &a_map, &b_map, row0, col0, tiles,
        [&](unsigned long long* full, unsigned long long* empty, int slab, int thread) {
            float acc[BN / 2] = {};
            if constexpr (PROMOTE) {
                consume_k_promoted<T, BN, STAGES, A_BYTES, B_BYTES>(smem, full, empty, slab, thread, tiles, [&](int) {
                    return [&](const float (&part)[BN / 2]) {
#pragma unroll
                        for (int i = 0; i < BN / 2; ++i) acc[i] += part[i];
                    };
                });
                fence_registers(acc);
            } else {
                consume_k_slice<T, BN, STAGES, A_BYTES, B_BYTES>(acc, smem, full, empty, slab, thread, 0, tiles);
            }
            store_wgmma_scaled<SCALING, BN>(acc, c, scale_a, scale_b, m, n, row0 + slab * 64, col0, thread);
        });
}
