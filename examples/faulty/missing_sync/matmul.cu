// A tiled product missing its second __syncthreads: a fast warp can load the
// next tile of A and B into shared memory while a slower warp of the same
// block still reads the current one. Whether that changes the result depends
// on timing, so it may pass a run and fail the next.
//
// C (M x N) = A (M x K) . B (K x N), row-major.

#define TILE 32

extern "C" __global__ void matmul_tiled(const float *A, const float *B, float *C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;

    for (int t = 0; t < K; t += TILE) {
        As[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K) ? A[row * K + t + threadIdx.x] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (t + threadIdx.y < K && col < N) ? B[(t + threadIdx.y) * N + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; i++) {
            sum += As[threadIdx.y][i] * Bs[i][threadIdx.x];
        }
        // the bug: no __syncthreads() here before the next tile overwrites As and Bs
    }
    if (row < M && col < N) {
        C[row * N + col] = sum;
    }
}
