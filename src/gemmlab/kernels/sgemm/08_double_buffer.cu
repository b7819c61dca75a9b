// sgemm_double_buffer: sgemm_warptile whose tiles arrive by asynchronous
// copies (cp.async) into two stages of shared memory.
// Source: not from the documents; cp.async needs compute capability 8.0.
// Launch: as sgemm_warptile (static shared memory: 2 stages of BK x (BM + BN)).
// Idea: in sgemm_warptile a warp waits for its global loads (hundreds of
// cycles) before it stores them and reaches the barrier, and only other
// blocks on the SM compute meanwhile. Here the copy of tile t + 1 is issued
// straight from global to shared memory (no registers, no store
// instructions) and runs while tile t is computed:
//   wait for tile t's copies; barrier; issue tile t + 1 into the other stage;
//   compute tile t.
// The one barrier per tile serves both ends: tile t is complete for every
// thread, and every thread has finished tile t - 1, whose stage tile t + 1
// overwrites. cp.async.wait_group makes a thread's own copies visible to it;
// the barrier after it makes them visible to the block.
// Copies: B rows go in 16-byte cp.async.cg (through L2 only) when N is a
// multiple of 4, else in 4-byte pieces. A must be transposed on its way into
// shared memory, which a 16-byte copy cannot do, so it goes in 4-byte
// cp.async.ca pieces, each to its swizzled place (the float4 pattern of
// sgemm_warptile, so the same XOR keeps the stores conflict-free). Elements
// outside the matrices are zero-filled by the copy itself (src-size 0). NVRTC
// has no CUDA headers, so the PTX is written out below.

__device__ __forceinline__ unsigned smem_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// cp.async needs compute capability 8.0. Compiled for an older GPU, the same
// helpers copy synchronously (through a register), which keeps the kernel
// correct there, without the overlap.

// Copy 4 bytes global -> shared, or write 4 zero bytes when !valid (src is then not read).
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_address(dst)), "l"(src),
                 "r"(valid ? 4 : 0) : "memory");
#else
    *static_cast<float*>(dst) = valid ? *static_cast<const float*>(src) : 0.f;
#endif
}

// Copy 16 bytes global -> shared (both 16-byte aligned), or zero-fill when !valid.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src),
                 "r"(valid ? 16 : 0) : "memory");
#else
    *static_cast<float4*>(dst) = valid ? *static_cast<const float4*>(src) : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
}

// Close the group of copies issued so far by this thread.
__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Wait until at most PENDING of this thread's groups are still in flight.
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
#endif
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

// The XOR that spreads a float4 load's column groups over distinct banks (see
// sgemm_swizzled). Needs BK in {4, 8, 16, 32} and BM a multiple of 32, so
// that the result stays a multiple of 4 and inside the row.
template <int BK>
__device__ __forceinline__ int a_swizzle(int c) {
    static_assert(BK == 4 || BK == 8 || BK == 16 || BK == 32, "a_swizzle needs BK in {4, 8, 16, 32}");
    return (c / 4) * (128 / BK);
}

// Issue the copies of the BM x BK tile of A at (row0, k0) into a_tile (BK x BM,
// transposed and swizzled) and of the BK x BN tile of B at (k0, col0) into
// b_tile. Every thread copies A_VECS / THREADS groups of 4 elements of A and
// B_VECS / THREADS of B.
template <int BM, int BN, int BK, int THREADS>
__device__ __forceinline__ void load_tiles(float (*a_tile)[BM], float (*b_tile)[BN], const float* __restrict__ a,
                                           const float* __restrict__ b, int row0, int col0, int k0, int m,
                                           int n, int k, bool b_vec, int tid) {
    constexpr int A_VECS = BM * BK / 4, B_VECS = BK * BN / 4;
#pragma unroll
    for (int p = 0; p < A_VECS / THREADS; ++p) {
        const int f = tid + p * THREADS;
        const int r = f / (BK / 4), c = (f % (BK / 4)) * 4;
        const int row = row0 + r, rs = r ^ a_swizzle<BK>(c);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const bool valid = row < m && k0 + c + q < k;
            cp_async4(&a_tile[c + q][rs], a + (valid ? row * k + k0 + c + q : 0), valid);
        }
    }
#pragma unroll
    for (int p = 0; p < B_VECS / THREADS; ++p) {
        const int f = tid + p * THREADS;
        const int r = f / (BN / 4), c = (f % (BN / 4)) * 4;
        const int row = k0 + r, col = col0 + c;
        if (b_vec) {
            const bool valid = row < k && col < n;  // n % 4 == 0: the whole float4 is inside
            cp_async16(&b_tile[r][c], b + (valid ? row * n + col : 0), valid);
        } else {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const bool valid = row < k && col + q < n;
                cp_async4(&b_tile[r][c + q], b + (valid ? row * n + col + q : 0), valid);
            }
        }
    }
}

