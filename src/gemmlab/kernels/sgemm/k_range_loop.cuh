// Shared by sgemm_small_tile and sgemm_split_k: sgemm_multistage's ring of
// STAGES cp.async stages, run over k-tiles t_begin .. t_end - 1 of one block
// tile (all of them for sgemm_small_tile, one slice for sgemm_split_k), and
// the alpha/beta store of a warp tile's accumulators. The pipeline is rung 9's,
// written once here so that both rungs' files show only what they add.

#include "cp_async_tiles.cuh"

// acc += A[row0 .. + BM][k-tiles t_begin .. t_end) . B[those k][col0 .. + BN],
// this thread's share (M_SUB x N_SUB sub-tiles of 4 x 4). One commit group
// per k-tile, empty past the range, so that wait_group<STAGES - 2> always means
// "k-tile t has landed" (see 09_multistage.cu). An empty range leaves acc as
// it was. Ends with a barrier: the ring is free again when it returns.
template <int BM, int BN, int BK, int WM, int WN, int STAGES, int THREADS>
__device__ __forceinline__ void ring_over_k_tiles(float (*a_tile)[BK][BM], float (*b_tile)[BK][BN],
                                                  float (&acc)[WM / 16 * 4][WN / 32 * 4],
                                                  const float* __restrict__ a, const float* __restrict__ b,
                                                  int row0, int col0, int m, int n, int k, int t_begin, int t_end,
                                                  bool b_vec, int wrow, int wcol, int lrow, int lcol, int tid) {
    constexpr int M_SUB = WM / 16, N_SUB = WN / 32;
    static_assert(STAGES >= 2, "at least one tile in flight while one is computed");
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (t_begin + s < t_end) {
            load_tiles<BM, BN, BK, THREADS>(a_tile[s], b_tile[s], a, b, row0, col0, (t_begin + s) * BK, m, n, k,
                                            b_vec, tid);
        }
        cp_async_commit();
    }
    for (int t = t_begin; t < t_end; ++t) {
        const int i = t - t_begin;
        cp_async_wait<STAGES - 2>();
        __syncthreads();  // k-tile t is in for everyone; everyone is done with k-tile t - 1
        const int ahead = i + STAGES - 1;
        if (t_begin + ahead < t_end) {
            const int s = ahead % STAGES;
            load_tiles<BM, BN, BK, THREADS>(a_tile[s], b_tile[s], a, b, row0, col0, (t_begin + ahead) * BK, m, n,
                                            k, b_vec, tid);
        }
        cp_async_commit();
        compute_tile<BM, BN, BK, M_SUB, N_SUB>(a_tile[i % STAGES], b_tile[i % STAGES], acc, wrow, wcol, lrow,
                                               lcol);
    }
    cp_async_wait<0>();
    __syncthreads();
}

// C[rows, cols of this thread] = alpha * acc + beta * C_in, inside M x N only.
template <int WM, int WN>
__device__ __forceinline__ void store_warp_tile(const float (&acc)[WM / 16 * 4][WN / 32 * 4], const float* c_in,
                                                float* c_out, int row0, int col0, int wrow, int wcol, int lrow,
                                                int lcol, int m, int n, float alpha, float beta) {
    constexpr int M_SUB = WM / 16, N_SUB = WN / 32;
    const bool c_vec = n % 4 == 0 && aligned16(c_in) && aligned16(c_out);
#pragma unroll
    for (int i = 0; i < M_SUB * 4; ++i) {
        const int row = row0 + wrow + (i / 4) * 16 + lrow + i % 4;
#pragma unroll
        for (int s = 0; s < N_SUB; ++s) {
            const float4 v = make_float4(acc[i][4 * s], acc[i][4 * s + 1], acc[i][4 * s + 2], acc[i][4 * s + 3]);
            store4(c_in, c_out, row, col0 + wcol + s * 32 + lcol, m, n, v, alpha, beta, c_vec);
        }
    }
}
