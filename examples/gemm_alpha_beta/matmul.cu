// GEMM as BLAS defines it: C = alpha * A.B + beta * C, so C is read as well
// as written. One thread per element of C, any M, N, K, float32, row-major.

#define BLOCK 16

extern "C" __global__ void gemm(int M, int N, int K, float alpha, const float *A, const float *B,
                                float beta, float *C)
{
    int row = blockIdx.y * BLOCK + threadIdx.y;
    int col = blockIdx.x * BLOCK + threadIdx.x;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int i = 0; i < K; i++) {
            sum += A[row * K + i] * B[i * N + col];
        }
        C[row * N + col] = alpha * sum + beta * C[row * N + col];
    }
}
