// Shared by the tensor-core peak kernels (mma_sync.cu, wgmma.cu): operand
// bits that look like data. Include after tc_common.cuh (directly or through
// wgmma.cuh), which declares the element-type tags.
//
// Values in +-[0.5, 1) with random mantissas: the tensor cores switch as many
// bits as with real data (all zeros would draw less power and let the clock
// run higher than any real product can), and each product adds a bounded
// amount to the FP32 accumulators, so none overflows in any launch.

// A 32-bit mix of the seed and a position (the finaliser of MurmurHash3).
__device__ __forceinline__ unsigned peak_hash(unsigned x) {
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    return x ^ (x >> 16);
}

// One 32-bit register (or shared-memory word) of operands of type T, from a hash.
template <typename T>
__device__ __forceinline__ unsigned peak_operand(unsigned hash);

template <>
__device__ __forceinline__ unsigned peak_operand<gl_bf16>(unsigned hash) {
    // Two bf16: sign, 8 exponent bits (126: [0.5, 1)), 7 mantissa bits.
    const unsigned lo = (hash & 0x8000u) | 0x3F00u | (hash & 0x7Fu);
    const unsigned hi = ((hash >> 16) & 0x8000u) | 0x3F00u | ((hash >> 16) & 0x7Fu);
    return lo | (hi << 16);
}

template <>
__device__ __forceinline__ unsigned peak_operand<gl_fp16>(unsigned hash) {
    // Two fp16: sign, 5 exponent bits (14: [0.5, 1)), 10 mantissa bits.
    const unsigned lo = (hash & 0x8000u) | 0x3800u | (hash & 0x3FFu);
    const unsigned hi = ((hash >> 16) & 0x8000u) | 0x3800u | ((hash >> 16) & 0x3FFu);
    return lo | (hi << 16);
}

template <>
__device__ __forceinline__ unsigned peak_operand<gl_tf32>(unsigned hash) {
    // One tf32, read from float32 bits: sign, exponent 126, random mantissa.
    return (hash & 0x80000000u) | 0x3F000000u | (hash & 0x7FFFFFu);
}
