// Shared by rungs 13 onward (sgemm_spread_copies to sgemm_padded_b): the
// copies planned per thread for whole sectors (SectorPlan), a block's place
// and k-loop (SpreadLoop), and the store of the outputs a block owns when its
// tile was moved inside M and N (store4_from, store_owned), and the whole
// body of a tile (spread_copies_body) that rungs 13, 15, 16 and 17 call.
// Inlined into the rung's source like cp_async_tiles.cuh, which it needs.

// One thread's copies, worked out once (as sgemm_lean_loop's CopyPlan), for
// 256 threads and a tile that lies inside M and N. A: copy (j, g) takes row
// 32 j + 4 warp + lane / 8 and k-slice 8 g + lane % 8 of the tile. B: B_VEC,
// CopyPlan's 16-byte pieces; else a warp copies 32 consecutive columns of one
// row. One source and one shared-memory offset per thread; each copy adds a
// multiple of k or n (read from the kernel's parameters) or a constant.
template <int BM, int BN, int BK, bool B_VEC>
struct SectorPlan {
    static constexpr int THREADS = 256;
    static constexpr int BANDS = BM / 32, K_GROUPS = BK / 8;
    static constexpr int B16_COPIES = BK * BN / 4 / THREADS, B16_ROWS = THREADS * 4 / BN;
    static constexpr int COL_GROUPS = BN / 32;
    unsigned a_src;  // A[row0 + r][k0 + kk] is a + k0 + a_src; copy (j, g) adds 32 j k + 8 g
    int a_dst;       // a_tile[kk][r ^ shift(kk)]; copy (j, g) adds 8 g BM + 32 j
    unsigned b_src;  // B[k0 + r][col0 + c] is b + k0 n + b_src; piece p adds p B16_ROWS n, else row i adds i n + 32 c
    int b_dst;       // b_tile[r][c]; piece p adds p B16_ROWS BN, else i BN + 32 c

    __device__ __forceinline__ SectorPlan(int row0, int col0, int n, int k, int tid) {
        const int warp = tid / 32, lane = tid % 32;
        const int r = 4 * warp + lane / 8, kk = lane % 8;  // r < 32: the XOR below stays inside a band
        a_src = static_cast<unsigned>((row0 + r) * k + kk);
        a_dst = kk * BM + (r ^ SliceSwizzle::shift(kk));
        if (B_VEC) {
            const int rb = tid / (BN / 4), c = (tid % (BN / 4)) * 4;
            b_src = static_cast<unsigned>(rb * n + col0 + c);
            b_dst = rb * BN + c;
        } else {
            b_src = static_cast<unsigned>(K_GROUPS * warp * n + col0 + lane);
            b_dst = K_GROUPS * warp * BN + lane;
        }
    }

    // The copies of a tile wholly inside K, its corner at a_k = a + k0 and b_k =
    // b + k0 n, or a share of them: copy i (A's first, then B's) is issued when
    // i % parts == part. Called with constants, so the tests fold away. on: false
    // switches every copy off (a look-ahead past the last whole tile of K).
    __device__ __forceinline__ void issue(float* a_stage, float* b_stage, const float* a_k, const float* b_k, int n,
                                          int k, int part, int parts, bool on) const {
#pragma unroll
        for (int j = 0; j < BANDS; ++j) {
#pragma unroll
            for (int g = 0; g < K_GROUPS; ++g) {
                if ((j * K_GROUPS + g) % parts == part) {
                    cp_async_if<4>(a_stage + a_dst + 8 * g * BM + 32 * j, a_k + (a_src + 32 * j * k) + 8 * g, on);
                }
            }
        }
        constexpr int A_COPIES = BANDS * K_GROUPS;
        if (B_VEC) {
#pragma unroll
            for (int p = 0; p < B16_COPIES; ++p) {
                if ((A_COPIES + p) % parts == part) {
                    cp_async_if<16>(b_stage + b_dst + p * B16_ROWS * BN, b_k + (b_src + p * B16_ROWS * n), on);
                }
            }
        } else {
#pragma unroll
            for (int i = 0; i < K_GROUPS; ++i) {
#pragma unroll
                for (int c = 0; c < COL_GROUPS; ++c) {
                    if ((A_COPIES + i * COL_GROUPS + c) % parts == part) {
                        cp_async_if<4>(b_stage + b_dst + i * BN + 32 * c, b_k + (b_src + i * n) + 32 * c, on);
                    }
                }
            }
        }
    }
};

