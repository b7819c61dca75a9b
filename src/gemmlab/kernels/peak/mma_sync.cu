// peak_mma: the warp-level tensor-core instruction's measured peak (gemmlab
// peak, see gemmlab/peak.py): mma.sync m16n8k16 for bf16 and fp16, m16n8k8
// for tf32, FP32 accumulators, the instruction of tc_wmma, tc_mma and
// tc_mma_pipeline.
// Every warp holds one A and one B fragment in registers and ACC independent
// accumulators; each loop iteration issues ACC x UNROLL mma.sync, one after the
// other into accumulators 0, 1, ..., ACC - 1, so consecutive instructions never
// wait for each other. No shared or global memory in the loop: the fragments
// stay in registers, since the point is the tensor cores' rate, not feeding them.
// Launch: THREADS per block, as many blocks as fit on an SM, times the SMs.
// Should teach: on Hopper the tensor cores' nominal rate is wgmma's; compare
// this family's rate with the wgmma family's on the same GPU.

#include "../tensor/tc_common.cuh"
#include "operands.cuh"

// One mma.sync of the element type's shape: 16 x 8 x 16 for the 16-bit types
// (tc_common.cuh's mma_16816), 16 x 8 x 8 for tf32, whose A fragment is four
// 32-bit registers and B two, as for the 16-bit types.
template <typename T>
__device__ __forceinline__ void peak_mma_step(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    mma_16816<T>(d, a, b[0], b[1]);
}

template <>
__device__ __forceinline__ void peak_mma_step<gl_tf32>(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <typename T, int THREADS, int ACC, int UNROLL>
__global__ void __launch_bounds__(THREADS) peak_mma(float* __restrict__ out, int iterations, unsigned seed) {
    const unsigned thread = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[4], b[2];
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = peak_operand<T>(peak_hash(seed ^ (thread * 8 + i)));
#pragma unroll
    for (int i = 0; i < 2; ++i) b[i] = peak_operand<T>(peak_hash(seed ^ (thread * 8 + 4 + i)));
    float d[ACC][4] = {};

    // unroll 1: one iteration is exactly ACC x UNROLL mma.sync, the count gemmlab.peak multiplies by.
#pragma unroll 1
    for (int it = 0; it < iterations; ++it) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
            for (int j = 0; j < ACC; ++j) peak_mma_step<T>(d[j], a, b);
        }
    }

    // Every accumulator reaches the store, so no mma.sync of any iteration can be left out.
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < ACC; ++j) sum += (d[j][0] + d[j][1]) + (d[j][2] + d[j][3]);
    out[thread] = sum;
}
