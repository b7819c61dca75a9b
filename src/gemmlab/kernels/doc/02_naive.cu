// naive: one output per thread, global memory only.
// Source: the 2014 Poznan report, version 2; the 2023 int32 lab's first kernel
// (naive_i32 is this file with T = int). Launch: grid (N/B, M/B), block (B, B).
// threadIdx.x walks a row of C, so a warp reads consecutive elements of B and
// writes consecutive elements of C (coalesced), while all its threads read the
// same element of A (a broadcast). Each multiply-add costs two global loads:
// CGMA = 1, which is why this kernel is bound by memory, not arithmetic.
template <typename T, int B>
__global__ void naive(const T* __restrict__ a, const T* __restrict__ b,
                      T* __restrict__ c, int m, int n, int k) {
    const int row = blockIdx.y * B + threadIdx.y;
    const int col = blockIdx.x * B + threadIdx.x;
    T acc = 0;
    for (int i = 0; i < k; ++i) {
        acc += a[row * k + i] * b[i * n + col];
    }
    c[row * n + col] = acc;
}
