// sgemm_1d_blocktile: each thread computes TM outputs of one column of C.
// Source: not from the documents (the documents stop at 4 outputs per thread,
// `blocked_x4`). Launch: grid (ceil(N/BN), ceil(M/BM)), block (BM * BN / TM).
// Idea: the block owns a BM x BN tile of C and walks K in steps of BK; a
// thread owns rows trow*TM .. trow*TM+TM-1 of column tcol. For each k it loads
// one value of B from shared memory into a register and reuses it for TM
// multiply-adds, against TM values of A that every thread of the warp reads
// at the same address (a broadcast). Shared-memory loads per FFMA fall from 2
// to (TM + 1) / TM, and the block's tile is taller than it is wide in threads,
// so a global load feeds 2 * TM * BK / (loads per thread per tile) FLOPs.
// Loads: each thread moves (BM*BK + BK*BN) / threads elements per tile, zero
// outside the matrices; the loads of consecutive threads are consecutive.
template <typename T, int BM, int BN, int BK, int TM>
__global__ void __launch_bounds__(BM * BN / TM)
sgemm_1d_blocktile(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out,
                   int m, int n, int k, T alpha, T beta) {
    constexpr int THREADS = BM * BN / TM;
    static_assert(BM % TM == 0, "a thread's TM rows tile BM");
    static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0,
                  "every thread loads the same number of elements of each tile");
    __shared__ T a_tile[BM][BK];
    __shared__ T b_tile[BK][BN];
    const int tid = threadIdx.x;
    const int tcol = tid % BN, trow = tid / BN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    T acc[TM] = {};
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
            const T bv = b_tile[kk][tcol];
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                acc[i] += a_tile[trow * TM + i][kk] * bv;
            }
        }
        __syncthreads();
    }
    const int col = col0 + tcol;
    if (col >= n) {
        return;
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + trow * TM + i;
        if (row < m) {
            const int idx = row * n + col;
            c_out[idx] = beta == T(0) ? alpha * acc[i] : alpha * acc[i] + beta * c_in[idx];
        }
    }
}
