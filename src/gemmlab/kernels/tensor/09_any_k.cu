// tc_any_k: wgmma for any M, N and K, bfloat16 in, float32 or bfloat16 C.
// When K is odd (4097), a row of A or B starts 2 bytes past a 16-byte
// boundary every other row: no TMA tensor map describes it (16-byte row
// strides) and no 16-byte copy reads it. This rung copies the whole aligned
// 16-byte pieces that cover a row's 64-element slice (9 of them: 144 bytes)
// with cp.async into a "raw" ring, then the block's threads shift each row by
// its own offset (0 to 7 elements) into the 128-byte-swizzled tile that wgmma
// reads, zeroing what lies past K. Rows past M or N are zero-filled by the copy.
// Source: not from the documents. CUTLASS's sm90 kernels for 2-byte
// alignment take the same path (cp.async, then wgmma from shared memory).
// Launch: BM / 64 warpgroups, one block per BM x BN tile of C; dynamic shared
// memory: two swizzled tiles of (BM + BN) x 128 bytes, then STAGES raw stages
// of (BM + BN) x 144 bytes. A and B are pointers; C a pointer of its type.
// Reads: whole aligned 16-byte pieces, which may hold bytes of the
// neighbouring row or just outside the array (never outside its allocation:
// CUDA allocations are 256-byte aligned and sized in whole 256 bytes); those
// bytes are shifted or masked out, never used.
// Should teach: wgmma does not need TMA. Threads may write the swizzled
// layout themselves; the writes are in the generic proxy and wgmma reads
// through the async proxy, so each writer fences (fence.proxy.async) before
// the barrier that lets the warpgroups issue their wgmma.
// Predicted (worklog, docs/tensor-ladder.md): 55-70% of the wgmma rungs'
// speed; the shift pass moves 272 bytes of shared memory per row per slice
// (144 read, 128 written) beside wgmma's own reads, and it runs while the
// previous slice's wgmma does.
// Synchronisation (one block; docs/synchronisation.md): per slice t,
//   (A) cp.async.wait_group<STAGES - 2> then __syncthreads: every thread's
//       copies of raw stage t have landed and are visible to all; every
//       thread has finished the shift pass of t - 1 (its raw stage may be
//       refilled) and every warpgroup has passed wgmma.wait_group<1> after
//       issuing t - 1, so the wgmma of t - 2, the last reader of swizzled
//       tile t % 2, has completed.
//   shift pass into tile t % 2; each thread's fence.proxy.async.shared::cta;
//   (B) __syncthreads: all fences before any warpgroup's wgmma reads tile t % 2.

#include "tma.cuh"
#include "wgmma.cuh"
#include "epilogue.cuh"

constexpr int RAW_CHUNKS = 9;                // 16-byte pieces that cover 128 bytes starting anywhere
constexpr int RAW_ROW = RAW_CHUNKS * 16;     // bytes of one raw row
constexpr int SLICE = TMA_ROW_BYTES / 2;     // 64 bf16 elements of K per slice

// The 8 elements that start `o` elements into the 32 bytes lo:hi (o in 0..7).
__device__ __forceinline__ uint4 shifted_chunk(uint4 lo, uint4 hi, int o) {
    const unsigned w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    unsigned v[6], u[5];
    // Whole words first (o / 2 of them, in two selects), then half a word.
#pragma unroll
    for (int i = 0; i < 6; ++i) v[i] = (o & 4) ? w[i + 2] : w[i];
#pragma unroll
    for (int i = 0; i < 5; ++i) u[i] = (o & 2) ? v[i + 1] : v[i];
    const int bits = (o & 1) * 16;
    return make_uint4(__funnelshift_r(u[0], u[1], bits), __funnelshift_r(u[1], u[2], bits),
                      __funnelshift_r(u[2], u[3], bits), __funnelshift_r(u[3], u[4], bits));
}

