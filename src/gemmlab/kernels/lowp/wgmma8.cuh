// Shared by the lowp ladder's Hopper rungs (sm_90a): the 8-bit wgmma
// instructions and the epilogues. Everything else (TMA, mbarriers, wgmma
// descriptors, setmaxnreg) is the tensor ladder's: tensor/mbarrier.cuh,
// tma.cuh, wgmma.cuh, epilogue.cuh and pipeline.cuh.
//
// An 8-bit tile is what the 16-bit rungs load, byte for byte: a TMA box of
// rows x 128 bytes in the 128-byte swizzle, now 128 elements of K per row.
// One wgmma step is 32 bytes of K (k = 32 here, 16 there), so wgmma.cuh's
// descriptors and its wgmma_slice (4 steps per row, the descriptor 32 bytes
// further each) serve unchanged. 8-bit wgmma reads both operands K-major
// only, which is the ladder's layout; its accumulator fragment is the 16-bit
// one (wgmma.cuh's `wgmma`), in int32 for int8.

#include "types8.cuh"
#include "../tensor/wgmma.cuh"
#include "../tensor/epilogue.cuh"

// FP8: float32 sums; the trailing immediates are scale-a and scale-b (1: no
// negation). 8-bit types take no transpose immediates.
GL_WGMMA_128(gl_e4m3, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3", "1, 1")
GL_WGMMA_256(gl_e4m3, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3", "1, 1")
GL_WGMMA_128(gl_e5m2, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e5m2", "1, 1")
GL_WGMMA_256(gl_e5m2, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e5m2", "1, 1")
GL_WGMMA_256(gl_e5m2_e4m3, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e4m3", "1, 1")  // peak/wgmma8.cu

// The same FP8 wgmma with the scale-d flag as an operand: `accumulate` 0
// writes D = A . B, 1 adds to D. A slice that starts a fresh partial sum
// passes 0 on its first step, so the partial slab needs no zeroing (64 moves
// a slice saved). N = 128 (a pass of a 128- or 256-column tile), 144 or 192
// (a 144- or 192-column tile in one pass): with its FP32 sums a consumer
// holds 144 to 192 registers.
template <typename T, int N>
__device__ __forceinline__ void wgmma_fp8_into(float (&d)[N / 2], unsigned long long da, unsigned long long db,
                                               int accumulate);
#define GL_WGMMA_FP8_INTO(TAG, N, TEXT, OUT, DESC_A, DESC_B, FLAG, INSTRUCTION)                             \
    template <>                                                                                             \
    __device__ __forceinline__ void wgmma_fp8_into<TAG, N>(float (&d)[N / 2], unsigned long long da,       \
                                                           unsigned long long db, int accumulate) {       \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " FLAG ", 0;\n" INSTRUCTION " {" TEXT "}, " DESC_A    \
                     ", " DESC_B ", p, 1, 1;\n}\n"                                                          \
                     : OUT(d)                                                                               \
                     : "l"(da), "l"(db), "r"(accumulate));                                                  \
    }
// Each FP8 pair in the three widths; TYPES names A's format, then B's.
#define GL_WGMMA_FP8_WIDTHS(TAG, TYPES)                                                                    \
    GL_WGMMA_FP8_INTO(TAG, 128, GL_TEXT_64, GL_OUT_64, "%64", "%65", "%66",                                \
                      "wgmma.mma_async.sync.aligned.m64n128k32.f32." TYPES)                                \
    GL_WGMMA_FP8_INTO(TAG, 144, GL_TEXT_72, GL_OUT_72, "%72", "%73", "%74",                                \
                      "wgmma.mma_async.sync.aligned.m64n144k32.f32." TYPES)                                \
    GL_WGMMA_FP8_INTO(TAG, 192, GL_TEXT_96, GL_OUT_96, "%96", "%97", "%98",                                \
                      "wgmma.mma_async.sync.aligned.m64n192k32.f32." TYPES)
GL_WGMMA_FP8_WIDTHS(gl_e4m3, "e4m3.e4m3")
GL_WGMMA_FP8_WIDTHS(gl_e5m2, "e5m2.e5m2")
// The mixed pair (A e5m2, B e4m3): the instruction names each operand's format.
GL_WGMMA_FP8_WIDTHS(gl_e5m2_e4m3, "e5m2.e4m3")

// One 128-K slice into a partial slab: 4 steps of k = 32, all adding to it,
// except (FRESH) the first, which overwrites it. The operands come as the
// low words of their first rows' descriptors (wgmma_desc_low), which a loop
// over stages steps by a stage's size in 32 bits instead of rebuilding them.
template <typename T, bool FRESH, int N>
__device__ __forceinline__ void wgmma_fp8_fresh_slice(float (&d)[N / 2], unsigned a_low, unsigned b_low) {
#pragma unroll
    for (int step = 0; step < TMA_ROW_BYTES / 32; ++step) {
        wgmma_fp8_into<T, N>(d, WGMMA_DESC_HIGH | (a_low + 2 * step), WGMMA_DESC_HIGH | (b_low + 2 * step),
                             FRESH ? step : 1);
    }
}

// Box `box` of a warpgroup's 64 x N float32 sums into a 64 x 128-byte box
// in the 128-byte swizzle, without the bank conflicts of epilogue.cuh's
// write_wgmma_box (which the bfloat16 C keeps: see below).
//
// Bank arithmetic. A box row is 128 bytes, all 32 banks, so only the swizzle
// (16-byte chunk c of row r at chunk c ^ (r % 8)) decides a bank. A warp's
// 64-bit store is served half a warp at a time: 16 threads, 128 bytes, one
// wavefront only if they cover the 32 banks. Lane l writes row R = l / 4
// (mod 8; its second row R + 8 has the same swizzle) at float 8 g + 2 (l % 4)
// of the box: chunk 2 g + (l % 4) / 2, so the row's 4 threads fill the chunk
// pair P = g ^ (R / 2) (chunks 2P, 2P + 1, 8 banks). A half warp holds rows
// R = 4h .. 4h + 3, whose R / 2 takes two values, each twice: with every
// lane on the same g (write_wgmma_box), rows R and R ^ 1 land on the same
// 8 banks, two wavefronts per half, four per store where 256 bytes need two.
// Here odd rows write group g ^ 2 while even rows write g, so
// P = g ^ 2 (R % 2) ^ (R / 2): for R = 0..3 that is g, g^2, g^1, g^3, and
// for R = 4..7 g^2, g, g^3, g^1: four distinct pairs, 32 banks, one
// wavefront per half warp. The cost: one SEL per value (which of the two
// groups this lane writes now), 64 a thread for a 64 x 128 slab.
//
// bfloat16 C is already conflict-free: a lane stores 4 bytes (one bf16x2) at
// chunk g ^ R, so a warp's 8 rows take 8 distinct chunks, 128 bytes, one
// wavefront; it keeps write_wgmma_box.
template <int N, typename C>
__device__ __forceinline__ void write_box_spread(const float (&d)[N / 2], unsigned char* box_mem, int box, int thread) {
    if constexpr (sizeof(C) != 4) {
        write_wgmma_box<N, C>(d, box_mem, box, thread);
    } else {
        constexpr int GROUPS = TMA_ROW_BYTES / sizeof(float) / 8;  // 4 eight-column groups of a box
        static_assert(GROUPS == 4, "the swap pairs group g with g ^ 2 of four");
        const int r = 16 * (thread / 32) + (thread % 32) / 4;
        const bool odd = r % 2;
        const int first = box_first_col<N, C>(box) / 8;  // the box's first 8-column group (N = 144: the last overlaps)
#pragma unroll
        for (int g = 0; g < GROUPS; ++g) {
            const int j = 4 * (first + g), k = 4 * (first + (g ^ 2));  // even rows: j, odd: k
            const int byte = (8 * (odd ? g ^ 2 : g) + 2 * (thread % 4)) * static_cast<int>(sizeof(float));
            put_pair_swizzled<C>(box_mem, r, byte, odd ? d[k] : d[j], odd ? d[k + 1] : d[j + 1]);
            put_pair_swizzled<C>(box_mem, r + 8, byte, odd ? d[k + 2] : d[j + 2], odd ? d[k + 3] : d[j + 3]);
        }
    }
}

// int8: int32 sums, listed as "+r" operands; the integer form has no
// scale-a/scale-b immediates, only the scale-d predicate (D += A . B).
#define GL_OUT_R_64(d) \
    "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), \
    "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), \
    "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), \
    "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), \
    "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), \
    "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), \
    "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), \
    "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
#define GL_OUT_R_128(d) GL_OUT_R_64(d), \
    "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), \
    "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), \
    "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), \
    "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), \
    "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), \
    "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), \
    "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), \
    "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])

