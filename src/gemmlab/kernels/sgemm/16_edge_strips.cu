// sgemm_edge_strips: sgemm_column_order on whole tiles only; a last strip of
// at most EDGE_MAX rows or columns of C goes to small blocks at the end of
// the grid instead of a row or column of nearly empty tiles.
// Source: not from the documents. Launch: grid (tiles along N, tiles along M
// + the rows of edge blocks), as sgemm_edge_strips_grid in sgemm.py computes
// it; 8 warps, dynamic shared memory as sgemm_spread_copies.
// Idea: at N = 4097 rung 13's 128 x 256 tiles cover C with 33 x 17 = 561
// tiles, 49 of them for one row or one column of outputs, and each of those
// costs a whole tile's FFMAs: 4.25 waves on 132 SMs, run in 5, where the
// 4096 x 4096 part alone is 512 tiles (3.88 waves, run in 4, with 16 SMs
// idle in the last). Here the tiles cover only whole multiples of BM and BN
// when what is left over (M % BM, N % BN) is a strip of 1 .. EDGE_MAX; the
// strips (the rows below, all N columns; the columns to the right, the rows
// above) are sums of K products per output on few outputs: they read all of
// B, or all of A, once, and are bound by memory, not FFMAs. Edge blocks come
// last in the grid, so they start on the SMs that the tiles' last partial
// wave leaves idle. A remainder over EDGE_MAX keeps rung 13's moved tile.
// The two strip functions are __noinline__: inlined, their code changed how
// ptxas allocated the tiles' registers (and their speed at 4095, which has no
// strip, by 2%); called, it disturbs the tiles' loops much less, though not
// always not at all (docs/sgemm-ladder.md).
// Predicted (H200, written before measuring): N = 4097 from 37.0 TFLOP/s
// (rung 15) to about 45, the speed of rung 15's guarded copies (B_VEC false,
// 45.6 at 4095), since the strips (134 MB read by 16 idle SMs at about 20
// GB/s each, 0.4 ms) fit inside the last wave (0.7 ms); N = 4096 and every
// multiple of the tile unchanged (no edge blocks).

#include "13_spread_copies.cu"

constexpr int EDGE_MAX = 32;  // the widest strip; also the outputs across an edge block
constexpr int EDGE_KC = 256;  // k-slices per chunk of the strip's shared operand

// How much of [0, extent) whole tiles cover: all of it, or all but a last strip
// of 1 .. EDGE_MAX (sgemm.py's tiled_extent agrees).
__device__ __forceinline__ int tiled_extent(int extent, int tile) {
    const int rest = extent % tile;
    return extent >= tile && rest <= EDGE_MAX ? extent - rest : extent;
}

