// sgemm_split_k: sgemm_small_tile's blocks with K cut into SPLITS slices, one
// block per (tile, slice); the slices' partial tiles are added, in slice
// order, by the last block of the tile to finish.
// Source: not from the documents; the split is CUTLASS's "serial"/"parallel"
// split-K, here with the fix-up done by the last arriver, as in rung 14.
// Launch: grid N / BN x M / BM x SPLITS, blocks of (BM / WM) x (BN / WN) warps,
// static shared memory as sgemm_small_tile; a last argument, the workspace:
// one counter per tile (zero before the first launch; the kernel leaves them
// zero), then, from the next multiple of 16 bytes, SPLITS partial tiles of
// BM x BN floats per tile.
// Idea: when C has few tiles (1024 x 1024 in 64 x 64 tiles is 256 of them) and
// K is long (16384: 1024 k-tiles of 16 per tile), the blocks are few and each
// is long; the GPU is either part idle or running a single wave of long
// blocks. Cutting K into SPLITS slices multiplies the blocks by SPLITS and
// divides their length by it, for one extra round trip of BM x BN floats per
// slice through L2 (the partial tiles), small beside a slice's own traffic
// when K / SPLITS is long. Slice z takes k-tiles floor(z T / S) .. floor((z +
// 1) T / S) - 1 of the T = ceil(K / BK): lengths differ by at most one, and a
// slice is empty only when T < S (it then writes zeros and arrives as the
// others do).
// Determinism: the last block to arrive adds the SPLITS partials in slice
// order 0, 1, ..., starting from zero, its own slice read back like the
// others, so C is the same bit for bit whichever block comes last, and
// launch after launch.
// Predicted (H100, written before measuring): 1024 x 1024 x 16384 (34.4
// GFLOP), 64 x 64 tiles and SPLITS = 4: 1024 blocks of 4 warps, 7.75 per SM,
// at 70-75% of the 67 TFLOP/s FFMA peak (8 blocks of 4 warps per SM hide the
// loads better than 2), 0.70-0.75 ms, 46-49 TFLOP/s; the partials add 1024 x
// 16 KB = 16 MB written and read once through L2, about 10 us at L2 rates.
// Without the split, 256 blocks: 2 per SM, at sgemm_small_tile's 50-60%.
// Measurement: pending GPU run.
// Synchronisation (docs/synchronisation.md): writer of a partial tile: each
// thread's __stcg stores, __syncthreads, then thread 0's __threadfence and its
// relaxed atomicAdd (.gpu) on the tile's counter: a release pattern in one
// thread, whose fence is cumulative over the stores the barrier ordered
// before it. The last to arrive: thread 0's atomicAdd returns a count that
// includes every other slice's increment (read-modify-writes carry each one
// into the value read), then its __threadfence: an acquire pattern, which
// synchronises with each writer's release; __syncthreads_or (a __syncthreads
// that also hands the verdict to every thread) passes that on to every
// thread's __ldcg reads. Counters: each tile's counter reaches SPLITS exactly
// once per launch, so when the last arriver zeroes it with a plain store no
// increment of this launch is still to come; the next launch on the stream
// sees the zero through the kernel boundary. Slots: slice z of tile t writes
// only its own slot (t, z), once per launch. Progress: no block ever waits for
// another (not last: exit), whatever the number resident.

// One launch and the next: the runner launches this kernel with programmatic
// dependent launch on compute capability 9.0 and newer, so its blocks may
// start while the launch before it runs. Its first statement waits for that
// launch to complete (griddepcontrol.wait: its memory operations visible);
// nothing in global memory, workspace included, is touched before it
// (docs/synchronisation.md).

