// sgemm_skinny_n: C = alpha A.B + beta C for N of 1 to COLS (at most 32): a
// tall A times a narrow B, read as A's rows stream past a copy of B held in
// shared memory.
// Source: not from the documents. Launch: one block of WARPS warps per
// BR = WARPS x (32 / ROW_LANES) x THREAD_ROWS rows of C (grid M / BR); static
// shared memory, a chunk of KC = 4 x ROW_LANES x K_STEPS rows of B, in groups
// of 4 k-rows padded to 4 x (COLS | 1) floats.
// Idea: at N = 16 the product reads A's M x K floats once and does 2 x 16
// FLOPs per 4 bytes of it, 8 FLOP per byte: memory-bound on an H100 (20 FLOP
// per byte at the ridge), so its time is A's bytes over the bandwidth. A tiled
// kernel reads A as well, but computes 128 - 16 columns of nothing and makes
// few blocks. Here ROW_LANES lanes share a row of A and read it along K in
// 16-byte loads side by side (ROW_LANES x 16 bytes: whole sectors), K_STEPS of
// them in flight per row before the first is used; a thread may take
// THREAD_ROWS rows, so each value of B it reads serves all of them. B's chunk
// is copied into shared memory by the whole block, laid out so that a float4
// holds the 4 k-rows of one column that one float4 of A multiplies: COLS
// 16-byte shared loads per float4 of A, for 4 x COLS FFMAs per row. The lanes
// of a row read groups 4 x (COLS | 1) words apart: an odd number of 16-byte
// bank groups, so 8 lanes hit 8 different ones; the lanes of other rows read
// the same words (broadcast). Each thread keeps THREAD_ROWS x COLS sums; the
// lanes of a row add theirs by a butterfly of shuffles (the same bits in every
// lane), and each writes the columns c with c % ROW_LANES equal to its place
// in the row (neighbouring lanes, neighbouring columns). A with K % 4 != 0 or
// an unaligned start is read 4 bytes at a time, the same lanes and sums.
// Predicted (H100, written before measuring): 4096 x 16 x 4096, the default
// (16 rows a block, 256 blocks of 4 warps, about 2 per SM, 32 KB of A in
// flight per SM): A is 64 MB, B (256 KB) and C stay in L2. At 85-90% of the
// 3.35 TB/s: 21-23 us, 23-26 TFLOP/s (537 MFLOP). Shared memory: COLS loads
// of one wavefront each per 4 x COLS FFMAs, so the FFMA and shared pipes take
// about 8 us each, hidden behind the loads (if the hardware merges the rows'
// identical addresses; if it takes a wavefront per 8 lanes regardless, 32 us:
// THREAD_ROWS = 2 halves that). Measured: docs/sgemm-ladder.md, rung 21.
// Staging of B (issue 21, third and fourth rounds): a thread issues all its
// words of B's chunk as 4-byte cp.async copies at once (one L2 round trip, no
// registers held), and each slot of A is reloaded with the next chunk's the
// moment it is used (as sgemm_skinny does for B). B's chunks are
// double-buffered: the next chunk's copies are issued before this chunk's
// FFMAs, and the wait is for the group before the last, so the copy overlaps
// the arithmetic. The two buffers must fit 48 KB of static shared memory
// (K_STEPS <= 8 at COLS = 16, ROW_LANES = 8). Why (a staging loop of one L2
// round trip per word left every configuration slower than split-K), the
// predictions and the measurements (at THREAD_ROWS = 2, cuBLAS's time at
// 4096 x 16 x 4096 on an H100): docs/sgemm-ladder.md, "Rung 22, stream-K for
// few tiles, and sgemm_skinny_n's staging" and "Rung 23, and sgemm_skinny_n's
// double-buffered B".
// COLS = 32 (issue 50: float32 with N from 17 to 32, where the dispatcher had
// only tiled rungs, computing at least 32 - N columns of nothing in tiles of
// 32 or more rows and splitting K to fill the GPU): the same loop, 32 sums a
// row, B's groups 4 x 33 floats apart (still an odd count of bank groups), 4
// warps at least (each thread copies one column of B's chunk). Predicted
// (written before any run, H200): at 1597 x 24 x 2069, A's 13.2 MB read once
// at 85-90% of 4.8 TB/s is about 3 us, and the FFMAs (158 MFLOP, 2 x 32 x 4
// FFMAs per float4 of A, 8 lanes a row) about 3-4 us on 100 blocks of 4 warps
// with 8 rows each: 6-9 us in all, against cuBLAS's 14 us measured there and
// the 18 us the cost model gives the dispatcher's split-K choice
// (benchmarks/results/2026-11-29_model-choices-prediction.txt). Not yet run.
// Synchronisation (inside a block only): the barrier at the top of a trip
// orders every thread's reads of the buffer the trip refills (read in the trip
// before) before any copy into it; cp.async.wait_group 1 then the barrier after
// it make this trip's chunk, copied a trip earlier, complete and visible to all.

#include "cp_async_tiles.cuh"

