// single_block: the whole product computed by ONE thread block of B x B threads.
// Source: the 2014 Poznan report, version 1 (GT 240). Launch: grid 1, block (B, B).
// Each thread walks every (M/B) x (N/B) output tile and computes one element of
// each, reading A and B straight from global memory. Only one SM is busy, so the
// time scales with the number of tiles: it teaches that a GPU needs many blocks.
template <typename T, int B>
__global__ void single_block(const T* __restrict__ a, const T* __restrict__ b,
                             T* __restrict__ c, int m, int n, int k) {
    for (int tile_row = 0; tile_row < m / B; ++tile_row) {
        for (int tile_col = 0; tile_col < n / B; ++tile_col) {
            const int row = tile_row * B + threadIdx.y;
            const int col = tile_col * B + threadIdx.x;
            T acc = 0;
            for (int i = 0; i < k; ++i) {
                acc += a[row * k + i] * b[i * n + col];
            }
            c[row * n + col] = acc;
        }
    }
}
