"""Honest control: PyTorch's matmul in float32, TF32 off."""

import torch


def matmul(A, B, C):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.matmul(A, B, out=C)


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "torch"}