template <int N>
__device__ __forceinline__ void wgmma_s8(int (&d)[N / 2], unsigned long long da, unsigned long long db);

#define GL_WGMMA_S8(N, TEXT, OUT, DESC_A, DESC_B, SCALE)                                                       \
    template <>                                                                                             \
    __device__ __forceinline__ void wgmma_s8<N>(int (&d)[N / 2], unsigned long long da, unsigned long long db) { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE ", 0;\n"                                    \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k32.s32.s8.s8 {" TEXT "}, " DESC_A ", " DESC_B   \
                     ", p;\n}\n"                                                                            \
                     : OUT(d)                                                                               \
                     : "l"(da), "l"(db), "r"(1));                                                           \
    }
GL_WGMMA_S8(128, GL_TEXT_64, GL_OUT_R_64, "%64", "%65", "%66")
GL_WGMMA_S8(256, GL_TEXT_128, GL_OUT_R_128, "%128", "%129", "%130")

// One 128-deep slice of a stage in int8: 4 wgmma steps of k = 32, as wgmma_slice.
template <int N>
__device__ __forceinline__ void wgmma_s8_slice(int (&d)[N / 2], const void* a_rows, const void* b_rows) {
    const unsigned long long da = wgmma_desc(a_rows), db = wgmma_desc(b_rows);
#pragma unroll
    for (int step = 0; step < TMA_ROW_BYTES / 32; ++step) wgmma_s8<N>(d, da + 2 * step, db + 2 * step);
}

