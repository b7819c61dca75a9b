// sgemm_spread_copies: sgemm_lean_loop with its copies issued a few at a time
// through the k-loop, each warp's copy reading whole sectors.
// Source: not from the documents. Launch: as sgemm_lean_loop (grid
// (ceil(N/BN), ceil(M/BM)), 8 warps, dynamic shared memory of
// STAGES x BK x (BM + BN) floats).
// Idea: sgemm_lean_loop issues a tile's copies all at once, right after the
// barrier that frees their stage, when the 8 warps are in step: 12 copy
// instructions per thread (24 when N % 4 != 0) arrive at the load/store unit
// together, and Nsight Compute (H200) shows long-scoreboard waits and LG
// throttle there. Four changes to the copies, none to the arithmetic:
// - Spread: the copies of tile t + STAGES - 1 go out a share per k-slice of
//   step t, between its fragment loads and its FFMAs, into the stage of tile
//   t - 1 (free since the barrier that ended step t - 1). The tile arrives a
//   step later than with sgemm_lean_loop's ring, so the default ring is 4
//   stages deep.
// - Whole sectors: a warp's 4-byte copy of A takes 4 rows x 8 consecutive k
//   (4 sectors; sgemm_lean_loop's takes 8 rows x 4 k, 16 bytes apart: 16
//   sectors, each read again by the next three copies). For the shared-memory
//   side to stay free of bank conflicts the transposed A tile moves each of 8
//   consecutive k-slices by a different multiple of 4 rows (SliceSwizzle), and
//   a thread's rows are 32 apart, so every copy's shared offset is one
//   register plus a constant. When B's rows are not 16-byte aligned, a warp's
//   copy takes 32 consecutive columns of a row of B.
// - Every copy planned: a block whose tile crosses M or N moves the tile up or
//   left to end there (M >= BM, N >= BN), computes some outputs it does not
//   own and stores only its own. No copy needs a clamp or a guard, and the
//   block column that crosses N no longer takes the guarded loader for every
//   tile when N % 4 != 0 (at N = 4095 those blocks ran longest and left SMs
//   idle).
// - One loop: past the last whole tile of K the copies are switched off by a
//   predicate, so one copy of the 2048-FFMA loop serves every step; only the
//   partial tile of K goes through the guarded loader, outside the k-slices.
// Predicted (H200, written before measuring, for the first two changes): +3%
// at N = 4096 (45.5 -> 47 TFLOP/s) from fewer long-scoreboard waits; at
// N = 4095 back within 4% of 4096, which sgemm_lean_loop misses by 9%.
// docs/sgemm-ladder.md has what the measurements said about each change.

#include "cp_async_tiles.cuh"
#include "spread_copies.cuh"

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int MIN_BLOCKS>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_spread_copies(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out, int m, int n,
                    int k, T alpha, T beta) {
    if (n % 4 == 0 && aligned16(b)) {
        spread_copies_body<BM, BN, BK, WM, WN, STAGES, true>(a, b, c_in, c_out, m, n, k, alpha, beta);
    } else {
        spread_copies_body<BM, BN, BK, WM, WN, STAGES, false>(a, b, c_in, c_out, m, n, k, alpha, beta);
    }
}
