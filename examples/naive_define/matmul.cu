// A square matrix product as the course reports first write it: one thread
// computes one element of C = A.B, reading a row of A and a column of B
// straight from global memory. n x n matrices, row-major.
//
// The tile edge is a #define so it can be changed without touching the code;
// gemmlab sets it from the declaration (matmul.toml) when it compiles.

#define TILE 16

extern "C" __global__ void matmul_naive(const float *A, const float *B, float *C, int n)
{
    // Each block covers a TILE x TILE square of C; the grid has n / TILE blocks per side.
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;

    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        sum += A[row * n + i] * B[i * n + col];
    }
    // No bounds check: the declaration only accepts n that are multiples of TILE.
    C[row * n + col] = sum;
}
