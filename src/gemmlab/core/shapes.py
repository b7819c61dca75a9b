"""Problem shapes and the index limits every kernel shares."""

from __future__ import annotations

from dataclasses import dataclass

Dim3 = tuple[int, int, int]
# The names of a Dim3's entries, for messages about one of them ("0 threads in y").
AXES = ("x", "y", "z")

# Kernels index with 32-bit ints; keep every matrix below 2^31 elements.
MAX_INDEX = 2**31 - 1
# gridDim.y and gridDim.z are limited to 65535 on every architecture since 1.0
# (CUDA C Programming Guide, "Technical Specifications per Compute Capability").
MAX_GRID_YZ = 65535
# gridDim.x may reach 2^31 - 1 from compute capability 3.0 on, and a block may
# hold 1024 threads from 2.0 on (the same tables).
MAX_GRID_X = 2**31 - 1
MAX_THREADS_PER_BLOCK = 1024


@dataclass(frozen=True)
class Shape:
    """A problem size. Matmul: C (m x n) = A (m x k) . B (k x n)."""

    m: int
    n: int
    k: int

    @classmethod
    def square(cls, n: int) -> Shape:
        return cls(n, n, n)

    @property
    def is_square(self) -> bool:
        return self.m == self.n == self.k

    def __str__(self) -> str:
        return str(self.m) if self.is_square else f"{self.m}x{self.n}x{self.k}"
