// Thread-block clusters (sm_90 on), shared by the ladders: a block's rank in
// its cluster, a barrier over every thread of the cluster, and a 16-byte read
// of another block's shared memory (distributed shared memory). Inline PTX.
#ifndef GEMMLAB_CLUSTER_CUH
#define GEMMLAB_CLUSTER_CUH

__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

// The cluster barrier in its two halves, for work that may go between them.
// arrive.release / wait.acquire: everything a thread of the cluster did before
// its arrive (remote mbarrier arrivals included) happens before everything any
// thread of the cluster does after its wait. What a thread does between its
// arrive and its wait is not ordered before the others' waits: an epilogue's
// global stores there are not waited for by the arrive's fence. .aligned: every
// thread of a warp executes them, so they sit only where a whole warp arrives
// (not inside `if (tid == 0)`).
__device__ __forceinline__ void cluster_arrive() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void cluster_wait() {
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// An arrive that orders nothing: for a barrier whose waiters need only know
// that every thread got this far (what they need to see was ordered otherwise).
__device__ __forceinline__ void cluster_arrive_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}

// Every thread of every block of the cluster arrives, then waits for all.
__device__ __forceinline__ void cluster_sync() {
    cluster_arrive();
    cluster_wait();
}

// The 16 bytes at `local`'s offset in the shared memory of cluster block `rank`.
__device__ __forceinline__ float4 load_cluster_float4(const void* local, unsigned rank) {
    float4 v;
    asm volatile("{\n.reg .b32 remote;\n"
                 "mapa.shared::cluster.u32 remote, %4, %5;\n"
                 "ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [remote];\n}\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(static_cast<unsigned>(__cvta_generic_to_shared(local))), "r"(rank)
                 : "memory");
    return v;
}

#endif  // GEMMLAB_CLUSTER_CUH
