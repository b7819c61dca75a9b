// The 16-byte variants: copy_vec4, vecadd_vec4 and transpose_tiled_vec4.
// Source: none of the documents; this is what a current GPU wants. A GTX 280
// reached its bandwidth with 4-byte accesses; an H100 has many more bytes in
// flight to cover, and 16-byte loads and stores (LDG.128 / STG.128) cover
// them with a quarter of the instructions and of the memory requests.
// An access of 16 bytes must be 16-byte aligned. CuPy allocations are
// 256-byte aligned and the vectors here start at multiples of 16 bytes from
// the base pointer, so that holds for any pointer the runner passes; a caller
// passing an offset view must keep its start 16-byte aligned.

// The 16-byte vector type of an element type: 4 floats or 2 doubles.
template <typename T> struct Vec16;
template <> struct Vec16<float> { using type = float4; };
template <> struct Vec16<double> { using type = double2; };

__device__ inline float4 add(float4 a, float4 b) {
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}
__device__ inline double2 add(double2 a, double2 b) { return make_double2(a.x + b.x, a.y + b.y); }

// Each thread moves 4 elements: one 16-byte access for float, two for double.
// Thread t of a block takes vectors base + t, base + blockDim + t, ..., so each
// access instruction of a warp covers 32 consecutive vectors (512 bytes).
constexpr int ELEMS_PER_THREAD = 4;

// copy_vec4: out = in, the m x n matrix read as one vector of m * n elements.
// Launch: a 1-D grid of ceil(m * n / (4 * 256)) blocks of 256 threads.
// The last (m * n) % (16 / sizeof(T)) elements do not fill a vector; the first
// threads of the grid copy them one by one.
template <typename T>
__global__ void copy_vec4(const T* __restrict__ in, T* __restrict__ out, int m, int n) {
    using V = typename Vec16<T>::type;
    constexpr int PER = sizeof(V) / sizeof(T);
    constexpr int VECS = ELEMS_PER_THREAD / PER;
    const unsigned len = static_cast<unsigned>(m) * static_cast<unsigned>(n);
    const unsigned nvec = len / PER;
    const unsigned base = blockIdx.x * blockDim.x * VECS + threadIdx.x;
#pragma unroll
    for (int j = 0; j < VECS; ++j) {
        const unsigned v = base + j * blockDim.x;
        if (v < nvec) {
            reinterpret_cast<V*>(out)[v] = reinterpret_cast<const V*>(in)[v];
        }
    }
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < len - nvec * PER) {
        out[nvec * PER + i] = in[nvec * PER + i];
    }
}

// vecadd_vec4: c = a + b with 16-byte accesses, any length (the tail as in copy_vec4).
// Launch: a 1-D grid of ceil(len / (4 * 256)) blocks of 256 threads.
template <typename T>
__global__ void vecadd_vec4(const T* __restrict__ a, const T* __restrict__ b,
                            T* __restrict__ c, int len) {
    using V = typename Vec16<T>::type;
    constexpr int PER = sizeof(V) / sizeof(T);
    constexpr int VECS = ELEMS_PER_THREAD / PER;
    const unsigned nvec = static_cast<unsigned>(len) / PER;
    const unsigned base = blockIdx.x * blockDim.x * VECS + threadIdx.x;
#pragma unroll
    for (int j = 0; j < VECS; ++j) {
        const unsigned v = base + j * blockDim.x;
        if (v < nvec) {
            reinterpret_cast<V*>(c)[v] =
                add(reinterpret_cast<const V*>(a)[v], reinterpret_cast<const V*>(b)[v]);
        }
    }
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < static_cast<unsigned>(len) - nvec * PER) {
        c[nvec * PER + i] = a[nvec * PER + i] + b[nvec * PER + i];
    }
}

// transpose_tiled_vec4: transpose_tiled_padded whose tile is read with 16-byte loads.
// Launch: grid (ceil(n/TILE), ceil(m/TILE)), block (TILE, ROWS); TILE and ROWS
// are template parameters (the catalogue uses ROWS = TILE/4). The block's
// TILE * ROWS threads read the tile as TILE * TILE / PER vectors, row by row,
// and unpack each into the padded tile; the write is transpose_tiled_padded's.
// A row of in starts 16-byte aligned only when n is a multiple of PER; for
// other n, and for a vector that would cross the right edge of the matrix,
// the thread falls back to guarded scalar loads, so any shape works. The
// test n % PER is the same for every thread, so aligned shapes never diverge.
// Unpacking a float4 into four consecutive words of the padded rows: with
// TILE = 32 a warp covers 4 tile rows x 8 vectors, words r * 33 + 4v + q, 32
// distinct banks for each q. For double the pattern leaves a 2-way conflict.
template <typename T, int TILE, int ROWS>
__global__ void transpose_tiled_vec4(const T* __restrict__ in, T* __restrict__ out, int m, int n) {
    using V = typename Vec16<T>::type;
    constexpr int PER = sizeof(V) / sizeof(T);
    constexpr int VECS_PER_ROW = TILE / PER;
    static_assert(TILE % ROWS == 0, "each thread writes TILE / ROWS whole rows");
    static_assert(TILE % PER == 0, "a tile row holds whole vectors");
    __shared__ T tile[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    const bool rows_aligned = n % PER == 0;
#pragma unroll
    for (int v = ty * TILE + tx; v < TILE * VECS_PER_ROW; v += TILE * ROWS) {
        const int r = v / VECS_PER_ROW;
        const int c = (v % VECS_PER_ROW) * PER;
        const int row = row0 + r, col = col0 + c;
        if (row >= m) {
            continue;
        }
        if (rows_aligned && col < n) {  // col and n are multiples of PER: the whole vector is inside
            const V piece = *reinterpret_cast<const V*>(in + row * n + col);
            const T* parts = reinterpret_cast<const T*>(&piece);
#pragma unroll
            for (int q = 0; q < PER; ++q) {
                tile[r][c + q] = parts[q];
            }
        } else {
#pragma unroll
            for (int q = 0; q < PER; ++q) {
                if (col + q < n) {
                    tile[r][c + q] = in[row * n + col + q];
                }
            }
        }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < TILE; j += ROWS) {
        if (col0 + ty + j < n && row0 + tx < m) {
            out[(col0 + ty + j) * m + row0 + tx] = tile[tx][ty + j];
        }
    }
}
