// Trick: take float32 and give float32, but round every input to bfloat16
// first (on the tensor cores that would be 16 times the FP32 rate). Caught
// by: the precision judgment at the first check ("computes at lower
// precision than float32 ... it looks like bfloat16 arithmetic").
#include <cuda_bf16.h>
#define T 16

extern "C" __global__ void matmul(const float *A, const float *B, float *C, int M, int N, int K)
{
    __shared__ float As[T][T], Bs[T][T];
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    float sum = 0.0f;
    for (int t = 0; t < K; t += T) {
        float a = (row < M && t + threadIdx.x < K) ? A[row * K + t + threadIdx.x] : 0.0f;
        float b = (t + threadIdx.y < K && col < N) ? B[(t + threadIdx.y) * N + col] : 0.0f;
        As[threadIdx.y][threadIdx.x] = __bfloat162float(__float2bfloat16(a));
        Bs[threadIdx.y][threadIdx.x] = __bfloat162float(__float2bfloat16(b));
        __syncthreads();
        for (int i = 0; i < T; i++) sum += As[threadIdx.y][i] * Bs[i][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = sum;
}
