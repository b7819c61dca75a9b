// mbarriers, shared by the Hopper rungs (sm_90a): init, arrive (in this block
// or another block of the cluster), wait and test by phase parity, and
// init_ring, which sets up a ring's full and empty barriers. Inline PTX, as in
// tc_common.cuh. The TMA copies that complete on them: tma.cuh.
#ifndef GEMMLAB_TENSOR_MBARRIER_CUH
#define GEMMLAB_TENSOR_MBARRIER_CUH

#include "tc_common.cuh"

// --- mbarriers: a 64-bit counter in shared memory with a phase bit --------------
//
// What each helper orders (PTX ISA, "mbarrier" and "Memory Consistency Model";
// docs/synchronisation.md holds the argument kernel by kernel):
// - mbar_arrive, mbar_expect_bytes: the default semantics, .release at .cta
//   scope: the thread's earlier memory operations are ordered before the
//   arrival for threads of this block that observe the phase complete.
// - mbar_arrive_cluster: the same default (.release.cta) on a barrier of either
//   block of the cluster. Across blocks a .cta-scope release is not a
//   synchronisation in the model; the kernels use it only to say "my reads of
//   the stage are finished", and those reads are wgmma's, in the async proxy,
//   finished at wgmma.wait_group before the arrive is issued. No release of
//   any scope orders async-proxy reads; completion does. So the scope does
//   not matter for that hazard, and .cluster would only add a wait for the
//   thread's global stores (measured: half speed).
// - mbar_wait: try_wait.parity with the default .acquire at .cta scope. Once
//   it returns, the phase has completed: every arrival of it was made, and
//   every byte a cp.async.bulk announced to it (complete_tx, the copy engine's
//   own count, whichever block issued the copy) has landed in this block's
//   shared memory and is visible to the waiting thread. Parity names a phase
//   only modulo 2: each ring keeps a barrier at most one phase ahead of any
//   thread that waits on it (the full/empty alternation guarantees it).
// - init_ring: fence.mbarrier_init.release.cluster orders the mbarrier.init
//   before the caller's next block (or cluster) barrier, so that neither the
//   other block's threads nor the copy engine can see an uninitialised barrier.

__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(arrivals) : "memory");
}

// Arrive and announce `bytes` more to come from the copy engine in this phase.
__device__ __forceinline__ void mbar_expect_bytes(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
}

// Each barrier operation also takes the barrier's shared-window address (a
// u32, as smem_u32 gives it), for loops that compute it once: the conversion
// from a generic pointer reads the block's place in its cluster, which ptxas
// does not hoist out of a loop.
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) { mbar_arrive(smem_u32(bar)); }

// Arrive on the barrier at the same offset in the shared memory of block
// `rank` of this cluster (which may be this block). The default semantics
// (release at CTA scope) suffice where the caller's reads are complete
// (wgmma.wait_group). An arrive with .release.cluster waits for all of the
// thread's earlier memory operations, the last tile's C stores included, to
// become visible cluster-wide; tc_cluster ran at half speed with it (see
// docs/tensor-ladder.md).
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned rank) {
    asm volatile("{\n.reg .b32 remote;\n"
                 "mapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n"
                 ::"r"(bar), "r"(rank) : "memory");
}
__device__ __forceinline__ void mbar_arrive_cluster(unsigned long long* bar, unsigned rank) {
    mbar_arrive_cluster(smem_u32(bar), rank);
}

// Thread 0 sets up the barriers of a ring of STAGES stages: full[s] completes
// on one arrival (the producer's, which announces the bytes to come) and the
// bytes; empty[s] on `releases` arrivals (none: a ring without empty
// barriers). The fence shows them to the copy engine and the cluster; the
// caller then synchronises its block (or cluster) before anyone uses them.
// A full barrier counts `fills` arrivals (1: the producer's, with the bytes it expects).
template <int STAGES>
__device__ __forceinline__ void init_ring(unsigned long long* full, unsigned long long* empty, unsigned releases,
                                          unsigned fills = 1) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], fills);
            if (releases) mbar_init(&empty[s], releases);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
}

// Wait until the phase with this parity (0 for the 1st, 3rd, ... completion) has completed.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    }
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) { mbar_wait(smem_u32(bar), parity); }

// Whether the phase with this parity has completed, without waiting: one
// test_wait, which acquires as try_wait does when it answers yes. A consumer
// asks while its tensor cores still run a group, so that a later wait (a
// loop, which ptxas will not put between a wgmma and its wait_group) only
// runs when the answer was no.
__device__ __forceinline__ bool mbar_ready(unsigned bar, unsigned parity) {
    unsigned done;
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    return done != 0;
}

#endif  // GEMMLAB_TENSOR_MBARRIER_CUH
