// tiled_prefetch_smem: `tiled` with two pairs of shared-memory tiles: while the
// block computes on one pair, it loads the next tiles into the other.
// Source: the 2014 Poznan report, version 4b. Launch: grid (N/B, M/B), block (B, B).
// Twice the shared memory of `tiled`. With two buffers one barrier per tile is
// enough: the buffer written in step t was last read in step t-1, which ended
// with a barrier. As in `tiled_prefetch_reg`, the last step fetches nothing, so
// no out-of-bounds read (the report's version read one tile past the end).
template <typename T, int B>
__global__ void tiled_prefetch_smem(const T* __restrict__ a, const T* __restrict__ b,
                                    T* __restrict__ c, int m, int n, int k) {
    __shared__ T a_tile[2][B][B];
    __shared__ T b_tile[2][B][B];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * B + ty;
    const int col = blockIdx.x * B + tx;
    a_tile[0][ty][tx] = a[row * k + tx];
    b_tile[0][ty][tx] = b[ty * n + col];
    __syncthreads();
    T acc = 0;
    int buf = 0;
    for (int t = 0; t < k; t += B) {
        if (t + B < k) {
            a_tile[buf ^ 1][ty][tx] = a[row * k + t + B + tx];
            b_tile[buf ^ 1][ty][tx] = b[(t + B + ty) * n + col];
        }
#pragma unroll
        for (int i = 0; i < B; ++i) {
            acc += a_tile[buf][ty][i] * b_tile[buf][i][tx];
        }
        __syncthreads();
        buf ^= 1;
    }
    c[row * n + col] = acc;
}
