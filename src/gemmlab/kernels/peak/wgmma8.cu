// peak_wgmma8: wgmma.cu's measurement in 8 bits (sm_90a): m64n256k32 in FP8
// (e4m3, e5m2 and the mixed e5m2 x e4m3; FP32 sums) and in s8 (int32 sums),
// both operands from shared memory, the instruction of tc_int8_wgmma,
// tc_fp8_wgmma and the persistent FP8 rungs.
// As wgmma.cu: one 64-row A slab and a 256-row B tile filled once, then each
// of CONSUMERS warpgroups issues one group of 4 wgmma (a 128-byte row of K)
// per iteration, keeping one group in flight while the next is issued.
// Should teach: whether 8-bit wgmma reaches twice the 16-bit rate that the
// datasheet promises when its operands come from shared memory, so that the
// 8-bit rungs' shares are taken against what the instruction can do.

#include "../lowp/wgmma8.cuh"
#include "operands.cuh"
#include "operands8.cuh"

constexpr int PEAK_WGMMA_N = 256;
constexpr int PEAK_A_ROWS = 64;

// One 128-byte row of K: FP8 through wgmma.cuh's wgmma_slice, int8 through wgmma8.cuh's.
template <typename T>
__device__ __forceinline__ void peak8_slice(float (&d)[PEAK_WGMMA_N / 2], const void* a, const void* b) {
    wgmma_slice<T, PEAK_WGMMA_N>(d, a, b);
}
template <typename T>
__device__ __forceinline__ void peak8_slice(int (&d)[PEAK_WGMMA_N / 2], const void* a, const void* b) {
    wgmma_s8_slice<PEAK_WGMMA_N>(d, a, b);
}
__device__ __forceinline__ void peak8_fence(float (&d)[PEAK_WGMMA_N / 2]) { fence_registers(d); }
__device__ __forceinline__ void peak8_fence(int (&d)[PEAK_WGMMA_N / 2]) { fence_int_registers(d); }

template <typename T, int CONSUMERS>
__global__ void __launch_bounds__(CONSUMERS * 128, 1) peak_wgmma8(float* __restrict__ out, int iterations,
                                                                  unsigned seed) {
    __shared__ __align__(1024) unsigned char tiles[(PEAK_A_ROWS + PEAK_WGMMA_N) * TMA_ROW_BYTES];
    unsigned* words = reinterpret_cast<unsigned*>(tiles);
    for (int i = threadIdx.x; i < static_cast<int>(sizeof(tiles) / 4); i += blockDim.x)
        words[i] = peak_operand8<T>(peak_hash(seed ^ static_cast<unsigned>(i)));
    fence_proxy_async_shared();
    __syncthreads();

    typename T::acc acc[PEAK_WGMMA_N / 2] = {};
    // unroll 1: one iteration is exactly one group of 4 wgmma per warpgroup, the count gemmlab.peak multiplies by.
#pragma unroll 1
    for (int it = 0; it < iterations; ++it) {
        wgmma_fence();
        peak8_slice<T>(acc, tiles, tiles + PEAK_A_ROWS * TMA_ROW_BYTES);
        wgmma_commit();
        wgmma_wait<1>();
    }
    wgmma_wait<0>();
    peak8_fence(acc);

    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < PEAK_WGMMA_N / 2; ++i) sum += peak_value(acc[i]);
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
