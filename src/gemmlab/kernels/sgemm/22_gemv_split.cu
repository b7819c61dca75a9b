// sgemm_gemv_split: C = alpha A.B + beta C for M of 1 to ROWS (at most 4):
// decoding's matrix-vector product, B read once in whole lines, K cut into
// SPLITS slices so that enough blocks stream it; no barrier inside the loop.
// Source: not from the documents. Launch: grid N / (4 COL_VECS) x SPLITS, one
// block of WARPS warps per (strip of 4 x COL_VECS columns, slice of K); static
// shared memory, the warps' sums (WARPS x ROWS x 4 COL_VECS floats); a last
// argument, the workspace: one counter per strip (zero before the first
// launch; the kernel leaves them zero), then, from the next multiple of 16
// bytes, SPLITS partial strips of ROWS x 4 COL_VECS floats per strip.
// Idea (issue 21, third round): sgemm_skinny at 1 x 4096 x 4096 ran at 2.06
// TB/s (32.5 us for B's 67.1 MB) where cuBLAS ran at 2.70 TB/s (24.8 us). Its
// best configuration read B in 32-byte row pieces (strips of 8 columns, 16 rows
// per warp load: 16 lines touched for 512 bytes), and every chunk of K stopped
// for two barriers and an L2 round trip to stage A; K = 4096 in chunks of 768
// took 6 chunks for 5.33 chunks of work. Here a lane's unit is a quad: 4
// consecutive k-rows of its float4 column, 4 loads of B and, per row of A, one
// float4 of A (4 k-values: the lanes that share a quad read one word of L1).
// With COL_VECS = 32 a warp reads 512 contiguous bytes of one row of B (4
// whole lines), with 8, 128 bytes of 4 rows (whole lines too). QUADS quads
// (4 QUADS loads of B) per thread are in flight; each slot is reloaded with
// the thread's next quad the moment it is used, and nothing in the loop
// waits for another thread. Slices are whole quads (k-rows 4 floor(z Q / S)
// .. 4 floor((z + 1) Q / S) - 1 of the Q = ceil(K / 4)), so a quad is wholly
// in one slice; past the slice a slot is zeros and is not loaded.
// Sums: the lanes of a warp that share columns add theirs by a butterfly of
// shuffles (every lane ends with the same bits), the warps theirs in shared
// memory in warp order; each block writes its partial strip to its slot of
// the workspace, and the last block of the strip to arrive adds the SPLITS
// slots in slice order from zero (its own read back like the others), so C
// is the same bit for bit whichever block comes last, launch after launch.
// Predicted (H100, written before measuring): 1 x 4096 x 4096, ROWS = 1,
// COL_VECS = 32, 4 warps, QUADS = 3, SPLITS = 16: 32 strips x 16 slices = 512
// blocks of 128 threads, 3.9 per SM (one wave of 528 slots at 4 per SM), each
// reading 256 rows x 512 bytes = 128 KB; 12 loads of 16 bytes per thread in
// flight, 96 KB per SM, 12.7 MB over the GPU: at 3.0 TB/s Little's law needs
// only 3 MB (1 us of loaded latency). B's 67.1 MB at 2.8-3.0 TB/s: 22-24 us;
// the fix-up reads 16 x 512 bytes per strip (256 KB in all, in L2) once the
// strip's last slice lands: under 1 us. 23-25 us against cuBLAS's 24.8: 99-108%.
// Measured: docs/sgemm-ladder.md, rung 22's section.
// Synchronisation (docs/synchronisation.md, sgemm_split_k's section: the same
// pattern): writer of a partial strip: each thread's __stcg stores,
// __syncthreads, then thread 0's __threadfence and relaxed atomicAdd (.gpu) on
// the strip's counter: a release pattern in one thread, its fence cumulative
// over the stores the barrier ordered before it. The last to arrive: thread
// 0's atomicAdd reads a count that includes every other slice's increment,
// then its __threadfence: an acquire pattern; __syncthreads_or passes it on to
// every thread's __ldcg reads. Each counter reaches SPLITS exactly once per
// launch, so the last arriver's plain store of zero races with no increment;
// the next launch sees it through the kernel boundary. Slice z of strip s
// writes only slot (s, z). Progress: no block waits for another.

#include "vec4_io.cuh"

// One quad of a thread: 4 float4s of B (k-rows 4q .. 4q + 3 at its columns) and,
// per row of A, A[r][4q .. 4q + 3]; zeros for a quad past the slice's end ke.
template <int ROWS>
struct Quad {
    float4 b[4];
    float4 a[ROWS];

    __device__ __forceinline__ void load(const float* __restrict__ a_mat, const float* __restrict__ b_mat, int q,
                                         int ke, int col, int m, int n, int k, bool a_vec, bool b_vec) {
        const bool inside = 4 * q < ke;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            b[i] = inside ? load4(b_mat, 4 * q + i, col, k, n, b_vec) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            a[r] = inside ? load4(a_mat, r, 4 * q, m, k, a_vec) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
    }
};

// acc[r][c] += sum over the quad's 4 k-rows, in k order.
template <int ROWS>
__device__ __forceinline__ void add_quad(float (&acc)[ROWS][4], const Quad<ROWS>& quad) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const float x[4] = {quad.a[r].x, quad.a[r].y, quad.a[r].z, quad.a[r].w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            acc[r][0] += x[i] * quad.b[i].x;
            acc[r][1] += x[i] * quad.b[i].y;
            acc[r][2] += x[i] * quad.b[i].z;
            acc[r][3] += x[i] * quad.b[i].w;
        }
    }
}