template <int REGS>
__device__ __forceinline__ void fence_int_registers(int (&d)[REGS]) {
#pragma unroll
    for (int i = 0; i < REGS; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// A warpgroup's 64 x N int32 sums to C at (row, col), guarded (fragment as store_wgmma_tile).
template <int N>
__device__ __forceinline__ void store_wgmma_int(const int (&d)[N / 2], int* c, int m, int n, int row, int col,
                                                int thread) {
    const int r = row + 16 * (thread / 32) + (thread % 32) / 4;
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
        const int cc = col + 8 * j + 2 * (thread % 4);
        store_int_pair(c, m, n, r, cc, d[4 * j], d[4 * j + 1]);
        store_int_pair(c, m, n, r + 8, cc, d[4 * j + 2], d[4 * j + 3]);
    }
}

// A warpgroup's 64 x N FP32 sums to C at (row, col), each times its epilogue scale, guarded.
template <int SCALING, int N>
__device__ __forceinline__ void store_wgmma_scaled(const float (&d)[N / 2], float* c, const float* scale_a,
                                                   const float* scale_b, int m, int n, int row, int col, int thread) {
    const int r = row + 16 * (thread / 32) + (thread % 32) / 4;
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
        const int cc = col + 8 * j + 2 * (thread % 4);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float f0 = epilogue_scale<SCALING>(scale_a, scale_b, m, n, r + 8 * h, cc);
            const float f1 = epilogue_scale<SCALING>(scale_a, scale_b, m, n, r + 8 * h, cc + 1);
            store_pair(c, m, n, r + 8 * h, cc, d[4 * j + 2 * h] * f0, d[4 * j + 2 * h + 1] * f1);
        }
    }
}
