// tc_warpspecialized: tc_wgmma split into a producer and consumers. One
// warpgroup only issues TMA copies; BM / 64 consumer warpgroups only run
// wgmma. Two barriers per stage replace the block-wide __syncthreads: `full`
// (the copy engine's bytes have landed) and `empty` (every consumer is done
// reading). The producer gives most of its registers to the consumers
// (setmaxnreg), which lets each consumer hold a 64 x 256 accumulator slab.
// Source: not from the documents. Launch: (BM / 64 + 1) x 128 threads, one
// block per SM (the register hand-over needs the cap of __launch_bounds__(.., 1)),
// one block per BM x BN tile of C; STAGES x (BM + BN) x 128 bytes of dynamic
// shared memory + the barriers. Any M and N; K x element size a multiple of 16 bytes.
// After the configuration come two template arguments set in
// kernels/tensor/spec.py, the register split (PRODUCER_REGS, CONSUMER_REGS),
// as in the rungs that follow.
// Should teach: a consumer never waits for another consumer, and keeps one
// group of wgmma in flight while it releases the stage of the previous one,
// so the matrix units see back-to-back work as long as the producer keeps
// STAGES - 1 tiles ahead.
// Predicted: close to cuBLAS at large sizes; the remaining gaps are the
// launch of one block per tile (a prologue and an epilogue per block, with
// the tensor cores idle during both) and the order tiles meet the L2.
// Synchronisation (inside one block; docs/synchronisation.md): thread 0 inits
// the barriers, fence.mbarrier_init and __syncthreads show them to every thread
// and to the copy engine. full[s]: the producer's arrive.expect_tx (release,
// .cta) and the copy engine's complete_tx; a consumer's try_wait (acquire,
// .cta) returns once the phase is complete, i.e. the stage's bytes have landed
// and are visible to it. Stage memory is written only by the copy engine and
// read only by wgmma, both in the async proxy, so no fence.proxy.async is
// needed. empty[s]: a consumer arrives only after wgmma.wait_group<1> says the
// wgmma that read the stage has completed, reads included; the producer issues
// the next copy into it after its wait on that phase, so a copy cannot
// overwrite data still being read. Parity is unambiguous: a barrier cannot run
// two phases ahead of its waiters, since each phase of full[s] needs the
// previous phase of empty[s] and the reverse.

#include "tma.cuh"
#include "epilogue.cuh"
#include "pipeline.cuh"

template <typename T, int BM, int BN, int STAGES, int PRODUCER_REGS, int CONSUMER_REGS>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1)
tc_warpspecialized(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                   float* __restrict__ c, int m, int n, int k) {
    using S = typename T::storage;
    constexpr int BK = TMA_ROW_BYTES / sizeof(S);
    constexpr int A_BYTES = BM * TMA_ROW_BYTES, B_BYTES = BN * TMA_ROW_BYTES;
    static_assert(BM % 64 == 0 && (BN == 128 || BN == 256), "64-row warpgroup slabs; N of one wgmma");
    extern __shared__ __align__(1024) unsigned char smem[];
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tiles = (k + BK - 1) / BK;
    warp_specialized_tile<BM, BN, BK, STAGES, PRODUCER_REGS, CONSUMER_REGS>(
        smem, &a_map, &b_map, row0, col0, tiles,
        [&](unsigned long long* full, unsigned long long* empty, int slab, int thread) {
            float acc[BN / 2] = {};
            consume_k_slice<T, BN, STAGES, A_BYTES, B_BYTES>(acc, smem, full, empty, slab, thread, 0, tiles);
            store_wgmma_tile<BN>(acc, c, m, n, row0 + slab * 64, col0, thread);
        });
}
