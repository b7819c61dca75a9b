// sgemm_lean_loop: sgemm_large_tile with the bounds arithmetic taken out of
// the main loop.
// Source: not from the documents. Launch: as sgemm_large_tile (grid
// (ceil(N/BN), ceil(M/BM)), 256 threads, dynamic shared memory of
// STAGES x BK x (BM + BN) floats).
// Idea: Nsight Compute on sgemm_multistage (H200, N = 4096) counts 18% of the
// executed instructions as other than FFMA: 64 LDS.128 per 1024 FFMA, and
// about 110 integer instructions per tile in load_tiles, which works out
// again, for each 4-byte copy of A, a 64-bit address, two bounds tests and a
// select. sgemm_large_tile halves the LDS per FFMA but keeps that loader, and
// measured no faster. cuBLAS's kernel on the same GPU (a 256 x 128 tile of 8
// warps, 254 registers) issues 88.5% FFMA. Here every thread works out its
// copies once (CopyPlan): one source offset per copy, with rows of A and
// columns of B clamped into the matrix (a clamped row or column only feeds
// outputs that are never stored), and one shared-memory offset per copy. A
// tile that lies wholly inside K costs its copies and an address add each.
// Only the last, partial tile of K goes through the guarded loader
// (zero-fill), and so does every tile of a block whose columns cross N when
// B's rows are not 16-byte aligned; elsewhere the pieces of B are one
// 16-byte copy (N % 4 == 0) or four 4-byte ones. The main loop is written
// once (step) and instantiated per way of copying, so no loop carries the
// guarded loader's registers.
// Predicted: FFMA from 82% to about 91% of the executed instructions; at the
// same issue rate, 41.4 -> 45-46 TFLOP/s at N = 4096 on an H200 (88-90% of
// cuBLAS's 51).
//
// The pipeline is sgemm_large_tile's (tile j in stage j % STAGES, the
// fragments of slice kk + 1 loaded while slice kk is computed).

#include "cp_async_tiles.cuh"

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int MIN_BLOCKS>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_lean_loop(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out,
                 int m, int n, int k, T alpha, T beta) {
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    constexpr int M_SUB = WM / 16, N_SUB = WN / 32;
    constexpr int TM = M_SUB * 4, TN = N_SUB * 4;
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles tile the block tile");
    static_assert(WM % 16 == 0 && WN % 32 == 0, "a warp tile is whole 16 x 32 sub-tiles");
    static_assert(BM % 32 == 0 && BN % 4 == 0 && BK % 4 == 0, "rows of whole float4s; a_swizzle needs BM % 32 == 0");
    static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
                  "every thread copies the same number of float4s of each tile");
    static_assert(STAGES >= 2, "at least one tile in flight while one is computed");
    static_assert(BK % 2 == 0, "the fragment buffers alternate, and slice 0 of every tile uses buffer 0");
    // The launch's dynamic shared memory: STAGES A tiles (BK x BM, transposed and
    // swizzled: a_tiles[s][kk][r ^ a_swizzle(kk)] = A[row0 + r][k0 + kk]), then
    // STAGES B tiles (BK x BN). Declared as float4 for 16-byte alignment.
    extern __shared__ float4 smem4[];
    float (*a_tiles)[BK][BM] = reinterpret_cast<float (*)[BK][BM]>(smem4);
    float (*b_tiles)[BK][BN] = reinterpret_cast<float (*)[BK][BN]>(reinterpret_cast<float*>(smem4) + STAGES * BK * BM);
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int lrow = (lane / 8) * 4, lcol = (lane % 8) * 4;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool b_vec = n % 4 == 0 && aligned16(b);
    const bool c_vec = n % 4 == 0 && aligned16(c_in) && aligned16(c_out);
    const int tiles = (k + BK - 1) / BK;
    const int lean_tiles = b_vec || col0 + BN <= n ? k / BK : 0;
    const CopyPlan<BM, BN, BK, THREADS> plan(row0, col0, m, n, k, tid);
    T acc[TM][TN] = {};
    T a_frag[2][TM], b_frag[2][TN];

    // How tile j reaches stage s: the plan's copies (B in 16- or 4-byte pieces) or the guarded loader.
    enum Copies { GUARDED, LEAN_B16, LEAN_B4 };
    auto load = [&](int j, int s, Copies how) {
        const float* a_k = a + j * BK;
        const float* b_k = b + static_cast<long long>(j) * BK * n;
        if (how == LEAN_B16) {
            plan.template issue<true>(&a_tiles[s][0][0], &b_tiles[s][0][0], a_k, b_k);
        } else if (how == LEAN_B4) {
            plan.template issue<false>(&a_tiles[s][0][0], &b_tiles[s][0][0], a_k, b_k);
        } else {
            load_tiles<BM, BN, BK, THREADS>(a_tiles[s], b_tiles[s], a, b, row0, col0, j * BK, m, n, k, b_vec, tid);
        }
    };
    const Copies lean = b_vec ? LEAN_B16 : LEAN_B4;
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
        if (s < tiles) {
            load(s, s, s < lean_tiles ? lean : GUARDED);
        }
        cp_async_commit();
    }
    cp_async_wait<STAGES - 1>();
    __syncthreads();  // tile 0 is in for everyone
    load_fragments<BM, BN, BK, M_SUB, N_SUB>(a_tiles[0], b_tiles[0], 0, a_frag[0], b_frag[0], wrow, wcol, lrow,
                                             lcol);
    int stage = 0;  // t % STAGES
    // Tile t, as in sgemm_large_tile; called with a constant `how`, so each loop below holds one loader only.
    auto step = [&](int t, Copies how) {
#pragma unroll
        for (int kk = 0; kk < BK - 1; ++kk) {
            load_fragments<BM, BN, BK, M_SUB, N_SUB>(a_tiles[stage], b_tiles[stage], kk + 1, a_frag[(kk + 1) % 2],
                                                     b_frag[(kk + 1) % 2], wrow, wcol, lrow, lcol);
            outer_product(acc, a_frag[kk % 2], b_frag[kk % 2]);
        }
        // The last slice of tile t is in registers (buffer 1, as BK is even).
        cp_async_wait<STAGES - 2>();
        __syncthreads();  // tile t + 1 is in for everyone; nobody reads stage t % STAGES any more
        if (t + STAGES < tiles) {
            load(t + STAGES, stage, how);
        }
        cp_async_commit();
        stage = stage + 1 == STAGES ? 0 : stage + 1;
        if (t + 1 < tiles) {
            load_fragments<BM, BN, BK, M_SUB, N_SUB>(a_tiles[stage], b_tiles[stage], 0, a_frag[0], b_frag[0], wrow,
                                                     wcol, lrow, lcol);
        }
        outer_product(acc, a_frag[1], b_frag[1]);
    };
    // First every tile whose look-ahead tile takes the lean copies, then the rest.
    const int lean_steps = max(0, lean_tiles - STAGES);
    int t = 0;
    if (b_vec) {
        for (; t < lean_steps; ++t) step(t, LEAN_B16);
    } else {
        for (; t < lean_steps; ++t) step(t, LEAN_B4);
    }
    for (; t < tiles; ++t) step(t, GUARDED);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + wrow + (i / 4) * 16 + lrow + i % 4;
#pragma unroll
        for (int s = 0; s < N_SUB; ++s) {
            const float4 v = make_float4(acc[i][4 * s], acc[i][4 * s + 1], acc[i][4 * s + 2], acc[i][4 * s + 3]);
            store4(c_in, c_out, row, col0 + wcol + s * 32 + lcol, m, n, v, alpha, beta, c_vec);
        }
    }
}
