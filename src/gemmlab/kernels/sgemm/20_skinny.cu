// sgemm_skinny: C = alpha A.B + beta C for M of 1 to ROWS (at most 16), the
// matrix-vector shape of decoding: one pass over B, every element of it used
// for all M rows at once.
// Source: not from the documents. Launch: one block of WARPS warps per strip
// of 4 x COL_VECS columns of C (grid N / (4 COL_VECS)); static shared memory,
// the larger of ROWS x KC floats (a chunk of A) and WARPS x ROWS x 4 COL_VECS
// floats (the warps' sums), KC = WARPS x (32 / COL_VECS) x K_STEPS k-rows.
// Idea: at M = 16 the product has 16 x N outputs and reads K x N floats of B
// once: 2 x 16 FLOPs per 4 bytes of B, 8 FLOP per byte, far below the 20 FLOP
// per byte (67 TFLOP/s over 3.35 TB/s) where an H100 turns from memory- to
// compute-bound. Its time is B's bytes over the bandwidth, and a tiled kernel
// wastes it: a 128-row tile computes 112 rows of nothing, and 4096 columns in
// tiles of 256 give 16 blocks for 132 SMs. Here a block takes a strip of
// columns for all M rows and walks down K: each lane reads a float4 of a row of
// B (COL_VECS lanes side by side: a row segment of 16 x COL_VECS bytes, whole
// sectors), 32 / COL_VECS rows per warp and WARPS warps per step, K_STEPS
// steps of loads in flight before the first is used; the slot of a row just
// used is loaded at once with the next chunk's, so the loads stay in flight
// while the next chunk of A is staged (two barriers and an L2 round trip per
// chunk, which would otherwise leave the DRAM idle). A's M rows arrive a
// chunk of KC k-slices at a time into shared memory, read back as broadcasts
// (the lanes that share a k-row read one word). Each thread keeps ROWS x 4
// sums; the lanes of a warp that share columns add theirs by shuffles, the
// warps theirs through shared memory, in warp order (the same result every
// launch). Rows of B whose ends are not 16-byte aligned (N % 4 != 0) are read
// 4 bytes at a time, the same lanes and sums.
// Predicted (H100, written before measuring): 16 x 4096 x 4096, COL_VECS = 8:
// 128 blocks of 8 warps, one per SM on 128 of the 132; B is 64 MB, A (256 KB)
// and C stay in L2. At 85-90% of the 3.35 TB/s: 21-23 us, 5.8-6.4 TFLOP/s.
// The FFMAs (16 x 4096 x 4096 = 268 M, 2.1 M per SM) take 4.1 us at the
// 1.98 GHz boost clock, hidden behind the loads if K_STEPS x 16 bytes x 256
// threads = 32 KB per SM in flight is enough (Little: 25 GB/s per SM x
// about 1 us of DRAM latency under load = 25 KB). Measured:
// docs/sgemm-ladder.md, rung 20.
// The configurations of 1 to 4 rows in blocks of 4 warps with 12 loads in
// flight (issue 21, second round) make four blocks per SM at M = 1, so that
// 96 KB of B per SM, four times Little's 25 KB, stays in flight; why, the
// prediction and the measurement: docs/sgemm-ladder.md, "Rung 21 and the
// skinny rungs' second round".

#include "vec4_io.cuh"

template <typename T, int ROWS, int COL_VECS, int WARPS, int K_STEPS>
__global__ void __launch_bounds__(WARPS * 32)
sgemm_skinny(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out, int m, int n, int k,
             T alpha, T beta) {
    constexpr int THREADS = WARPS * 32;
    constexpr int K_PER_WARP = 32 / COL_VECS;          // k-rows a warp reads in one load
    constexpr int KC = WARPS * K_PER_WARP * K_STEPS;  // k-rows of one chunk
    constexpr int COLS = 4 * COL_VECS;                // columns of the block's strip
    constexpr int RED = WARPS * ROWS * COLS;          // the warps' sums
    constexpr int SMEM = ROWS * KC > RED ? ROWS * KC : RED;
    static_assert(COL_VECS == 2 || COL_VECS == 4 || COL_VECS == 8 || COL_VECS == 16 || COL_VECS == 32,
                  "a warp's lanes split evenly between columns and k-rows");
    static_assert(ROWS >= 1 && ROWS <= 16, "ROWS x 4 sums per thread, 64 at most");
    static_assert(SMEM * 4 <= 48 * 1024, "static shared memory: 48 KB at most");
    __shared__ __align__(16) T smem[SMEM];  // a_chunk[r][kk] = A[r][k0 + kk], then the warps' sums
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int cv = lane % COL_VECS, kr = lane / COL_VECS;
    const int col = blockIdx.x * COLS + 4 * cv;
    const bool b_vec = n % 4 == 0 && aligned16(b);
    T acc[ROWS][4] = {};

    // The first chunk's B; each later chunk's is loaded while the one before is used.
    float4 b_rows[K_STEPS];
#pragma unroll
    for (int j = 0; j < K_STEPS; ++j) {
        b_rows[j] = load4(b, (j * WARPS + warp) * K_PER_WARP + kr, col, k, n, b_vec);
    }
    for (int k0 = 0; k0 < k; k0 += KC) {
        __syncthreads();  // everyone is done with the last chunk of A
#pragma unroll
        for (int i = tid; i < ROWS * KC; i += THREADS) {
            const int r = i / KC, kk = i % KC;  // consecutive threads: consecutive k (coalesced, no bank conflict)
            smem[i] = r < m && k0 + kk < k ? a[r * k + k0 + kk] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < K_STEPS; ++j) {
            const int kk = (j * WARPS + warp) * K_PER_WARP + kr;
#pragma unroll
            for (int r = 0; r < ROWS; ++r) {
                const T x = smem[r * KC + kk];
                acc[r][0] += x * b_rows[j].x;
                acc[r][1] += x * b_rows[j].y;
                acc[r][2] += x * b_rows[j].z;
                acc[r][3] += x * b_rows[j].w;
            }
            // Its slot takes the next chunk's row at once (zeros past K): K_STEPS loads stay in
            // flight through the next chunk's staging of A, with no registers added.
            b_rows[j] = load4(b, k0 + KC + kk, col, k, n, b_vec);
        }
    }
    // The lanes of a warp with the same columns (kr = 0 .. K_PER_WARP - 1) add
    // their sums by a butterfly: a + b is b + a, so every lane ends with the same bits.
#pragma unroll
    for (int offset = COL_VECS; offset < 32; offset *= 2) {
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                acc[r][q] += __shfl_xor_sync(0xffffffffu, acc[r][q], offset);
            }
        }
    }
    __syncthreads();  // the chunk of A is read by everyone: its space takes the sums
    if (kr == 0) {
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                smem[(warp * ROWS + r) * COLS + 4 * cv + q] = acc[r][q];
            }
        }
    }
    __syncthreads();
    for (int i = tid; i < ROWS * COLS; i += THREADS) {
        const int r = i / COLS, c = blockIdx.x * COLS + i % COLS;
        if (r < m && c < n) {
            T sum = 0.f;
            for (int w = 0; w < WARPS; ++w) {
                sum += smem[w * ROWS * COLS + i];
            }
            const int idx = r * n + c;
            // As the ladder's store4: alpha * sum rounded, then beta * C added by one FMA.
            const T scaled = alpha * sum;
            c_out[idx] = beta == 0.f ? scaled : fmaf(beta, c_in[idx], scaled);
        }
    }
}
