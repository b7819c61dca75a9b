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
// The kernel is rung 13's body (spread_copies_body) with outer_product's BY_COLUMN set.
// Branches from rung 13, not rung 14: with stream-K's bookkeeping around it,
// the same order compiled (NVRTC 13.0) to a loop with spills around it and ran
// at 89% of cuBLAS at 4096 (docs/sgemm-ladder.md).
// Predicted (H200, written after a first timing of this order against rung 13
// in one run, not before): +2% at 4096 and 8192; the guarded-store odd sizes
// (4095, 4097), compiled separately (B_VEC false), may lose as much.

#include "cp_async_tiles.cuh"
#include "spread_copies.cuh"

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int MIN_BLOCKS>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_column_order(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out, int m, int n,
                   int k, T alpha, T beta) {
    if (n % 4 == 0 && aligned16(b)) {
        spread_copies_body<BM, BN, BK, WM, WN, STAGES, true, true>(a, b, c_in, c_out, m, n, k, alpha, beta);
    } else {
        spread_copies_body<BM, BN, BK, WM, WN, STAGES, false, true>(a, b, c_in, c_out, m, n, k, alpha, beta);
    }
}
