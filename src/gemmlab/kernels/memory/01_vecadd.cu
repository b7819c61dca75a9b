// vecadd: c[i] = a[i] + b[i] over a vector of any length.
// Source: the 2014 Brno lecture's first kernel. Launch: a 1-D grid of
// ceil(len / 256) blocks of 256 threads, one element per thread.
// The grid is rounded up to whole blocks, so the last block has threads past
// the end of the vector; the bounds check keeps them from reading or writing
// there. Three memory accesses per addition: the kernel is bound by memory
// bandwidth, never by arithmetic. The index is unsigned because the rounded-up
// grid can reach past 2^31 - 1 when len is close to it.
template <typename T>
__global__ void vecadd(const T* __restrict__ a, const T* __restrict__ b,
                       T* __restrict__ c, int len) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < static_cast<unsigned>(len)) {
        c[i] = a[i] + b[i];
    }
}
