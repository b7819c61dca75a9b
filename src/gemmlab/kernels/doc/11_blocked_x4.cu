// blocked_x4: B x B tiles loaded by B x B/4 threads; each thread loads four
// elements of each tile and computes four outputs, in rows ty, ty + B/4,
// ty + B/2 and ty + 3B/4 of the tile.
// Source: the 2014 Kursk paper's "unroll 4" kernel. Launch: grid (N/B, M/B),
// block (B, B/4).
// A quarter of the threads do the same work, so each value of the B tile read
// from shared memory feeds four multiply-adds. The paper's version stored C
// inside the tile loop; here each output is stored once, after the last tile.
template <typename T, int B>
__global__ void blocked_x4(const T* __restrict__ a, const T* __restrict__ b,
                           T* __restrict__ c, int m, int n, int k) {
    constexpr int Q = B / 4;
    __shared__ T a_tile[B][B];
    __shared__ T b_tile[B][B];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * B + ty;
    const int col = blockIdx.x * B + tx;
    T acc[4] = {0, 0, 0, 0};
    for (int t = 0; t < k; t += B) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            a_tile[ty + r * Q][tx] = a[(row + r * Q) * k + t + tx];
            b_tile[ty + r * Q][tx] = b[(t + ty + r * Q) * n + col];
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < B; ++i) {
            const T b_val = b_tile[i][tx];
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                acc[r] += a_tile[ty + r * Q][i] * b_val;
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        c[(row + r * Q) * n + col] = acc[r];
    }
}
