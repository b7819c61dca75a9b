// transpose_tiled_padded: transpose_tiled with one unused column in the tile.
// Source: the 2014 Brno lecture (93.4 GB/s against 75.1 unpadded on a GTX 280).
// Launch: grid (ceil(n/TILE), ceil(m/TILE)), block (TILE, ROWS); TILE and ROWS
// are template parameters (the catalogue uses ROWS = TILE/4, the lecture's 32 x 8).
// Shared memory has 32 banks of 4 bytes; word w lives in bank w % 32. With
// rows of TILE = 32 floats, the column read tile[tx][ty + j] of a warp hits
// words tx * 32 + const: one bank, a 32-way conflict, 32 serial accesses.
// With rows of TILE + 1 = 33 words the same read hits (tx * 33 + const) % 32
// = (tx + const) % 32: 32 different banks, one access. For double the rows
// are 66 words, and the 64-bit accesses of each half-warp land in distinct
// bank pairs as well. The price is one column of shared memory per tile.
template <typename T, int TILE, int ROWS>
__global__ void transpose_tiled_padded(const T* __restrict__ in, T* __restrict__ out, int m, int n) {
    static_assert(TILE % ROWS == 0, "each thread moves TILE / ROWS whole rows");
    __shared__ T tile[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
#pragma unroll
    for (int j = 0; j < TILE; j += ROWS) {
        if (row0 + ty + j < m && col0 + tx < n) {
            tile[ty + j][tx] = in[(row0 + ty + j) * n + col0 + tx];
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
