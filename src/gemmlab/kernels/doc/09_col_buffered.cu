// col_buffered: one block per column j of C, one thread per row.
// Source: the 2014 Kursk paper, launched <<<N, N>>>. Launch: grid N, block M,
// dynamic shared memory K elements.
// The block first copies column j of B into shared memory; consecutive threads
// read elements N apart, so that copy is uncoalesced. Each thread then walks its
// row of A, again with a stride of K between neighbouring threads. The paper
// found it slower than the naive kernel: caching the wrong operand does not help.
template <typename T>
__global__ void col_buffered(const T* __restrict__ a, const T* __restrict__ b,
                             T* __restrict__ c, int m, int n, int k) {
    extern __shared__ unsigned char smem_raw[];
    T* b_col = reinterpret_cast<T*>(smem_raw);
    const int col = blockIdx.x;
    const int row = threadIdx.x;
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
        b_col[i] = b[i * n + col];
    }
    __syncthreads();
    T acc = 0;
    for (int i = 0; i < k; ++i) {
        acc += a[row * k + i] * b_col[i];
    }
    c[row * n + col] = acc;
}
