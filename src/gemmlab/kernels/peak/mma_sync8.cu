// peak_mma8: mma_sync.cu's measurement in 8 bits: mma.sync m16n8k32 in s8
// (int32 sums, compute capability 8.0 on) and e4m3 (FP32 sums, 8.9 only:
// Hopper has FP8 tensor cores behind wgmma alone, and ptxas turns FP8
// mma.sync there into conversions and float16 HMMA, so gemmlab.measure.peak
// does not offer it on 9.0). The instruction of tc_int8_mma and tc_fp8_mma.
// As mma_sync.cu: fragments in registers, ACC independent accumulators per
// warp, ACC x UNROLL instructions per iteration, no memory in the loop.

#include "../lowp/mma8.cuh"
#include "operands.cuh"
#include "operands8.cuh"

template <typename T, int THREADS, int ACC, int UNROLL>
__global__ void __launch_bounds__(THREADS) peak_mma8(float* __restrict__ out, int iterations, unsigned seed) {
    const unsigned thread = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a[4], b[2];
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = peak_operand8<T>(peak_hash(seed ^ (thread * 8 + i)));
#pragma unroll
    for (int i = 0; i < 2; ++i) b[i] = peak_operand8<T>(peak_hash(seed ^ (thread * 8 + 4 + i)));
    typename T::acc d[ACC][4] = {};

    // unroll 1: one iteration is exactly ACC x UNROLL mma.sync, the count gemmlab.peak multiplies by.
#pragma unroll 1
    for (int it = 0; it < iterations; ++it) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
            for (int j = 0; j < ACC; ++j) mma_16832<T>(d[j], a, b[0], b[1]);
        }
    }

    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < ACC; ++j) sum += (peak_value(d[j][0]) + peak_value(d[j][1])) + (peak_value(d[j][2]) + peak_value(d[j][3]));
    out[thread] = sum;
}
