// copy: out = in for an m x n row-major matrix, one element per thread.
// Source: the 2014 Brno lecture's reference for the transposes. Launch: grid
// (ceil(n/B), ceil(m/B)), block (B, B); B is read from blockDim, so one build
// serves every block edge.
// The indexing is transpose_naive's, with the output index left untransposed:
// both the read and the write of a warp touch consecutive addresses. This is
// the speed a transpose would have if its writes were as well-behaved as its
// reads, the ceiling the other transposes are measured against.
template <typename T>
__global__ void copy(const T* __restrict__ in, T* __restrict__ out, int m, int n) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < m && col < n) {
        out[row * n + col] = in[row * n + col];
    }
}