template <typename T, int COLS, int ROW_LANES, int THREAD_ROWS, int WARPS, int K_STEPS>
__global__ void __launch_bounds__(WARPS * 32)
sgemm_skinny_n(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out, int m, int n, int k,
               T alpha, T beta) {
    constexpr int THREADS = WARPS * 32;
    constexpr int ROWS_PER_WARP = 32 / ROW_LANES * THREAD_ROWS;
    constexpr int BR = WARPS * ROWS_PER_WARP;   // rows of C per block
    constexpr int KC = 4 * ROW_LANES * K_STEPS;  // k-rows of one chunk of B
    constexpr int GS = 4 * (COLS | 1);           // floats per group of 4 k-rows: an odd count of 16-byte bank groups
    static_assert(COLS == 1 || COLS == 2 || COLS == 4 || COLS == 8 || COLS == 16 || COLS == 32,
                  "COLS: 1, 2, 4, 8, 16 or 32");
    static_assert(ROW_LANES == 4 || ROW_LANES == 8 || ROW_LANES == 16 || ROW_LANES == 32,
                  "a warp's lanes split evenly between rows");
    static_assert(THREAD_ROWS * COLS <= 64, "THREAD_ROWS x COLS sums per thread, 64 at most");
    static_assert(2 * (KC / 4 * GS * 4) <= 48 * 1024, "static shared memory (two chunks of B): 48 KB at most");
    // b_chunks[i][g * GS + 4 c + q] = B[k0 + 4 g + q][c] for the chunk at k0 in buffer i
    __shared__ __align__(16) T b_chunks[2][KC / 4 * GS];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int kl = lane % ROW_LANES;                                           // place along the row
    const int row0 = blockIdx.x * BR + (warp * (32 / ROW_LANES) + lane / ROW_LANES) * THREAD_ROWS;
    const bool a_vec = k % 4 == 0 && aligned16(a);
    // Consecutive threads copy consecutive words of B's chunk: q fastest, then the column.
    const int q_copy = tid % 4, c_copy = (tid / 4) % COLS;
    constexpr int G_STEP = THREADS / (4 * COLS);  // groups of 4 k-rows between a thread's copies of B
    static_assert((THREADS / 4) % COLS == 0, "a thread copies one column and k-row of every G_STEP-th group");
    T acc[THREAD_ROWS][COLS] = {};

    // The first chunk's A; each later chunk's is loaded slot by slot as the one before is used.
    float4 a_vals[THREAD_ROWS][K_STEPS];
#pragma unroll
    for (int j = 0; j < K_STEPS; ++j) {
#pragma unroll
        for (int t = 0; t < THREAD_ROWS; ++t) {
            a_vals[t][j] = load4(a, row0 + t, 4 * (kl + ROW_LANES * j), m, k, a_vec);
        }
    }
    // A chunk of B by 4-byte cp.async, every thread's copies in flight at once (no
    // registers held), as one commit group; zeros past N and K. A thread's k-row (q)
    // and column (c) stay fixed; its groups are G_STEP apart.
    auto stage = [&](T* chunk, int k_start) {
#pragma unroll 8
        for (int g = tid / (4 * COLS); g < KC / 4; g += G_STEP) {
            const int kk = k_start + 4 * g + q_copy;
            const bool valid = c_copy < n && kk < k;
            cp_async4(chunk + g * GS + 4 * c_copy + q_copy, valid ? b + kk * n + c_copy : b, valid);
        }
        cp_async_commit();
    };
    stage(b_chunks[0], 0);
    for (int k0 = 0, trip = 0; k0 < k; k0 += KC, ++trip) {
        const T* b_chunk = b_chunks[trip % 2];
        __syncthreads();  // everyone is done with the other buffer (the last trip's chunk)
        if (k0 + KC < k) {
            stage(b_chunks[(trip + 1) % 2], k0 + KC);  // the next chunk, copied while this one is used
        } else {
            cp_async_commit();  // an empty group: the wait below always leaves exactly one pending
        }
        cp_async_wait<1>();  // this trip's chunk has landed (this thread's copies)
        __syncthreads();     // ... and every thread's
#pragma unroll
        for (int j = 0; j < K_STEPS; ++j) {
            const float4* group = reinterpret_cast<const float4*>(b_chunk + (kl + ROW_LANES * j) * GS);
#pragma unroll
            for (int c = 0; c < COLS; ++c) {
                const float4 w = group[c];
#pragma unroll
                for (int t = 0; t < THREAD_ROWS; ++t) {
                    acc[t][c] += a_vals[t][j].x * w.x;
                    acc[t][c] += a_vals[t][j].y * w.y;
                    acc[t][c] += a_vals[t][j].z * w.z;
                    acc[t][c] += a_vals[t][j].w * w.w;
                }
            }
            // The slot takes the next chunk's A at once (zeros past K): the loads stay in
            // flight through the next chunk's staging of B.
#pragma unroll
            for (int t = 0; t < THREAD_ROWS; ++t) {
                a_vals[t][j] = load4(a, row0 + t, k0 + KC + 4 * (kl + ROW_LANES * j), m, k, a_vec);
            }
        }
    }
    // The lanes of a row add their sums by a butterfly: a + b is b + a, so every
    // lane of the row ends with the same bits.
#pragma unroll
    for (int offset = 1; offset < ROW_LANES; offset *= 2) {
#pragma unroll
        for (int t = 0; t < THREAD_ROWS; ++t) {
#pragma unroll
            for (int c = 0; c < COLS; ++c) {
                acc[t][c] += __shfl_xor_sync(0xffffffffu, acc[t][c], offset);
            }
        }
    }
#pragma unroll
    for (int t = 0; t < THREAD_ROWS; ++t) {
#pragma unroll
        for (int c = 0; c < COLS; ++c) {
            const int row = row0 + t;
            if (c % ROW_LANES == kl && row < m && c < n) {
                const int idx = row * n + c;
                // As the ladder's store4: alpha * sum rounded, then beta * C added by one FMA.
                const float scaled = alpha * acc[t][c];
                c_out[idx] = beta == 0.f ? scaled : fmaf(beta, c_in[idx], scaled);
            }
        }
    }
}
