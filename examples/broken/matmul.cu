// Deliberately broken: `sum` is used but never declared, so NVRTC refuses
// the file. gemmlab's tests check that the error names this file and line 11.

#define TILE 16

extern "C" __global__ void matmul_broken(const float *A, const float *B, float *C, int n)
{
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    for (int i = 0; i < n; i++) {
        sum += A[row * n + i] * B[i * n + col];
    }
    C[row * n + col] = 0.0f;
}
