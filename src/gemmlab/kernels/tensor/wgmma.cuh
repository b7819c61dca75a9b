// wgmma, shared by the Hopper rungs (sm_90a) and the peak-rate kernels: the
// shared-memory descriptors of a tile in tma.cuh's layout, the fence, commit
// and wait of a warpgroup's groups, one 128-byte slice of K, and the
// instructions themselves, one per element type and N (the 8-bit ones:
// lowp/wgmma8.cuh). Inline PTX, as in tc_common.cuh.
#ifndef GEMMLAB_TENSOR_WGMMA_CUH
#define GEMMLAB_TENSOR_WGMMA_CUH

#include "tc_common.cuh"
#include "tma.cuh"

// --- wgmma ------------------------------------------------------------------------

// Shared-memory matrix descriptor of a K-major tile in tma.cuh's layout:
// start address (bits 0-13, in 16-byte units), leading-byte offset (unused
// with a swizzle, set to 1), stride-byte offset between 8-row groups (bits
// 32-45: 1024 bytes), swizzle mode in bits 62-63 (1: 128 bytes).
// The high word (stride-byte offset and swizzle) is the same for every tile.
constexpr unsigned long long WGMMA_DESC_HIGH = ((1024ull >> 4) << 32) | (1ull << 62);
__device__ __forceinline__ unsigned long long wgmma_desc(const void* tile) {
    const unsigned long long address = smem_u32(tile);
    return ((address & 0x3FFFF) >> 4) | (1ull << 16) | WGMMA_DESC_HIGH;
}
// The low word alone: that of a tile `bytes` further on is this plus bytes /
// 16, which lets a loop over stages keep one 32-bit word and add to it.
// WGMMA_DESC_HIGH | wgmma_desc_low(smem_u32(tile)) == wgmma_desc(tile).
__device__ __forceinline__ unsigned wgmma_desc_low(unsigned address) { return ((address & 0x3FFFF) >> 4) | (1u << 16); }

// Order this warpgroup's register accesses before the wgmma that follows.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

// Wait until at most PENDING committed groups of this warpgroup are still running.
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}

