"""The distributed ladder on torch.distributed: what one rank runs.

Every rank draws the same global A and B from the seed (so no rank waits on
another for its inputs), keeps the blocks its algorithm gives it
(plan.blocks), runs the algorithm, and checks its C block against a float64
product of the same block of the exact bfloat16 inputs. The ranks add their
squared error and squared reference norms (an all-reduce), so the relative
error is that of the whole C, as if C had been gathered on one rank.

Each algorithm is timed three ways, every repetition between barriers, the
slowest rank's time kept: the whole algorithm, its communication alone and its
local GEMMs alone (on the buffers the communication filled). The local GEMM
is a callable (a, bt) -> float32 C on this rank's device: gemmlab.matmul for
the GPU (api/distributed.py builds it), torch for the CPU check.

This module imports torch: only the ranks import it, never the launcher.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from gemmlab.core.dtypes import TOLERANCE
from gemmlab.studies.distributed import plan
from gemmlab.studies.distributed.plan import Blocks, Grid, Setup

Gemm = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def torch_gemm(a: torch.Tensor, bt: torch.Tensor) -> torch.Tensor:
    """a . bt^T with float32 sums and a float32 C: cuBLAS's bfloat16 GEMM
    with a float32 output on a GPU, a float32 product on the CPU."""
    if a.is_cuda:
        return torch.mm(a, bt.T, out_dtype=torch.float32)
    return a.float() @ bt.float().T


@dataclass
class LocalGemm:
    """The local GEMM every algorithm calls: ``primary`` (gemmlab's rung)
    until it fails once, torch's after that; ``used`` names what ran since
    the last ``reset``, so that a result says which GEMM it measured."""

    primary: Gemm | None
    primary_name: str = "gemmlab.matmul"
    failure: str | None = None
    used: set[str] = field(default_factory=set)

    def __call__(self, a: torch.Tensor, bt: torch.Tensor) -> torch.Tensor:
        if self.primary is not None and self.failure is None:
            try:
                out = self.primary(a, bt)
                self.used.add(self.primary_name)
                return out
            except Exception as exc:  # any failure of the primary path: fall back, and say why in the result
                self.failure = f"{type(exc).__name__}: {exc}"
        self.used.add("torch.matmul")
        return torch_gemm(a, bt)

    def reset(self) -> None:
        self.used = set()


@dataclass
class Context:
    """One rank's place in the launch."""

    rank: int
    world: int
    device: torch.device
    gemm: LocalGemm
    grid: Grid
    groups: dict[tuple[str, int], Any]  # ("row", i) / ("col", j) -> SUMMA's process groups
    side: torch.cuda.Stream | None = None  # the ring's communication stream (None on the CPU)
    panels_per_block: int = 1  # SUMMA's panels per lcm(R, C)-th of K

    @property
    def nccl(self) -> bool:
        return self.device.type == "cuda"


def make_context(gemm: LocalGemm, setup: Setup) -> Context:
    """This rank's context; every rank must call it, in the same order, since
    it creates SUMMA's row and column groups (a collective)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if setup.device == "cuda" else torch.device("cpu")
    grid = setup.grid_for(world)
    groups = {("row", i): dist.new_group(grid.row_ranks(i)) for i in range(grid.rows)}
    groups |= {("col", j): dist.new_group(grid.col_ranks(j)) for j in range(grid.cols)}
    side = torch.cuda.Stream(device) if device.type == "cuda" else None
    return Context(rank, world, device, gemm, grid, groups, side, setup.panels_per_block)


# -- the algorithms -------------------------------------------------------------------


class Algorithm:
    """One rung: built on this rank's blocks; ``run`` is the algorithm,
    ``communicate`` and ``compute`` its two halves apart, and ``c`` the C block it ends with."""

    name = ""

    def __init__(self, ctx: Context, a: torch.Tensor, bt: torch.Tensor, blocks: Blocks) -> None:
        self.ctx = ctx
        self.blocks = blocks
        self.c: torch.Tensor | None = None
        self.prepare(a, bt)

    def prepare(self, a: torch.Tensor, bt: torch.Tensor) -> None:
        raise NotImplementedError

    def run(self) -> None:
        raise NotImplementedError

    def communicate(self) -> None:
        raise NotImplementedError

    def compute(self) -> None:
        raise NotImplementedError


def _block(x: torch.Tensor, rows: plan.Span, cols: plan.Span) -> torch.Tensor:
    return x[rows.as_slice(), cols.as_slice()].contiguous()


class AllGatherGemm(Algorithm):
    """All-gather A's row blocks into the whole A, then one GEMM with this rank's columns of B."""

    name = "allgather_gemm"

    def prepare(self, a: torch.Tensor, bt: torch.Tensor) -> None:
        b = self.blocks
        self.a_mine = _block(a, b.a_rows, b.a_k)
        self.bt_mine = _block(bt, b.b_cols, b.b_k)
        self.a_all = torch.empty((b.c_rows.size, b.a_k.size), dtype=a.dtype, device=a.device)

    def communicate(self) -> None:
        dist.all_gather_into_tensor(self.a_all, self.a_mine)

    def compute(self) -> None:
        self.c = self.ctx.gemm(self.a_all, self.bt_mine)

    def run(self) -> None:
        self.communicate()
        self.compute()


class CollectiveMatmul(Algorithm):
    """The all-gather broken into a ring: at step s this rank multiplies the A
    chunk it holds (rank r - s's rows) while it sends that chunk to its right
    neighbour and receives the next from its left, on a side stream. Two chunk
    buffers alternate: one multiplies while the other receives. CUDA events
    order the streams: the side stream starts an exchange only after the
    compute stream has finished reading the buffer it receives into, and the
    compute stream multiplies a chunk only after its exchange has landed."""

    name = "collective_matmul"
    c: torch.Tensor  # made by prepare, before anything runs

    def prepare(self, a: torch.Tensor, bt: torch.Tensor) -> None:
        b, ctx = self.blocks, self.ctx
        self.a_mine = _block(a, b.a_rows, b.a_k)
        self.bt_mine = _block(bt, b.b_cols, b.b_k)
        self.chunks = [torch.empty_like(self.a_mine) for _ in range(2)]
        self.c = torch.full((b.c_rows.size, b.c_cols.size), float("nan"), dtype=torch.float32, device=a.device)
        self.sources = plan.ring_sources(ctx.rank, ctx.world)
        self.send_to, self.recv_from = plan.ring_neighbours(ctx.rank, ctx.world)

    def _exchange(self, send: torch.Tensor, recv: torch.Tensor) -> list[Any]:
        """Send one chunk right and receive one from the left, as one group:
        with two ranks both neighbours are the same peer, and a send and a
        receive issued apart would each wait for the other."""
        ops = [dist.P2POp(dist.isend, send, self.send_to), dist.P2POp(dist.irecv, recv, self.recv_from)]
        return dist.batch_isend_irecv(ops)

    def _rows(self, source: int) -> slice:
        rows = self.a_mine.shape[0]
        return slice(source * rows, (source + 1) * rows)

    def run(self) -> None:
        ctx = self.ctx
        self.chunks[0].copy_(self.a_mine)
        for step, source in enumerate(self.sources):
            held, incoming = self.chunks[step % 2], self.chunks[(step + 1) % 2]
            works, landed = [], None
            if step < ctx.world - 1:
                with _on_side(ctx):
                    works = self._exchange(held, incoming)
                    landed = _landed(ctx, works)
            self.c[self._rows(source)] = ctx.gemm(held, self.bt_mine)
            _wait(ctx, works, landed)

    def communicate(self) -> None:
        for step in range(self.ctx.world - 1):
            for work in self._exchange(self.chunks[step % 2], self.chunks[(step + 1) % 2]):
                work.wait()

    def compute(self) -> None:
        for step, source in enumerate(self.sources):
            self.c[self._rows(source)] = self.ctx.gemm(self.chunks[step % 2], self.bt_mine)


@contextlib.contextmanager
def _on_side(ctx: Context) -> Iterator[None]:
    """Run on the side stream, after what the compute stream has queued so far
    (the chunk being sent is written, the buffer being received into is read)."""
    if ctx.side is None:
        yield
        return
    ready = torch.cuda.Event()
    ready.record(torch.cuda.current_stream(ctx.device))
    ctx.side.wait_event(ready)
    with torch.cuda.stream(ctx.side):
        yield


def _landed(ctx: Context, works: list[Any]) -> torch.cuda.Event | None:
    """On a GPU, an event on the side stream after NCCL has delivered (a
    work's wait makes the current stream wait, not the host); None on the CPU."""
    if ctx.side is None:
        return None
    for work in works:
        work.wait()
    event = torch.cuda.Event()
    event.record(ctx.side)
    return event


def _wait(ctx: Context, works: list[Any], landed: torch.cuda.Event | None) -> None:
    """The compute stream waits for the exchange; on the CPU (gloo's threads
    sent meanwhile) the host waits here, after the GEMM."""
    if landed is not None:
        torch.cuda.current_stream(ctx.device).wait_event(landed)
        return
    for work in works:
        work.wait()


class Summa(Algorithm):
    """2-D SUMMA on an R x C grid: rank (i, j) holds blocks A_ij, B_ij and
    C_ij; for each panel of K the grid column owning A's panel broadcasts it
    along every grid row, the grid row owning B's panel broadcasts it along
    every grid column, and each rank adds A_panel . B_panel into C_ij."""

    name = "summa"
    c: torch.Tensor  # made by prepare, before anything runs

    def prepare(self, a: torch.Tensor, bt: torch.Tensor) -> None:
        b, ctx = self.blocks, self.ctx
        self.i, self.j = ctx.grid.coords(ctx.rank)
        self.a_mine = _block(a, b.a_rows, b.a_k)
        self.bt_mine = _block(bt, b.b_cols, b.b_k)
        self.panels = plan.summa_panels(a.shape[1], ctx.grid, ctx.panels_per_block)
        width = self.panels[0].k.size
        self.a_panel = torch.empty((b.c_rows.size, width), dtype=a.dtype, device=a.device)
        self.bt_panel = torch.empty((b.c_cols.size, width), dtype=a.dtype, device=a.device)
        self.c = torch.zeros((b.c_rows.size, b.c_cols.size), dtype=torch.float32, device=a.device)

    def _share(self, panel: plan.Panel) -> None:
        ctx, b = self.ctx, self.blocks
        if self.j == panel.a_owner_col:
            start = panel.k.start - b.a_k.start
            self.a_panel.copy_(self.a_mine[:, start : start + panel.k.size])
        if ctx.grid.cols > 1:
            src = ctx.grid.rank_of(self.i, panel.a_owner_col)
            dist.broadcast(self.a_panel, src=src, group=ctx.groups[("row", self.i)])
        if self.i == panel.b_owner_row:
            start = panel.k.start - b.b_k.start
            self.bt_panel.copy_(self.bt_mine[:, start : start + panel.k.size])
        if ctx.grid.rows > 1:
            src = ctx.grid.rank_of(panel.b_owner_row, self.j)
            dist.broadcast(self.bt_panel, src=src, group=ctx.groups[("col", self.j)])

    def run(self) -> None:
        self.c.zero_()
        for panel in self.panels:
            self._share(panel)
            self.c += self.ctx.gemm(self.a_panel, self.bt_panel)

    def communicate(self) -> None:
        for panel in self.panels:
            self._share(panel)

    def compute(self) -> None:
        self.c.zero_()
        for _ in self.panels:
            self.c += self.ctx.gemm(self.a_panel, self.bt_panel)


class GemmReduceScatter(Algorithm):
    """K split over the ranks: each multiplies its K slice of A and B into a
    whole partial C, and a reduce-scatter sums the partials, leaving rank r
    its row block of C."""

    name = "gemm_reduce_scatter"

    def prepare(self, a: torch.Tensor, bt: torch.Tensor) -> None:
        b = self.blocks
        self.a_mine = _block(a, b.a_rows, b.a_k)
        self.bt_mine = _block(bt, b.b_cols, b.b_k)
        self.partial = self.ctx.gemm(self.a_mine, self.bt_mine)
        self.c = torch.empty((b.c_rows.size, b.c_cols.size), dtype=torch.float32, device=a.device)

    def communicate(self) -> None:
        dist.reduce_scatter_tensor(self.c, self.partial)

    def compute(self) -> None:
        self.partial = self.ctx.gemm(self.a_mine, self.bt_mine)

    def run(self) -> None:
        self.compute()
        self.communicate()


RUNGS: dict[str, type[Algorithm]] = {
    rung.name: rung for rung in (AllGatherGemm, CollectiveMatmul, Summa, GemmReduceScatter)
}
assert tuple(RUNGS) == plan.ALGORITHMS, "plan.ALGORITHMS names the rungs in ladder order"


def rung_class(name: str) -> type[Algorithm]:
    """A rung of the ladder, or the library baseline (imported only when asked for: it needs nvmath-python)."""
    if name == "cublasmp":
        from gemmlab.studies.distributed.cublasmp import CublasMp

        return CublasMp
    return RUNGS[name]


# -- inputs, verification, timing -----------------------------------------------------


def inputs(m: int, n: int, k: int, seed: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole A (M x K) and Bt (N x K) in bfloat16, the same on every rank:
    one generator per launch point, seeded alike on each."""
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn((m, k), generator=gen, device=device, dtype=torch.float32).to(torch.bfloat16)
    bt = torch.randn((n, k), generator=gen, device=device, dtype=torch.float32).to(torch.bfloat16)
    return a, bt


def relative_error(ctx: Context, c: torch.Tensor, a: torch.Tensor, bt: torch.Tensor, blocks: Blocks) -> float:
    """The Frobenius relative error of the whole C: each rank's block against
    a float64 product of the exact bfloat16 inputs, the squared sums added
    over the ranks. NaN anywhere (a row the ring never wrote) gives NaN."""
    ref = a[blocks.c_rows.as_slice()].double() @ bt[blocks.c_cols.as_slice()].double().T
    sums = torch.stack([(c.double() - ref).square().sum(), ref.square().sum()])
    dist.all_reduce(sums)
    diff, norm = sums.tolist()
    return (diff / norm) ** 0.5 if norm else diff**0.5


def timed_ms(ctx: Context, fn: Callable[[], None], warmup: int, reps: int) -> list[float]:
    """Each repetition's time on the slowest rank, in ms: the ranks start
    together (a barrier) and stop on their own; an all-reduce keeps the
    maximum of each repetition."""
    for _ in range(warmup):
        fn()
    times = [_one_rep(ctx, fn) for _ in range(reps)]
    slowest = torch.tensor(times, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.tolist()


def _one_rep(ctx: Context, fn: Callable[[], None]) -> float:
    if not ctx.nccl:
        dist.barrier()
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3
    torch.cuda.synchronize(ctx.device)
    dist.barrier(device_ids=[ctx.device.index])
    torch.cuda.synchronize(ctx.device)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop)


def measure(ctx: Context, setup: Setup, name: str, scaling: str, size: int) -> dict:
    """One algorithm at one point: verified before and after timing, then timed whole and in halves."""
    m, n, k = plan.global_shape(scaling, size, ctx.world)
    plan.check_shape(name, m, n, k, ctx.world, ctx.grid, setup.panels_per_block)
    a, bt = inputs(m, n, k, setup.seed, ctx.device)
    blocks = plan.blocks(name, m, n, k, ctx.world, ctx.rank, ctx.grid)
    ctx.gemm.reset()
    rung = rung_class(name)(ctx, a, bt, blocks)
    rung.run()
    error_before = relative_error(ctx, rung.c, a, bt, blocks)
    total = timed_ms(ctx, rung.run, setup.warmup, setup.reps)
    error = max(error_before, relative_error(ctx, rung.c, a, bt, blocks))
    comm = timed_ms(ctx, rung.communicate, setup.warmup, setup.reps)
    gemm = timed_ms(ctx, rung.compute, setup.warmup, setup.reps)
    return row(ctx, setup, name, scaling, size, (m, n, k), total, comm, gemm, error)


def row(ctx: Context, setup: Setup, name: str, scaling: str, size: int, shape: tuple[int, int, int],
        total: list[float], comm: list[float], gemm: list[float], error: float) -> dict:  # fmt: skip
    """The result of one algorithm at one point, as the launcher stores it."""
    median = statistics.median(total)
    t_comm, t_gemm = statistics.median(comm), statistics.median(gemm)
    tolerance = TOLERANCE["bfloat16-out" if name == "cublasmp" else "bfloat16"]
    return {
        "algorithm": name, "gpus": ctx.world, "device": ctx.device.type, "scaling": scaling, "size": size,
        "m": shape[0], "n": shape[1], "k": shape[2],
        "grid": str(ctx.grid) if name == "summa" else None,
        "median_ms": median, "min_ms": min(total), "max_ms": max(total), "reps": len(total),
        "comm_ms": t_comm, "gemm_ms": t_gemm,
        # One rank communicates with itself only: nothing to hide, no overlap to state.
        "overlap_efficiency": plan.overlap_efficiency(t_comm, t_gemm, median) if ctx.world > 1 else None,
        "tflops_per_gpu": plan.tflops_per_gpu(*shape, ctx.world, median),
        "error": error, "tolerance": tolerance, "verified": error <= tolerance,
        "local_gemm": ", ".join(sorted(ctx.gemm.used)), "fallback_reason": ctx.gemm.failure,
    }  # fmt: skip


def run_rank(setup: Setup, gemm: LocalGemm) -> list[dict]:
    """Every algorithm at every point on this rank (the process group is
    initialised); the rows are the same on every rank, rank 0's are kept."""
    ctx = make_context(gemm, setup)
    rows = []
    for scaling, size in setup.points:
        for name in setup.algorithms:
            rows.append(measure(ctx, setup, name, scaling, size))
            if ctx.nccl:
                torch.cuda.empty_cache()
    return rows
