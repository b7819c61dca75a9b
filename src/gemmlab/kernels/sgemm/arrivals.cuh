// Shared by sgemm_split_k and sgemm_cluster_split_k: a block's arrival at a
// counter after storing its share of a sum, and the verdict whether it is the
// last of `expected`. (sgemm_gemv_split writes the same handshake out: through
// this helper ptxas schedules its kernel differently, which has not been timed.)
// Inlined into the rung's source like the other headers.
#ifndef GEMMLAB_SGEMM_ARRIVALS_CUH
#define GEMMLAB_SGEMM_ARRIVALS_CUH

// Call after a __syncthreads that follows every thread's stores of the block's
// share (__stcg). Thread 0 fences (release: the barrier showed it the block's
// stores, and the fence is cumulative over them) and adds one to *counter,
// relaxed at .gpu scope. The block whose add returns expected - 1 read a count
// that carries every other arrival; it zeroes the counter with a plain store
// (no arrival of this launch is left, and the next launch on the stream sees
// the zero through the kernel boundary) and fences again (acquire: the other
// blocks' shares before its reads). __syncthreads_or is a __syncthreads that
// hands the verdict, and with it the acquire, to every thread of the block.
// True in every thread of the last block; nothing waits.
__device__ __forceinline__ bool arrive_last(unsigned* counter, unsigned expected) {
    bool last = false;
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(counter, 1u) == expected - 1;
        if (last) {
            *counter = 0;
            __threadfence();
        }
    }
    return __syncthreads_or(last);
}

#endif  // GEMMLAB_SGEMM_ARRIVALS_CUH
