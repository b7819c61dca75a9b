"""The arithmetic of the distributed ladder, apart from any GPU or library:
which block of A, B and C each rank holds for each algorithm, the order in
which the ring passes A's chunks, SUMMA's panels, the global shape of a
strong or weak scaling point, and the rates and overlap computed from times.

Every algorithm computes C = A . B with A (M x K) and B (K x N) in bfloat16
and C in float32. B is held as its transpose Bt (N x K, C-contiguous), the
layout gemmlab's tensor-core rungs read (api/matmul.py); a block of B is
named here by its rows of B (a span of K) and its columns (a span of N).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gemmlab.core.errors import GemmlabError
from gemmlab.core.extras import MissingExtra

# The ladder, in order: each rung adds one idea to the one before it.
#   allgather_gemm      all-gather A's row blocks, then one local GEMM per rank
#   collective_matmul   the same product, A's chunks passed round a ring while the previous chunk multiplies
#   summa               2-D blocks on an R x C grid; A's panels broadcast along rows, B's along columns
#   gemm_reduce_scatter K split over the ranks: a partial C per rank, summed and scattered by rows
ALGORITHMS = ("allgather_gemm", "collective_matmul", "summa", "gemm_reduce_scatter")
# The library baseline (the `cublasmp` extra): nvmath-python's distributed matmul on
# allgather_gemm's layout; cuBLASMp writes a bfloat16 C (its result type follows the inputs).
BASELINES = ("cublasmp",)
SCALINGS = ("strong", "weak")
# The oldest NCCL the cuBLASMp baseline runs on: nvidia-cublasmp-cu13 0.8.1 and
# later declare nvidia-nccl-cu13>=2.29.2 (cublasmp.py says why it is checked).
NCCL_FOR_CUBLASMP = (2, 29, 2)


@dataclass(frozen=True)
class Span:
    """Rows or columns [start, stop) of a global matrix."""

    start: int
    stop: int

    @property
    def size(self) -> int:
        return self.stop - self.start

    def as_slice(self) -> slice:
        return slice(self.start, self.stop)


@dataclass(frozen=True)
class Grid:
    """R x C ranks for SUMMA, numbered row by row: rank = i * cols + j."""

    rows: int
    cols: int

    @property
    def size(self) -> int:
        return self.rows * self.cols

    @classmethod
    def parse(cls, text: str) -> Grid:
        rows, sep, cols = text.lower().partition("x")
        if not (sep and rows.isdigit() and cols.isdigit() and int(rows) > 0 and int(cols) > 0):
            raise GemmlabError(f"--grid {text!r} is not R x C.", "Give the grid as RxC, e.g. --grid 1x2.")
        return cls(int(rows), int(cols))

    @classmethod
    def squarest(cls, world: int) -> Grid:
        """The grid of ``world`` ranks closest to square, with no more rows than
        columns: a square grid moves the least data per rank in SUMMA."""
        rows = max(r for r in range(1, math.isqrt(world) + 1) if world % r == 0)
        return cls(rows, world // rows)

    def coords(self, rank: int) -> tuple[int, int]:
        return divmod(rank, self.cols)

    def rank_of(self, i: int, j: int) -> int:
        return i * self.cols + j

    def row_ranks(self, i: int) -> list[int]:
        """The ranks of grid row i: they share A's row block and exchange A's panels."""
        return [self.rank_of(i, j) for j in range(self.cols)]

    def col_ranks(self, j: int) -> list[int]:
        """The ranks of grid column j: they share B's column block and exchange B's panels."""
        return [self.rank_of(i, j) for i in range(self.rows)]

    def __str__(self) -> str:
        return f"{self.rows}x{self.cols}"


@dataclass(frozen=True)
class Blocks:
    """What one rank holds: A[a_rows, a_k], B[b_k, b_cols], and the C block
    [c_rows, c_cols] it ends with (float32)."""

    a_rows: Span
    a_k: Span
    b_k: Span
    b_cols: Span
    c_rows: Span
    c_cols: Span


def split(total: int, parts: int, index: int) -> Span:
    """Part ``index`` of ``total`` cut into ``parts`` equal spans (``check_shape`` has made sure they are)."""
    size = total // parts
    return Span(index * size, (index + 1) * size)


def whole(total: int) -> Span:
    return Span(0, total)


def blocks(algorithm: str, m: int, n: int, k: int, world: int, rank: int, grid: Grid | None = None) -> Blocks:
    """The blocks ``rank`` of ``world`` starts with and ends with under ``algorithm``."""
    if algorithm in ("allgather_gemm", "collective_matmul", "cublasmp"):
        # A by rows (as activations are sharded by sequence), B by columns: every
        # rank needs all of A, which is what the communication brings.
        cols = split(n, world, rank)
        return Blocks(split(m, world, rank), whole(k), whole(k), cols, whole(m), cols)
    if algorithm == "summa":
        grid = grid or Grid.squarest(world)
        i, j = grid.coords(rank)
        rows, cols = split(m, grid.rows, i), split(n, grid.cols, j)
        return Blocks(rows, split(k, grid.cols, j), split(k, grid.rows, i), cols, rows, cols)
    if algorithm == "gemm_reduce_scatter":
        # K split: each rank's partial C is the whole M x N; the reduce-scatter
        # leaves rank r the sum of row block r.
        ks = split(k, world, rank)
        return Blocks(whole(m), ks, ks, whole(n), split(m, world, rank), whole(n))
    raise unknown_algorithm(algorithm)


def unknown_algorithm(name: str) -> GemmlabError:
    return GemmlabError(f"Unknown algorithm {name!r}.", f"Choose from {', '.join(ALGORITHMS + BASELINES)}.")


def parse_algorithms(text: str | None) -> tuple[str, ...]:
    """'allgather_gemm,summa' -> the names, in ladder order; None: the whole ladder (no baseline)."""
    if not text:
        return ALGORITHMS
    names = [part.strip() for part in text.split(",") if part.strip()]
    for name in names:
        if name not in ALGORITHMS + BASELINES:
            raise unknown_algorithm(name)
    return tuple(n for n in ALGORITHMS + BASELINES if n in names)


def ring_sources(rank: int, world: int) -> list[int]:
    """Whose A chunk ``rank`` multiplies at each step of the ring: its own
    first, then the chunk its left neighbour held one step before."""
    return [(rank - step) % world for step in range(world)]


def ring_neighbours(rank: int, world: int) -> tuple[int, int]:
    """(the rank this one sends to, the rank it receives from)."""
    return (rank + 1) % world, (rank - 1) % world


@dataclass(frozen=True)
class Panel:
    """One step of SUMMA: columns [k.start, k.stop) of A and the same rows of B.
    A's panel lies in the A block of grid column ``a_owner_col`` (broadcast
    along each grid row from there), B's in the B block of grid row ``b_owner_row``."""

    k: Span
    a_owner_col: int
    b_owner_row: int