// The accumulators must not be touched by ordinary code while a wgmma that
// writes them runs; this tells the compiler they may change "now".
template <int REGS>
__device__ __forceinline__ void fence_registers(float (&d)[REGS]) {
#pragma unroll
    for (int i = 0; i < REGS; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D (64 x N, float32, across the 4 warps of a warpgroup) += A (64 x K_STEP) .
// B (N x K_STEP)^T, both read from shared memory through their descriptors.
// Thread t of the warpgroup holds, for each 8 columns j: d[4j], d[4j + 1] at
// row 16 (t / 32) + (t % 32) / 4, columns 8 j + 2 (t % 4) + {0, 1}, and
// d[4j + 2], d[4j + 3] eight rows below. K_STEP is 32 bytes of a row: 16
// bf16/fp16 elements or 8 tf32. The specialisations are at the end of this file.
template <typename T, int N>
__device__ __forceinline__ void wgmma(float (&d)[N / 2], unsigned long long da, unsigned long long db);

// One 64-deep (128-byte) slice of a stage: 4 wgmma steps, each 32 bytes further along K.
template <typename T, int N>
__device__ __forceinline__ void wgmma_slice(float (&d)[N / 2], const void* a_rows, const void* b_rows) {
    const unsigned long long da = wgmma_desc(a_rows), db = wgmma_desc(b_rows);
#pragma unroll
    for (int step = 0; step < TMA_ROW_BYTES / 32; ++step) wgmma<T, N>(d, da + 2 * step, db + 2 * step);
}

// --- the wgmma instructions, one per element type and N ---------------------------

// Inline PTX takes no arrays, so the accumulators are listed operand by
// operand: the text "%0, ..., %31" and the constraints "+f"(d[0]) ... "+f"(d[31]),
// then longer lists of 64, 72, 96 and 128 (N = 128, 144, 192, 256). Written once here, used by every wrapper below.
#define GL_TEXT_32 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define GL_TEXT_64 GL_TEXT_32 ", " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define GL_TEXT_72 GL_TEXT_64 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define GL_TEXT_96 GL_TEXT_64 ", " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define GL_TEXT_128 GL_TEXT_96 ", " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define GL_OUT_32(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define GL_OUT_64(d) GL_OUT_32(d), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define GL_OUT_72(d) GL_OUT_64(d), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71])
#define GL_OUT_96(d) GL_OUT_64(d), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define GL_OUT_128(d) GL_OUT_96(d), \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// One wrapper: REGS accumulators named by TEXT/OUT, the two descriptors and the
// scale-d flag (always 1: D += A . B; the accumulators start at zero) after
// them, and the instruction's trailing immediates (scale-a, scale-b and, for
// 16-bit types, transpose-a and transpose-b: both K-major, no transpose).
#define GL_WGMMA(TAG, N, TEXT, OUT, DESC_A, DESC_B, SCALE, INSTRUCTION, IMMEDIATES)                           \
    template <>                                                                                             \
    __device__ __forceinline__ void wgmma<TAG, N>(float (&d)[N / 2], unsigned long long da,                \
                                                  unsigned long long db) {                                \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE ", 0;\n" INSTRUCTION " {" TEXT "}, " DESC_A  \
                     ", " DESC_B ", p, " IMMEDIATES ";\n}\n"                                                \
                     : OUT(d)                                                                               \
                     : "l"(da), "l"(db), "r"(1));                                                           \
    }
#define GL_WGMMA_64(TAG, INSTRUCTION, IMMEDIATES) \
    GL_WGMMA(TAG, 64, GL_TEXT_32, GL_OUT_32, "%32", "%33", "%34", INSTRUCTION, IMMEDIATES)
#define GL_WGMMA_128(TAG, INSTRUCTION, IMMEDIATES) \
    GL_WGMMA(TAG, 128, GL_TEXT_64, GL_OUT_64, "%64", "%65", "%66", INSTRUCTION, IMMEDIATES)
#define GL_WGMMA_144(TAG, INSTRUCTION, IMMEDIATES) \
    GL_WGMMA(TAG, 144, GL_TEXT_72, GL_OUT_72, "%72", "%73", "%74", INSTRUCTION, IMMEDIATES)
#define GL_WGMMA_192(TAG, INSTRUCTION, IMMEDIATES) \
    GL_WGMMA(TAG, 192, GL_TEXT_96, GL_OUT_96, "%96", "%97", "%98", INSTRUCTION, IMMEDIATES)
#define GL_WGMMA_256(TAG, INSTRUCTION, IMMEDIATES) \
    GL_WGMMA(TAG, 256, GL_TEXT_128, GL_OUT_128, "%128", "%129", "%130", INSTRUCTION, IMMEDIATES)

// N = 64: tc_small's narrow tiles.
GL_WGMMA_64(gl_bf16, "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", "1, 1, 0, 0")
GL_WGMMA_64(gl_fp16, "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", "1, 1, 0, 0")
GL_WGMMA_64(gl_tf32, "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32", "1, 1")
GL_WGMMA_128(gl_bf16, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", "1, 1, 0, 0")
GL_WGMMA_256(gl_bf16, "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", "1, 1, 0, 0")
GL_WGMMA_128(gl_fp16, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", "1, 1, 0, 0")
GL_WGMMA_256(gl_fp16, "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16", "1, 1, 0, 0")
GL_WGMMA_128(gl_tf32, "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32", "1, 1")
GL_WGMMA_256(gl_tf32, "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32", "1, 1")
// N = 192: tiles of 128 x 192 (3000 cubed: 384 tiles, 2.9 waves of 132, where 128 x 256 makes 2.2).
GL_WGMMA_192(gl_bf16, "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16", "1, 1, 0, 0")
GL_WGMMA_192(gl_fp16, "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16", "1, 1, 0, 0")
GL_WGMMA_192(gl_tf32, "wgmma.mma_async.sync.aligned.m64n192k8.f32.tf32.tf32", "1, 1")
// N = 144: tiles of 128 x 144 (1536 cubed: 6 x 11 clusters of two, the 132 SMs once, where 128 x 192 fills 96).
GL_WGMMA_144(gl_bf16, "wgmma.mma_async.sync.aligned.m64n144k16.f32.bf16.bf16", "1, 1, 0, 0")
GL_WGMMA_144(gl_fp16, "wgmma.mma_async.sync.aligned.m64n144k16.f32.f16.f16", "1, 1, 0, 0")
GL_WGMMA_144(gl_tf32, "wgmma.mma_async.sync.aligned.m64n144k8.f32.tf32.tf32", "1, 1")

#endif  // GEMMLAB_TENSOR_WGMMA_CUH
