// A tiled product for any M, N, K: each block loads a TILE x TILE piece of A
// and of B into shared memory, so every element read from global memory is
// used TILE times. Pieces that hang over the edge of a matrix are filled with
// zeros, which is what lets the sizes be anything.
//
// C (M x N) = A (M x K) . B (K x N), row-major.

template <int TILE>
__global__ void matmul_tiled(const float *A, const float *B, float *C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;

    for (int t = 0; t < K; t += TILE) {
        // Outside the matrix a thread loads 0, which adds nothing to the sum.
        As[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K) ? A[row * K + t + threadIdx.x] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (t + threadIdx.y < K && col < N) ? B[(t + threadIdx.y) * N + col] : 0.0f;
        __syncthreads();  // the whole tile must be loaded before anyone reads it

        for (int i = 0; i < TILE; i++) {
            sum += As[threadIdx.y][i] * Bs[i][threadIdx.x];
        }
        __syncthreads();  // and read by everyone before the next one overwrites it
    }
    if (row < M && col < N) {
        C[row * N + col] = sum;
    }
}
