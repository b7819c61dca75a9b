// tc_gemv: C = A . B^T when M (or N) is 1 to MAX_M: a matrix-vector product
// (decoding's x . W^T), bound by reading the big operand once. For M <= MAX_M
// the big operand is B (N x K) and C[m][n] = dot(A[m, :], B[n, :]); for N <=
// MAX_M it is A, by symmetry (C^T = B . A^T), and C is stored transposed back
// into its row-major place, in float32 or bfloat16 alike.
// Source: not from the documents. Launch: one block of WARPS warps per 16 rows
// of the big operand; the warps share K out in 32-element blocks (warp w takes
// blocks w, w + WARPS, ...), then add their sums in warp order through shared
// memory. K a multiple of 8 (16-byte loads); any M, N.
// The product runs on the tensor cores, with no shared memory on the way in:
// mma.sync m16n8k16 with the big operand's 16 rows as its A (16 x 16) and up
// to MAX_M small rows as its B (8 columns per mma). Each lane loads 16 bytes
// (8 consecutive k) of a big row and of a small row; the sum over k does not
// care which k meets which inside the instruction, only that both operands
// agree: lane 4 g + q holds physical k 8 q .. 8 q + 7 of its rows, and for
// step s (0, 1) gives words 2 s and 2 s + 1 as the fragments' k pairs 2 q and
// 2 q + 8. So the fragments come straight from the 16-byte loads, with no
// ldmatrix and no shuffle; every lane's load is a whole 16 bytes of one row,
// four lanes a row's 64 contiguous bytes (two full 32-byte sectors).
// Loads in flight: the lane's loads come in batches of UNROLL blocks. With
// PREFETCH = 1 the next batch is loaded before the current one's mma (a
// software pipeline); with PREFETCH = 0 a batch is loaded and multiplied in
// the same iteration, and ptxas puts each mma right behind its own loads.
// NO_L1 = 1 streams the big operand past L1 (ld.global.nc.L1::no_allocate).
// Which wins is the GPU's to say, so both are configurations: on an H100 the
// L1 bypass lost at every shape, the 32 MB operand being largely in the 50 MB
// L2 between graph-timed launches, and the pipeline alone was the fastest or
// within 2% (docs/tensor-ladder.md, "Issue 21, third round", and its round 4).
// Predicted (docs/tensor-ladder.md): the big operand at 85-90% of DRAM
// bandwidth: 1 x 4096 x 4096 reads 32 MB, 10-11 us on an H100 (3.35 TB/s);
// the small rows (at most 128 KB at K = 4096) come from L1 and L2.
// Synchronisation: one __syncthreads between the warps' writes of their sums
// to shared memory and the reads that add them; nothing across blocks.

#include "tc_common.cuh"

// 16 bytes of `row` from column `col`, or zeros past the rows or K. With
// BYPASS_L1 (the streamed operand at NO_L1 = 1) the load does not allocate in
// L1: each of its bytes is read once, and would only evict the small rows,
// which every block on the SM reads again (128 KB at M = 16, K = 4096).
template <bool BYPASS_L1>
__device__ __forceinline__ uint4 load16(const unsigned short* base, int row, int rows, int k, int col) {
    if (row >= rows || col >= k) return make_uint4(0, 0, 0, 0);
    const uint4* p = reinterpret_cast<const uint4*>(base + static_cast<long long>(row) * k + col);
    if constexpr (!BYPASS_L1) return __ldg(p);
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

// One batch of a lane's loads: UNROLL 32-deep blocks of K, each 16 bytes of
// its two big rows and of FRAGS small rows.
template <int UNROLL, int FRAGS>
struct Batch {
    uint4 x0[UNROLL], x1[UNROLL], y[UNROLL][FRAGS];
};

__device__ __forceinline__ void store_one(float* c, long long at, float v) { c[at] = v; }
__device__ __forceinline__ void store_one(unsigned short* c, long long at, float v) {
    unsigned short bits;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(bits) : "f"(v));
    c[at] = bits;
}

