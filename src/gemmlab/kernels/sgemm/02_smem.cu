// sgemm_smem: TILE x TILE tiles of A and B staged in shared memory.
// Source: the documents' `tiled_any_size` (Arequipa 2017), as an SGEMM rung.
// Launch: grid (ceil(N/TILE), ceil(M/TILE)), block (TILE, TILE).
// Idea: the block loads one tile of A and one of B with one element per
// thread, then every thread reads TILE values of each from shared memory, so
// a global load feeds TILE multiply-adds instead of one (CGMA = TILE). Tiles
// that hang over the edge of A or B are filled with zeros, which add nothing,
// and only threads inside C store. What it should gain over sgemm_coalesced:
// the global traffic falls by TILE, but each FFMA now needs two shared-memory
// loads, and shared memory becomes the limit (1 FFMA : 2 LDS).
template <typename T, int TILE>
__global__ void __launch_bounds__(TILE * TILE)
sgemm_smem(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out,
           int m, int n, int k, T alpha, T beta) {
    __shared__ T a_tile[TILE][TILE];
    __shared__ T b_tile[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    T acc = 0;
    for (int k0 = 0; k0 < k; k0 += TILE) {
        a_tile[ty][tx] = (row < m && k0 + tx < k) ? a[row * k + k0 + tx] : T(0);
        b_tile[ty][tx] = (k0 + ty < k && col < n) ? b[(k0 + ty) * n + col] : T(0);
        __syncthreads();  // the tiles are complete before anyone reads them
#pragma unroll
        for (int i = 0; i < TILE; ++i) {
            acc += a_tile[ty][i] * b_tile[i][tx];
        }
        __syncthreads();  // nobody overwrites a tile a slower warp still reads
    }
    if (row < m && col < n) {
        const int idx = row * n + col;
        c_out[idx] = beta == T(0) ? alpha * acc : alpha * acc + beta * c_in[idx];
    }
}
