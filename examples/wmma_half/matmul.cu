// Tensor cores from CUDA C++ with WMMA (<mma.h>): one warp computes one
// 16 x 16 tile of C = A.B, 16 x 16 x 16 products at a time, accumulating in
// float and rounding C to the inputs' type once at the end (float16 or
// bfloat16, as gemmlab checks a user's 16-bit kernel). A, B, C row-major;
// M, N and K multiples of 16 (the declaration's accepts).
#include <mma.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

using namespace nvcuda;

template <typename T>
__global__ void matmul_wmma(const T *A, const T *B, T *C, int M, int N, int K)
{
    __shared__ float tile[16 * 16];
    int row = blockIdx.y * 16, col = blockIdx.x * 16;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> sum;
    wmma::fill_fragment(sum, 0.0f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + row * K + k, K);
        wmma::load_matrix_sync(b, B + k * N + col, N);
        wmma::mma_sync(sum, a, b, sum);
    }
    // Through shared memory: the fragment's layout across the warp's lanes is the hardware's.
    wmma::store_matrix_sync(tile, sum, 16, wmma::mem_row_major);
    __syncwarp();
    for (int i = threadIdx.x; i < 16 * 16; i += 32) {
        C[(row + i / 16) * N + col + i % 16] = T(tile[i]);
    }
}