def summa_panels(k: int, grid: Grid, per_block: int = 1) -> list[Panel]:
    """SUMMA's schedule: K cut into panels each inside one A block column and
    one B block row (so one rank of each row and column owns it), ``per_block``
    panels per lcm(R, C)-th of K; a smaller panel means less memory and more steps."""
    count = math.lcm(grid.rows, grid.cols) * per_block
    width = k // count
    return [
        Panel(Span(p * width, (p + 1) * width), p * width // (k // grid.cols), p * width // (k // grid.rows))
        for p in range(count)
    ]


def check_nccl(version: tuple[int, ...]) -> None:
    """MissingExtra with the fix when the NCCL a rank loaded (torch.cuda.nccl.version())
    is older than the cuBLASMp baseline needs."""
    if tuple(version) < NCCL_FOR_CUBLASMP:
        have, need = ".".join(map(str, version)), ".".join(map(str, NCCL_FOR_CUBLASMP))
        raise MissingExtra(
            f"The cuBLASMp baseline needs NCCL {need} or newer; this process loaded NCCL {have} (torch's).",
            f"Upgrade torch (torch 2.15's wheels bring NCCL 2.30), or install a newer NCCL where torch loads it "
            f"from, `pip install 'nvidia-nccl-cu13>={need}'`; or leave cublasmp out of --algorithms.",
        )


def global_shape(scaling: str, size: int, world: int) -> tuple[int, int, int]:
    """(M, N, K) of one point. Strong scaling keeps the product fixed as GPUs
    are added; weak scaling keeps each GPU's share: M grows with the ranks
    (size x world rows), N and K stay at ``size``."""
    if scaling == "strong":
        return size, size, size
    if scaling == "weak":
        return size * world, size, size
    raise GemmlabError(f"Unknown scaling {scaling!r}.", f"Choose from {', '.join(SCALINGS)}.")


def check_shape(algorithm: str, m: int, n: int, k: int, world: int, grid: Grid | None = None,
                per_block: int = 1) -> None:  # fmt: skip
    """A GemmlabError naming the dimension that does not divide into ``world`` equal blocks."""
    grid = grid or Grid.squarest(world)
    if algorithm == "summa" and grid.size != world:
        raise GemmlabError(f"A {grid} grid has {grid.size} ranks, not {world}.",
                           f"Give a grid of {world} ranks, e.g. --grid {Grid.squarest(world)}.")  # fmt: skip
    needs = {
        "allgather_gemm": {"M": (m, world), "N": (n, world)},
        "collective_matmul": {"M": (m, world), "N": (n, world)},
        "cublasmp": {"M": (m, world), "N": (n, world)},
        "summa": {"M": (m, grid.rows), "N": (n, grid.cols), "K": (k, math.lcm(grid.rows, grid.cols) * per_block)},
        "gemm_reduce_scatter": {"M": (m, world), "K": (k, world)},
    }.get(algorithm)
    if needs is None:
        raise unknown_algorithm(algorithm)
    for name, (value, parts) in needs.items():
        if value % parts:
            raise GemmlabError(f"{algorithm} cuts {name} = {value} into {parts} equal parts, and it does not divide.",
                               f"Give sizes that are multiples of {parts}.")  # fmt: skip


def flops(m: int, n: int, k: int) -> float:
    return 2.0 * m * n * k


def tflops_per_gpu(m: int, n: int, k: int, world: int, ms: float) -> float:
    """The product's rate shared evenly over the GPUs: comparable with one GPU's TFLOP/s."""
    return flops(m, n, k) / world / (ms * 1e-3) / 1e12


def overlap_efficiency(t_comm: float, t_gemm: float, t_total: float) -> float | None:
    """The share of the shorter of communication and computation that the
    algorithm hid behind the other: (t_comm + t_gemm - t_total) / min(t_comm, t_gemm).
    1 when the total is max(t_comm, t_gemm) (all hidden), 0 when it is their
    sum (run one after the other), below 0 when overlapping slowed both down.
    None when either part took no time (nothing to hide)."""
    shorter = min(t_comm, t_gemm)
    if shorter <= 0:
        return None
    return (t_comm + t_gemm - t_total) / shorter


def scaling_efficiency(scaling: str, t_one: float, t_many: float, world: int) -> float:
    """How well the time scaled from one GPU to ``world``: strong, t1 / (P tP)
    (1 when P GPUs are P times as fast); weak, t1 / tP (1 when P times the
    work takes the same time)."""
    return t_one / (world * t_many) if scaling == "strong" else t_one / t_many


@dataclass(frozen=True)
class Setup:
    """What every rank of one launch runs, written as JSON beside the ranks' logs.

    ``points``: (scaling, size) pairs; ``local``: "gemmlab" (gemmlab.matmul,
    torch.matmul where it fails) or "torch"; ``device``: "cuda" (NCCL) or
    "cpu" (gloo, to check the algorithms without GPUs: its times mean nothing)."""

    algorithms: tuple[str, ...]
    points: tuple[tuple[str, int], ...]
    grid: str | None = None
    panels_per_block: int = 1
    warmup: int = 3
    reps: int = 10
    seed: int = 0
    local: str = "gemmlab"
    device: str = "cuda"

    def to_json(self) -> dict:
        return {**self.__dict__, "algorithms": list(self.algorithms), "points": [list(p) for p in self.points]}

    @classmethod
    def from_json(cls, data: dict) -> Setup:
        points = tuple((str(s), int(n)) for s, n in data["points"])
        return cls(**{**data, "algorithms": tuple(data["algorithms"]), "points": points})

    def grid_for(self, world: int) -> Grid:
        """SUMMA's grid for ``world`` ranks: the one asked for where it has that
        many ranks (a launch over 1 and 2 GPUs asks 1x2 for the second), else the squarest."""
        asked = Grid.parse(self.grid) if self.grid else None
        return asked if asked and asked.size == world else Grid.squarest(world)
