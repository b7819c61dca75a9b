// tc_wmma: the first rung on the tensor cores. The block tile and the shared
// memory tiles are those of an FP32 ladder rung; what changes is the inner
// product: instead of FFMAs, each warp hands 16 x 16 (x 16, or x 8 for tf32)
// pieces of A and B to the matrix units through WMMA fragments, an opaque
// per-warp register layout that the wmma.load / wmma.mma / wmma.store
// instructions agree on.
// Source: not from the documents. Launch: (BM / WM) x (BN / WN) warps per
// block, one block per BM x BN tile of C; any M, N, K (scalar, guarded loads).
// Should teach: one 16 x 16 x 16 step is 4096 multiply-adds, 128 per lane,
// for a handful of instructions, so the limit moves at once from arithmetic
// to feeding the matrix units: the loads here are scalar and synchronous,
// and the next rungs fix exactly that.

#include "tc_common.cuh"

// One WMMA step per element type: fragment sizes in registers and the PTX.
template <typename T> struct Wmma;

template <> struct Wmma<gl_bf16> {
    static constexpr int K = 16, A_REGS = 4, B_REGS = 4;
    static __device__ __forceinline__ void load_a(unsigned (&r)[A_REGS], const void* p, int ld) {
        asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.shared.bf16 {%0, %1, %2, %3}, [%4], %5;\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)), "r"(ld));
    }
    static __device__ __forceinline__ void load_b(unsigned (&r)[B_REGS], const void* p, int ld) {
        asm volatile("wmma.load.b.sync.aligned.col.m16n16k16.shared.bf16 {%0, %1, %2, %3}, [%4], %5;\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)), "r"(ld));
    }
    static __device__ __forceinline__ void mma(float (&d)[8], const unsigned (&a)[A_REGS], const unsigned (&b)[B_REGS]) {
        asm volatile("wmma.mma.sync.aligned.row.col.m16n16k16.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, {%12, %13, %14, %15}, "
                     "{%0, %1, %2, %3, %4, %5, %6, %7};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]));
    }
};

template <> struct Wmma<gl_fp16> {
    // fp16 fragments hold the same 16 x 16 values as bf16 ones, in twice the
    // registers (PTX's f16 WMMA predates the packed bf16 form).
    static constexpr int K = 16, A_REGS = 8, B_REGS = 8;
    static __device__ __forceinline__ void load_a(unsigned (&r)[A_REGS], const void* p, int ld) {
        asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.shared.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7])
                     : "r"(smem_u32(p)), "r"(ld));
    }
    static __device__ __forceinline__ void load_b(unsigned (&r)[B_REGS], const void* p, int ld) {
        asm volatile("wmma.load.b.sync.aligned.col.m16n16k16.shared.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7])
                     : "r"(smem_u32(p)), "r"(ld));
    }
    static __device__ __forceinline__ void mma(float (&d)[8], const unsigned (&a)[A_REGS], const unsigned (&b)[B_REGS]) {
        asm volatile("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11, %12, %13, %14, %15}, "
                     "{%16, %17, %18, %19, %20, %21, %22, %23}, {%0, %1, %2, %3, %4, %5, %6, %7};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]), "r"(a[6]), "r"(a[7]),
                       "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(b[4]), "r"(b[5]), "r"(b[6]), "r"(b[7]));
    }
};

