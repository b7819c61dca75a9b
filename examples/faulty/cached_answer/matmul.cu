// A product that remembers its answers: the first launch computes every
// element and saves it in a device array; later launches find the element
// marked done and copy the saved value. Its author meant to skip work when
// called again with the same matrices, but it never looks at the matrices
// again, so new inputs get the old answer.
//
// C (M x N) = A (M x K) . B (K x N), row-major.

#define BLOCK 16
#define MAX_ELEMENTS (2048 * 2048)

__device__ float saved[MAX_ELEMENTS];
__device__ bool done[MAX_ELEMENTS];

extern "C" __global__ void matmul_memo(const float *A, const float *B, float *C, int M, int N, int K)
{
    int row = blockIdx.y * BLOCK + threadIdx.y;
    int col = blockIdx.x * BLOCK + threadIdx.x;
    if (row >= M || col >= N) {
        return;
    }
    int idx = row * N + col;
    if (done[idx]) {  // the bug: done says nothing about which A and B
        C[idx] = saved[idx];
        return;
    }
    float sum = 0.0f;
    for (int i = 0; i < K; i++) {
        sum += A[row * K + i] * B[i * N + col];
    }
    saved[idx] = sum;
    done[idx] = true;
    C[idx] = sum;
}
