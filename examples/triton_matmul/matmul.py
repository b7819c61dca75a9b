"""C = A @ B in Triton: float16 A, B and C, float32 accumulation.

Each program (Triton's word for a block) owns one BLOCK_M x BLOCK_N tile of C.
It walks K in steps of BLOCK_K, loading a BLOCK_M x BLOCK_K strip of A and a
BLOCK_K x BLOCK_N strip of B and adding their product, computed by tl.dot on
the tensor cores, to a float32 accumulator; the tile is rounded to float16 and
stored once at the end.
Masks on the loads and the store let M, N and K be any size.

    gemmlab run examples/triton_matmul/matmul.py --size 1024
    gemmlab run examples/triton_matmul/matmul.py --size 1024 --block 64
"""

import torch
import triton
import triton.language as tl


@triton.jit
def tile_product(a, b, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Programs laid out along N first: neighbours share a strip of A, which stays in L2.
    tiles_n = tl.cdiv(N, BLOCK_N)
    row0 = (tl.program_id(0) // tiles_n) * BLOCK_M
    col0 = (tl.program_id(0) % tiles_n) * BLOCK_N
    rows = row0 + tl.arange(0, BLOCK_M)
    cols = col0 + tl.arange(0, BLOCK_N)
    steps = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + steps
        # Row-major: element (i, j) of an R x S matrix is at i * S + j.
        a_tile = tl.load(a + rows[:, None] * K + ks[None, :], mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        b_tile = tl.load(b + ks[:, None] * N + cols[None, :], mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tl.dot(a_tile, b_tile)
    tl.store(c + rows[:, None] * N + cols[None, :], acc.to(tl.float16), mask=(rows[:, None] < M) & (cols[None, :] < N))


def matmul(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, BLOCK_M: int, BLOCK_N: int, BLOCK_K: int):
    """Launch one program per tile of C on torch's current stream (gemmlab's).
    Returning the launch's result lets gemmlab show the kernel's registers and
    shared memory."""
    M, K = A.shape
    N = B.shape[1]
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    return tile_product[grid](A, B, C, M, N, K, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=4)


GEMMLAB = {
    "function": "matmul",
    "problem": "matmul",
    "dtypes": ["float16"],
    "arrays": "torch",
    "summary": "Triton tiles on the tensor cores, float16 in and out, float32 accumulation",
    # The first value of each is its default; --block sets the edge.
    "parameters": {"BLOCK_M": [128, 64], "BLOCK_N": [128], "BLOCK_K": [32]},
    "edge": "BLOCK_M",
}
