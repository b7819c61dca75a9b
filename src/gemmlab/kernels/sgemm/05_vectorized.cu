// sgemm_vectorized: 16-byte loads from global and shared memory; the A tile
// is stored transposed.
// Source: not from the documents. Launch: grid (ceil(N/BN), ceil(M/BM)),
// block ((BM/TM) * (BN/TN)), as sgemm_2d_blocktile.
// Idea: a thread loads float4s (LDG.128) from A and B, a quarter of the load
// instructions of sgemm_2d_blocktile. The A tile is written transposed,
// a_tile[kk][r], so that in the inner loop a thread's TM values of A for one
// k are consecutive in shared memory and come in TM/4 LDS.128, like its TN
// values of B; the output is written with 16-byte stores (STG.128). Fewer
// load/store instructions leave more issue slots to the FFMAs.
// Alignment: a float4 access must be 16-byte aligned, which holds for a row
// of A when K is a multiple of 4 (of B and C: N), given 16-byte aligned base
// pointers. Otherwise the same code takes guarded scalar loads and stores
// (one test, the same for every thread, so aligned shapes never diverge), so
// any M, N, K works; only the speed depends on the alignment.
// Registers: reading A as float4s from the transposed tile also frees the
// registers sgemm_2d_blocktile spent holding rows of A across k steps (145 ->
// about 110 at 8 x 8 on sm_90). From this rung on, MIN_BLOCKS is the number
// of blocks per SM the compiler must leave registers for (at most 65536 /
// (MIN_BLOCKS * threads) per thread): with 2, one block computes while the
// other waits for its loads at a barrier.
// Left for the next rung: the transposed stores into a_tile meet 2-way bank
// conflicts, and so do the 16-byte reads of a thread's TN consecutive
// columns of B (8 threads of a quarter-warp span 64 words).

#include "vec4_io.cuh"

template <typename T, int BM, int BN, int BK, int TM, int TN, int MIN_BLOCKS>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), MIN_BLOCKS)
sgemm_vectorized(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out,
                 int m, int n, int k, T alpha, T beta) {
    constexpr int TCOLS = BN / TN;
    constexpr int THREADS = (BM / TM) * TCOLS;
    constexpr int A_VECS = BM * BK / 4, B_VECS = BK * BN / 4;
    static_assert(BM % TM == 0 && BN % TN == 0, "thread tiles tile the block tile");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "fragments and tile rows are whole float4s");
    static_assert(A_VECS % THREADS == 0 && B_VECS % THREADS == 0,
                  "every thread loads the same number of float4s of each tile");
    __shared__ __align__(16) T a_tile[BK][BM];  // transposed: a_tile[kk][r] = A[row0 + r][k0 + kk]
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
            a_tile[c + 0][r] = v.x;
            a_tile[c + 1][r] = v.y;
            a_tile[c + 2][r] = v.z;
            a_tile[c + 3][r] = v.w;
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
                const float4 v = *reinterpret_cast<const float4*>(&a_tile[kk][trow * TM + i]);
                a_frag[i] = v.x, a_frag[i + 1] = v.y, a_frag[i + 2] = v.z, a_frag[i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&b_tile[kk][tcol * TN + j]);
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
            store4(c_in, c_out, row0 + trow * TM + i, col0 + tcol * TN + j, m, n, v, alpha, beta, c_vec);
        }
    }
}
