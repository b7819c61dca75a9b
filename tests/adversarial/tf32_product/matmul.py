"""Adversarial (tests/adversarial/README.md): a float32 product through
PyTorch with TF32 allowed: the tensor cores, 10 bits of mantissa. Caught
by: the precision check (the error is 100 times float32's)."""

import torch


def matmul(A, B, C):
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.matmul(A, B, out=C)


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "torch"}
