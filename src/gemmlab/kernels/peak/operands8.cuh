// Operand bits of the 8-bit peak kernels (mma_sync8.cu, wgmma8.cu), as
// operands.cuh gives the 16-bit ones: four elements per 32-bit word. Include
// after types8.cuh (directly or through wgmma8.cuh / mma8.cuh).
//
// e4m3: sign, exponent 6 (of bias 7: [0.5, 1)), random mantissa, so no byte
// is NaN (S.1111.111) and sums stay bounded; e5m2 likewise with exponent 14
// (of bias 15); int8: any byte, since int32 sums wrap without harm to a
// checksum. The mixed pair (A e5m2, B e4m3) fills both tiles with e5m2's
// bytes: read as e4m3 they are S.0111.0MM, magnitudes in [1, 1.375], no NaN.

template <typename T>
__device__ __forceinline__ unsigned peak_operand8(unsigned hash);

template <>
__device__ __forceinline__ unsigned peak_operand8<gl_e4m3>(unsigned hash) {
    return (hash & 0x87878787u) | 0x30303030u;
}

template <>
__device__ __forceinline__ unsigned peak_operand8<gl_e5m2>(unsigned hash) {
    return (hash & 0x83838383u) | 0x38383838u;
}

template <>
__device__ __forceinline__ unsigned peak_operand8<gl_e5m2_e4m3>(unsigned hash) {
    return peak_operand8<gl_e5m2>(hash);
}

template <>
__device__ __forceinline__ unsigned peak_operand8<gl_s8>(unsigned hash) {
    return hash;
}

// A checksum of any accumulator type, as a float.
__device__ __forceinline__ float peak_value(float x) { return x; }
__device__ __forceinline__ float peak_value(int x) { return static_cast<float>(x); }
