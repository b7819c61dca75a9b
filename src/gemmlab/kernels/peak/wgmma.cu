// peak_wgmma: Hopper's warpgroup tensor-core instruction's measured peak
// (gemmlab peak, see gemmlab/peak.py; sm_90a): wgmma m64n256k16 for bf16 and
// fp16, m64n256k8 for tf32, both operands read from shared memory through
// descriptors, FP32 accumulators: the instruction of tc_wgmma .. tc_cluster.
// One 64-row A slab and one 256-row B tile (40 KB, 128-byte swizzled rows as
// TMA writes them) are filled once; then each of CONSUMERS warpgroups issues,
// per loop iteration, one group of 4 wgmma over the tiles' 128-byte rows
// (wgmma.cuh's wgmma_slice, the rungs' own inner loop), commits it and waits
// only for the group before, so one group runs while the next is issued. The
// warpgroups share the tiles: which values they multiply does not matter.
// Launch: CONSUMERS x 128 threads per block; the 64 x 256 accumulators take
// 128 registers per thread, so one block fits an SM; one block per SM.
// Should teach: with nothing to load, how close wgmma comes to the tensor
// cores' nominal rate, and at what clock the GPU holds it.

#include "../tensor/tma.cuh"
#include "../tensor/wgmma.cuh"
#include "operands.cuh"

constexpr int PEAK_WGMMA_N = 256;  // the widest wgmma: the fewest instructions per FLOP
constexpr int PEAK_A_ROWS = 64;    // one warpgroup's slab of A

template <typename T, int CONSUMERS>
__global__ void __launch_bounds__(CONSUMERS * 128, 1) peak_wgmma(float* __restrict__ out, int iterations,
                                                                 unsigned seed) {
    // 1024-byte alignment: the 128-byte swizzle repeats every 8 rows, and the
    // descriptor's pattern must line up with the addresses (see tma.cuh).
    __shared__ __align__(1024) unsigned char tiles[(PEAK_A_ROWS + PEAK_WGMMA_N) * TMA_ROW_BYTES];
    unsigned* words = reinterpret_cast<unsigned*>(tiles);
    for (int i = threadIdx.x; i < static_cast<int>(sizeof(tiles) / 4); i += blockDim.x)
        words[i] = peak_operand<T>(peak_hash(seed ^ static_cast<unsigned>(i)));
    // wgmma reads shared memory through the async proxy: the ordinary stores
    // above must be made visible to it before any warpgroup starts.
    fence_proxy_async_shared();
    __syncthreads();

    float acc[PEAK_WGMMA_N / 2] = {};
    // unroll 1: one iteration is exactly one group of 4 wgmma per warpgroup, the count gemmlab.peak multiplies by.
#pragma unroll 1
    for (int it = 0; it < iterations; ++it) {
        wgmma_fence();
        wgmma_slice<T, PEAK_WGMMA_N>(acc, tiles, tiles + PEAK_A_ROWS * TMA_ROW_BYTES);
        wgmma_commit();
        wgmma_wait<1>();
    }
    wgmma_wait<0>();
    fence_registers(acc);

    // Every accumulator reaches the store, so no wgmma of any iteration can be left out.
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < PEAK_WGMMA_N / 2; ++i) sum += acc[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
