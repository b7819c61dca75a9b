// Shared by the mma.sync rungs (tc_mma, tc_mma_pipeline, and the 8-bit
// tc_int8_mma and tc_fp8_mma through lowp/mma8.cuh): the swizzled
// shared-memory tile and its cp.async copy, the warp tile's inner product with
// ldmatrix + mma.sync, and the guarded store of the accumulators. Each rung's
// own file holds when the tiles get into shared memory (one tile at a time,
// or a ring), which is what differs between them.
//
// A tile is ROWS x 64 16-bit elements: each row is 128 bytes, eight 16-byte
// chunks. ldmatrix reads one chunk from each of 8 consecutive rows; stored
// plainly, all 8 sit in the same 4 banks (rows are 128 bytes apart) and the
// read takes 8 passes. Storing chunk c of row r at chunk c ^ (r % 8) puts the
// 8 rows' chunks in 8 different bank groups: one pass. It is the pattern the
// TMA unit writes with its 128-byte swizzle, used by the Hopper rungs.

#include "tc_common.cuh"

constexpr int MMA_BK = 64;  // 16-bit elements per tile row: 128 bytes

// Where chunk `chunk` (16 bytes) of row `row` sits in a swizzled tile of
// 128-byte rows, counted in elements of E (the 8-bit rungs share these tiles).
template <typename E>
__device__ __forceinline__ int swizzled_at(int row, int chunk) {
    constexpr int ROW = 128 / sizeof(E), CHUNK = 16 / sizeof(E);
    return row * ROW + ((chunk ^ (row % 8)) * CHUNK);
}

// ROWS rows of a 128-byte-deep slice of A (or B), from element k0 of each row,
// into a swizzled tile by cp.async, 16 bytes a copy; rows past `rows` and
// chunks past K are zero-filled. K x sizeof(E) % 16 == 0 (the spec's rule), so
// a chunk is wholly inside K or wholly outside.
template <int ROWS, int THREADS, typename E>
__device__ __forceinline__ void copy_tile_async(E* tile, const E* src, int row0, int rows, int k0, int k, int tid) {
    constexpr int CHUNKS = 8, CHUNK = 16 / sizeof(E);  // chunks per tile row, elements per chunk
    static_assert((ROWS * CHUNKS) % THREADS == 0, "equal shares of the copies");
#pragma unroll
    for (int i = tid; i < ROWS * CHUNKS; i += THREADS) {
        const int r = i / CHUNKS, ch = i % CHUNKS;
        const bool in = row0 + r < rows && k0 + CHUNK * ch < k;
        // Out of range: zero-filled, and src stays a valid address that is not read.
        const E* p = in ? src + static_cast<long long>(row0 + r) * k + k0 + CHUNK * ch : src;
        cp_async16(tile + swizzled_at<E>(r, ch), p, in);
    }
}

// One warp's WM x WN piece of C over one 128-byte-deep slice of the tiles:
// 4 steps of 32 bytes of K (k = 16 for 16-bit elements, 32 for 8-bit ones),
// each (WM / 16) x (WN / 8) calls of mma(d, a, b0, b1), the mma.sync that
// takes those fragments. The 8-bit m16n8k32 places its fragments byte for
// byte as m16n8k16 places 16-bit ones, so one set of ldmatrix addresses
// serves both.
template <int WM, int WN, typename E, typename Acc, typename Mma>
__device__ __forceinline__ void warp_tile_steps(Acc (&acc)[WM / 16][WN / 8][4], const E* a_tile, const E* b_tile,
                                                int wrow, int wcol, int lane, Mma mma) {
    static_assert(WM % 16 == 0 && WN % 16 == 0, "whole 16 x 16 pieces");
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
        unsigned fa[WM / 16][4], fb[WN / 8][2];
#pragma unroll
        for (int i = 0; i < WM / 16; ++i) {
            // Lanes 0-15: rows 0-15 at bytes 0-15 of the step; lanes 16-31: the same rows at bytes 16-31.
            ldmatrix_x4(fa[i], a_tile + swizzled_at<E>(wrow + 16 * i + lane % 16, 2 * ks + lane / 16));
        }
#pragma unroll
        for (int j = 0; j < WN / 8; j += 2) {
            // Matrices: (n 0-7, bytes 0-15), (n 0-7, bytes 16-31), (n 8-15, bytes 0-15), (n 8-15, bytes 16-31).
            unsigned r[4];
            ldmatrix_x4(r, b_tile + swizzled_at<E>(wcol + 8 * j + lane % 8 + (lane / 16) * 8, 2 * ks + (lane / 8) % 2));
            fb[j][0] = r[0];
            fb[j][1] = r[1];
            fb[j + 1][0] = r[2];
            fb[j + 1][1] = r[3];
        }
#pragma unroll
        for (int i = 0; i < WM / 16; ++i)
#pragma unroll
            for (int j = 0; j < WN / 8; ++j) mma(acc[i][j], fa[i], fb[j][0], fb[j][1]);
    }
}

// The 16-bit warp tile: 4 steps of k = 16 over a 64-deep slice.
template <typename T, int WM, int WN>
__device__ __forceinline__ void mma_warp_tile(float (&acc)[WM / 16][WN / 8][4], const unsigned short* a_tile,
                                              const unsigned short* b_tile, int wrow, int wcol, int lane) {
    warp_tile_steps<WM, WN>(acc, a_tile, b_tile, wrow, wcol, lane,
                            [](float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
                                mma_16816<T>(d, a, b0, b1);
                            });
}

template <int WM, int WN>
__device__ __forceinline__ void store_warp_tile(const float (&acc)[WM / 16][WN / 8][4], float* c, int m, int n,
                                                int row, int col, int lane) {
#pragma unroll
    for (int i = 0; i < WM / 16; ++i)
#pragma unroll
        for (int j = 0; j < WN / 8; ++j) {
            const int r = row + 16 * i + lane / 4, cc = col + 8 * j + 2 * (lane % 4);
            store_pair(c, m, n, r, cc, acc[i][j][0], acc[i][j][1]);
            store_pair(c, m, n, r + 8, cc, acc[i][j][2], acc[i][j][3]);
        }
}
