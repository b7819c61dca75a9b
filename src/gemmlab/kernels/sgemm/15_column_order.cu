// sgemm_column_order: sgemm_spread_copies with each k-slice's 128 FFMAs issued
// a column of the thread's outputs at a time instead of a row at a time.
// Source: not from the documents. Launch: as sgemm_spread_copies (grid
// (ceil(N/BN), ceil(M/BM)), 8 warps, dynamic shared memory of
// STAGES x BK x (BM + BN) floats).
// Idea: the outer product of a 16-float column of A and an 8-float row of B
// is 128 independent FFMAs, and CUDA C leaves their order to the source: rows
// first (rungs 2-14: a[i] shared by 8 FFMAs in a row) or columns first (b[j]
// shared by 16). The arithmetic, the copies and every sum are unchanged; what
// changes is the instruction stream ptxas builds from it: which operand each
// FFMA can take from the operand reuse cache, how it numbers the registers,
// how it interleaves the fragment loads. Rung 12's profile put the gap to
// cuBLAS in the issue rate, not in memory waits, so the stream is what is
// left to change.
// Branches from rung 13, not rung 14: with stream-K's bookkeeping around it,
// the same order compiled (NVRTC 13.0) to a loop with spills around it and ran
// at 89% of cuBLAS at 4096 (docs/sgemm-ladder.md).
// Predicted (H200, written after a first timing of this order against rung 13
// in one run, not before): +2% at 4096 and 8192; the guarded-store odd sizes
// (4095, 4097), compiled separately (B_VEC false), may lose as much.

#include "cp_async_tiles.cuh"
#include "spread_copies.cuh"

// acc += a_frag x b_frag as outer_product does, one column of the thread's
// outputs after another: b_frag[j] is the operand the next TM FFMAs share. Each
// output gets the same updates in the same order, so the sums are bit for bit
// those of outer_product.
template <int TM, int TN>
__device__ __forceinline__ void outer_product_by_column(float (&acc)[TM][TN], const float (&a_frag)[TM],
                                                        const float (&b_frag)[TN]) {
#pragma unroll
    for (int j = 0; j < TN; ++j) {
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            acc[i][j] += a_frag[i] * b_frag[j];
        }
    }
}