template <typename T, int MAX_M, int WARPS, int UNROLL, int PREFETCH, int NO_L1>
__global__ void __launch_bounds__(WARPS * 32)
tc_gemv(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
        typename T::c_storage* __restrict__ c, int m, int n, int k) {
    static_assert(MAX_M == 8 || MAX_M == 16, "the small rows fill one or two 8-column mma operands");
    static_assert(WARPS >= 1 && WARPS * 32 <= 1024 && UNROLL >= 1, "a block of 1 to 32 warps");
    static_assert((PREFETCH == 0 || PREFETCH == 1) && (NO_L1 == 0 || NO_L1 == 1), "switches are 0 or 1");
    constexpr int FRAGS = MAX_M / 8;
    __shared__ float sums[WARPS][FRAGS][4][32];

    // Which operand is streamed: B when M is the small side, else A (C transposed back).
    const bool stream_b = m <= MAX_M;
    const unsigned short* big = stream_b ? b : a;
    const unsigned short* small = stream_b ? a : b;
    const int big_rows = stream_b ? n : m, small_rows = stream_b ? m : n;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    const int row0 = blockIdx.x * 16 + g;  // this lane's big rows: row0 and row0 + 8
    const int blocks = (k + 31) / 32;
    float acc[FRAGS][4] = {};

    // The batch of blocks kb0, kb0 + WARPS, ... (past K: zeros, and no load issued).
    auto load = [&](Batch<UNROLL, FRAGS>& batch, int kb0) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int col = (kb0 + u * WARPS) * 32 + 8 * q;
            batch.x0[u] = load16<NO_L1 == 1>(big, row0, big_rows, k, col);
            batch.x1[u] = load16<NO_L1 == 1>(big, row0 + 8, big_rows, k, col);
#pragma unroll
            for (int f = 0; f < FRAGS; ++f) batch.y[u][f] = load16<false>(small, 8 * f + g, small_rows, k, col);
        }
    };
    // The mma of one batch: each 16-byte load is two k-steps' fragments.
    auto multiply = [&](const Batch<UNROLL, FRAGS>& now) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const uint4 x0 = now.x0[u], x1 = now.x1[u];
            const unsigned lo[2][2] = {{x0.x, x0.y}, {x0.z, x0.w}};
            const unsigned hi[2][2] = {{x1.x, x1.y}, {x1.z, x1.w}};
#pragma unroll
            for (int s = 0; s < 2; ++s) {
                const unsigned frag[4] = {lo[s][0], hi[s][0], lo[s][1], hi[s][1]};
#pragma unroll
                for (int f = 0; f < FRAGS; ++f) {
                    const uint4 y = now.y[u][f];
                    mma_16816<typename T::inputs>(acc[f], frag, s == 0 ? y.x : y.z, s == 0 ? y.y : y.w);
                }
            }
        }
    };
    if constexpr (PREFETCH == 1) {
        // A batch carried across the loop's back edge: its loads are in
        // flight while the batch before is multiplied (written as one loop of
        // loads then one of mma, ptxas interleaves them instead).
        Batch<UNROLL, FRAGS> now, next;
        load(now, warp);
        for (int kb0 = warp; kb0 < blocks; kb0 += WARPS * UNROLL) {
            load(next, kb0 + WARPS * UNROLL);
            multiply(now);
            now = next;
        }
    } else {
        for (int kb0 = warp; kb0 < blocks; kb0 += WARPS * UNROLL) {
            Batch<UNROLL, FRAGS> now;
            load(now, kb0);
            multiply(now);
        }
    }

#pragma unroll
    for (int f = 0; f < FRAGS; ++f)
#pragma unroll
        for (int e = 0; e < 4; ++e) sums[warp][f][e][lane] = acc[f][e];
    __syncthreads();
    if (warp != 0) return;
#pragma unroll
    for (int f = 0; f < FRAGS; ++f)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            float v = 0.f;
            for (int w = 0; w < WARPS; ++w) v += sums[w][f][e][lane];  // warp order: the same bits every launch
            // d[e]: big row g (+ 8 for e >= 2), small row 8 f + 2 q (+ 1 for odd e).
            const int big_row = row0 + 8 * (e / 2), small_row = 8 * f + 2 * q + e % 2;
            if (big_row >= big_rows || small_row >= small_rows) continue;
            const long long at = stream_b ? static_cast<long long>(small_row) * n + big_row
                                          : static_cast<long long>(big_row) * n + small_row;
            store_one(c, at, v);
        }
}
