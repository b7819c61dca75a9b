"""Honest control: a Triton kernel in float32 (tl.dot in IEEE precision, not TF32)."""

import torch
import triton
import triton.language as tl


@triton.jit
def tile_product(a, b, c, M, N, K, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr):
    tiles_n = tl.cdiv(N, BLOCK)
    rows = (tl.program_id(0) // tiles_n) * BLOCK + tl.arange(0, BLOCK)
    cols = (tl.program_id(0) % tiles_n) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a_tile = tl.load(a + rows[:, None] * K + ks[None, :], mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        b_tile = tl.load(b + ks[:, None] * N + cols[None, :], mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tl.dot(a_tile, b_tile, input_precision="ieee")
    tl.store(c + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


def matmul(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor):
    M, K = A.shape
    N = B.shape[1]
    grid = (triton.cdiv(M, 64) * triton.cdiv(N, 64),)
    return tile_product[grid](A, B, C, M, N, K, BLOCK=64, BLOCK_K=32, num_warps=4)


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "torch"}