// One tile's worth of FFMAs: acc += a_tile^T . b_tile over the warp's tile.
template <int BM, int BN, int BK, int M_SUB, int N_SUB>
__device__ __forceinline__ void compute_tile(const float (*a_tile)[BM], const float (*b_tile)[BN],
                                             float (&acc)[M_SUB * 4][N_SUB * 4], int wrow, int wcol, int lrow,
                                             int lcol) {
    float a_frag[M_SUB * 4], b_frag[N_SUB * 4];
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
#pragma unroll
        for (int s = 0; s < M_SUB; ++s) {
            const int r = (wrow + s * 16 + lrow) ^ a_swizzle<BK>(kk);
            const float4 v = *reinterpret_cast<const float4*>(&a_tile[kk][r]);
            a_frag[4 * s] = v.x, a_frag[4 * s + 1] = v.y, a_frag[4 * s + 2] = v.z, a_frag[4 * s + 3] = v.w;
        }
#pragma unroll
        for (int s = 0; s < N_SUB; ++s) {
            const float4 v = *reinterpret_cast<const float4*>(&b_tile[kk][wcol + s * 32 + lcol]);
            b_frag[4 * s] = v.x, b_frag[4 * s + 1] = v.y, b_frag[4 * s + 2] = v.z, b_frag[4 * s + 3] = v.w;
        }
#pragma unroll
        for (int i = 0; i < M_SUB * 4; ++i) {
#pragma unroll
            for (int j = 0; j < N_SUB * 4; ++j) {
                acc[i][j] += a_frag[i] * b_frag[j];
            }
        }
    }
}

template <typename T, int BM, int BN, int BK, int WM, int WN, int MIN_BLOCKS>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_double_buffer(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out,
                    int m, int n, int k, T alpha, T beta) {
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    constexpr int M_SUB = WM / 16, N_SUB = WN / 32;
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles tile the block tile");
    static_assert(WM % 16 == 0 && WN % 32 == 0, "a warp tile is whole 16 x 32 sub-tiles");
    static_assert(BM % 32 == 0 && BN % 4 == 0 && BK % 4 == 0, "rows of whole float4s; a_swizzle needs BM % 32 == 0");
    static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
                  "every thread copies the same number of float4s of each tile");
    __shared__ __align__(16) T a_tile[2][BK][BM];  // a_tile[s][kk][r ^ a_swizzle(kk)] = A[row0 + r][k0 + kk]
    __shared__ __align__(16) T b_tile[2][BK][BN];
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int lrow = (lane / 8) * 4, lcol = (lane % 8) * 4;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool b_vec = n % 4 == 0 && aligned16(b);
    const bool c_vec = n % 4 == 0 && aligned16(c_in) && aligned16(c_out);
    const int tiles = (k + BK - 1) / BK;
    T acc[M_SUB * 4][N_SUB * 4] = {};

    load_tiles<BM, BN, BK, THREADS>(a_tile[0], b_tile[0], a, b, row0, col0, 0, m, n, k, b_vec, tid);
    cp_async_commit();
    for (int t = 0; t < tiles; ++t) {
        cp_async_wait<0>();
        __syncthreads();  // tile t is in for everyone; everyone is done with tile t - 1
        if (t + 1 < tiles) {
            const int next = (t + 1) % 2;
            load_tiles<BM, BN, BK, THREADS>(a_tile[next], b_tile[next], a, b, row0, col0, (t + 1) * BK, m, n,
                                            k, b_vec, tid);
        }
        cp_async_commit();
        compute_tile<BM, BN, BK, M_SUB, N_SUB>(a_tile[t % 2], b_tile[t % 2], acc, wrow, wcol, lrow, lcol);
    }
#pragma unroll
    for (int i = 0; i < M_SUB * 4; ++i) {
        const int row = row0 + wrow + (i / 4) * 16 + lrow + i % 4;
#pragma unroll
        for (int s = 0; s < N_SUB; ++s) {
            const float4 v = make_float4(acc[i][4 * s], acc[i][4 * s + 1], acc[i][4 * s + 2], acc[i][4 * s + 3]);
            store4(c_in, c_out, row, col0 + wcol + s * 32 + lcol, m, n, v, alpha, beta, c_vec);
        }
    }
}
