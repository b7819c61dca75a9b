// Shared by the cp.async rungs (sgemm_double_buffer, sgemm_multistage,
// sgemm_swizzle_l2, sgemm_large_tile, sgemm_lean_loop, sgemm_spread_copies,
// sgemm_stream_k, sgemm_column_order):
// the cp.async wrappers, the guarded alpha/beta store, the swizzle of the transposed A
// tile, the guarded tile loader, sgemm_lean_loop's precomputed copies
// (CopyPlan), one k-slice's fragment loads and outer product (rungs 11-12
// call them a slice ahead) and, built from them, a whole tile's compute for
// rungs 8-10 (compute_tile).
// Each rung's own file holds only its pipeline (or block order), so a diff
// between neighbours still shows one idea. gemmlab inlines this file into the
// rung's source before NVRTC sees it (KernelSpec.source_text), so it is part of
// the compile-cache key.

__device__ __forceinline__ unsigned smem_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// cp.async needs compute capability 8.0. Compiled for an older GPU, the same
// helpers copy synchronously (through a register), which keeps the kernel
// correct there, without the overlap.

// Copy 4 bytes global -> shared, or write 4 zero bytes when !valid (src is then not read).
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_address(dst)), "l"(src),
                 "r"(valid ? 4 : 0) : "memory");
#else
    *static_cast<float*>(dst) = valid ? *static_cast<const float*>(src) : 0.f;
#endif
}

// Copy BYTES (4, through L1; or 16, both addresses 16-byte aligned, L2 only)
// global -> shared when `issue`; otherwise nothing at all (neither address is
// touched, unlike the zero-fill of cp_async4 and cp_async16).
template <int BYTES>
__device__ __forceinline__ void cp_async_if(void* dst, const void* src, bool issue) {
    static_assert(BYTES == 4 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes; these kernels use 4 and 16");
#if __CUDA_ARCH__ >= 800
    if (BYTES == 4) {
        asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p cp.async.ca.shared.global [%0], [%1], 4;\n}\n"
                     ::"r"(smem_address(dst)), "l"(src), "r"(static_cast<int>(issue)) : "memory");
    } else {
        asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p cp.async.cg.shared.global [%0], [%1], 16;\n}\n"
                     ::"r"(smem_address(dst)), "l"(src), "r"(static_cast<int>(issue)) : "memory");
    }
#else
    if (issue) {
        memcpy(dst, src, BYTES);
    }
#endif
}

// Copy 16 bytes global -> shared (both 16-byte aligned), or zero-fill when !valid.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src),
                 "r"(valid ? 16 : 0) : "memory");
#else
    *static_cast<float4*>(dst) = valid ? *static_cast<const float4*>(src) : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
}

// Close the group of copies issued so far by this thread.
__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Wait until at most PENDING of this thread's groups are still in flight.
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
#endif
}

#include "vec4_io.cuh"

// The XOR that spreads a float4 load's column groups over distinct banks (see
// sgemm_swizzled). Needs BK in {4, 8, 16, 32} and BM a multiple of 32, so
// that the result stays a multiple of 4 and inside the row.
template <int BK>
__device__ __forceinline__ int a_swizzle(int c) {
    static_assert(BK == 4 || BK == 8 || BK == 16 || BK == 32, "a_swizzle needs BK in {4, 8, 16, 32}");
    return (c / 4) * (128 / BK);
}

// The A tile's swizzles as types, for the helpers below: a_swizzle (rungs
// 8-12), and sgemm_spread_copies's, which moves every k-slice of a group of 8
// by a different multiple of 4 rows (shift(kk) = 4 x (kk % 8)), so that 4 rows
// x 8 consecutive k-slices land in 32 distinct banks. Both are multiples of 4
// below 32: a float4 of 4 rows starting at a multiple of 4 stays one float4.
// row(): the swizzled row of a fragment load, rows wrow + s * 16 + lrow .. + 3
// (wrow a multiple of 32, lrow of 4 below 16) at k-slice kk.
template <int BK>
struct ColumnGroupSwizzle {
    static constexpr bool PER_SLICE = false;  // the same shift for the 4 k-slices of a float4 group
    __device__ __forceinline__ static int shift(int kk) { return a_swizzle<BK>(kk); }
    __device__ __forceinline__ static int row(int wrow, int s, int lrow, int kk) {
        return (wrow + s * 16 + lrow) ^ shift(kk);
    }
};
struct SliceSwizzle {
    static constexpr bool PER_SLICE = true;
    __device__ __forceinline__ static int shift(int kk) { return 4 * (kk % 8); }
    // The same XOR, split by bits: bit 4 of the shift meets s * 16 (constants),
    // bits 2-3 meet lrow, so a thread keeps 4 values of lrow ^ (shift & 12) instead
    // of an address per (s, kk), and s and kk become constant offsets.
    __device__ __forceinline__ static int row(int wrow, int s, int lrow, int kk) {
        return wrow + ((s * 16) ^ (shift(kk) & 16)) + (lrow ^ (shift(kk) & 12));
    }
};

