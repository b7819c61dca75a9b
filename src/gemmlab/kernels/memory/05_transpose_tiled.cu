// transpose_tiled: out (n x m) = transpose of in (m x n) through a TILE x TILE
// tile of shared memory.
// Source: the 2014 Brno lecture. Launch: grid (ceil(n/TILE), ceil(m/TILE)),
// block (TILE, ROWS); each thread moves TILE/ROWS elements. TILE and ROWS are
// template parameters (the catalogue uses ROWS = TILE/4, the lecture's 32 x 8).
// The block reads its tile by rows (coalesced), waits, and writes the
// transposed tile by rows of out (coalesced too): the transposition happens in
// shared memory, where a strided access costs little. Little, not nothing:
// reading tile[tx][...] down a column puts a warp's 32 accesses TILE words
// apart, all in one bank when TILE is 32, so they are served one after
// another; transpose_tiled_padded removes that.
// Matrices of any shape: tile element (r, c) is stored only when (row0 + r,
// col0 + c) is inside in, and read back only by the thread whose guarded
// store writes exactly that element, so nothing unloaded is ever used.
template <typename T, int TILE, int ROWS>
__global__ void transpose_tiled(const T* __restrict__ in, T* __restrict__ out, int m, int n) {
    static_assert(TILE % ROWS == 0, "each thread moves TILE / ROWS whole rows");
    __shared__ T tile[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
#pragma unroll
    for (int j = 0; j < TILE; j += ROWS) {
        if (row0 + ty + j < m && col0 + tx < n) {
            tile[ty + j][tx] = in[(row0 + ty + j) * n + col0 + tx];
        }
    }
    __syncthreads();
    // The block now writes rows col0 .. col0 + TILE - 1 of out, columns row0 + tx.
#pragma unroll
    for (int j = 0; j < TILE; j += ROWS) {
        if (col0 + ty + j < n && row0 + tx < m) {
            out[(col0 + ty + j) * m + row0 + tx] = tile[tx][ty + j];
        }
    }
}
