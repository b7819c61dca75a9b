// naive_uncoalesced: the naive kernel with the roles of x and y swapped.
// Source: the 2014 Kursk paper's first GPU kernel ("in the forehead", 32 x 32
// threads). Launch: grid (M/B, N/B), block (B, B).
// threadIdx.x picks the ROW of C, so the 32 threads of a warp read A and write C
// with a stride of K and N elements: every access of the warp touches a different
// 32-byte sector. Compare with `naive` to see what coalescing is worth.
template <typename T, int B>
__global__ void naive_uncoalesced(const T* __restrict__ a, const T* __restrict__ b,
                                  T* __restrict__ c, int m, int n, int k) {
    const int row = blockIdx.x * B + threadIdx.x;
    const int col = blockIdx.y * B + threadIdx.y;
    T acc = 0;
    for (int i = 0; i < k; ++i) {
        acc += a[row * k + i] * b[i * n + col];
    }
    c[row * n + col] = acc;
}
