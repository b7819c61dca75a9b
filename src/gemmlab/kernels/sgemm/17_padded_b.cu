// sgemm_padded_b: sgemm_edge_strips that, when the rows of B are not 16-byte
// aligned (N % 4 != 0), first copies B into a workspace whose rows are, so
// that the tiles copy B 16 bytes at a time at every N.
// Source: not from the documents; the tickets are the dynamic block numbering
// of decoupled look-back scans (Merrill and Garland, 2016). Launch:
// sgemm_edge_strips's grid with, when N % 4 != 0, PAD_BLOCKS more blocks
// (a template argument, 128, set in kernels/sgemm/spec.py) rounded up to
// whole rows of the grid: the kernel counts the rows beyond rung 16's as the
// copy's, so it reads the rounded count from the grid; 8 warps; dynamic
// shared memory as sgemm_spread_copies; a last argument, the workspace: two
// 64-bit counters (zero before the first launch; they count up over the
// launches of one grid), then, from byte 16, the padded B: K rows of N
// rounded up to 4 floats.
// Idea: rung 16 at 4095 executes 1.4% more instructions than at 4096 but
// issues on 81% of cycles instead of 85% (Nsight Compute,
// 2026-11-21e_h200_odd-size-profile.txt): with rows of B 4-byte aligned only,
// B arrives in 16 4-byte copies per thread and tile instead of 4 of 16 bytes,
// L2 sees 36% more requests, and MIO-throttle stalls appear. That costs 6%
// at 4095 and 4097, against about 1% to copy B once: one read and one write
// (67 MB each at 4097). Whatever block runs first must do the copy, and no
// tile may read B before it is finished; so a block's work is a ticket from
// an atomic counter, not its blockIdx. The first tickets of a launch, one per
// copying block, copy a share of B each and count themselves done; the others
// wait until all of those are, then do rung 16's work number ticket - the
// copying blocks. A block waits only for blocks with smaller tickets, which
// are running already, so the wait ends whatever order the GPU starts blocks
// in. At N % 4 == 0 there is no copy and no ticket: rung 16's kernel, with
// the same two bodies.
// Predicted (H200, written before measuring): 4095 and 4097 at about 47.5
// TFLOP/s, 97-98% of the 48.6 at 4096 (the tiles at the 16-byte path's speed,
// about 2% for the copy); every N % 4 == 0 as rung 16.
// Synchronisation (docs/synchronisation.md): a copying block's threads store
// their share of the padded B, __syncthreads, then thread 0 runs __threadfence
// (fence.sc.gpu, cumulative: it covers the stores the barrier showed it) and a
// relaxed atomicAdd on work[1]: a release pattern. A waiting block's thread 0
// reads work[1] with atomicAdd(.., 0) until it reaches (launch + 1) x
// pad_blocks, then __threadfence: an acquire pattern, which synchronises with
// every copier's release (atomic read-modify-writes carry each increment into
// the value read); __syncthreads hands that on to the block's loads of the
// padded B. Progress: copying tickets never wait; a block that waits holds a
// ticket numbered after every copying ticket of its launch, and a ticket is
// only taken by a block already running, so everything it waits for is
// resident and finishes. Preconditions: counters zero for a new workspace, one
// grid size per workspace, launches on it one after another (the runner's
// launcher owns its workspace and stream); a launch cut short leaves the
// counters off, and the next one could read early or wait: the wait is
// bounded (PAD_WAIT_SPINS), and past it the block traps, so a broken
// workspace is a fault, not a hang (finding 2 of docs/synchronisation.md).

#include "cp_async_tiles.cuh"
#include "spread_copies.cuh"
#include "edge_strips.cuh"

// The longest wait for the copy, in sleeps of at least 256 ns: 2^26 of them
// is about 17 s, far beyond any copy (67 MB at 4097 takes tens of microseconds).
constexpr unsigned PAD_WAIT_SPINS = 1u << 26;
constexpr int PAD_UNROLL = 8;  // float4s of the copy per thread and step: their loads go out together

