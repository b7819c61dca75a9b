// sgemm_coalesced: the first rung of the FP32 ladder, C = alpha * A.B + beta * C.
// Source: not from the documents; it restates the documents' `naive` kernel in
// the form every later rung keeps: any M, N, K, and full SGEMM semantics.
// Launch: grid (ceil(N/BX), ceil(M/BY)), block (BX, BY); one output per thread.
// Idea: threadIdx.x walks along a row of C, so a warp reads 32 consecutive
// floats of B (one 128-byte line) and one broadcast float of A per step, and
// writes 32 consecutive floats of C. Every multiply-add still costs two global
// loads (CGMA = 1); the L1 cache, not the kernel, provides the reuse.
//
// Every kernel of this ladder takes the same arguments:
//   a (M x K), b (K x N): row-major inputs;
//   c_in (M x N): the C that beta scales, only read where beta != 0 (as in
//     BLAS, C may then hold anything, NaN included);
//   c_out (M x N): where alpha * A.B + beta * c_in goes. c_in and c_out may
//     be the same buffer (in place): each element is read once, by the thread
//     that writes it, so neither carries __restrict__.
// T is float: the catalogue's first template argument is the data type, and
// this ladder is FP32 only (FFMA, no tensor cores).
template <typename T, int BX, int BY>
__global__ void __launch_bounds__(BX * BY)
sgemm_coalesced(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out,
                int m, int n, int k, T alpha, T beta) {
    const int col = blockIdx.x * BX + threadIdx.x;
    const int row = blockIdx.y * BY + threadIdx.y;
    if (row >= m || col >= n) {
        return;
    }
    const T* a_row = a + row * k;
    T acc = 0;
    for (int i = 0; i < k; ++i) {
        acc += a_row[i] * b[i * n + col];
    }
    const int idx = row * n + col;
    c_out[idx] = beta == T(0) ? alpha * acc : alpha * acc + beta * c_in[idx];
}
