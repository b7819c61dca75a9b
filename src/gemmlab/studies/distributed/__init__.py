"""GEMM across GPUs: a ladder of four distributed algorithms over NCCL, one
process per GPU (docs/distributed.md).

- plan.py: who owns which block, the ring's order, SUMMA's panel schedule,
  the overlap and rate formulas (pure, tested without a GPU or torch);
- ladder.py: the algorithms on torch.distributed, verified and timed on one rank;
- launch.py: torchrun's command line, the checks before it starts, and the
  ranks' answers gathered into result rows;
- cublasmp.py: nvmath-python's distributed matmul (cuBLASMp) as the library baseline.
"""
