// sgemm_2d_blocktile: each thread computes a TM x TN block of C (an outer product).
// Source: not from the documents. Launch: grid (ceil(N/BN), ceil(M/BM)),
// block ((BM/TM) * (BN/TN)). This is the ladder's any-size, any-alignment
// kernel: only scalar loads and stores, every one guarded.
// Idea: per k, a thread loads TM values of A and TN of B from shared memory
// into registers and does TM * TN multiply-adds with them: shared-memory loads
// per FFMA fall to (TM + TN) / (TM * TN), 1/4 at 8 x 8. The block tile grows
// to BM x BN = 128 x 128, so a global element feeds 2 * 128 FLOPs. The cost is
// registers: TM * TN accumulators plus TM + TN operands per thread. ptxas
// reads the A tile (rows of BK values) with 16-byte loads spanning 4 k steps
// and keeps them, which takes it to about 145 registers on sm_90 at 8 x 8:
// one block of 256 threads per SM. A thread's TN outputs are consecutive
// columns, read as float4s at a 2-way bank conflict; the next rungs remove
// both costs.
template <typename T, int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm_2d_blocktile(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out,
                   int m, int n, int k, T alpha, T beta) {
    constexpr int TCOLS = BN / TN;
    constexpr int THREADS = (BM / TM) * TCOLS;
    static_assert(BM % TM == 0 && BN % TN == 0, "thread tiles tile the block tile");
    static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0,
                  "every thread loads the same number of elements of each tile");
    __shared__ T a_tile[BM][BK];
    __shared__ T b_tile[BK][BN];
    const int tid = threadIdx.x;
    const int trow = tid / TCOLS, tcol = tid % TCOLS;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    T acc[TM][TN] = {};
    T a_frag[TM], b_frag[TN];
    for (int k0 = 0; k0 < k; k0 += BK) {
#pragma unroll
        for (int p = 0; p < BM * BK / THREADS; ++p) {
            const int e = tid + p * THREADS;
            const int r = e / BK, c = e % BK;
            const int gr = row0 + r, gc = k0 + c;
            a_tile[r][c] = (gr < m && gc < k) ? a[gr * k + gc] : T(0);
        }
#pragma unroll
        for (int p = 0; p < BK * BN / THREADS; ++p) {
            const int e = tid + p * THREADS;
            const int r = e / BN, c = e % BN;
            const int gr = k0 + r, gc = col0 + c;
            b_tile[r][c] = (gr < k && gc < n) ? b[gr * n + gc] : T(0);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                a_frag[i] = a_tile[trow * TM + i][kk];
            }
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                b_frag[j] = b_tile[kk][tcol * TN + j];
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
        const int row = row0 + trow * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = col0 + tcol * TN + j;
            if (row < m && col < n) {
                const int idx = row * n + col;
                c_out[idx] = beta == T(0) ? alpha * acc[i][j] : alpha * acc[i][j] + beta * c_in[idx];
            }
        }
    }
}
