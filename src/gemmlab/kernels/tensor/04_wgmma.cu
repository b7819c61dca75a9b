// tc_wgmma: Hopper's own path (sm_90a). Two changes from tc_mma_pipeline:
// tiles arrive by TMA, one instruction per tile issued by one thread, the
// copy engine computing every address and writing the 128-byte swizzle
// itself, and completion counted in bytes on an mbarrier; and the product is
// wgmma: a warpgroup (4 warps) multiplies a 64 x BN slab straight from shared
// memory, asynchronously, with no ldmatrix and no operand registers.
// Source: not from the documents. Launch: BM / 64 warpgroups (128 threads
// each) per block, one block per BM x BN tile of C; STAGES x (BM + BN) x 128
// bytes of dynamic shared memory + the barriers. Any M and N; K x element
// size a multiple of 16 bytes (the tensor map's row stride).
// Should teach: the whole feeding machinery of the mma.sync rungs (address
// arithmetic, cp.async, ldmatrix, bank-conflict swizzles) becomes one thread
// issuing copies and a descriptor per operand.
// Predicted: a large step over tc_mma_pipeline. Left on the table: every
// warpgroup waits for its wgmma to finish and then for the whole block at a
// barrier before the stage is refilled, so the matrix units idle at each
// tile boundary; tc_warpspecialized removes that.
//   prologue: thread 0 issues tiles 0 .. STAGES - 1;
//   loop t:   wait for tile t's bytes; wgmma over it; wait for the wgmma;
//             barrier (nobody reads stage t % STAGES any more); thread 0
//             issues tile t + STAGES into it.

#include "mbarrier.cuh"
#include "tma.cuh"
#include "wgmma.cuh"
#include "epilogue.cuh"

template <typename T, int BM, int BN, int STAGES>
__global__ void __launch_bounds__(BM / 64 * 128)
tc_wgmma(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map, float* __restrict__ c,
         int m, int n, int k) {
    using S = typename T::storage;
    constexpr int BK = TMA_ROW_BYTES / sizeof(S);  // K per stage: one 128-byte swizzled row
    constexpr int A_BYTES = BM * TMA_ROW_BYTES, B_BYTES = BN * TMA_ROW_BYTES;
    static_assert(BM % 64 == 0 && (BN == 128 || BN == 256), "64-row warpgroup slabs; N of one wgmma");
    extern __shared__ __align__(1024) unsigned char smem[];
    // Stages first (each a multiple of 1024 bytes, so each stays 1024-aligned), barriers after.
    unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + STAGES * (A_BYTES + B_BYTES));

    const int tid = threadIdx.x, group = tid / 128;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tiles = (k + BK - 1) / BK;
    auto a_stage = [&](int s) { return smem + s * (A_BYTES + B_BYTES); };
    auto issue = [&](int t) {
        const int s = t % STAGES;
        mbar_expect_bytes(&full[s], A_BYTES + B_BYTES);
        tma_load(a_stage(s), &a_map, &full[s], row0, t * BK);
        tma_load(a_stage(s) + A_BYTES, &b_map, &full[s], col0, t * BK);
    };

    init_ring<STAGES>(full, nullptr, 0);
    __syncthreads();
    if (tid == 0)
        for (int t = 0; t < STAGES && t < tiles; ++t) issue(t);

    float acc[BN / 2] = {};
    for (int t = 0; t < tiles; ++t) {
        const int s = t % STAGES;
        mbar_wait(&full[s], (t / STAGES) % 2);
        wgmma_fence();
        wgmma_slice<T, BN>(acc, a_stage(s) + group * 64 * TMA_ROW_BYTES, a_stage(s) + A_BYTES);
        wgmma_commit();
        wgmma_wait<0>();
        __syncthreads();
        if (tid == 0 && t + STAGES < tiles) issue(t + STAGES);
    }
    fence_registers(acc);
    store_wgmma_tile<BN>(acc, c, m, n, row0 + group * 64, col0, tid % 128);
}