// B (k rows, n floats apart) into bp (nb = n rounded up to 4 floats apart;
// columns n .. nb - 1 zero): block `part` of `parts` writes the float4s part x
// 256 + t, then every parts x 256 after.
__device__ __noinline__ void pad_b(const float* __restrict__ b, float4* __restrict__ bp, int n, int nb, int k,
                                   int part, int parts) {
    const int quads = nb / 4, total = k * quads;
    const int stride = parts * blockDim.x;
    for (int first = part * blockDim.x + threadIdx.x; first < total; first += stride * PAD_UNROLL) {
        float v[PAD_UNROLL][4];
#pragma unroll
        for (int u = 0; u < PAD_UNROLL; ++u) {
            const int q = first + u * stride;
            const int row = q / quads, col = (q % quads) * 4;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                v[u][i] = q < total && col + i < n ? b[row * n + col + i] : 0.f;
            }
        }
#pragma unroll
        for (int u = 0; u < PAD_UNROLL; ++u) {
            const int q = first + u * stride;
            if (q < total) {
                bp[q] = make_float4(v[u][0], v[u][1], v[u][2], v[u][3]);
            }
        }
    }
}

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int MIN_BLOCKS, int EDGE_MAX, int EDGE_KC,
          int PAD_BLOCKS>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_padded_b(const T* __restrict__ a, const T* __restrict__ b, const T* c_in, T* c_out, int m, int n, int k,
               T alpha, T beta, unsigned long long* work) {
    static_assert(PAD_BLOCKS >= 1, "when N % 4 != 0 at least one block must copy B");
    __shared__ unsigned long long ticket;
    const EdgeSplit<BM, BN, (BM / WM) * (BN / WN) * 32, STAGES * BK * (BM + BN), EDGE_MAX, EDGE_KC> split(m, n);
    const int across = gridDim.x;
    const int edge_blocks = split.row_blocks(m, n) + split.col_blocks(n);
    const int work_rows = split.tile_rows + (edge_blocks + across - 1) / across;
    const int pad_blocks = (gridDim.y - work_rows) * across;  // PAD_BLOCKS in whole rows, or none
    const int nb = (n + 3) / 4 * 4;
    float4* bp = reinterpret_cast<float4*>(work + 2);
    int w = blockIdx.y * across + blockIdx.x;  // this block's work: a tile, then the edge blocks
    if (pad_blocks > 0) {
        if (threadIdx.x == 0) {
            ticket = atomicAdd(&work[0], 1ull);
        }
        __syncthreads();
        const unsigned long long blocks = static_cast<unsigned long long>(gridDim.x) * gridDim.y;
        const unsigned long long launch = ticket / blocks;
        const int local = static_cast<int>(ticket % blocks);
        if (local < pad_blocks) {
            pad_b(b, bp, n, nb, k, local, pad_blocks);
            __syncthreads();  // the whole block's share is written
            if (threadIdx.x == 0) {
                __threadfence();
                atomicAdd(&work[1], 1ull);
            }
            return;
        }
        if (threadIdx.x == 0) {
            const unsigned long long done = (launch + 1) * pad_blocks;
            // Bounded: a workspace left off by a launch cut short would make this
            // wait for ever; past some 17 s of sleeps it is a fault instead.
            for (unsigned spins = 0; atomicAdd(&work[1], 0ull) < done; ++spins) {
                if (spins == PAD_WAIT_SPINS) {
                    __trap();
                }
                __nanosleep(256);
            }
            __threadfence();
        }
        __syncthreads();  // the padded B is complete for everyone
        w = local - pad_blocks;
    }
    const int wy = w / across, wx = w % across;
    if (wy >= split.tile_rows) {
        split.run(w - split.tile_rows * across, a, b, c_in, c_out, m, n, k, alpha, beta);
        return;
    }
    // The padded copy, or B itself when its rows are aligned; the 4-byte copies are
    // left for an N % 4 == 0 whose B starts off a 16-byte boundary.
    const float* b_read = pad_blocks > 0 ? reinterpret_cast<const float*>(bp) : b;
    if (pad_blocks > 0 || (n % 4 == 0 && aligned16(b))) {
        spread_copies_body<BM, BN, BK, WM, WN, STAGES, true, true>(a, b_read, c_in, c_out, m, n, k, alpha, beta,
                                                                   pad_blocks > 0 ? nb : 0, wy, wx);
    } else {
        spread_copies_body<BM, BN, BK, WM, WN, STAGES, false, true>(a, b, c_in, c_out, m, n, k, alpha, beta, 0, wy,
                                                                    wx);
    }
}
