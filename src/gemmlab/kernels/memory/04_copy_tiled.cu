// copy_tiled: out = in through a TILE x TILE tile of shared memory.
// Source: the 2014 Brno lecture's tiled copy. Launch: grid (ceil(n/TILE),
// ceil(m/TILE)), block (TILE, ROWS); each thread moves TILE/ROWS elements, in
// rows ty, ty + ROWS, ... of the tile. TILE and ROWS are template parameters
// (the catalogue uses ROWS = TILE/4, the lecture's 32 x 8).
// Each thread reads back the very element it stored, so the barrier is not
// needed for correctness; it is kept so that this kernel pays everything the
// tiled transpose pays except the transposition itself, and the difference
// between the two is the cost of reading the tile by columns.
// Matrices of any shape: loads and stores outside the matrix are skipped.
template <typename T, int TILE, int ROWS>
__global__ void copy_tiled(const T* __restrict__ in, T* __restrict__ out, int m, int n) {
    static_assert(TILE % ROWS == 0, "each thread moves TILE / ROWS whole rows");
    __shared__ T tile[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int col = blockIdx.x * TILE + tx;
    const int row0 = blockIdx.y * TILE;
#pragma unroll
    for (int j = 0; j < TILE; j += ROWS) {
        if (row0 + ty + j < m && col < n) {
            tile[ty + j][tx] = in[(row0 + ty + j) * n + col];
        }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < TILE; j += ROWS) {
        if (row0 + ty + j < m && col < n) {
            out[(row0 + ty + j) * n + col] = tile[ty + j][tx];
        }
    }
}
