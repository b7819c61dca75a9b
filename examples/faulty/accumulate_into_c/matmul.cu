// A naive product that adds straight into C, saving a register: correct only
// if C starts at zero, which nobody promised. cudaMalloc'd memory often is
// zero the first time, so it can pass a quick test and fail on the second call.
//
// C (n x n) = A (n x n) . B (n x n), row-major.

#define TILE 16

extern "C" __global__ void matmul_accumulate(const float *A, const float *B, float *C, int n)
{
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    if (row < n && col < n) {
        for (int i = 0; i < n; i++) {
            C[row * n + col] += A[row * n + i] * B[i * n + col];  // the bug: C is never set to 0 first
        }
    }
}
