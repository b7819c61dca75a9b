// Shared by the mma.sync rungs (tc_mma, tc_mma_pipeline): the swizzled
// shared-memory tile, the warp tile's inner product with ldmatrix + mma.sync,
// and the guarded store of the accumulators. Each rung's own file holds how
// the tiles get into shared memory, which is what differs between them.
//
// A tile is ROWS x 64 16-bit elements: each row is 128 bytes, eight 16-byte
// chunks. ldmatrix reads one chunk from each of 8 consecutive rows; stored
// plainly, all 8 sit in the same 4 banks (rows are 128 bytes apart) and the
// read takes 8 passes. Storing chunk c of row r at chunk c ^ (r % 8) puts the
// 8 rows' chunks in 8 different bank groups: one pass. It is the pattern the
// TMA unit writes with its 128-byte swizzle, used by the Hopper rungs.

#include "tc_common.cuh"

constexpr int MMA_BK = 64;  // 16-bit elements per tile row: 128 bytes

__device__ __forceinline__ int swizzled(int row, int chunk) { return row * MMA_BK + ((chunk ^ (row % 8)) * 8); }

// One warp's WM x WN piece of C, over one 64-deep slice of the tiles:
// 4 steps of k = 16, each (WM / 16) x (WN / 8) mma.sync instructions.
template <typename T, int WM, int WN>
__device__ __forceinline__ void mma_warp_tile(float (&acc)[WM / 16][WN / 8][4], const unsigned short* a_tile,
                                              const unsigned short* b_tile, int wrow, int wcol, int lane) {
    static_assert(WM % 16 == 0 && WN % 16 == 0, "whole 16 x 16 pieces");
#pragma unroll
    for (int ks = 0; ks < MMA_BK / 16; ++ks) {
        unsigned fa[WM / 16][4], fb[WN / 8][2];
#pragma unroll
        for (int i = 0; i < WM / 16; ++i) {
            // Lanes 0-15: rows 0-15 at k 0-7; lanes 16-31: the same rows at k 8-15.
            ldmatrix_x4(fa[i], a_tile + swizzled(wrow + 16 * i + lane % 16, 2 * ks + lane / 16));
        }
#pragma unroll
        for (int j = 0; j < WN / 8; j += 2) {
            // Matrices: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
            unsigned r[4];
            ldmatrix_x4(r, b_tile + swizzled(wcol + 8 * j + lane % 8 + (lane / 16) * 8, 2 * ks + (lane / 8) % 2));
            fb[j][0] = r[0];
            fb[j][1] = r[1];
            fb[j + 1][0] = r[2];
            fb[j + 1][1] = r[3];
        }
#pragma unroll
        for (int i = 0; i < WM / 16; ++i)
#pragma unroll
            for (int j = 0; j < WN / 8; ++j) mma_16816<T>(acc[i][j], fa[i], fb[j][0], fb[j][1]);
    }
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
