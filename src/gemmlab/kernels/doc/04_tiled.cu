// tiled: B x B tiles of A and B staged in shared memory.
// Source: the 2014 Poznan report, version 3; the 2023 int32 lab's shared-memory
// kernel (tiled_i32 is this file with T = int); the Kursk paper's blocked kernel.
// Launch: grid (N/B, M/B), block (B, B).
// Each thread loads one element of each tile, the block waits, then every thread
// reads B values of the A tile and B of the B tile from shared memory. A global
// load now feeds B multiply-adds instead of one: CGMA = B. Two barriers per tile:
// the first so the tile is complete before use, the second so nobody overwrites
// it while a slower warp still reads it.
template <typename T, int B>
__global__ void tiled(const T* __restrict__ a, const T* __restrict__ b,
                      T* __restrict__ c, int m, int n, int k) {
    __shared__ T a_tile[B][B];
    __shared__ T b_tile[B][B];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * B + ty;
    const int col = blockIdx.x * B + tx;
    T acc = 0;
    for (int t = 0; t < k; t += B) {
        a_tile[ty][tx] = a[row * k + t + tx];
        b_tile[ty][tx] = b[(t + ty) * n + col];
        __syncthreads();
#pragma unroll
        for (int i = 0; i < B; ++i) {
            acc += a_tile[ty][i] * b_tile[i][tx];
        }
        __syncthreads();
    }
    c[row * n + col] = acc;
}
