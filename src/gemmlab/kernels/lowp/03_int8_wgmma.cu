// tc_int8_wgmma: tc_warpspecialized in int8. One producer warpgroup issues
// TMA copies of 128-byte rows (128 int8 elements of K) into a ring; BM / 64
// consumer warpgroups run wgmma.m64nNk32.s32.s8.s8 from shared memory and
// sum in int32 registers, exactly.
// Source: not from the documents. Launch: (BM / 64 + 1) x 128 threads, one
// block per BM x BN tile of C; STAGES x (BM + BN) x 128 bytes of dynamic
// shared memory + 2 barriers per stage; the register split (PRODUCER_REGS,
// CONSUMER_REGS) after the configuration, as in the tensor ladder. K a
// multiple of 16 and under 2^17; any M and N.
// Should teach: the 16-bit pipeline moves half the bytes per multiply-add:
// the same tiles carry twice the K, and the tensor cores' dense int8 rate is
// twice their bfloat16 rate, so the same kernel is asked for twice the work
// per byte.
// Predicted: the rate of tc_warpspecialized in bfloat16 (its share of the
// 989 TFLOP/s peak) applied to the 1979 TOPS int8 peak, less what a
// non-persistent grid leaves idle: docs/lowp-ladder.md. Measurement: pending.
// Synchronisation: tc_warpspecialized's full/empty ring, unchanged
// (docs/synchronisation.md); only the instruction and the accumulator type differ.

#include "../tensor/mbarrier.cuh"
#include "../tensor/tma.cuh"
#include "../tensor/pipeline.cuh"
#include "wgmma8.cuh"

template <typename T, int BM, int BN, int STAGES, int PRODUCER_REGS, int CONSUMER_REGS>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1)
tc_int8_wgmma(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
              int* __restrict__ c, int m, int n, int k) {
    constexpr int BK = TMA_ROW_BYTES;  // one byte an element
    constexpr int A_BYTES = BM * TMA_ROW_BYTES, B_BYTES = BN * TMA_ROW_BYTES;
    static_assert(BM % 64 == 0 && (BN == 128 || BN == 256), "64-row warpgroup slabs; N of one wgmma");
    extern __shared__ __align__(1024) unsigned char smem[];
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tiles = (k + BK - 1) / BK;
    warp_specialized_tile<BM, BN, BK, STAGES, PRODUCER_REGS, CONSUMER_REGS>(
        smem, &a_map, &b_map, row0, col0, tiles,
        [&](unsigned long long* full, unsigned long long* empty, int slab, int thread) {
            int acc[BN / 2] = {};
            consume_k_ring<STAGES, A_BYTES, B_BYTES>(
                smem, full, slab, 0, tiles,
                [&](const unsigned char* a_rows, const unsigned char* b_rows) {
                    wgmma_s8_slice<BN>(acc, a_rows, b_rows);
                },
                [&](int v) {
                    if (thread == 0) mbar_arrive(&empty[v % STAGES]);
                });
            fence_int_registers(acc);
            store_wgmma_int<BN>(acc, c, m, n, row0 + slab * 64, col0, thread);
        });
}
