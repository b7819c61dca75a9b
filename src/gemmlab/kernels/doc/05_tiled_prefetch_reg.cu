// tiled_prefetch_reg: `tiled`, with the NEXT tiles fetched into registers while
// the current tiles in shared memory are being used.
// Source: the 2014 Poznan report, version 4a. Launch: grid (N/B, M/B), block (B, B).
// The global loads for tile t+1 are issued before the inner product over tile t,
// so their latency overlaps arithmetic instead of stalling the warp. The report's
// code also fetched a tile past the end of A and B on its last pass; here the
// fetch is skipped on the last tile, so nothing outside the matrices is read.
template <typename T, int B>
__global__ void tiled_prefetch_reg(const T* __restrict__ a, const T* __restrict__ b,
                                   T* __restrict__ c, int m, int n, int k) {
    __shared__ T a_tile[B][B];
    __shared__ T b_tile[B][B];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * B + ty;
    const int col = blockIdx.x * B + tx;
    T a_next = a[row * k + tx];
    T b_next = b[ty * n + col];
    T acc = 0;
    for (int t = 0; t < k; t += B) {
        a_tile[ty][tx] = a_next;
        b_tile[ty][tx] = b_next;
        __syncthreads();
        if (t + B < k) {
            a_next = a[row * k + t + B + tx];
            b_next = b[(t + B + ty) * n + col];
        }
#pragma unroll
        for (int i = 0; i < B; ++i) {
            acc += a_tile[ty][i] * b_tile[i][tx];
        }
        __syncthreads();
    }
    c[row * n + col] = acc;
}
