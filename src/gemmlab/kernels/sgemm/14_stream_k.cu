// sgemm_stream_k: sgemm_spread_copies in persistent blocks whose last tiles
// are shared out along K, so that every SM runs until about the same moment.
// Source: not from the documents; the split of the tail is Stream-K's (Osama,
// Merrill, Cecka, Garland and Owens, PPoPP 2023), in its "data-parallel, then
// stream-K" form. Launch: as many blocks of 8 warps as the GPU holds at once
// (one per SM), at most one per tile; dynamic shared memory as
// sgemm_spread_copies; a last argument, the workspace: 2 x gridDim.x counters
// (zero before the first launch; the kernel leaves them zero) and, from the
// next multiple of 16 bytes, 2 x gridDim.x partial tiles of BM x BN floats.
// Idea: with one block per tile and one block per SM, a GPU of P SMs runs the
// T tiles in ceil(T / P) waves, and the last wave is as long as the others
// however few tiles it has: at N = 4096 on 132 SMs, 512 tiles take 4 waves
// where 3.88 would do (3%), at N = 4097 the 561 tiles (4.25 waves) take 5.
// Here each block walks over tiles b, b + P, ... while a whole wave remains
// beyond the tail; the tail (the last partial wave and the full wave before
// it) is counted in k-tiles, T_tail x ceil(K / BK) of them, and every block
// takes an equal run of them. A run may start or end inside a tile: each
// block that worked on such a tile writes its partial sums to the workspace,
// and the last to arrive (an atomic counter per tile) adds all of them, in
// block order so the result does not depend on who came last, and stores
// the tile. Nobody waits for anybody: a block that is not last moves on.
// The arithmetic and the copies of a tile are sgemm_spread_copies's; the
// pipeline starts afresh for each piece of work, from its first k-tile.
// With fewer tiles than SMs (issue 21, third round; 1024 x 1024 x 16384 is
// 32 tiles of 128 x 256) one block per tile would leave most SMs idle, so the
// grid counts a work unit per STREAM_K_MIN_RUN k-tiles of each tile (the
// runner still launches no more blocks than the GPU holds) and the whole
// problem is the tail. Prediction and measurement: docs/sgemm-ladder.md,
// "Rung 22, stream-K for few tiles, and sgemm_skinny_n's staging".
// Predicted (H200, written before measuring): +2.5% at N = 4096 (3.88 waves
// instead of 4, less the partial sums' round trip through L2), 47.4 -> 48.6
// TFLOP/s; at 4097 +15% (4.25 instead of 5), 38.6 -> 44 TFLOP/s, still 9% under
// its aligned speed, since the edge tiles compute whole tiles for one row or
// one column.
// Synchronisation (docs/synchronisation.md): writer of a partial tile: each
// thread's __stcg stores, __syncthreads, then thread 0's __threadfence and
// its atomicAdd (relaxed, .gpu) on the tile's counter: a release pattern in
// one thread, whose fence is cumulative over the stores the barrier ordered
// before it. The last to arrive: thread 0's atomicAdd reads a count that
// includes every other contributor's increment (read-modify-writes carry each
// one into the value read), then its __threadfence: an acquire pattern, which
// synchronises with each writer's release; __syncthreads hands that on to
// every thread's __ldcg reads. (The earlier version, every thread fencing
// before and after the barrier, was correct only because __threadfence is
// fence.sc.gpu, and a fence.acq_rel would have broken it: finding 1 of
// docs/synchronisation.md.) Slots are not reused within a launch (slot 0 for
// a block's first tail tile, 1 for its last), the last arriver zeroes the
// counter with a plain store, and the next launch on the stream sees it
// through the kernel boundary. Progress: no block ever waits for another (not
// last: move on), whatever the number resident.

#include "cp_async_tiles.cuh"
#include "spread_copies.cuh"

// Who does what. Tiles 0 .. dp_tiles - 1 are whole: block b takes b, b + P,
// ... (P = gridDim.x blocks). The rest, when the tiles do not fill a whole
// number of waves, are the tail: the last partial wave and one full wave
// before it, so that every block's run is at least one tile long and a tile
// has at most two contributors. With fewer tiles than blocks every tile is in
// the tail: a run is then shorter than a tile (per < k_tiles), so it still
// touches at most two tiles (slots 0 and 1), and a tile has about P / tiles
// contributors, each one's partial added by the last (the loop below takes
// any number). When the tiles have fewer k-tiles than P, per is 0 and the
// blocks past `extra` have an empty run. Their k-tiles are numbered tile by
// tile; block b takes iterations begin(b) .. begin(b + 1) - 1.
struct StreamKSplit {
    int dp_tiles;
    long long per;  // iterations per block; the first `extra` blocks take one more
    int extra;

