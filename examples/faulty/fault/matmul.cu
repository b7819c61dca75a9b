// A faulty kernel: it stores its results through a wild index, 2^40 elements
// (4 TiB) past the start of C, far outside any allocation, the way a corrupted
// or uninitialised index would. The GPU stops it with an illegal-address
// error (CUDA_ERROR_ILLEGAL_ADDRESS, 700), after which the CUDA context of the
// process that launched it cannot be used again.
//
// gemmlab's watchdog runs it in a process of its own: the point is stored as a
// "fault" naming the error, that process is ended, and a sweep goes on with its
// next point in a fresh one. `gemmlab check` (compute-sanitizer) names the line.

#define TILE 16

extern "C" __global__ void matmul_fault(const float *A, const float *B, float *C, int n)
{
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;

    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        sum += A[row * n + i] * B[i * n + col];
    }
    size_t wild = (size_t)1 << 40;  // the bug: an offset no matrix of this lab has
    C[wild + (size_t)row * n + col] = sum;
}
