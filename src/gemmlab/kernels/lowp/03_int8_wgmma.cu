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

#include "wgmma8.cuh"

template <typename T, int BM, int BN, int STAGES, int PRODUCER_REGS, int CONSUMER_REGS>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1)
tc_int8_wgmma(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
              int* __restrict__ c, int m, int n, int k) {
    constexpr int BK = TMA_ROW_BYTES;  // one byte an element
    constexpr int A_BYTES = BM * TMA_ROW_BYTES, B_BYTES = BN * TMA_ROW_BYTES;
    constexpr int CONSUMERS = BM / 64;
    using Registers = RegisterSplit<PRODUCER_REGS, CONSUMER_REGS, CONSUMERS>;
    static_assert(BM % 64 == 0 && (BN == 128 || BN == 256), "64-row warpgroup slabs; N of one wgmma");
    extern __shared__ __align__(1024) unsigned char smem[];
    unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + STAGES * (A_BYTES + B_BYTES));
    unsigned long long* empty = full + STAGES;

    const int tid = threadIdx.x, group = tid / 128;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tiles = (k + BK - 1) / BK;
    auto stage = [&](int s) { return smem + s * (A_BYTES + B_BYTES); };

    init_ring<STAGES>(full, empty, CONSUMERS);
    __syncthreads();

    if (group == 0) {
        Registers::release();
        if (tid == 0)
            produce_k_tiles<STAGES, A_BYTES, B_BYTES, BK>(smem, full, empty, &a_map, &b_map, row0, col0, tiles);
    } else {
        Registers::claim();
        const int slab = group - 1, thread = tid % 128;
        int acc[BN / 2] = {};
        for (int t = 0; t < tiles; ++t) {
            const int s = t % STAGES;
            mbar_wait(&full[s], (t / STAGES) % 2);
            wgmma_fence();
            wgmma_s8_slice<BN>(acc, stage(s) + slab * 64 * TMA_ROW_BYTES, stage(s) + A_BYTES);
            wgmma_commit();
            wgmma_wait<1>();
            if (t > 0 && thread == 0) mbar_arrive(&empty[(t - 1) % STAGES]);
        }
        wgmma_wait<0>();
        fence_int_registers(acc);
        store_wgmma_int<BN>(acc, c, m, n, row0 + slab * 64, col0, thread);
    }
}
