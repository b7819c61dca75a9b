// sgemm_large_tile: sgemm_multistage with one block per SM (MIN_BLOCKS = 1),
// so a thread may hold 128 accumulators: a 128 x 256 block tile of 8 warps,
// a 64 x 64 warp tile, 16 x 8 outputs per thread, and the operand fragments
// of the next k-slice loaded from shared memory while the current one is used.
// Source: not from the documents. Launch: grid (ceil(N/BN), ceil(M/BM)),
// block (BM/WM * BN/WN * 32) = 256 threads; DYNAMIC shared memory of
// STAGES x BK x (BM + BN) floats (72 KB at the default 3 stages of BK = 16:
// more than 48 KB needs the opt-in attribute, which gemmlab.run sets).
// Idea: every warp-tiled rung sits at 127 registers, because MIN_BLOCKS = 2
// (two blocks of 256 threads per SM) caps a thread at 65536 / 512 = 128: an
// 8 x 8 thread tile, 4 LDS.128 per 64 FFMA, and no room to load the next
// fragments while the current ones are in use, so each k-slice waits on its
// shared-memory loads (~30 cycles) with only 4 warps per scheduler to cover.
// With one block per SM a thread may use up to 255 registers: 128
// accumulators + 2 x 24 fragment registers fit (ptxas for sm_90 takes all 255;
// capped at 224-232 with __maxnreg__ it still compiles without spills, so
// about 30 are slack). A thread does 128 FFMA per 6 LDS.128 (1 per 21
// instead of 1 per 16), a warp reads 128 floats of shared memory per k for
// 4096 FMAs (96 for 2048 before), and the fragments of slice kk + 1
// (including the first slice of the next tile) are in flight while slice kk
// is computed, so the 2 warps per scheduler need no other warp to hide the
// shared-memory latency. Global loads: as sgemm_multistage (cp.async ring, A
// transposed and swizzled in 4-byte copies, B in 16-byte copies when
// N % 4 == 0); with one block per SM the ring alone hides them, so it holds
// more bytes (3 stages of 24 KB).
// Predicted: 46 TFLOP/s at N = 4096 on an H200 (90% of cuBLAS's 51; sgemm_multistage
// 41.4): fewer shared-memory instructions per FFMA and the LDS latency off the
// critical path take the FFMA issue rate from ~62% to ~69% of the boost-clock
// peak; 8 warps per SM, each barrier stalling the whole SM, keep it short of cuBLAS.
//
// The pipeline (tile j lives in stage j % STAGES; one commit group per tile,
// empty past the end, so that "at most STAGES - 2 groups pending" always
// means "the next tile is in"):
//   prologue: issue tiles 0 .. STAGES - 1; wait for tile 0; barrier; load the
//             fragments of tile 0, slice 0.
//   tile t:   for kk < BK - 1: load the fragments of slice kk + 1, compute
//             slice kk (from the other fragment buffer).
//             Last slice: its fragments are already in registers, so this
//             thread no longer reads stage t % STAGES. Wait for tile t + 1;
//             barrier (tile t + 1 is in for everyone, and everyone is done
//             with stage t % STAGES); issue tile t + STAGES into stage
//             t % STAGES; load the fragments of tile t + 1, slice 0; compute
//             the last slice of tile t.
// With one barrier per tile a stage is never overwritten while it is read,
// and never read before its copies have landed.

// load_fragments and outer_product are in cp_async_tiles.cuh (sgemm_lean_loop uses them too).
#include "cp_async_tiles.cuh"

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int MIN_BLOCKS>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_large_tile(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out,
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
    T acc[TM][TN] = {};
    T a_frag[2][TM], b_frag[2][TN];

#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
        if (s < tiles) {
            load_tiles<BM, BN, BK, THREADS>(a_tiles[s], b_tiles[s], a, b, row0, col0, s * BK, m, n, k, b_vec, tid);
        }
        cp_async_commit();
    }
    cp_async_wait<STAGES - 1>();
    __syncthreads();  // tile 0 is in for everyone
    load_fragments<BM, BN, BK, M_SUB, N_SUB>(a_tiles[0], b_tiles[0], 0, a_frag[0], b_frag[0], wrow, wcol, lrow,
                                             lcol);
    int stage = 0;  // t % STAGES
    for (int t = 0; t < tiles; ++t) {
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
            load_tiles<BM, BN, BK, THREADS>(a_tiles[stage], b_tiles[stage], a, b, row0, col0, (t + STAGES) * BK,
                                            m, n, k, b_vec, tid);
        }
        cp_async_commit();
        stage = stage + 1 == STAGES ? 0 : stage + 1;
        if (t + 1 < tiles) {
            load_fragments<BM, BN, BK, M_SUB, N_SUB>(a_tiles[stage], b_tiles[stage], 0, a_frag[0], b_frag[0], wrow,
                                                     wcol, lrow, lcol);
        }
        outer_product(acc, a_frag[1], b_frag[1]);
    }
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