// The whole kernel for one way of copying B; sgemm_column_order picks one.
template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool B_VEC>
__device__ __forceinline__ void column_order_body(const float* __restrict__ a, const float* __restrict__ b,
                                                   const float* c_in, float* c_out, int m, int n, int k,
                                                   float alpha, float beta) {
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    constexpr int M_SUB = WM / 16, N_SUB = WN / 32;
    constexpr int TM = M_SUB * 4, TN = N_SUB * 4;
    extern __shared__ float4 smem4[];
    float (*a_tiles)[BK][BM] = reinterpret_cast<float (*)[BK][BM]>(smem4);
    float (*b_tiles)[BK][BN] = reinterpret_cast<float (*)[BK][BN]>(reinterpret_cast<float*>(smem4) + STAGES * BK * BM);
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int lrow = (lane / 8) * 4, lcol = (lane % 8) * 4;
    // The block owns rows row_owned .. + BM - 1 and columns col_owned .. + BN - 1
    // of C. When they cross M or N, and M >= BM and N >= BN, its tile moves up or
    // left to end at M or N: it computes outputs it does not own, and stores only
    // its own, but every copy of the plan stays inside A and B. (Smaller matrices
    // take the guarded loader for every tile.)
    const int row_owned = blockIdx.y * BM, col_owned = blockIdx.x * BN;
    const bool inside = m >= BM && n >= BN;
    const int row0 = inside ? min(row_owned, m - BM) : row_owned;
    const int col0 = inside ? min(col_owned, n - BN) : col_owned;
    const bool c_vec = n % 4 == 0 && aligned16(c_in) && aligned16(c_out);
    const int tiles = (k + BK - 1) / BK;
    const int whole_tiles = inside ? k / BK : 0;
    const SectorPlan<BM, BN, BK, B_VEC> plan(row0, col0, n, k, tid);
    float acc[TM][TN] = {};
    float a_frag[2][TM], b_frag[2][TN];

    // How a tile reaches its stage: the plan's copies (a share of them, or none when
    // !on), or the guarded loader (the last, partial tile of K, and every tile of a
    // matrix smaller than the block tile).
    auto planned = [&](int j, int s, int part, int parts, bool on) {
        plan.issue(&a_tiles[s][0][0], &b_tiles[s][0][0], a + j * BK, b + static_cast<long long>(j) * BK * n, n, k,
                   part, parts, on);
    };
    auto guarded = [&](int j, int s) {
        load_tiles<BM, BN, BK, THREADS, SliceSwizzle>(a_tiles[s], b_tiles[s], a, b, row0, col0, j * BK, m, n, k,
                                                      B_VEC, tid);
    };
    auto fragments = [&](int s, int kk, int buf) {
        load_fragments<BM, BN, BK, M_SUB, N_SUB, SliceSwizzle>(a_tiles[s], b_tiles[s], kk, a_frag[buf],
                                                               b_frag[buf], wrow, wcol, lrow, lcol);
    };
    // Tiles 0 .. STAGES - 2 before the loop; step t loads tile t + STAGES - 1.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < whole_tiles) {
            planned(s, s, 0, 1, true);
        } else if (s < tiles) {
            guarded(s, s);
        }
        cp_async_commit();
    }
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // tile 0 is in for everyone
    fragments(0, 0, 0);
    int stage = 0;  // t % STAGES
    // Tile t. Its look-ahead, tile t + STAGES - 1, goes to the stage of tile t - 1,
    // free since the barrier that ended step t - 1: with the plan's copies, a share
    // of them after each k-slice's fragment loads (switched off past the last whole
    // tile, so that one copy of the loop serves every step); with the guarded
    // loader, all at the end.
    for (int t = 0; t < tiles; ++t) {
        const int ahead = t + STAGES - 1;
        const int ahead_stage = stage == 0 ? STAGES - 1 : stage - 1;
        const bool on = ahead < whole_tiles;
        const int j = on ? ahead : 0;  // a switched-off copy's address stays inside A and B
#pragma unroll
        for (int kk = 0; kk < BK - 1; ++kk) {
            fragments(stage, kk + 1, (kk + 1) % 2);
            planned(j, ahead_stage, kk, BK, on);
            outer_product_by_column(acc, a_frag[kk % 2], b_frag[kk % 2]);
        }
        planned(j, ahead_stage, BK - 1, BK, on);
        if (!on && ahead < tiles) {
            guarded(ahead, ahead_stage);
        }
        cp_async_commit();
        cp_async_wait<STAGES - 2>();
        __syncthreads();  // tile t + 1 is in for everyone; nobody reads stage t % STAGES any more
        stage = stage + 1 == STAGES ? 0 : stage + 1;
        if (t + 1 < tiles) {
            fragments(stage, 0, 0);
        }
        outer_product_by_column(acc, a_frag[1], b_frag[1]);
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + wrow + (i / 4) * 16 + lrow + i % 4;
        if (row < row_owned) {
            continue;
        }
#pragma unroll
        for (int s = 0; s < N_SUB; ++s) {
            const float4 v = make_float4(acc[i][4 * s], acc[i][4 * s + 1], acc[i][4 * s + 2], acc[i][4 * s + 3]);
            store4_from(c_in, c_out, row, col0 + wcol + s * 32 + lcol, col_owned, m, n, v, alpha, beta, c_vec);
        }
    }
}

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int MIN_BLOCKS>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_column_order(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out, int m, int n,
                    int k, T alpha, T beta) {
    static_assert((BM / WM) * (BN / WN) == 8, "SectorPlan's copies are laid out for 8 warps");
    static_assert(WM % 16 == 0 && WN % 32 == 0, "a warp tile is whole 16 x 32 sub-tiles");
    static_assert(BM % 32 == 0 && BN % 32 == 0 && BK % 8 == 0, "whole 32-row bands, 32-column groups, 8 k-slices");
    static_assert(BK * BN % 1024 == 0, "every thread copies the same number of float4s of B");
    static_assert(STAGES >= 2, "at least one tile in flight while one is computed");
    if (n % 4 == 0 && aligned16(b)) {
        column_order_body<BM, BN, BK, WM, WN, STAGES, true>(a, b, c_in, c_out, m, n, k, alpha, beta);
    } else {
        column_order_body<BM, BN, BK, WM, WN, STAGES, false>(a, b, c_in, c_out, m, n, k, alpha, beta);
    }
}
