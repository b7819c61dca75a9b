"""C = A @ B as a PyTorch expression: torch.matmul on float16 tensors with a
float32 result, written into gemmlab's C on torch's current stream (gemmlab's).
torch.mm of float16 gives float16, so the product is taken in float32 here:
the inputs are converted first (exactly: every float16 is a float32).

    gemmlab run examples/torch_matmul/matmul.py --size 2048
"""

import torch


def matmul(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    torch.matmul(A.float(), B.float(), out=C)


GEMMLAB = {
    "function": "matmul",
    "problem": "matmul",
    "dtypes": ["float16"],
    "arrays": "torch",
    "summary": "torch.matmul of the inputs widened to float32",
}
