// tc_split_tail: tc_persistent's blocks over whole tiles for as many full
// waves as the tiles make, then the last, partial wave's tiles cut along K so
// that every block has a share of them; the slices' float32 partials are added
// in slice order by the last block of a tile to finish (tc_split_k's fix-up).
// Source: not from the documents; the wave-quantisation half of stream-K
// (Osama et al., 2023), in its simplest form: whole tiles first, split-K for
// the remainder.
// Launch: as many blocks of (BM / 64 + 1) x 128 threads as the GPU holds at
// once (G, one per SM), at most one per tile. With T tiles, block b computes
// tiles b, b + G, ... below W = (T / G) x G whole, then, of the R = T - W
// tiles left, slice b % S of tile W + b / S if b < R x S, where S = min(G / R,
// MAX_SLICES, the 64-deep k-tiles). A last argument, the workspace: G counters
// (zero before the first launch; the kernel leaves them zero), then, from the
// next multiple of 16 bytes, G partial tiles of BM x BN floats (R x S <= G).
// Idea: at 3000 cubed in 128 x 256 tiles, T = 288 on 132 SMs is two full
// waves and 24 tiles: a third wave 18% full that costs a whole tile's time.
// Cut into 5 slices each, those 24 tiles keep 120 SMs busy for a fifth of it.
// Predicted (written before measuring; docs/tensor-ladder.md, sixth round):
// 3000 from 73-75% of cuBLAS to 90-100%; 5120 (800 tiles, 6 waves and 8)
// from 90% to 95-100%; no change where T is a multiple of G or below it.
// Synchronisation (docs/synchronisation.md): inside the block, tc_persistent's
// ring, `use` counted on across work items on both sides, every use released
// exactly once (the last of an item after wgmma.wait_group<0>). Across blocks,
// tc_split_k's argument for each split tile: each consumer thread's __stcg
// stores of its share of the partial, bar.sync 1 over the consumers, one
// thread's __threadfence and relaxed atomicAdd on the tile's counter (release,
// cumulative over the stores the barrier ordered before it); the block whose
// add returns S - 1 fences again (acquire), publishes the verdict in shared
// memory, and bar.sync 1 passes it and the ordering to the consumers' __ldcg
// reads. A block has at most one slice of a split tile, its last item, so the
// verdict's shared word is written once per launch. Counters: each split
// tile's reaches S once per launch; the last arriver's plain zero races with
// no increment of this launch, and the next launch sees it through the kernel
// boundary. Slots: slice z of split tile r writes only slot r x S + z, once
// per launch. Progress: no block waits for another; a block that is not last
// exits.

#include "hopper.cuh"
#include "slices.cuh"

// What block `b` of `blocks` computes as its item `i` (0, 1, ...): a tile and
// its k-tiles [t_begin, t_end), and in how many slices that tile was cut (1:
// whole). False when the block has no item `i`.
struct TailPlan {
    int whole, rest, slices, k_tiles;

    __device__ TailPlan(int tiles, int blocks, int k_tiles_, int max_slices) : k_tiles(k_tiles_) {
        whole = tiles / blocks * blocks;
        rest = tiles - whole;
        slices = rest == 0 ? 1 : min(min(blocks / rest, max_slices), k_tiles);
        if (slices < 1) slices = 1;
    }

    __device__ bool item(int b, int blocks, int i, int& tile, int& t_begin, int& t_end, int& slice) const {
        const int waves = whole / blocks;
        if (i < waves) {
            tile = b + i * blocks;
            slice = 0;
            t_begin = 0;
            t_end = k_tiles;
            return true;
        }
        if (i > waves || b >= rest * slices) return false;
        tile = whole + b / slices;
        slice = b % slices;
        t_begin = static_cast<int>(static_cast<long long>(slice) * k_tiles / slices);
        t_end = static_cast<int>(static_cast<long long>(slice + 1) * k_tiles / slices);
        return true;
    }
};

template <typename T, int BM, int BN, int STAGES, int GROUP_M, int MAX_SLICES, int PRODUCER_REGS,
          int CONSUMER_REGS>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1)
