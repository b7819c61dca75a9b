// Trick: count launches in device memory. The runner's checked launches come
// first (two warm-ups, then the check), so a kernel that works on its first
// three launches and returns at once after them passes the check and is
// timed doing nothing. Caught by: the check after every timed launch.
#define T 16

__device__ unsigned int blocks_started;

extern "C" __global__ void matmul(const float *A, const float *B, float *C, int M, int N, int K)
{
    __shared__ float As[T][T], Bs[T][T];
    __shared__ unsigned int launch;
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    if (threadIdx.x == 0 && threadIdx.y == 0) launch = atomicAdd(&blocks_started, 1) / (gridDim.x * gridDim.y);
    __syncthreads();
    if (launch >= 3) return;
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