template <typename T, int ROWS, int COL_VECS, int WARPS, int QUADS, int SPLITS>
__global__ void __launch_bounds__(WARPS * 32)
sgemm_gemv_split(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out, int m, int n, int k,
                 T alpha, T beta, void* workspace) {
    constexpr int THREADS = WARPS * 32;
    constexpr int Q_PER_WARP = 32 / COL_VECS;      // quads a warp takes side by side
    constexpr int Q_STEP = WARPS * Q_PER_WARP;     // quads between a thread's consecutive ones
    constexpr int COLS = 4 * COL_VECS;             // columns of the strip
    constexpr int STRIP = ROWS * COLS;             // outputs of the strip
    static_assert(COL_VECS == 8 || COL_VECS == 16 || COL_VECS == 32, "a row piece of whole 128-byte lines");
    static_assert(ROWS >= 1 && ROWS <= 4, "a quad holds ROWS float4s of A: 4 rows at most");
    static_assert(QUADS >= 1 && SPLITS >= 2, "a quad in flight at least; one slice is sgemm_skinny's job");
    static_assert(WARPS * STRIP * 4 <= 48 * 1024, "static shared memory: 48 KB at most");
    __shared__ __align__(16) T sums[WARPS * STRIP];  // sums[(warp * ROWS + r) * COLS + c]
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int cv = lane % COL_VECS, kq = lane / COL_VECS;
    const int strip = blockIdx.x, slice = blockIdx.y;
    const int col = strip * COLS + 4 * cv;
    const int quads = (k + 3) / 4;
    const int ke = min(k, 4 * static_cast<int>(static_cast<long long>(slice + 1) * quads / SPLITS));
    const int q_first = static_cast<int>(static_cast<long long>(slice) * quads / SPLITS) + warp * Q_PER_WARP + kq;
    const bool a_vec = k % 4 == 0 && aligned16(a), b_vec = n % 4 == 0 && aligned16(b);
    T acc[ROWS][4] = {};

    Quad<ROWS> ring[QUADS];
#pragma unroll
    for (int j = 0; j < QUADS; ++j) {
        ring[j].load(a, b, q_first + j * Q_STEP, ke, col, m, n, k, a_vec, b_vec);
    }
    for (int q = q_first; 4 * q < ke; q += QUADS * Q_STEP) {
#pragma unroll
        for (int j = 0; j < QUADS; ++j) {
            add_quad<ROWS>(acc, ring[j]);
            // The slot takes this thread's quad one round on at once: QUADS quads stay in flight.
            ring[j].load(a, b, q + (j + QUADS) * Q_STEP, ke, col, m, n, k, a_vec, b_vec);
        }
    }
    // The lanes with the same columns (kq = 0 .. Q_PER_WARP - 1): a butterfly, a + b being b + a.
#pragma unroll
    for (int offset = COL_VECS; offset < 32; offset *= 2) {
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                acc[r][c] += __shfl_xor_sync(0xffffffffu, acc[r][c], offset);
            }
        }
    }
    if (kq == 0) {
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            reinterpret_cast<float4*>(sums)[((warp * ROWS + r) * COLS + 4 * cv) / 4] =
                make_float4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
        }
    }
    __syncthreads();

    // The block's partial strip, the warps in warp order, into its slot (through L2 only).
    unsigned* arrivals = static_cast<unsigned*>(workspace);
    float* partials = reinterpret_cast<float*>(static_cast<char*>(workspace) + (gridDim.x * 4 + 15) / 16 * 16);
    for (int i = tid; i < STRIP; i += THREADS) {
        T sum = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) {
            sum += sums[w * STRIP + i];
        }
        __stcg(partials + (static_cast<long long>(strip) * SPLITS + slice) * STRIP + i, sum);
    }
    __syncthreads();  // every thread's share of the partial is stored
    bool last = false;
    if (tid == 0) {
        __threadfence();  // release: the barrier showed thread 0 the block's stores; the fence is cumulative
        last = atomicAdd(&arrivals[strip], 1u) == SPLITS - 1;
        if (last) {
            arrivals[strip] = 0;  // as the next launch expects it
            __threadfence();      // acquire: the other slices' partials before our reads
        }
    }
    if (!__syncthreads_or(last)) {  // hands the acquire on to the block's reads
        return;
    }
    const float* slots = partials + static_cast<long long>(strip) * SPLITS * STRIP;
    for (int i = tid; i < STRIP; i += THREADS) {
        const int r = i / COLS, c = strip * COLS + i % COLS;
        float parts[SPLITS];
#pragma unroll
        for (int z = 0; z < SPLITS; ++z) {
            parts[z] = __ldcg(slots + z * STRIP + i);  // all in flight at once
        }
        T sum = 0.f;
#pragma unroll
        for (int z = 0; z < SPLITS; ++z) {
            sum += parts[z];  // slice order, from zero
        }
        if (r < m && c < n) {
            const int idx = r * n + c;
            // As the ladder's store4: alpha * sum rounded, then beta * C added by one FMA.
            const T scaled = alpha * sum;
            c_out[idx] = beta == 0.f ? scaled : fmaf(beta, c_in[idx], scaled);
        }
    }
}