    __device__ __forceinline__ StreamKSplit(int tiles, int k_tiles, int blocks) {
        // Fewer tiles than blocks (issue 21, third round): the whole problem is the
        // tail, so every block gets a run and none idles.
        const int tail = tiles % blocks == 0 ? 0 : tiles > blocks ? tiles % blocks + blocks : tiles;
        dp_tiles = tiles - tail;
        const long long iterations = static_cast<long long>(tail) * k_tiles;
        per = iterations / blocks;
        extra = static_cast<int>(iterations % blocks);
    }
    __device__ __forceinline__ long long begin(int block) const { return block * per + min(block, extra); }
    // The block whose run holds iteration `it` (it < extra (per + 1) whenever per is 0).
    __device__ __forceinline__ int owner(long long it) const {
        const long long longer = static_cast<long long>(extra) * (per + 1);
        return it < longer ? static_cast<int>(it / (per + 1)) : extra + static_cast<int>((it - longer) / per);
    }
    // Block c's partial of tail tile `tail_tile` is its slot 0 when its run starts
    // in that tile (its first piece of work in the tail), else slot 1 (its last).
    __device__ __forceinline__ int slot(int c, int tail_tile, int k_tiles) const {
        return begin(c) >= static_cast<long long>(tail_tile) * k_tiles ? 0 : 1;
    }
};

