// A faulty kernel: it never finishes. Each block waits for a "ready" flag in
// shared memory that its author meant the first thread to set after loading a
// tile, but the line that sets it was lost, so every thread waits forever.
//
// gemmlab's watchdog stops it: the point is stored as a "hang" with the time
// limit it was given, the process that ran it is killed (which frees the GPU),
// and a sweep goes on with its next point.
//
// The flag is volatile so that every pass of the loop reads shared memory
// again; a loop that reads a plain variable and does nothing else may be
// assumed to end, and the compiler could drop it.

#define TILE 16

extern "C" __global__ void matmul_hang(const float *A, const float *B, float *C, int n)
{
    __shared__ volatile int ready;
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        ready = 0;
    }
    __syncthreads();
    while (ready == 0) {
        // waiting for a store that never comes
    }

    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        sum += A[row * n + i] * B[i * n + col];
    }
    C[row * n + col] = sum;
}
