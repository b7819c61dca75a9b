"""The documents' matmul kernels (the .cu files beside this one)."""