// The whole kernel for one way of copying B; sgemm_stream_k picks one.
template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool B_VEC>
__device__ __forceinline__ void stream_k_body(const float* __restrict__ a, const float* __restrict__ b,
                                              const float* c_in, float* c_out, int m, int n, int k, float alpha,
                                              float beta, unsigned* arrivals, float4* partials) {
    using Loop = SpreadLoop<BM, BN, BK, WM, WN, STAGES, B_VEC>;
    constexpr int THREADS = Loop::THREADS, N_SUB = Loop::N_SUB, TM = Loop::TM, TN = Loop::TN;
    constexpr int TILE_VECS = BM * BN / 4;  // float4s of one partial tile
    __shared__ int last_to_arrive;
    const Loop loop;
    const int tid = loop.tid;
    // The block's next piece of work, k-tiles kb .. ke - 1 of one tile, is worked
    // out by thread 0 and read by all from shared memory; what the epilogue needs
    // is read again after the main loop, not kept in registers through it (the
    // 128 accumulators leave few).
    __shared__ struct {
        int tile, kb, ke, tail_tile;  // tile < 0: no more work; tail_tile < 0: a whole tile
        int planned_end;              // k-tiles kb .. planned_end - 1 take the plan's copies
        int row_owned, col_owned;     // the outputs the block stores
        int row0, col0;               // the tile's corner: moved inside M and N when M >= BM and N >= BN
        bool partial;                 // only part of the tile's k-tiles
        int next_whole;               // the block's next whole tile
        long long it;                 // the next iteration of its run in the tail
    } work;
    const int tiles_n = (n + BN - 1) / BN;
    const int tiles = ((m + BM - 1) / BM) * tiles_n;
    const int k_tiles = (k + BK - 1) / BK;
    if (tid == 0) {
        work.next_whole = blockIdx.x;
        work.it = StreamKSplit(tiles, k_tiles, gridDim.x).begin(blockIdx.x);
    }
    for (;;) {
        __syncthreads();  // everyone has read the last piece
        if (tid == 0) {
            const StreamKSplit split(tiles, k_tiles, gridDim.x);
            const long long run_end = split.begin(blockIdx.x + 1);
            int tile = -1, kb = 0, ke = k_tiles, tail_tile = -1;
            if (work.next_whole < split.dp_tiles) {
                tile = work.next_whole;
                work.next_whole += gridDim.x;
            } else if (work.it < run_end) {
                tail_tile = static_cast<int>(work.it / k_tiles);
                kb = static_cast<int>(work.it - static_cast<long long>(tail_tile) * k_tiles);
                ke = static_cast<int>(min(static_cast<long long>(k_tiles), kb + (run_end - work.it)));
                tile = split.dp_tiles + tail_tile;
                work.it += ke - kb;
            }
            const bool inside = m >= BM && n >= BN;
            work.tile = tile;
            work.kb = kb;
            work.ke = ke;
            work.tail_tile = tail_tile;
            work.planned_end = min(ke, inside ? k / BK : 0);
            work.row_owned = (tile / tiles_n) * BM;
            work.col_owned = (tile % tiles_n) * BN;
            work.row0 = inside ? min(work.row_owned, m - BM) : work.row_owned;
            work.col0 = inside ? min(work.col_owned, n - BN) : work.col_owned;
            work.partial = kb != 0 || ke != k_tiles;
        }
        __syncthreads();
        if (work.tile < 0) {
            break;
        }
        const int kb = work.kb, ke = work.ke, planned_end = work.planned_end;
        const int row0 = work.row0, col0 = work.col0;
        const SectorPlan<BM, BN, BK, B_VEC> plan(row0, col0, n, k, tid);
        float acc[TM][TN] = {};
        // The ring is free: every warp's last reads of the previous piece came before
        // that piece's last barrier.
        loop.run(acc, plan, a, b, row0, col0, m, n, k, kb, ke, planned_end);

        if (work.partial) {
            // Part of a tile: leave the partial sums in this block's slot, each thread
            // its own float4s side by side with its neighbours' (whole lines per warp).
            const int tail_tile = work.tail_tile;
            const StreamKSplit split(tiles, k_tiles, gridDim.x);
            const long long first = static_cast<long long>(tail_tile) * k_tiles;
            float4* mine =
                partials + static_cast<long long>(2 * blockIdx.x + split.slot(blockIdx.x, tail_tile, k_tiles)) * TILE_VECS;
#pragma unroll
            for (int i = 0; i < TM; ++i) {
#pragma unroll
                for (int s = 0; s < N_SUB; ++s) {
                    __stcg(mine + (i * N_SUB + s) * THREADS + tid,
                           make_float4(acc[i][4 * s], acc[i][4 * s + 1], acc[i][4 * s + 2], acc[i][4 * s + 3]));
                }
            }
            const int c_lo = split.owner(first), c_hi = split.owner(first + k_tiles - 1);
            __syncthreads();  // every thread's share of the partial is stored
            if (tid == 0) {
                // Release: the barrier showed thread 0 the block's stores, and its
                // fence (cumulative) orders them before the arrival.
                __threadfence();
                const unsigned arrived = atomicAdd(&arrivals[tail_tile], 1u) + 1;
                last_to_arrive = arrived == static_cast<unsigned>(c_hi - c_lo + 1);
                if (last_to_arrive) {
                    arrivals[tail_tile] = 0;  // as the next launch expects it
                    __threadfence();  // acquire: the other contributors' partials before our reads
                }
            }
            __syncthreads();  // hands the acquire on to the block's reads
            if (!last_to_arrive) {
                continue;
            }
            // The sum of every contributor's partial, in block order (this block's own too,
            // read back, so that the sum is the same whoever arrives last).
#pragma unroll
            for (int i = 0; i < TM; ++i) {
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    acc[i][j] = 0.f;
                }
            }
            for (int c = c_lo; c <= c_hi; ++c) {
                const float4* theirs = partials + static_cast<long long>(2 * c + split.slot(c, tail_tile, k_tiles)) * TILE_VECS;
#pragma unroll
                for (int i = 0; i < TM; ++i) {
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
        }
        const bool c_vec = n % 4 == 0 && aligned16(c_in) && aligned16(c_out);
        store_owned(acc, c_in, c_out, work.row0, work.col0, work.row_owned, work.col_owned, loop.wrow, loop.wcol,
                    loop.lrow, loop.lcol, m, n, alpha, beta, c_vec);
    }
}

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int MIN_BLOCKS>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_stream_k(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out, int m, int n, int k,
               T alpha, T beta, void* workspace) {
    unsigned* arrivals = static_cast<unsigned*>(workspace);
    float4* partials = reinterpret_cast<float4*>(static_cast<char*>(workspace) + (2 * gridDim.x * 4 + 15) / 16 * 16);
    if (n % 4 == 0 && aligned16(b)) {
        stream_k_body<BM, BN, BK, WM, WN, STAGES, true>(a, b, c_in, c_out, m, n, k, alpha, beta, arrivals, partials);
    } else {
        stream_k_body<BM, BN, BK, WM, WN, STAGES, false>(a, b, c_in, c_out, m, n, k, alpha, beta, arrivals, partials);
    }
}