tc_split_tail(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
              typename T::c_storage* __restrict__ c, int m, int n, int k, void* workspace) {
    using S = typename T::storage;
    constexpr int BK = TMA_ROW_BYTES / sizeof(S);
    constexpr int A_BYTES = BM * TMA_ROW_BYTES, B_BYTES = BN * TMA_ROW_BYTES;
    constexpr int CONSUMERS = BM / 64;
    using Registers = RegisterSplit<PRODUCER_REGS, CONSUMER_REGS, CONSUMERS>;
    static_assert(BM % 64 == 0 && (BN == 128 || BN == 256), "64-row warpgroup slabs; N of one wgmma");
    static_assert(MAX_SLICES >= 1, "at least one slice");
    extern __shared__ __align__(1024) unsigned char smem[];
    unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + STAGES * (A_BYTES + B_BYTES));
    unsigned long long* empty = full + STAGES;
    __shared__ int last_arrival;

    const int tid = threadIdx.x, group = tid / 128;
    const int tiles_m = (m + BM - 1) / BM, tiles_n = (n + BN - 1) / BN;
    const int blocks = gridDim.x, b = blockIdx.x;
    const TailPlan plan(tiles_m * tiles_n, blocks, (k + BK - 1) / BK, MAX_SLICES);
    auto stage = [&](int s) { return smem + s * (A_BYTES + B_BYTES); };

    init_ring<STAGES>(full, empty, CONSUMERS);
    __syncthreads();

    if (group == 0) {
        Registers::release();
        if (tid == 0) {
            int use = 0, tile, t_begin, t_end, slice;
            for (int i = 0; plan.item(b, blocks, i, tile, t_begin, t_end, slice); ++i) {
                int tm, tn;
                tile_coords<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
                for (int t = t_begin; t < t_end; ++t, ++use) {
                    const int s = use % STAGES;
                    if (use >= STAGES) mbar_wait(&empty[s], (use / STAGES - 1) % 2);
                    mbar_expect_bytes(&full[s], A_BYTES + B_BYTES);
                    tma_load(stage(s), &a_map, &full[s], tm * BM, t * BK);
                    tma_load(stage(s) + A_BYTES, &b_map, &full[s], tn * BN, t * BK);
                }
            }
        }
        return;  // the fix-ups are the consumers' alone (bar.sync 1 counts only them)
    }
    Registers::claim();
    const int slab = group - 1, thread = tid % 128;
    const int me = tid - 128;  // 0 .. CONSUMERS x 128 - 1
    int use = 0;
    // Tiles tm, tn's k-tiles [t_begin, t_end) into acc, every use of the ring released.
    auto mainloop = [&](float (&acc)[BN / 2], int tm, int tn, int t_begin, int t_end) {
#pragma unroll
        for (int j = 0; j < BN / 2; ++j) acc[j] = 0.f;
        for (int t = t_begin; t < t_end; ++t, ++use) {
            const int s = use % STAGES;
            mbar_wait(&full[s], (use / STAGES) % 2);
            wgmma_fence();
            wgmma_slice<typename T::inputs, BN>(acc, stage(s) + slab * 64 * TMA_ROW_BYTES, stage(s) + A_BYTES);
            wgmma_commit();
            wgmma_wait<1>();
            if (t > t_begin && thread == 0) mbar_arrive(&empty[(use - 1) % STAGES]);
        }
        wgmma_wait<0>();
        if (t_end > t_begin && thread == 0) mbar_arrive(&empty[(use - 1) % STAGES]);
        fence_registers(acc);
    };
    // The full waves: whole tiles, stored as they finish.
    const int waves = plan.whole / blocks;
#pragma unroll 1
    for (int i = 0; i < waves; ++i) {
        int tm, tn;
        tile_coords<GROUP_M>(b + i * blocks, tiles_m, tiles_n, tm, tn);
        float acc[BN / 2];
        mainloop(acc, tm, tn, 0, plan.k_tiles);
        store_wgmma_tile<BN>(acc, c, m, n, tm * BM + slab * 64, tn * BN, thread);
    }
    // The last wave's tiles: this block's slice of one of them, if any.
    int tile, t_begin, t_end, slice;
    if (!plan.item(b, blocks, waves, tile, t_begin, t_end, slice)) return;
    int tm, tn;
    tile_coords<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
    float acc[BN / 2];
    mainloop(acc, tm, tn, t_begin, t_end);
    const int row0 = tm * BM + slab * 64, col0 = tn * BN;
    if (plan.slices == 1) {
        store_wgmma_tile<BN>(acc, c, m, n, row0, col0, thread);
        return;
    }
    // A slice of a split tile: its partial through L2, then the last to arrive adds them.
    const int r = tile - plan.whole;
    unsigned* arrivals = static_cast<unsigned*>(workspace);
    float4* partials = reinterpret_cast<float4*>(static_cast<char*>(workspace) + (blocks * 4 + 15) / 16 * 16);
    if (!add_slices<BM, BN, CONSUMERS>(acc, partials, &arrivals[r], last_arrival, r, slice, plan.slices, me)) return;
    store_wgmma_tile<BN>(acc, c, m, n, row0, col0, thread);
}