// A spread-copies block's place in its tile and its k-loop, shared by
// spread_copies_body (rungs 13, 15-17) and stream_k_body (rung 14). 8 warps of
// WM x WN outputs cover the BM x BN tile, and a lane's TM x TN outputs are
// load_fragments's. The launch's dynamic shared memory is a ring of STAGES A
// tiles (BK x BM, transposed, SliceSwizzle), then STAGES B tiles (BK x BN).
template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool B_VEC, bool BY_COLUMN = false>
struct SpreadLoop {
    static_assert((BM / WM) * (BN / WN) == 8, "SectorPlan's copies are laid out for 8 warps");
    static_assert(WM % 16 == 0 && WN % 32 == 0, "a warp tile is whole 16 x 32 sub-tiles");
    static_assert(BM % 32 == 0 && BN % 32 == 0 && BK % 8 == 0, "whole 32-row bands, 32-column groups, 8 k-slices");
    static_assert(BK * BN % 1024 == 0, "every thread copies the same number of float4s of B");
    static_assert(STAGES >= 2, "at least one tile in flight while one is computed");
    static constexpr int WARPS_N = BN / WN;
    static constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    static constexpr int M_SUB = WM / 16, N_SUB = WN / 32;
    static constexpr int TM = M_SUB * 4, TN = N_SUB * 4;
    float (*a_tiles)[BK][BM];
    float (*b_tiles)[BK][BN];
    int tid, wrow, wcol, lrow, lcol;

    __device__ __forceinline__ SpreadLoop() {
        extern __shared__ float4 smem4[];
        a_tiles = reinterpret_cast<float (*)[BK][BM]>(smem4);
        b_tiles = reinterpret_cast<float (*)[BK][BN]>(reinterpret_cast<float*>(smem4) + STAGES * BK * BM);
        tid = threadIdx.x;
        const int warp = tid / 32, lane = tid % 32;
        wrow = (warp / WARPS_N) * WM;
        wcol = (warp % WARPS_N) * WN;
        lrow = (lane / 8) * 4;
        lcol = (lane % 8) * 4;
    }

    // Adds k-tiles kb .. ke - 1 of the tile whose corner is (row0, col0) to acc,
    // B's rows ldb floats apart. The ring must be free, and kb goes to stage 0.
    // K-tiles before planned_end come by the plan's copies, the others (the last,
    // partial tile of K, and every tile of a matrix smaller than the block tile)
    // by the guarded loader.
    __device__ __forceinline__ void run(float (&acc)[TM][TN], const SectorPlan<BM, BN, BK, B_VEC>& plan,
                                       const float* __restrict__ a, const float* __restrict__ b, int row0, int col0,
                                       int m, int ldb, int k, int kb, int ke, int planned_end) const {
        float a_frag[2][TM], b_frag[2][TN];
        // A tile's copies into stage s: the plan's (a share of them, or none when !on),
        // or the guarded loader's.
        auto planned = [&](int j, int s, int part, int parts, bool on) {
            plan.issue(&a_tiles[s][0][0], &b_tiles[s][0][0], a + j * BK, b + static_cast<long long>(j) * BK * ldb,
                       ldb, k, part, parts, on);
        };
        auto guarded = [&](int j, int s) {
            load_tiles<BM, BN, BK, THREADS, SliceSwizzle>(a_tiles[s], b_tiles[s], a, b, row0, col0, j * BK, m, ldb,
                                                          k, B_VEC, tid);
        };
        auto fragments = [&](int s, int kk, int buf) {
            load_fragments<BM, BN, BK, M_SUB, N_SUB, SliceSwizzle>(a_tiles[s], b_tiles[s], kk, a_frag[buf],
                                                                   b_frag[buf], wrow, wcol, lrow, lcol);
        };
        // K-tiles kb .. kb + STAGES - 2 before the loop; step t loads k-tile t + STAGES - 1.
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (kb + s < planned_end) {
                planned(kb + s, s, 0, 1, true);
            } else if (kb + s < ke) {
                guarded(kb + s, s);
            }
            cp_async_commit();
        }
        cp_async_wait<STAGES - 2>();
        __syncthreads();  // k-tile kb is in for everyone
        fragments(0, 0, 0);
        int stage = 0;  // (t - kb) % STAGES
        // K-tile t. Its look-ahead, t + STAGES - 1, goes to the stage of t - 1, free
        // since the barrier that ended step t - 1: with the plan's copies, a share of
        // them after each k-slice's fragment loads (switched off past planned_end, so
        // that one copy of the loop serves every step); with the guarded loader, all
        // at the end.
        for (int t = kb; t < ke; ++t) {
            const int ahead = t + STAGES - 1;
            const int ahead_stage = stage == 0 ? STAGES - 1 : stage - 1;
            const bool on = ahead < planned_end;
            const int j = on ? ahead : 0;  // a switched-off copy's address stays inside A and B
#pragma unroll
            for (int kk = 0; kk < BK - 1; ++kk) {
                fragments(stage, kk + 1, (kk + 1) % 2);
                planned(j, ahead_stage, kk, BK, on);
                outer_product<TM, TN, BY_COLUMN>(acc, a_frag[kk % 2], b_frag[kk % 2]);
            }
            planned(j, ahead_stage, BK - 1, BK, on);
            if (!on && ahead < ke) {
                guarded(ahead, ahead_stage);
            }
            cp_async_commit();
            cp_async_wait<STAGES - 2>();
            __syncthreads();  // k-tile t + 1 is in for everyone; nobody reads t's stage any more
            stage = stage + 1 == STAGES ? 0 : stage + 1;
            if (t + 1 < ke) {
                fragments(stage, 0, 0);
            }
            outer_product<TM, TN, BY_COLUMN>(acc, a_frag[1], b_frag[1]);
        }
    }
};