// C's rows row0 .. m - 1 (1 .. EDGE_MAX of them) and columns c0 .. c0 + 31:
// lane l sums column c0 + l, warp w the k-slices w, w + 8, ... of each chunk,
// then the 8 warps' sums are added in warp order. The rows of A are staged a
// chunk at a time, transposed (a_t[kk][i], rows past m zero), so each k-slice's
// values are float4 broadcasts. Every load of a chunk, A's (thread t: k-slice t
// of each row) and B's (32 per thread), goes out together, and before the FFMAs
// of the chunk ahead of it: an SM runs one such block, and only the loads in
// flight hide the memory's latency.
__device__ __noinline__ void row_strip(const float* __restrict__ a, const float* __restrict__ b,
                                          const float* c_in, float* c_out, int row0, int c0, int m, int n, int k,
                                          float alpha, float beta, float* smem) {
    constexpr int WARPS = 8, PER_WARP = EDGE_KC / WARPS, STRIDE = EDGE_MAX + 4;
    const int rows = m - row0, groups = (rows + 3) / 4;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int col = c0 + lane, col_read = min(col, n - 1);  // a column past N reads a real one, never stored
    float (*a_t)[STRIDE] = reinterpret_cast<float (*)[STRIDE]>(smem);
    float acc[EDGE_MAX] = {};
    float av[EDGE_MAX], bv[PER_WARP];  // a chunk's loads: thread t's k-slice t of A's rows, and 32 of B
    auto load = [&](int k0) {
#pragma unroll
        for (int i = 0; i < EDGE_MAX; ++i) {
            if (i < 4 * groups) {
                av[i] = i < rows && k0 + threadIdx.x < k ? a[(row0 + i) * k + k0 + threadIdx.x] : 0.f;
            }
        }
#pragma unroll
        for (int s = 0; s < PER_WARP; ++s) {
            const int kk = warp + s * WARPS;
            bv[s] = k0 + kk < k ? b[(k0 + kk) * n + col_read] : 0.f;
        }
    };
    load(0);
    for (int k0 = 0; k0 < k; k0 += EDGE_KC) {
        __syncthreads();  // the last chunk's a_t is read by everyone
#pragma unroll
        for (int i = 0; i < EDGE_MAX; ++i) {
            if (i < 4 * groups) {
                a_t[threadIdx.x][i] = av[i];
            }
        }
        float bc[PER_WARP];
#pragma unroll
        for (int s = 0; s < PER_WARP; ++s) {
            bc[s] = bv[s];
        }
        if (k0 + EDGE_KC < k) {
            load(k0 + EDGE_KC);  // the next chunk's loads fly while this one's FFMAs run
        }
        __syncthreads();  // a_t is in
#pragma unroll
        for (int s = 0; s < PER_WARP; ++s) {
            const float* at = a_t[warp + s * WARPS];
#pragma unroll
            for (int q = 0; q < EDGE_MAX / 4; ++q) {
                if (q < groups) {
                    const float4 v = *reinterpret_cast<const float4*>(at + 4 * q);
                    acc[4 * q] += v.x * bc[s];
                    acc[4 * q + 1] += v.y * bc[s];
                    acc[4 * q + 2] += v.z * bc[s];
                    acc[4 * q + 3] += v.w * bc[s];
                }
            }
        }
    }
    // The warps' sums: sums[w][i][lane], added by thread (i, lane) in warp order.
    __syncthreads();
    float (*sums)[EDGE_MAX][32] = reinterpret_cast<float (*)[EDGE_MAX][32]>(smem);
#pragma unroll
    for (int i = 0; i < EDGE_MAX; ++i) {
        if (i < rows) {
            sums[warp][i][lane] = acc[i];
        }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < rows * 32; idx += WARPS * 32) {
        const int i = idx / 32, l = idx % 32;
        float s = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) {
            s += sums[w][i][l];
        }
        const int c = c0 + l, o = (row0 + i) * n + c;
        if (c < n) {
            c_out[o] = beta == 0.f ? alpha * s : alpha * s + beta * c_in[o];
        }
    }
}

// C's rows r0 .. r0 + 31 (those below m_end) and columns col0 .. n - 1 (1 ..
// EDGE_MAX of them): warp w takes 4 rows and lane l the k-slices l, l + 32, ...
// of each chunk; the columns of B are staged a chunk at a time (b_s[kk][j],
// thread t: k-slice t; columns past n zero; stride EDGE_MAX + 1, so 32 lanes at
// 32 k-slices hit 32 banks). All of a chunk's loads go out together, before the
// FFMAs of the chunk ahead of it; at the end each output's 32 lane sums are
// added by a butterfly of shuffles.
__device__ __noinline__ void column_strip(const float* __restrict__ a, const float* __restrict__ b,
                                             const float* c_in, float* c_out, int r0, int m_end, int col0, int n,
                                             int k, float alpha, float beta, float* smem) {
    constexpr int WARPS = 8, ROWS = 4, SLICES = EDGE_KC / 32, STRIDE = EDGE_MAX + 1;
    const int cols = n - col0, groups = (cols + 3) / 4;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row_first = r0 + warp * ROWS;
    float (*b_s)[STRIDE] = reinterpret_cast<float (*)[STRIDE]>(smem);
    float acc[ROWS][EDGE_MAX] = {};
    float bv[EDGE_MAX], av[ROWS][SLICES];  // a chunk's loads: thread t's k-slice t of B's columns, and A's
    auto load = [&](int k0) {
#pragma unroll
        for (int j = 0; j < EDGE_MAX; ++j) {
            bv[j] = j < cols && k0 + threadIdx.x < k ? b[(k0 + threadIdx.x) * n + col0 + j] : 0.f;
        }
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            const int row = min(row_first + r, m_end - 1);  // a row past m_end reads a real one, never stored
#pragma unroll
            for (int s = 0; s < SLICES; ++s) {
                const int kk = k0 + lane + 32 * s;
                av[r][s] = kk < k ? a[row * k + kk] : 0.f;
            }
        }
    };
    load(0);
    for (int k0 = 0; k0 < k; k0 += EDGE_KC) {
        __syncthreads();  // the last chunk's b_s is read by everyone
#pragma unroll
        for (int j = 0; j < EDGE_MAX; ++j) {
            b_s[threadIdx.x][j] = bv[j];
        }
        float ac[ROWS][SLICES];
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
#pragma unroll
            for (int s = 0; s < SLICES; ++s) {
                ac[r][s] = av[r][s];
            }
        }
        if (k0 + EDGE_KC < k) {
            load(k0 + EDGE_KC);  // the next chunk's loads fly while this one's FFMAs run
        }
        __syncthreads();  // b_s is in
