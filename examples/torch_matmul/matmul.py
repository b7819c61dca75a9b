"""C = A @ B as a PyTorch expression: torch.matmul on float16 tensors,
written into gemmlab's C (float16) on torch's current stream (gemmlab's).
cuBLAS, behind torch, accumulates in float32 and rounds the result once.

    gemmlab run examples/torch_matmul/matmul.py --size 2048
"""

import torch


def matmul(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    torch.matmul(A, B, out=C)


GEMMLAB = {
    "function": "matmul",
    "problem": "matmul",
    "dtypes": ["float16"],
    "arrays": "torch",
    "summary": "torch.matmul of float16 tensors",
}
