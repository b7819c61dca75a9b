// sgemm_swizzled: sgemm_vectorized with a shared-memory layout free of bank conflicts.
// Source: not from the documents. Launch: as sgemm_vectorized.
// Idea: shared memory serves a warp in one pass only when its 32 words (or,
// for 16-byte accesses, the 8 float4s of each quarter-warp) fall in distinct
// banks. sgemm_vectorized misses that twice, and this rung fixes both without
// padding, so the 16-byte alignment of every row is kept:
// - Transposed stores into a_tile. One float4 load of a warp covers
//   128/BK rows r and BK/4 groups of columns c; element (r, c + q) goes to
//   a_tile[c + q][r], and a_tile's rows are BM = 128 words long, so the BK/4
//   groups land in the same 128/BK banks (2-way at BK = 8). The column is
//   therefore XOR-ed with a_swizzle(c) = (c / 4) * (128 / BK), which moves
//   each group to its own 128/BK banks. The XOR keeps groups of 4 words
//   together (a_swizzle is a multiple of 4), so the reads stay float4s at the
//   column trow*TM ^ a_swizzle(kk).
// - Reads of B. A thread's TN columns were consecutive, so 8 threads of a
//   quarter-warp read words 0, 8, ..., 56: two float4s per group of banks.
//   Here they come in TN/4 float4s spaced 4 * BN/TN apart: thread tcol takes
//   columns j4 * 4 * (BN/TN) + 4 * tcol + (0..3), and a quarter-warp reads
//   32 consecutive words.
// Expect the same instruction count as sgemm_vectorized with fewer shared-
// memory wavefronts (Nsight Compute: l1tex__data_bank_conflicts_pipe_lsu_mem_shared).

#include "vec4_io.cuh"

// The XOR that spreads a float4 load's column groups over distinct banks (see
// the top of the file). Needs BK in {4, 8, 16, 32} and BM a multiple of 32, so
// that the result stays a multiple of 4 and inside the row.
template <int BK>
__device__ __forceinline__ int a_swizzle(int c) {
    static_assert(BK == 4 || BK == 8 || BK == 16 || BK == 32, "a_swizzle needs BK in {4, 8, 16, 32}");
    return (c / 4) * (128 / BK);
}

template <typename T, int BM, int BN, int BK, int TM, int TN, int MIN_BLOCKS>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), MIN_BLOCKS)
sgemm_swizzled(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out,
                 int m, int n, int k, T alpha, T beta) {
    constexpr int TCOLS = BN / TN;
    constexpr int THREADS = (BM / TM) * TCOLS;
    constexpr int A_VECS = BM * BK / 4, B_VECS = BK * BN / 4;
    static_assert(BM % TM == 0 && BN % TN == 0, "thread tiles tile the block tile");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "fragments and tile rows are whole float4s");
    static_assert(BM % 32 == 0, "a_swizzle flips bits below 32: rows must be whole multiples of 32");
    static_assert(A_VECS % THREADS == 0 && B_VECS % THREADS == 0,
                  "every thread loads the same number of float4s of each tile");
    __shared__ __align__(16) T a_tile[BK][BM];  // a_tile[kk][r ^ a_swizzle(kk)] = A[row0 + r][k0 + kk]
    __shared__ __align__(16) T b_tile[BK][BN];
    const int tid = threadIdx.x;
    const int trow = tid / TCOLS, tcol = tid % TCOLS;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool a_vec = k % 4 == 0 && aligned16(a);
    const bool b_vec = n % 4 == 0 && aligned16(b);
    const bool c_vec = n % 4 == 0 && aligned16(c_in) && aligned16(c_out);
    T acc[TM][TN] = {};
    T a_frag[TM], b_frag[TN];
    for (int k0 = 0; k0 < k; k0 += BK) {
#pragma unroll
        for (int p = 0; p < A_VECS / THREADS; ++p) {
            const int f = tid + p * THREADS;
            const int r = f / (BK / 4), c = (f % (BK / 4)) * 4;
            const float4 v = load4(a, row0 + r, k0 + c, m, k, a_vec);
            const int rs = r ^ a_swizzle<BK>(c);
            a_tile[c + 0][rs] = v.x;
            a_tile[c + 1][rs] = v.y;
            a_tile[c + 2][rs] = v.z;
            a_tile[c + 3][rs] = v.w;
        }
#pragma unroll
        for (int p = 0; p < B_VECS / THREADS; ++p) {
            const int f = tid + p * THREADS;
            const int r = f / (BN / 4), c = (f % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(&b_tile[r][c]) = load4(b, k0 + r, col0 + c, k, n, b_vec);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&a_tile[kk][(trow * TM + i) ^ a_swizzle<BK>(kk)]);
                a_frag[i] = v.x, a_frag[i + 1] = v.y, a_frag[i + 2] = v.z, a_frag[i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&b_tile[kk][j * TCOLS + 4 * tcol]);
                b_frag[j] = v.x, b_frag[j + 1] = v.y, b_frag[j + 2] = v.z, b_frag[j + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i) {
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    acc[i][j] += a_frag[i] * b_frag[j];
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const float4 v = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
            store4(c_in, c_out, row0 + trow * TM + i, col0 + j * TCOLS + 4 * tcol, m, n, v, alpha, beta, c_vec);
        }
    }
}
