// 16-byte global access for the vectorised rungs (sgemm_vectorized onwards):
// a guarded float4 load, the guarded alpha/beta float4 store, and the
// alignment test that picks between the 16-byte and the scalar path. Inlined
// into each rung's source by gemmlab before NVRTC sees it.

// Four consecutive elements src[row][col .. col+3] of a rows x cols row-major
// matrix, zero outside it. vec: cols is a multiple of 4 and src 16-byte
// aligned, so the four are one aligned float4, wholly inside or wholly outside.
__device__ __forceinline__ float4 load4(const float* __restrict__ src, int row, int col, int rows,
                                        int cols, bool vec) {
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row >= rows || col >= cols) {
        return v;
    }
    const float* p = src + row * cols + col;
    if (vec) {
        return *reinterpret_cast<const float4*>(p);
    }
    v.x = p[0];
    if (col + 1 < cols) v.y = p[1];
    if (col + 2 < cols) v.z = p[2];
    if (col + 3 < cols) v.w = p[3];
    return v;
}

// c_out[row][col .. col+3] = alpha * v + beta * c_in[row][col .. col+3], the
// parts inside the m x n matrix only; c_in is not read when beta == 0.
__device__ __forceinline__ void store4(const float* c_in, float* c_out, int row, int col, int m, int n,
                                       float4 v, float alpha, float beta, bool vec) {
    if (row >= m || col >= n) {
        return;
    }
    const int idx = row * n + col;
    float r[4] = {alpha * v.x, alpha * v.y, alpha * v.z, alpha * v.w};
    if (vec) {
        if (beta != 0.f) {
            const float4 old = *reinterpret_cast<const float4*>(c_in + idx);
            r[0] += beta * old.x;
            r[1] += beta * old.y;
            r[2] += beta * old.z;
            r[3] += beta * old.w;
        }
        *reinterpret_cast<float4*>(c_out + idx) = make_float4(r[0], r[1], r[2], r[3]);
        return;
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        if (col + q < n) {
            c_out[idx + q] = beta == 0.f ? r[q] : r[q] + beta * c_in[idx + q];
        }
    }
}

__device__ __forceinline__ bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}
