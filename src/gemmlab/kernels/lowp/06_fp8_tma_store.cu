// tc_fp8_tma_store: tc_fp8_wgmma (per-tensor or row/column scales, promotion every 128 K)
// built as the tensor ladder's tc_tma_store: persistent blocks over tiles in
// GROUP_M-row groups, clusters of CLUSTER blocks sharing B by multicast, a
// STAGES-deep TMA ring, setmaxnreg, and C (float32, or bfloat16 for
// e4m3-bf16) stored by TMA from swizzled shared-memory boxes, the scales
// applied on the way out. Promotion every 128 K as tc_fp8_wgmma's PROMOTE = 1
// (fp8_persistent.cuh).
// Source: not from the documents; promotion as DeepGEMM and CUTLASS's FP8
// "fast accumulation off". Launch: as tc_tma_store (resident blocks, whole
// clusters); A, B and C as TMA tensor maps, then scale_a and scale_b ([1] each, or [M] and [N] with SCALING = 1), M,
// N, K; STAGES x (BM + BN) x 128 + BM / 64 x C_BOXES x 8 KB of dynamic shared
// memory and 2 barriers per stage. BN 128, 144 or 192 (one pass) or 256 (two 128-column passes).
// K a multiple of 16; N a multiple of 4 (float32 C) or 8 (bfloat16 C), the
// C tensor map's 16-byte rows.
// Should teach: what held tc_fp8_wgmma at 962 TFLOP/s at 8192 was not the
// tensor cores alone: every tile paid its start (an empty ring) and its
// epilogue (64 KB of float32 C through per-thread stores) with the tensor
// cores idle, and a 4-stage ring drains in 1.1 us at FP8's rate. docs/lowp-ladder.md has the arithmetic.
// Predicted: 1150-1450 TFLOP/s at 8192 (docs/lowp-ladder.md, rung 6).
// Measured (docs/lowp-ladder.md, rounds 4 to 10, which have each change's
// figures): after round 10 (descriptors in uniform registers; H200), the
// tuner's best 100.8% of cuBLASLt at 8192 with a float32 C, 101.4% with a
// bfloat16 C (766 us, 1435 TFLOP/s), 104-107% at 4096.
// Synchronisation: tc_tma_store's; see fp8_persistent.cuh.

#include "fp8_persistent.cuh"

template <typename T, int BM, int BN, int STAGES, int GROUP_M, int CLUSTER, int C_BOXES, int PROMOTE_K,
          int STAGGER, int SCALING, int PRODUCER_REGS, int CONSUMER_REGS, int C_BOX_ROWS>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1)
tc_fp8_tma_store(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                 const __grid_constant__ CUtensorMap c_map, const float* __restrict__ scale_a,
                 const float* __restrict__ scale_b, int m, int n, int k) {
    extern __shared__ __align__(1024) unsigned char smem[];
    fp8_persistent<T, SCALING, BM, BN, STAGES, GROUP_M, CLUSTER, C_BOXES, PRODUCER_REGS, CONSUMER_REGS,
                   C_BOX_ROWS, PROMOTE_K, STAGGER>(smem, &a_map, &b_map, &c_map, scale_a, scale_b, m, n, k);
}
