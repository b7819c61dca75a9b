// Shared by rungs 16 and 17 (sgemm_edge_strips, sgemm_padded_b): the strips
// of at most EDGE_MAX rows or columns of C that whole tiles leave over, each
// done by small blocks at the end of the grid (16_edge_strips.cu says why).
// EDGE_MAX (the widest strip) and EDGE_KC (k-slices per chunk of a strip's
// shared operand) arrive as template arguments, set once in
// kernels/sgemm/spec.py, whose rules check what EdgeSplit static_asserts.

// How much of [0, extent) whole tiles cover: all of it, or all but a last strip
// of 1 .. EDGE_MAX (spec.py's tiled_extent, which lays out the grid, is the same rule).
template <int EDGE_MAX>
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
template <int EDGE_MAX, int EDGE_KC>
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
template <int EDGE_MAX, int EDGE_KC>
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
// matrix (spec.py's edge_strips_grid lays out the same), and what edge block e
// does: the strip below the tiles first, 32 columns a block, then the one to
// their right, 32 rows a block. THREADS and RING_FLOATS (the ring's shared
// memory, which an edge block reuses) are checked against what a block needs.
template <int BM, int BN, int THREADS, int RING_FLOATS, int EDGE_MAX, int EDGE_KC>
struct EdgeSplit {
    // The strips' blocks take one column (row strip) or one row (column strip) per lane.
    static_assert(EDGE_MAX == 32, "an edge block spans EDGE_MAX columns or rows, one per lane of a warp");
    static_assert(THREADS == EDGE_KC, "an edge block's thread t stages k-slice t of a chunk");
    static_assert(RING_FLOATS >= EDGE_KC * (EDGE_MAX + 4) && RING_FLOATS >= 8 * EDGE_MAX * 32,
                  "an edge block stages its operand and its warps' sums in the ring's shared memory");
    int m_tiled, n_tiled, tile_rows;

    __device__ __forceinline__ EdgeSplit(int m, int n)
        : m_tiled(tiled_extent<EDGE_MAX>(m, BM)),
          n_tiled(tiled_extent<EDGE_MAX>(n, BN)),
          tile_rows((m_tiled + BM - 1) / BM) {}

    __device__ __forceinline__ int row_blocks(int m, int n) const { return m_tiled < m ? (n + 31) / 32 : 0; }
    __device__ __forceinline__ int col_blocks(int n) const { return n_tiled < n ? (m_tiled + 31) / 32 : 0; }

    __device__ __forceinline__ void run(int e, const float* __restrict__ a, const float* __restrict__ b,
                                        const float* c_in, float* c_out, int m, int n, int k, float alpha,
                                        float beta) const {
        const int row_blocks = this->row_blocks(m, n);
        extern __shared__ float4 smem4[];
        float* smem = reinterpret_cast<float*>(smem4);
        if (e < row_blocks) {
            row_strip<EDGE_MAX, EDGE_KC>(a, b, c_in, c_out, m_tiled, 32 * e, m, n, k, alpha, beta, smem);
        } else if (n_tiled < n && 32 * (e - row_blocks) < m_tiled) {
            column_strip<EDGE_MAX, EDGE_KC>(a, b, c_in, c_out, 32 * (e - row_blocks), m_tiled, n_tiled, n, k, alpha,
                                            beta, smem);
        }
    }
};
