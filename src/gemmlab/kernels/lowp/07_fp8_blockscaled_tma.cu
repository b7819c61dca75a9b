// tc_fp8_blockscaled_tma: tc_fp8_tma_store with DeepGEMM's scales (1 x 128
// blocks of A, 128 x 128 blocks of B), as tc_fp8_blockscaled has them. A
// K tile is one K block, and a pass one block of B's columns, so each
// promotion multiplies its partial by scale_a[kb][row] x scale_b[kb][pass's
// column block]: one FFMA per sum where the per-tensor rung has one FADD.
// The scales reach shared memory with each stage, copied by a scale warp
// with cp.async (fp8_persistent.cuh).
// Source: not from the documents; the scaling of DeepSeek-V3 and DeepGEMM.
// Launch: as tc_fp8_tma_store, with STAGES x (BM + 4) floats of scales and
// STAGES more barriers (scales_free) of shared memory; scale_a holds ceil(K / 128) x M floats and scale_b
// ceil(K / 128) x ceil(N / 128), K block first (problems/lowp.py).
// Should teach: once partial sums are promoted anyway, block scales cost one
// FFMA where the per-tensor rung has one FADD: nothing the tensor cores see.
// Predicted: within 3% of tc_fp8_tma_store (docs/lowp-ladder.md, rung 7).
// Measured (docs/lowp-ladder.md, rounds 5, 6 and 10, which have each change's
// figures; round 5 has why the scales are staged by a scale warp): after
// round 6 (the next group prepared during the current one), 897-898 us at
// 8192 and 126-128 us at 4096, 93% of the per-tensor rung and 95-98% of
// cuBLASLt's block-scaled product (torch._scaled_mm; float32 C, H100 and H200).
// Synchronisation: tc_fp8_tma_store's, the scale warp's arrivals on each
// full barrier, and the consumer warps' on scales_free before the scale
// warp overwrites a stage's scales (argued in fp8_persistent.cuh).

#include "fp8_persistent.cuh"

template <typename T, int BM, int BN, int STAGES, int GROUP_M, int CLUSTER, int C_BOXES, int STAGGER, int PRODUCER_REGS,
          int CONSUMER_REGS, int C_BOX_ROWS>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1)
tc_fp8_blockscaled_tma(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                       const __grid_constant__ CUtensorMap c_map, const float* __restrict__ scale_a,
                       const float* __restrict__ scale_b, int m, int n, int k) {
    extern __shared__ __align__(1024) unsigned char smem[];
    fp8_persistent<T, SCALE_BLOCKS, BM, BN, STAGES, GROUP_M, CLUSTER, C_BOXES, PRODUCER_REGS, CONSUMER_REGS,
                   C_BOX_ROWS, SCALE_BLOCK, STAGGER>(smem, &a_map, &b_map, &c_map, scale_a, scale_b, m, n, k);
}
