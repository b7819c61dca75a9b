// Shared by every rung of the tensor-core ladder: the input types, 16-byte
// copies, ldmatrix and mma.sync. Everything is inline PTX, so a kernel needs
// no CUDA header (NVRTC runs with no include path) and a student reads the
// instruction the hardware runs, not a wrapper around it.
//
// Layout of every rung: C (M x N, float32, row-major) = A . B^T, with A stored
// M x K and B stored N x K, both row-major, so that both operands are
// "K-major": consecutive elements of a row run along K. That is the layout
// the tensor cores read without a transpose (wgmma takes tf32 only that way),
// and the one of a linear layer, y = x . W^T.
#ifndef GEMMLAB_TENSOR_TC_COMMON_CUH
#define GEMMLAB_TENSOR_TC_COMMON_CUH

// The element types, as tags: `storage` is what A and B hold in memory.
// bf16 and fp16 are 16-bit patterns; tf32 inputs are ordinary float32 that
// the tensor cores read with a 10-bit mantissa. `inputs` names the tag of the
// multiply (the tensor-core instruction), `c_storage` what C holds: float32,
// except for gl_bf16_out, whose C is bfloat16 (bit patterns, like its inputs).
struct gl_bf16 { using storage = unsigned short; using inputs = gl_bf16; using c_storage = float; };
struct gl_fp16 { using storage = unsigned short; using inputs = gl_fp16; using c_storage = float; };
struct gl_tf32 { using storage = float; using inputs = gl_tf32; using c_storage = float; };
struct gl_bf16_out { using storage = unsigned short; using inputs = gl_bf16; using c_storage = unsigned short; };

#include "../dependent_launch.cuh"

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared without a register on the way (sm_80), or 16 zero
// bytes when !valid (src is then not read): the tile edges of any M, N, K.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(valid ? 16 : 0) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

// Four 8 x 8 matrices of 16-bit elements from shared memory, one per group of
// 8 lanes: lane l gives the address of one 16-byte row (row l % 8 of matrix
// l / 8) and receives, per matrix, the two elements of row l / 4 at columns
// 2 (l % 4) and 2 (l % 4) + 1: the fragment layout mma.sync expects.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* row_address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(row_address)));
}

// D (16 x 8, float32) += A (16 x 16) . B (16 x 8) on the tensor cores, for one
// warp. a: the 4 registers of ldmatrix_x4 over A's 16 x 16; b: 2 registers
// (two 8 x 8 matrices of B^T, k 0-7 and 8-15); d[0..1] are row l / 4 and
// d[2..3] row l / 4 + 8, columns 2 (l % 4) and 2 (l % 4) + 1.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1);

template <>
__device__ __forceinline__ void mma_16816<gl_bf16>(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma_16816<gl_fp16>(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Round a float32 to tf32 (nearest, ties away), the rounding cuBLAS uses; the
// tensor cores would otherwise drop the low 13 mantissa bits (truncation).
__device__ __forceinline__ unsigned to_tf32(unsigned bits) {
    unsigned out;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(out) : "f"(__uint_as_float(bits)));
    return out;
}

// Store two adjacent float32 outputs of row `row` (columns col, col + 1) of C,
// each only if inside M x N; one 8-byte store when both are and C allows it.
__device__ __forceinline__ void store_pair(float* c, int m, int n, int row, int col, float v0, float v1) {
    if (row >= m) return;
    float* p = c + static_cast<long long>(row) * n + col;
    if (col + 1 < n && (n % 2) == 0) {
        *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
    } else {
        if (col < n) p[0] = v0;
        if (col + 1 < n) p[1] = v1;
    }
}

// Two float32 values rounded to nearest even as bfloat16, v0 in the low half
// (the lower address once stored), v1 in the high (cvt packs its first operand high).
__device__ __forceinline__ unsigned pack_bf16x2(float v0, float v1) {
    unsigned packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(v1), "f"(v0));
    return packed;
}

// The same for a bfloat16 C (bit patterns): the pair rounded to nearest even,
// one 4-byte store when both are inside and C allows it.
__device__ __forceinline__ void store_pair(unsigned short* c, int m, int n, int row, int col, float v0, float v1) {
    if (row >= m) return;
    unsigned short* p = c + static_cast<long long>(row) * n + col;
    const unsigned packed = pack_bf16x2(v0, v1);
    if (col + 1 < n && (n % 2) == 0) {
        *reinterpret_cast<unsigned*>(p) = packed;
    } else {
        if (col < n) p[0] = static_cast<unsigned short>(packed & 0xFFFFu);
        if (col + 1 < n) p[1] = static_cast<unsigned short>(packed >> 16);
    }
}

#endif  // GEMMLAB_TENSOR_TC_COMMON_CUH
