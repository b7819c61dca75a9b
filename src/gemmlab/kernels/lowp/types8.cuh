// The 8-bit element types of the lowp ladder, as tags (core/dtypes.py names
// them): `storage` is a byte of A and B, `acc` what the tensor cores sum in
// and C holds (int32 for int8, float32 for FP8). FP8 is OCP e4m3 ("fn": no
// infinities, largest 448) or e5m2 (IEEE-like, largest 57344); the hardware
// reads the bytes, so the kernel never converts them.
struct gl_s8 { using storage = signed char; using acc = int; };
struct gl_e4m3 { using storage = unsigned char; using acc = float; using inputs = gl_e4m3; using c_storage = float; };
struct gl_e5m2 { using storage = unsigned char; using acc = float; using inputs = gl_e5m2; using c_storage = float; };
// FP8 inputs, float32 sums, C rounded to bfloat16 (stored as its 16 bits):
// the persistent rungs' second C type (torch._scaled_mm's usual output). The
// tensor cores see the input tag (`inputs`); only the epilogue reads `c_storage`.
struct gl_e4m3_bf16 { using storage = unsigned char; using acc = float; using inputs = gl_e4m3; using c_storage = unsigned short; };
struct gl_e5m2_bf16 { using storage = unsigned char; using acc = float; using inputs = gl_e5m2; using c_storage = unsigned short; };
// A in e5m2 and B in e4m3 (training's backward pass: gradients times weights),
// with a float32 or a bfloat16 C; wgmma8.cuh gives the pair its own instructions.
struct gl_e5m2_e4m3 { using storage = unsigned char; using acc = float; using inputs = gl_e5m2_e4m3; using c_storage = float; };
struct gl_e5m2_e4m3_bf16 { using storage = unsigned char; using acc = float; using inputs = gl_e5m2_e4m3; using c_storage = unsigned short; };

// How FP8 scales are laid out (problems/lowp.py's SCALINGS, in order):
// TENSOR: scale_a[0], scale_b[0]; ROWCOL: scale_a[M], scale_b[N]; BLOCK:
// scale_a[kb][M] (a row per 128-wide K block) and scale_b[kb][ceil(N / 128)]
// (a 128 x 128 block of B), K block first.
constexpr int SCALE_TENSOR = 0, SCALE_ROWCOL = 1, SCALE_BLOCKS = 2;
constexpr int SCALE_BLOCK = 128;  // K per scale block, and rows of B per block

// The epilogue's factor for C[row][col]: both per-tensor scales, or the row's
// and the column's; 1 for block scaling, whose scales were applied K block by
// K block. 0 outside M x N, where nothing is stored and no scale may be read.
template <int SCALING>
__device__ __forceinline__ float epilogue_scale(const float* scale_a, const float* scale_b, int m, int n, int row,
                                                int col) {
    if (row >= m || col >= n) return 0.f;
    if (SCALING == SCALE_TENSOR) return scale_a[0] * scale_b[0];
    if (SCALING == SCALE_ROWCOL) return scale_a[row] * scale_b[col];
    return 1.f;
}

// Block scaling: the factor of K block kb for C[row][col] (0 outside M x N).
__device__ __forceinline__ float block_scale(const float* scale_a, const float* scale_b, int m, int n, int kb, int row,
                                             int col) {
    if (row >= m || col >= n) return 0.f;
    const int b_blocks = (n + SCALE_BLOCK - 1) / SCALE_BLOCK;
    return scale_a[static_cast<long long>(kb) * m + row] * scale_b[kb * b_blocks + col / SCALE_BLOCK];
}

// Two adjacent int32 outputs of row `row` (columns col, col + 1), each only if
// inside M x N; one 8-byte store when both are and C allows it.
__device__ __forceinline__ void store_int_pair(int* c, int m, int n, int row, int col, int v0, int v1) {
    if (row >= m) return;
    int* p = c + static_cast<long long>(row) * n + col;
    if (col + 1 < n && (n % 2) == 0) {
        *reinterpret_cast<int2*>(p) = make_int2(v0, v1);
    } else {
        if (col < n) p[0] = v0;
        if (col + 1 < n) p[1] = v1;
    }
}
