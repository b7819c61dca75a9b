// Trick: exact float32 on the first two launches (the checked warm-up), then
// inputs rounded to bfloat16: the answer still looks right to the eye, with
// an error 100 times float32's. Caught by: the check after every timed
// launch, against the float64 sketch of the new inputs' product.
#include <cuda_bf16.h>
#define T 16

__device__ unsigned int blocks_started;

extern "C" __global__ void matmul(const float *A, const float *B, float *C, int M, int N, int K)
{
    __shared__ float As[T][T], Bs[T][T];
    __shared__ unsigned int launch;
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    if (threadIdx.x == 0 && threadIdx.y == 0) launch = atomicAdd(&blocks_started, 1) / (gridDim.x * gridDim.y);
    __syncthreads();
    bool coarse = launch >= 2;
    float sum = 0.0f;
    for (int t = 0; t < K; t += T) {
        float a = (row < M && t + threadIdx.x < K) ? A[row * K + t + threadIdx.x] : 0.0f;
        float b = (t + threadIdx.y < K && col < N) ? B[(t + threadIdx.y) * N + col] : 0.0f;
        As[threadIdx.y][threadIdx.x] = coarse ? __bfloat162float(__float2bfloat16(a)) : a;
        Bs[threadIdx.y][threadIdx.x] = coarse ? __bfloat162float(__float2bfloat16(b)) : b;
        __syncthreads();
        for (int i = 0; i < T; i++) sum += As[threadIdx.y][i] * Bs[i][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = sum;
}
