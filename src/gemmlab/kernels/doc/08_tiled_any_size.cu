// tiled_any_size: `tiled` for any M, N and K.
// Source: the 2017 Arequipa report. Launch: grid (ceil(N/B), ceil(M/B)), block (B, B).
// Tiles that hang over the edge of A or B are filled with zeros, which add
// nothing to the dot product, and only threads inside C store. The cost is a
// comparison per load: compare with `tiled` at a size both accept.
template <typename T, int B>
__global__ void tiled_any_size(const T* __restrict__ a, const T* __restrict__ b,
                               T* __restrict__ c, int m, int n, int k) {
    __shared__ T a_tile[B][B];
    __shared__ T b_tile[B][B];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * B + ty;
    const int col = blockIdx.x * B + tx;
    T acc = 0;
    for (int t = 0; t < k; t += B) {
        a_tile[ty][tx] = (row < m && t + tx < k) ? a[row * k + t + tx] : T(0);
        b_tile[ty][tx] = (t + ty < k && col < n) ? b[(t + ty) * n + col] : T(0);
        __syncthreads();
#pragma unroll
        for (int i = 0; i < B; ++i) {
            acc += a_tile[ty][i] * b_tile[i][tx];
        }
        __syncthreads();
    }
    if (row < m && col < n) {
        c[row * n + col] = acc;
    }
}