#pragma unroll
        for (int s = 0; s < SLICES; ++s) {
            const float* bs = b_s[lane + 32 * s];
#pragma unroll
            for (int q = 0; q < EDGE_MAX / 4; ++q) {
                if (q < groups) {
#pragma unroll
                    for (int u = 0; u < 4; ++u) {
                        const float bj = bs[4 * q + u];
#pragma unroll
                        for (int r = 0; r < ROWS; ++r) {
                            acc[r][4 * q + u] += ac[r][s] * bj;
                        }
                    }
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const int row = row_first + r;
#pragma unroll
        for (int j = 0; j < EDGE_MAX; ++j) {
            if (j < cols) {
                float s = acc[r][j];
#pragma unroll
                for (int d = 16; d > 0; d /= 2) {
                    s += __shfl_xor_sync(0xffffffffu, s, d);
                }
                const int o = row * n + col0 + j;
                if (lane == j && row < m_end) {
                    c_out[o] = beta == 0.f ? alpha * s : alpha * s + beta * c_in[o];
                }
            }
        }
    }
}

// Where the tiles end and how many edge blocks follow them, for an M x N
// matrix (sgemm.edge_strips_grid lays out the same), and what edge block e
// does: the strip below the tiles first, 32 columns a block, then the one to
// their right, 32 rows a block. THREADS and RING_FLOATS (the ring's shared
// memory, which an edge block reuses) are checked against what a block needs.
template <int BM, int BN, int THREADS, int RING_FLOATS>
struct EdgeSplit {
    static_assert(THREADS == EDGE_KC, "an edge block's thread t stages k-slice t of a chunk");
    static_assert(RING_FLOATS >= EDGE_KC * (EDGE_MAX + 4) && RING_FLOATS >= 8 * EDGE_MAX * 32,
                  "an edge block stages its operand and its warps' sums in the ring's shared memory");
    int m_tiled, n_tiled, tile_rows;

    __device__ __forceinline__ EdgeSplit(int m, int n)
        : m_tiled(tiled_extent(m, BM)), n_tiled(tiled_extent(n, BN)), tile_rows((m_tiled + BM - 1) / BM) {}

    __device__ __forceinline__ int row_blocks(int m, int n) const { return m_tiled < m ? (n + 31) / 32 : 0; }
    __device__ __forceinline__ int col_blocks(int n) const { return n_tiled < n ? (m_tiled + 31) / 32 : 0; }

    __device__ __forceinline__ void run(int e, const float* __restrict__ a, const float* __restrict__ b,
                                        const float* c_in, float* c_out, int m, int n, int k, float alpha,
                                        float beta) const {
        const int row_blocks = this->row_blocks(m, n);
        extern __shared__ float4 smem4[];
        float* smem = reinterpret_cast<float*>(smem4);
        if (e < row_blocks) {
            row_strip(a, b, c_in, c_out, m_tiled, 32 * e, m, n, k, alpha, beta, smem);
        } else if (n_tiled < n && 32 * (e - row_blocks) < m_tiled) {
            column_strip(a, b, c_in, c_out, 32 * (e - row_blocks), m_tiled, n_tiled, n, k, alpha, beta, smem);
        }
    }
};

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int MIN_BLOCKS>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_edge_strips(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out, int m, int n, int k,
                  T alpha, T beta) {
    const EdgeSplit<BM, BN, (BM / WM) * (BN / WN) * 32, STAGES * BK * (BM + BN)> split(m, n);
    if (blockIdx.y >= split.tile_rows) {
        split.run((blockIdx.y - split.tile_rows) * gridDim.x + blockIdx.x, a, b, c_in, c_out, m, n, k, alpha, beta);
        return;
    }
    if (n % 4 == 0 && aligned16(b)) {
        spread_copies_body<BM, BN, BK, WM, WN, STAGES, true, true>(a, b, c_in, c_out, m, n, k, alpha, beta);
    } else {
        spread_copies_body<BM, BN, BK, WM, WN, STAGES, false, true>(a, b, c_in, c_out, m, n, k, alpha, beta);
    }
}