// Keep the first `valid` of the chunk's 8 elements (valid < 8), zero the rest.
__device__ __forceinline__ uint4 keep_first(uint4 x, int valid) {
    unsigned w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        if (2 * i >= valid) w[i] = 0;
        else if (2 * i + 1 >= valid) w[i] &= 0xFFFFu;
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// Where row `r` of the block's operands (A's BM rows, then B's BN) lives.
struct RowSource {
    const unsigned short* base;
    int row, rows;  // global row, and the operand's row count
};

template <int BM>
__device__ __forceinline__ RowSource row_source(const unsigned short* a, const unsigned short* b, int r, int row0,
                                                int col0, int m, int n) {
    return r < BM ? RowSource{a, row0 + r, m} : RowSource{b, col0 + r - BM, n};
}

// First byte of (row, k0): its distance past a 16-byte boundary fixes the shift.
__device__ __forceinline__ unsigned long long element_address(const unsigned short* base, int row, int k, int k0) {
    return reinterpret_cast<unsigned long long>(base) + 2ull * (static_cast<unsigned long long>(row) * k + k0);
}

// Raw stage: for each of the ROWS rows, the 9 aligned pieces from the one that
// holds (row, k0); a piece with no byte of the row's [k0, K) is zero-filled.
template <int BM, int ROWS, int THREADS>
__device__ __forceinline__ void copy_raw(unsigned char* raw, const unsigned short* a, const unsigned short* b, int row0,
                                         int col0, int m, int n, int k, int k0, int tid) {
    for (int i = tid; i < ROWS * RAW_CHUNKS; i += THREADS) {
        const int r = i / RAW_CHUNKS, j = i % RAW_CHUNKS;
        const RowSource src = row_source<BM>(a, b, r, row0, col0, m, n);
        const unsigned long long first = element_address(src.base, src.row, k, k0) & ~15ull;
        const unsigned long long end = element_address(src.base, src.row, k, k);
        const unsigned long long piece = first + 16ull * j;
        const bool valid = src.row < src.rows && piece < end;
        cp_async16(raw + r * RAW_ROW + 16 * j, valid ? reinterpret_cast<const void*>(piece) : src.base, valid);
    }
}

// Shift pass: half a row (4 output chunks from 5 raw pieces) per item, into the swizzled tile.
template <int BM, int ROWS, int THREADS>
__device__ __forceinline__ void relayout(unsigned char* tile, const unsigned char* raw, const unsigned short* a,
                                         const unsigned short* b, int row0, int col0, int m, int n, int k, int k0,
                                         int tid) {
    for (int i = tid; i < ROWS * 2; i += THREADS) {
        const int r = i / 2, half = i % 2;
        const RowSource src = row_source<BM>(a, b, r, row0, col0, m, n);
        const int o = static_cast<int>(element_address(src.base, src.row, k, k0) & 15) / 2;
        const uint4* pieces = reinterpret_cast<const uint4*>(raw + r * RAW_ROW) + 4 * half;
        uint4 lo = pieces[0];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const uint4 hi = pieces[j + 1];
            const int chunk = 4 * half + j;
            uint4 out = shifted_chunk(lo, hi, o);
            const int valid = k - (k0 + 8 * chunk);
            if (valid < 8) out = valid > 0 ? keep_first(out, valid) : make_uint4(0, 0, 0, 0);
            *reinterpret_cast<uint4*>(tile + r * TMA_ROW_BYTES + ((chunk ^ (r % 8)) * 16)) = out;
            lo = hi;
        }
    }
}

template <typename T, int BM, int BN, int STAGES>
__global__ void __launch_bounds__(BM / 64 * 128)
tc_any_k(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
         typename T::c_storage* __restrict__ c, int m, int n, int k) {
    static_assert(sizeof(typename T::storage) == 2, "16-bit inputs: a slice is 64 elements of 2 bytes");
    static_assert(BM % 64 == 0 && (BN == 128 || BN == 256), "64-row warpgroup slabs; N of one wgmma");
    static_assert(STAGES >= 2, "one raw stage in flight while one is shifted");
    constexpr int ROWS = BM + BN, THREADS = BM / 64 * 128;
    constexpr int TILE = ROWS * TMA_ROW_BYTES;  // a multiple of 1024: each tile stays 1024-aligned
    extern __shared__ __align__(1024) unsigned char smem[];
    unsigned char* raw = smem + 2 * TILE;

    const int tid = threadIdx.x, group = tid / 128;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int slices = (k + SLICE - 1) / SLICE;
    auto issue = [&](int t) {
        if (t < slices) copy_raw<BM, ROWS, THREADS>(raw + (t % STAGES) * ROWS * RAW_ROW, a, b, row0, col0, m, n, k,
                                                     t * SLICE, tid);
        cp_async_commit();  // one group per slice, empty past the end
    };

#pragma unroll
    for (int t = 0; t < STAGES - 1; ++t) issue(t);
    float acc[BN / 2] = {};
    for (int t = 0; t < slices; ++t) {
        unsigned char* tile = smem + (t % 2) * TILE;
        cp_async_wait<STAGES - 2>();
        __syncthreads();  // (A) in the header
        issue(t + STAGES - 1);
        relayout<BM, ROWS, THREADS>(tile, raw + (t % STAGES) * ROWS * RAW_ROW, a, b, row0, col0, m, n, k, t * SLICE,
                                    tid);
        fence_proxy_async_shared();
        __syncthreads();  // (B)
        wgmma_fence();
        wgmma_slice<typename T::inputs, BN>(acc, tile + group * 64 * TMA_ROW_BYTES, tile + BM * TMA_ROW_BYTES);
        wgmma_commit();
        wgmma_wait<1>();  // slice t - 1's wgmma has finished: tile (t + 1) % 2 may be rewritten after (A)
    }
    wgmma_wait<0>();
    fence_registers(acc);
    store_wgmma_tile<BN>(acc, c, m, n, row0 + group * 64, col0, tid % 128);
}
