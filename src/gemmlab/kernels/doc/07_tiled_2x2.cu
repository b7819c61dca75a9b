// tiled_2x2: register prefetch as in `tiled_prefetch_reg`, and each thread now
// computes a 2 x 2 block of C.
// Source: the 2014 Poznan report, version 5. Launch: grid (N/2B, M/2B), block (B, B).
// The block covers a 2B x 2B tile of C from a 2B x B tile of A and a B x 2B tile
// of B. A thread's outputs sit at (ty, tx), (ty, tx+B), (ty+B, tx), (ty+B, tx+B),
// so a warp still reads consecutive shared-memory words. Each value read from
// shared memory now feeds two multiply-adds, and the prefetch lives in four
// scalar registers (not an array, which the compiler could move to local memory).
template <typename T, int B>
__global__ void tiled_2x2(const T* __restrict__ a, const T* __restrict__ b,
                          T* __restrict__ c, int m, int n, int k) {
    __shared__ T a_tile[2 * B][B];
    __shared__ T b_tile[B][2 * B];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 2 * B + ty;
    const int col = blockIdx.x * 2 * B + tx;
    T a_next0 = a[row * k + tx];
    T a_next1 = a[(row + B) * k + tx];
    T b_next0 = b[ty * n + col];
    T b_next1 = b[ty * n + col + B];
    T c00 = 0, c01 = 0, c10 = 0, c11 = 0;
    for (int t = 0; t < k; t += B) {
        a_tile[ty][tx] = a_next0;
        a_tile[ty + B][tx] = a_next1;
        b_tile[ty][tx] = b_next0;
        b_tile[ty][tx + B] = b_next1;
        __syncthreads();
        if (t + B < k) {
            a_next0 = a[row * k + t + B + tx];
            a_next1 = a[(row + B) * k + t + B + tx];
            b_next0 = b[(t + B + ty) * n + col];
            b_next1 = b[(t + B + ty) * n + col + B];
        }
#pragma unroll
        for (int i = 0; i < B; ++i) {
            const T a0 = a_tile[ty][i], a1 = a_tile[ty + B][i];
            const T b0 = b_tile[i][tx], b1 = b_tile[i][tx + B];
            c00 += a0 * b0;
            c01 += a0 * b1;
            c10 += a1 * b0;
            c11 += a1 * b1;
        }
        __syncthreads();
    }
    c[row * n + col] = c00;
    c[row * n + col + B] = c01;
    c[(row + B) * n + col] = c10;
    c[(row + B) * n + col + B] = c11;
}
