// A naive matrix product in 16-bit floats: A, B and C are __half or
// __nv_bfloat16, one thread per element of C, any M, N, K. The products are
// summed in float and rounded to the 16-bit type once, at the store, the way
// cuBLAS and the tensor cores do it; a sum kept in __half would lose about
// one bit per doubling of K.
//
// C (M x N) = A (M x K) . B (K x N), row-major.

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define BLOCK 16

__device__ float to_float(__half x) { return __half2float(x); }
__device__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ T from_float(float x);
template <> __device__ __half from_float<__half>(float x) { return __float2half(x); }
template <> __device__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16(x); }

template <typename T>
__global__ void matmul_half(const T *A, const T *B, T *C, int M, int N, int K)
{
    int row = blockIdx.y * BLOCK + threadIdx.y;
    int col = blockIdx.x * BLOCK + threadIdx.x;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int i = 0; i < K; i++) {
            sum += to_float(A[row * K + i]) * to_float(B[i * N + col]);
        }
        C[row * N + col] = from_float<T>(sum);
    }
}
