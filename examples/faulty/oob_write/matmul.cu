// A tiled product for any M, N, K, with one character wrong: the store's
// bounds test says `row <= M`. The loads are guarded properly (rows past the
// matrix load zeros), so the thread of row M computes 0 and writes it one row
// past the end of C. When M is a multiple of TILE no such thread exists and
// the kernel is right, which is why it passed its author's tests at 512.
//
// C (M x N) = A (M x K) . B (K x N), row-major.

#define TILE 16

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
        __syncthreads();
    }
    if (row <= M && col < N) {  // the bug: row == M is one row past C
        C[row * N + col] = sum;
    }
}