#include "arrivals.cuh"
#include "k_range_loop.cuh"
#include "../dependent_launch.cuh"

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int SPLITS>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
sgemm_split_k(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out, int m, int n, int k,
              T alpha, T beta, void* workspace) {
    wait_for_previous_launch();  // nothing of A, B, C or the workspace touched before (PDL)
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    constexpr int M_SUB = WM / 16, N_SUB = WN / 32;
    constexpr int TILE_VECS = BM * BN / 4;  // float4s of one partial tile
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles tile the block tile");
    static_assert(WM % 16 == 0 && WN % 32 == 0, "a warp tile is whole 16 x 32 sub-tiles");
    static_assert(BM % 32 == 0 && BN % 4 == 0 && BK % 4 == 0, "rows of whole float4s; a_swizzle needs BM % 32 == 0");
    static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
                  "every thread copies the same number of float4s of each tile");
    static_assert(STAGES * BK * (BM + BN) * 4 <= 48 * 1024, "static shared memory: 48 KB at most");
    static_assert(SPLITS >= 2, "one slice is sgemm_small_tile");
    __shared__ __align__(16) T a_tile[STAGES][BK][BM];
    __shared__ __align__(16) T b_tile[STAGES][BK][BN];
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wrow = (warp / WARPS_N) * WM, wcol = (warp % WARPS_N) * WN;
    const int lrow = (lane / 8) * 4, lcol = (lane % 8) * 4;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tile = blockIdx.y * gridDim.x + blockIdx.x, slice = blockIdx.z;
    const int k_tiles = (k + BK - 1) / BK;
    const int t_begin = static_cast<int>(static_cast<long long>(slice) * k_tiles / SPLITS);
    const int t_end = static_cast<int>(static_cast<long long>(slice + 1) * k_tiles / SPLITS);
    unsigned* arrivals = static_cast<unsigned*>(workspace);
    const int tiles = gridDim.x * gridDim.y;
    float4* partials = reinterpret_cast<float4*>(static_cast<char*>(workspace) + (tiles * 4 + 15) / 16 * 16);

    T acc[M_SUB * 4][N_SUB * 4] = {};
    ring_over_k_tiles<BM, BN, BK, WM, WN, STAGES, THREADS>(a_tile, b_tile, acc, a, b, row0, col0, m, n, k, t_begin,
                                                           t_end, n % 4 == 0 && aligned16(b), wrow, wcol, lrow,
                                                           lcol, tid);

    // This slice's partial: each thread's float4s side by side with its
    // neighbours' (a warp's store is whole 128-byte lines), through L2 only.
    float4* mine = partials + (static_cast<long long>(tile) * SPLITS + slice) * TILE_VECS;
#pragma unroll
    for (int i = 0; i < M_SUB * 4; ++i) {
#pragma unroll
        for (int s = 0; s < N_SUB; ++s) {
            __stcg(mine + (i * N_SUB + s) * THREADS + tid,
                   make_float4(acc[i][4 * s], acc[i][4 * s + 1], acc[i][4 * s + 2], acc[i][4 * s + 3]));
        }
    }
    __syncthreads();  // every thread's share of the partial is stored
    if (!arrive_last(&arrivals[tile], SPLITS)) {  // release; the last of the slices acquires, and zeroes it
        return;
    }
    // The slices' sum in slice order, from zero, this block's own partial read
    // back like the others: the same bits whoever is last.
#pragma unroll
    for (int i = 0; i < M_SUB * 4; ++i) {
#pragma unroll
        for (int j = 0; j < N_SUB * 4; ++j) {
            acc[i][j] = 0.f;
        }
    }
#pragma unroll 1
    for (int z = 0; z < SPLITS; ++z) {
        const float4* theirs = partials + (static_cast<long long>(tile) * SPLITS + z) * TILE_VECS;
#pragma unroll
        for (int i = 0; i < M_SUB * 4; ++i) {
#pragma unroll
            for (int s = 0; s < N_SUB; ++s) {
                const float4 v = __ldcg(theirs + (i * N_SUB + s) * THREADS + tid);
                acc[i][4 * s] += v.x;
                acc[i][4 * s + 1] += v.y;
                acc[i][4 * s + 2] += v.z;
                acc[i][4 * s + 3] += v.w;
            }
        }
    }
    store_warp_tile<WM, WN>(acc, c_in, c_out, row0, col0, wrow, wcol, lrow, lcol, m, n, alpha, beta);
}