// store4 for the columns from col_lo on only. With vec, col and col_lo differ by
// a multiple of 4 (N % 4 == 0 and so is N - BN), so a float4 is all in or all out.
// (A col_lo parameter on store4 itself, tried instead, left rungs 5-12's SASS as
// it was but changed ptxas's registers in this rung's main loop: 0.9% slower at
// 4096 and 2.9% at 4095 on the H200, benchmarks/results/2026-11-21_h200_sgemm-store4-col-lo.txt.)
__device__ __forceinline__ void store4_from(const float* c_in, float* c_out, int row, int col, int col_lo, int m,
                                            int n, float4 v, float alpha, float beta, bool vec) {
    if (col >= col_lo) {
        store4(c_in, c_out, row, col, m, n, v, alpha, beta, vec);
        return;
    }
    if (vec || col + 3 < col_lo || row >= m) {
        return;
    }
    const float r[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const int idx = row * n + col + q;
        if (col + q >= col_lo) {
            c_out[idx] = beta == 0.f ? alpha * r[q] : alpha * r[q] + beta * c_in[idx];
        }
    }
}

// The thread's outputs (acc, the TM x TN layout of load_fragments) of a tile
// whose corner is (row0, col0), those the block owns only: rows from row_owned
// and columns from col_owned on (a tile moved inside M and N computes some it
// does not own).
template <int TM, int TN>
__device__ __forceinline__ void store_owned(const float (&acc)[TM][TN], const float* c_in, float* c_out, int row0,
                                            int col0, int row_owned, int col_owned, int wrow, int wcol, int lrow,
                                            int lcol, int m, int n, float alpha, float beta, bool c_vec) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + wrow + (i / 4) * 16 + lrow + i % 4;
        if (row < row_owned) {
            continue;
        }
#pragma unroll
        for (int s = 0; s < TN / 4; ++s) {
            const float4 v = make_float4(acc[i][4 * s], acc[i][4 * s + 1], acc[i][4 * s + 2], acc[i][4 * s + 3]);
            store4_from(c_in, c_out, row, col0 + wcol + s * 32 + lcol, col_owned, m, n, v, alpha, beta, c_vec);
        }
    }
}

// The whole kernel for one way of copying B (sgemm_spread_copies picks one)
// and one order of the FFMAs (sgemm_column_order's BY_COLUMN, see outer_product).
// Left out, the last three are this block's: B's rows n floats apart (nb, a
// multiple of 4 for B_VEC; columns n .. nb - 1 are then read, and must be
// zero: a tile crossing N moves left to end at nb, not n) and the tile at
// (blockIdx.y BM, blockIdx.x BN) (sgemm_padded_b gives its own).
template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool B_VEC, bool BY_COLUMN = false>
__device__ __forceinline__ void spread_copies_body(const float* __restrict__ a, const float* __restrict__ b,
                                                   const float* c_in, float* c_out, int m, int n, int k,
                                                   float alpha, float beta, int nb = 0, int tile_row = -1,
                                                   int tile_col = -1) {
    using Loop = SpreadLoop<BM, BN, BK, WM, WN, STAGES, B_VEC, BY_COLUMN>;
    const Loop loop;
    // The block owns rows row_owned .. + BM - 1 and columns col_owned .. + BN - 1
    // of C. When they cross M or N, and M >= BM and N >= BN, its tile moves up or
    // left to end at M or N: it computes outputs it does not own, and stores only
    // its own, but every copy of the plan stays inside A and B. (Smaller matrices
    // take the guarded loader for every tile.)
    const int row_owned = (tile_row < 0 ? blockIdx.y : tile_row) * BM;
    const int col_owned = (tile_col < 0 ? blockIdx.x : tile_col) * BN;
    const int ldb = nb > 0 ? nb : n;  // B's row stride, and the columns its copies may read
    const bool inside = m >= BM && n >= BN;
    const int row0 = inside ? min(row_owned, m - BM) : row_owned;
    const int col0 = inside ? min(col_owned, ldb - BN) : col_owned;  // B_VEC: a multiple of 4
    const bool c_vec = n % 4 == 0 && aligned16(c_in) && aligned16(c_out);
    const int tiles = (k + BK - 1) / BK;
    const int whole_tiles = inside ? k / BK : 0;
    const SectorPlan<BM, BN, BK, B_VEC> plan(row0, col0, ldb, k, loop.tid);
    float acc[Loop::TM][Loop::TN] = {};
    loop.run(acc, plan, a, b, row0, col0, m, ldb, k, 0, tiles, whole_tiles);
    store_owned(acc, c_in, c_out, row0, col0, row_owned, col_owned, loop.wrow, loop.wcol, loop.lrow, loop.lcol, m, n,
                alpha, beta, c_vec);
}
