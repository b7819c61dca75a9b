// Slices of K added by the last block of a tile to finish: the fix-up that
// tc_split_k and tc_split_tail share. Their headers, and docs/synchronisation.md,
// give the argument for its ordering. The consumers meet on pipeline.cuh's consumers_sync.
#ifndef GEMMLAB_TENSOR_SLICES_CUH
#define GEMMLAB_TENSOR_SLICES_CUH

#include "pipeline.cuh"

// Called by every consumer thread (`me`: 0 .. CONSUMERS x 128 - 1) with its
// share of slice `slice` of a tile's BM x BN float32 sum in `acc`: stores it
// through L2 to slot first + slice of `partials` (a workspace of BM x BN
// float32 tiles; the tile's slices take slots first .. first + slices - 1),
// then one thread arrives on the tile's counter. The last of the tile's
// `slices` to arrive zeroes the counter, replaces acc by the sum of every
// slot in slice order from zero, and returns true; the others return false.
// `verdict` is a word of the block's shared memory, written once per call.
// The consumers meet on named barrier BARRIER.
template <int BM, int BN, int CONSUMERS, int BARRIER = 1>
__device__ __forceinline__ bool add_slices(float (&acc)[BN / 2], float4* partials, long long first, unsigned* counter,
                                           int& verdict, int slice, int slices, int me) {
    constexpr int VECS = BN / 8;  // float4s of accumulators per consumer thread
    constexpr int TILE_VECS = BM * BN / 4;
    // Each thread's float4s side by side with its neighbours' (a warp stores
    // whole 512-byte runs), through L2 only.
    float4* mine = partials + (first + slice) * TILE_VECS;
#pragma unroll
    for (int v = 0; v < VECS; ++v)
        __stcg(mine + v * (CONSUMERS * 128) + me, make_float4(acc[4 * v], acc[4 * v + 1], acc[4 * v + 2], acc[4 * v + 3]));
    consumers_sync<CONSUMERS * 128, BARRIER>();  // every consumer's share of the partial is stored
    if (me == 0) {
        __threadfence();  // release: cumulative over the stores the barrier showed this thread
        const bool last = atomicAdd(counter, 1u) == static_cast<unsigned>(slices - 1);
        if (last) {
            *counter = 0;     // as the next launch expects it
            __threadfence();  // acquire: the other slices' partials before our reads
        }
        verdict = last;
    }
    consumers_sync<CONSUMERS * 128, BARRIER>();  // hands the verdict, and the acquire, to every consumer
    if (!verdict) return false;
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
#pragma unroll 1
    for (int z = 0; z < slices; ++z) {
        const float4* theirs = partials + (first + z) * TILE_VECS;
#pragma unroll
        for (int v = 0; v < VECS; ++v) {
            const float4 p = __ldcg(theirs + v * (CONSUMERS * 128) + me);
            acc[4 * v] += p.x;
            acc[4 * v + 1] += p.y;
            acc[4 * v + 2] += p.z;
            acc[4 * v + 3] += p.w;
        }
    }
    return true;
}

#endif  // GEMMLAB_TENSOR_SLICES_CUH
