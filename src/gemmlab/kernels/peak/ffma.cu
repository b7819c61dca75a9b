// peak_ffma: the FP32 pipe's measured peak (gemmlab peak, see gemmlab/peak.py).
// Every thread runs CHAINS independent chains x = x * A + B, UNROLL steps per
// loop iteration; nothing else runs in the loop, and nothing touches memory
// until the sums are stored at the end.
// Launch: THREADS per block, as many blocks as the driver's occupancy
// calculator puts on an SM, times the SMs; all of them resident at once, so
// they start and end together.
// Why this shape: a sub-partition of an SM issues one warp instruction per
// clock, and with 32 FP32 lanes (sm_86, sm_89, sm_90) a warp FFMA takes all of
// them for that clock; its result is ready about 4 clocks later. Full
// occupancy gives each sub-partition 16 warps, each with CHAINS independent
// FFMAs, far more than the latency needs. What costs rate is any other
// instruction: the loop's counter, compare and branch take issue slots, once
// per CHAINS x UNROLL FFMAs.
// Should teach: the FP32 peak is reachable, and what it takes: only FFMAs.

// A = 1 - 2^-20 and B = 2^-20: each step takes a chain 2^-20 of its distance
// closer to 1. Started in [1.5, 2), a chain is still above 1.15 after a million
// steps (a launch of LAUNCH_MS makes fewer), so nothing overflows or turns
// denormal and every result differs from the last, as a real kernel's do
// (identical bits cost less power). Neither constant is 0 or 1, which the
// compiler would turn into something cheaper than an FFMA. The starting values
// come from the seed at run time, as float32 bits (no FFMA: the cubin's FFMAs
// are the loop's), so the compiler cannot evaluate the chains itself.
constexpr float PEAK_FFMA_A = 1.0f - 1.0f / 1048576.0f;
constexpr float PEAK_FFMA_B = 1.0f / 1048576.0f;

template <int THREADS, int CHAINS, int UNROLL>
__global__ void __launch_bounds__(THREADS) peak_ffma(float* __restrict__ out, int iterations, unsigned seed) {
    const unsigned thread = blockIdx.x * blockDim.x + threadIdx.x;
    float x[CHAINS];
#pragma unroll
    for (int i = 0; i < CHAINS; ++i) x[i] = __uint_as_float(0x3FC00000u | ((seed + thread * CHAINS + i) & 0x3FFFFFu));

    // unroll 1: one iteration is exactly CHAINS x UNROLL FFMAs, the count gemmlab.peak multiplies by.
#pragma unroll 1
    for (int it = 0; it < iterations; ++it) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
            for (int i = 0; i < CHAINS; ++i) x[i] = fmaf(x[i], PEAK_FFMA_A, PEAK_FFMA_B);
        }
    }

    // Every chain reaches the store, so no FFMA of any iteration can be left out.
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < CHAINS; ++i) sum += x[i];
    out[thread] = sum;
}