// Issue the copies of the BM x BK tile of A at (row0, k0) into a_tile (BK x BM,
// transposed and swizzled) and of the BK x BN tile of B at (k0, col0) into
// b_tile. Every thread copies A_VECS / THREADS groups of 4 elements of A and
// B_VECS / THREADS of B.
template <int BM, int BN, int BK, int THREADS, class SWZ = ColumnGroupSwizzle<BK>>
__device__ __forceinline__ void load_tiles(float (*a_tile)[BM], float (*b_tile)[BN], const float* __restrict__ a,
                                           const float* __restrict__ b, int row0, int col0, int k0, int m,
                                           int n, int k, bool b_vec, int tid) {
    constexpr int A_VECS = BM * BK / 4, B_VECS = BK * BN / 4;
#pragma unroll
    for (int p = 0; p < A_VECS / THREADS; ++p) {
        const int f = tid + p * THREADS;
        const int r = f / (BK / 4), c = (f % (BK / 4)) * 4;
        const int row = row0 + r, rs = r ^ SWZ::shift(c);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const bool valid = row < m && k0 + c + q < k;
            const int rq = SWZ::PER_SLICE ? r ^ SWZ::shift(c + q) : rs;
            cp_async4(&a_tile[c + q][rq], a + (valid ? row * k + k0 + c + q : 0), valid);
        }
    }
#pragma unroll
    for (int p = 0; p < B_VECS / THREADS; ++p) {
        const int f = tid + p * THREADS;
        const int r = f / (BN / 4), c = (f % (BN / 4)) * 4;
        const int row = k0 + r, col = col0 + c;
        if (b_vec) {
            const bool valid = row < k && col < n;  // n % 4 == 0: the whole float4 is inside
            cp_async16(&b_tile[r][c], b + (valid ? row * n + col : 0), valid);
        } else {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const bool valid = row < k && col + q < n;
                cp_async4(&b_tile[r][c + q], b + (valid ? row * n + col + q : 0), valid);
            }
        }
    }
}

// The copies one thread issues for every tile, worked out once: where each
// copy reads, as an element offset from the tile's corner column (A) or row
// (B), and where it lands in a stage. Rows of A past M and columns of B past N
// are clamped into the matrix. The tile's own corner (a + k0, b + k0 * n) is
// the same for every thread, so the compiler keeps it in uniform registers.
template <int BM, int BN, int BK, int THREADS>
struct CopyPlan {
    static constexpr int A_COPIES = BM * BK / 4 / THREADS, B_COPIES = BK * BN / 4 / THREADS;
    unsigned a_src[A_COPIES];  // A[min(row, m - 1)][k0 + c .. + 3] is a + k0 + a_src: four 4-byte copies
    unsigned b_src[B_COPIES];  // B[k0 + r][min(col, n - 4) .. + 3] is b + k0 * n + b_src
    int a_dst[A_COPIES];       // float offset of a_tile[c][r ^ a_swizzle(c)] in a stage
    int b_dst[B_COPIES];       // float offset of b_tile[r][c]

    // Used for a block's tiles only when B's rows are 16-byte aligned or the
    // block's columns lie inside N (col0 + BN <= n); a clamped column is then a
    // whole float4 past N.
    __device__ __forceinline__ CopyPlan(int row0, int col0, int m, int n, int k, int tid) {
#pragma unroll
        for (int p = 0; p < A_COPIES; ++p) {
            const int f = tid + p * THREADS;
            const int r = f / (BK / 4), c = (f % (BK / 4)) * 4;
            a_src[p] = static_cast<unsigned>(min(row0 + r, m - 1) * k + c);
            a_dst[p] = c * BM + (r ^ a_swizzle<BK>(c));
        }
#pragma unroll
        for (int p = 0; p < B_COPIES; ++p) {
            const int f = tid + p * THREADS;
            const int r = f / (BN / 4), c = (f % (BN / 4)) * 4;
            b_src[p] = static_cast<unsigned>(r * n + max(0, min(col0 + c, n - 4)));
            b_dst[p] = r * BN + c;
        }
    }

