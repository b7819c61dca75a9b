// transpose_tiled_diagonal: transpose_tiled_padded with the blocks visited in
// diagonal order.
// Source: the idea comes from NVIDIA's matrix-transpose study that the Brno
// lecture follows ("partition camping"); not measured in the lecture itself.
// Launch: as transpose_tiled_padded, grid (ceil(n/TILE), ceil(m/TILE)),
// block (TILE, ROWS).
// Blocks that run at the same time have neighbouring linear ids. In row-major
// order they read one band of rows of the input but write one band of
// COLUMNS of the output: addresses TILE * m elements apart, which for a
// power-of-two m can all fall into the same few DRAM channels. Renumbering the
// blocks along diagonals spreads both the reads and the writes of concurrent
// blocks over different columns and rows. Nothing else changes, so any gain is
// the memory system's, not the SM's.
template <typename T, int TILE, int ROWS>
__global__ void transpose_tiled_diagonal(const T* __restrict__ in, T* __restrict__ out, int m, int n) {
    static_assert(TILE % ROWS == 0, "each thread moves TILE / ROWS whole rows");
    __shared__ T tile[TILE][TILE + 1];
    // Linear id in launch order, then the diagonal walk: block i of diagonal d
    // takes tile row i and tile column (i + d) mod gridDim.x. Works for any grid
    // shape: every (row, column) pair is visited exactly once.
    const int linear = blockIdx.x + gridDim.x * blockIdx.y;
    const int tile_row = linear % gridDim.y;
    const int tile_col = (linear / gridDim.y + tile_row) % gridDim.x;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = tile_row * TILE, col0 = tile_col * TILE;
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
