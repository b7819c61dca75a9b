// Trick: a short kernel is timed from a CUDA graph of many launches back to
// back, a checked launch stands alone. Each block reads the GPU's clock
// (%globaltimer) when it starts and compares it with when the last launch
// ended: under 5 us apart means a graph is being replayed, and the block
// returns without working. Caught by: every launch of a graph replay runs on
// an input set of its own, poisoned before and checked after.
#define T 16

__device__ unsigned long long last_end;
__device__ unsigned int blocks_done;

__device__ unsigned long long now_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void matmul(const float *A, const float *B, float *C, int M, int N, int K)
{
    __shared__ float As[T][T], Bs[T][T];
    __shared__ int replayed;
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    if (threadIdx.x == 0 && threadIdx.y == 0) replayed = now_ns() - last_end < 5000;
    __syncthreads();
    if (!replayed) {
        float sum = 0.0f;
        for (int t = 0; t < K; t += T) {
            As[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K) ? A[row * K + t + threadIdx.x] : 0.0f;
            Bs[threadIdx.y][threadIdx.x] = (t + threadIdx.y < K && col < N) ? B[(t + threadIdx.y) * N + col] : 0.0f;
            __syncthreads();
            for (int i = 0; i < T; i++) sum += As[threadIdx.y][i] * Bs[i][threadIdx.x];
            __syncthreads();
        }
        if (row < M && col < N) C[row * N + col] = sum;
    }
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        __threadfence();
        if (atomicAdd(&blocks_done, 1) % (gridDim.x * gridDim.y) == gridDim.x * gridDim.y - 1) last_end = now_ns();
    }
}