    // The copies of a tile that lies wholly inside K, its corner at a_k = a + k0
    // and b_k = b + k0 * n. B_VEC: B's rows are 16-byte aligned, so each piece of
    // B is one 16-byte copy, else four of 4 bytes.
    template <bool B_VEC>
    __device__ __forceinline__ void issue(float* a_stage, float* b_stage, const float* a_k, const float* b_k) const {
#pragma unroll
        for (int p = 0; p < A_COPIES; ++p) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                cp_async4(a_stage + a_dst[p] + q * BM, a_k + a_src[p] + q, true);
            }
        }
#pragma unroll
        for (int p = 0; p < B_COPIES; ++p) {
            if (B_VEC) {
                cp_async16(b_stage + b_dst[p], b_k + b_src[p], true);
            } else {
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    cp_async4(b_stage + b_dst[p] + q, b_k + b_src[p] + q, true);
                }
            }
        }
    }
};

// The thread's operands for one k-slice kk of a tile: M_SUB float4s of the A
// column (rows wrow + s * 16 + lrow .. + 3) and N_SUB float4s of the B row
// (columns wcol + s * 32 + lcol .. + 3). A lane's rows differ from its
// neighbours' in lane / 8 only and its columns in lane % 8, so an A load
// reads 4 distinct float4s (broadcast to 8 lanes each) and a B load 8
// consecutive ones: one shared-memory wavefront each, no bank conflict.
template <int BM, int BN, int BK, int M_SUB, int N_SUB, class SWZ = ColumnGroupSwizzle<BK>>
__device__ __forceinline__ void load_fragments(const float (*a_tile)[BM], const float (*b_tile)[BN], int kk,
                                               float (&a_frag)[M_SUB * 4], float (&b_frag)[N_SUB * 4],
                                               int wrow, int wcol, int lrow, int lcol) {
#pragma unroll
    for (int s = 0; s < M_SUB; ++s) {
        const int r = SWZ::row(wrow, s, lrow, kk);
        const float4 v = *reinterpret_cast<const float4*>(&a_tile[kk][r]);
        a_frag[4 * s] = v.x, a_frag[4 * s + 1] = v.y, a_frag[4 * s + 2] = v.z, a_frag[4 * s + 3] = v.w;
    }
#pragma unroll
    for (int s = 0; s < N_SUB; ++s) {
        const float4 v = *reinterpret_cast<const float4*>(&b_tile[kk][wcol + s * 32 + lcol]);
        b_frag[4 * s] = v.x, b_frag[4 * s + 1] = v.y, b_frag[4 * s + 2] = v.z, b_frag[4 * s + 3] = v.w;
    }
}

// acc += a_frag (a column) x b_frag (a row): one k-slice's outer product, a
// row of the thread's outputs at a time (a_frag[i] shared by TN FFMAs), or with
// BY_COLUMN a column at a time (b_frag[j] shared by TM; sgemm_column_order).
// Each output gets the same update either way; only the order of the FFMAs,
// and so the instruction stream ptxas builds, differs.
template <int TM, int TN, bool BY_COLUMN = false>
__device__ __forceinline__ void outer_product(float (&acc)[TM][TN], const float (&a_frag)[TM],
                                              const float (&b_frag)[TN]) {
    if constexpr (BY_COLUMN) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                acc[i][j] += a_frag[i] * b_frag[j];
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < TM; ++i) {
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                acc[i][j] += a_frag[i] * b_frag[j];
            }
        }
    }
}

// One tile's worth of FFMAs: acc += a_tile^T . b_tile over the warp's tile.
template <int BM, int BN, int BK, int M_SUB, int N_SUB>
__device__ __forceinline__ void compute_tile(const float (*a_tile)[BM], const float (*b_tile)[BN],
                                             float (&acc)[M_SUB * 4][N_SUB * 4], int wrow, int wcol, int lrow,
                                             int lcol) {
    float a_frag[M_SUB * 4], b_frag[N_SUB * 4];
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
        load_fragments<BM, BN, BK, M_SUB, N_SUB>(a_tile, b_tile, kk, a_frag, b_frag, wrow, wcol, lrow, lcol);
        outer_product(acc, a_frag, b_frag);
    }
}
