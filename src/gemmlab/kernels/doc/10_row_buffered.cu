// row_buffered: one block per row i of C, one thread per column.
// Source: the 2014 Kursk paper, launched <<<N, N>>>. Launch: grid M, block N,
// dynamic shared memory K elements.
// The block copies row i of A into shared memory with consecutive threads reading
// consecutive elements (coalesced); each thread then reads column `col` of B,
// where neighbouring threads read neighbouring elements (coalesced too), and the
// row of A is a shared-memory broadcast. The paper's fastest unblocked kernel.
template <typename T>
__global__ void row_buffered(const T* __restrict__ a, const T* __restrict__ b,
                             T* __restrict__ c, int m, int n, int k) {
    extern __shared__ unsigned char smem_raw[];
    T* a_row = reinterpret_cast<T*>(smem_raw);
    const int row = blockIdx.x;
    const int col = threadIdx.x;
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
        a_row[i] = a[row * k + i];
    }
    __syncthreads();
    T acc = 0;
    for (int i = 0; i < k; ++i) {
        acc += a_row[i] * b[i * n + col];
    }
    c[row * n + col] = acc;
}
