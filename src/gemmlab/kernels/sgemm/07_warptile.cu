// sgemm_warptile: a level between the block and the thread: block tile ->
// warp tile -> thread tile.
// Source: not from the documents. Launch: grid (ceil(N/BN), ceil(M/BM)),
// block (BM/WM) * (BN/WN) warps of 32 threads.
// Idea: each warp owns a WM x WN tile of the block's BM x BN tile. Its 32
// lanes stand in a 4 x 8 grid; per sub-tile of 16 rows x 32 columns a lane
// computes a 4 x 4 micro-tile, and the warp walks (WM/16) x (WN/32) sub-tiles,
// so a lane holds (WM/16 * 4) x (WN/32 * 4) outputs (8 x 8 at WM = 32,
// WN = 64). Per k a warp then reads only WM values of A and WN of B from
// shared memory (96 words at 32 x 64, against 16 + 128 = 144 for the 16 x 128
// strip that a warp of sgemm_swizzled covers): fewer shared-memory wavefronts
// per FFMA. A quarter-warp (8 lanes) reads either one float4 of A (a
// broadcast) or 8 consecutive float4s of B, so there are no bank conflicts by
// construction; the A tile keeps sgemm_swizzled's XOR for its transposed
// stores. The hierarchy is also the shape tensor-core kernels use (a warp
// owns an MMA tile), so this is where a reader moves on to them.

#include "vec4_io.cuh"

// The XOR that spreads a float4 load's column groups over distinct banks (see
// sgemm_swizzled). Needs BK in {4, 8, 16, 32} and BM a multiple of 32, so
// that the result stays a multiple of 4 and inside the row.
template <int BK>
__device__ __forceinline__ int a_swizzle(int c) {
    static_assert(BK == 4 || BK == 8 || BK == 16 || BK == 32, "a_swizzle needs BK in {4, 8, 16, 32}");
    return (c / 4) * (128 / BK);
}

template <typename T, int BM, int BN, int BK, int WM, int WN, int MIN_BLOCKS>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_warptile(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out,
               int m, int n, int k, T alpha, T beta) {
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    constexpr int M_SUB = WM / 16, N_SUB = WN / 32;  // sub-tiles of 16 x 32 per warp tile
    constexpr int A_VECS = BM * BK / 4, B_VECS = BK * BN / 4;
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles tile the block tile");
    static_assert(WM % 16 == 0 && WN % 32 == 0, "a warp tile is whole 16 x 32 sub-tiles");
    static_assert(BM % 32 == 0 && BN % 4 == 0 && BK % 4 == 0, "rows of whole float4s; a_swizzle needs BM % 32 == 0");
    static_assert(A_VECS % THREADS == 0 && B_VECS % THREADS == 0,
                  "every thread loads the same number of float4s of each tile");
    __shared__ __align__(16) T a_tile[BK][BM];  // a_tile[kk][r ^ a_swizzle(kk)] = A[row0 + r][k0 + kk]
    __shared__ __align__(16) T b_tile[BK][BN];
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int lrow = (lane / 8) * 4, lcol = (lane % 8) * 4;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool a_vec = k % 4 == 0 && aligned16(a);
    const bool b_vec = n % 4 == 0 && aligned16(b);
    const bool c_vec = n % 4 == 0 && aligned16(c_in) && aligned16(c_out);
    T acc[M_SUB * 4][N_SUB * 4] = {};
    T a_frag[M_SUB * 4], b_frag[N_SUB * 4];
    for (int k0 = 0; k0 < k; k0 += BK) {
#pragma unroll
        for (int p = 0; p < A_VECS / THREADS; ++p) {
            const int f = tid + p * THREADS;
            const int r = f / (BK / 4), c = (f % (BK / 4)) * 4;
            const float4 v = load4(a, row0 + r, k0 + c, m, k, a_vec);
            const int rs = r ^ a_swizzle<BK>(c);
            a_tile[c + 0][rs] = v.x;
            a_tile[c + 1][rs] = v.y;
            a_tile[c + 2][rs] = v.z;
            a_tile[c + 3][rs] = v.w;
        }
#pragma unroll
        for (int p = 0; p < B_VECS / THREADS; ++p) {
            const int f = tid + p * THREADS;
            const int r = f / (BN / 4), c = (f % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(&b_tile[r][c]) = load4(b, k0 + r, col0 + c, k, n, b_vec);
        }
        __syncthreads();
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
        __syncthreads();
    }
    // acc[4 * sm + i][4 * sn + j] is C[row0 + wrow + 16 * sm + lrow + i][col0 + wcol + 32 * sn + lcol + j].
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