template <> struct Wmma<gl_tf32> {
    // tf32 steps are 8 deep (a 32-bit element takes two 16-bit slots). The
    // fragments are loaded as raw float32 and rounded to tf32 in registers.
    static constexpr int K = 8, A_REGS = 4, B_REGS = 4;
    static __device__ __forceinline__ void load_a(unsigned (&r)[A_REGS], const void* p, int ld) {
        asm volatile("wmma.load.a.sync.aligned.row.m16n16k8.shared.tf32 {%0, %1, %2, %3}, [%4], %5;\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)), "r"(ld));
#pragma unroll
        for (int i = 0; i < A_REGS; ++i) r[i] = to_tf32(r[i]);
    }
    static __device__ __forceinline__ void load_b(unsigned (&r)[B_REGS], const void* p, int ld) {
        asm volatile("wmma.load.b.sync.aligned.col.m16n16k8.shared.tf32 {%0, %1, %2, %3}, [%4], %5;\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)), "r"(ld));
#pragma unroll
        for (int i = 0; i < B_REGS; ++i) r[i] = to_tf32(r[i]);
    }
    static __device__ __forceinline__ void mma(float (&d)[8], const unsigned (&a)[A_REGS], const unsigned (&b)[B_REGS]) {
        asm volatile("wmma.mma.sync.aligned.row.col.m16n16k8.f32.tf32.tf32.f32 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, {%12, %13, %14, %15}, "
                     "{%0, %1, %2, %3, %4, %5, %6, %7};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]));
    }
    static __device__ __forceinline__ void store(float* p, const float (&d)[8], int ld) {
        asm volatile("wmma.store.d.sync.aligned.row.m16n16k8.shared.f32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8}, %9;\n"
                     ::"r"(smem_u32(p)), "f"(d[0]), "f"(d[1]), "f"(d[2]), "f"(d[3]), "f"(d[4]), "f"(d[5]),
                       "f"(d[6]), "f"(d[7]), "r"(ld) : "memory");
    }
};

// The accumulator fragment is the same for every 16 x 16 x 16 type.
template <typename T>
__device__ __forceinline__ void wmma_store(float* p, const float (&d)[8], int ld) {
    asm volatile("wmma.store.d.sync.aligned.row.m16n16k16.shared.f32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8}, %9;\n"
                 ::"r"(smem_u32(p)), "f"(d[0]), "f"(d[1]), "f"(d[2]), "f"(d[3]), "f"(d[4]), "f"(d[5]),
                   "f"(d[6]), "f"(d[7]), "r"(ld) : "memory");
}
template <>
__device__ __forceinline__ void wmma_store<gl_tf32>(float* p, const float (&d)[8], int ld) {
    Wmma<gl_tf32>::store(p, d, ld);
}

template <typename T, int BM, int BN, int BK, int WM, int WN>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
tc_wmma(const typename T::storage* __restrict__ a, const typename T::storage* __restrict__ b, float* __restrict__ c,
        int m, int n, int k) {
    using S = typename T::storage;
    using W = Wmma<T>;
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    constexpr int FM = WM / 16, FN = WN / 16;  // 16 x 16 fragments per warp
    // Rows padded by 32 bytes: wmma.load wants 32-byte aligned fragments, and
    // the pad moves each row's start to another bank.
    constexpr int LD = BK + 32 / sizeof(S);
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0 && BK % W::K == 0, "tile shapes");
    // The epilogue reuses the tiles' memory for one 16 x 16 float32 scratch per warp.
    constexpr int TILE_BYTES = (BM + BN) * LD * sizeof(S), SCRATCH_BYTES = THREADS / 32 * 256 * sizeof(float);
    __shared__ __align__(128) unsigned char raw[TILE_BYTES > SCRATCH_BYTES ? TILE_BYTES : SCRATCH_BYTES];
    S* a_tile = reinterpret_cast<S*>(raw);  // a_tile[r * LD + kk] = A[row0 + r][k0 + kk]
    S* b_tile = a_tile + BM * LD;           // b_tile[c * LD + kk] = B[col0 + c][k0 + kk]

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[FM][FN][8] = {};

    for (int k0 = 0; k0 < k; k0 += BK) {
        for (int i = tid; i < BM * BK; i += THREADS) {
            const int r = i / BK, kk = i % BK;
            const bool in = row0 + r < m && k0 + kk < k;
            a_tile[r * LD + kk] = in ? a[static_cast<long long>(row0 + r) * k + k0 + kk] : S(0);
        }
        for (int i = tid; i < BN * BK; i += THREADS) {
            const int r = i / BK, kk = i % BK;
            const bool in = col0 + r < n && k0 + kk < k;
            b_tile[r * LD + kk] = in ? b[static_cast<long long>(col0 + r) * k + k0 + kk] : S(0);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += W::K) {
            unsigned fa[FM][W::A_REGS], fb[FN][W::B_REGS];
#pragma unroll
            for (int i = 0; i < FM; ++i) W::load_a(fa[i], &a_tile[(wrow + 16 * i) * LD + kk], LD);
#pragma unroll
            for (int j = 0; j < FN; ++j) W::load_b(fb[j], &b_tile[(wcol + 16 * j) * LD + kk], LD);
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) W::mma(acc[i][j], fa[i], fb[j]);
        }
        __syncthreads();
    }

    // The fragment layout is opaque: each fragment goes through a 16 x 16
    // scratch in shared memory, from which every lane writes 8 guarded outputs.
    float* scratch = reinterpret_cast<float*>(raw) + warp * 256;
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) {
            wmma_store<T>(scratch, acc[i][j], 16);
            __syncwarp();
#pragma unroll
            for (int e = lane; e < 256; e += 32) {
                const int r = row0 + wrow + 16 * i + e / 16, col = col0 + wcol + 16 * j + e % 16;
                if (r < m && col < n) c[static_cast<long long>(r) * n + col] = scratch[e];
            }
            __syncwarp();
        }
}
