"""What the tensor-core ladder's rungs share: the Hopper limits, the
warp-specialised rungs' register split, the rules several rungs check, the
ring's and C boxes' shared memory, and the catalogue entry one configuration
builds, TMA boxes included (kernels/tensor/spec.py lists the rungs)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from gemmlab.core.arch import sm_limits
from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.ladder import Config, Rung, cdiv, grid_rows_fit, needs
from gemmlab.kernels.spec import Constraint, KernelSpec
from gemmlab.problems.base import Problem
from gemmlab.problems.tensor import ROW_BYTES, TENSOR, prepare_tensor, tensor_device_bytes, tensor_operands

SOURCE_DOC = "gemmlab tensor-core ladder (beyond the documents)"
MAX_DYNAMIC_SMEM = sm_limits((9, 0)).max_smem_per_block_optin  # the Hopper rungs' opt-in limit per block
WARPGROUP = 128


def block_limits(rung: Rung, c: Config) -> list[str]:
    """The thread and shared-memory limits the configuration breaks."""
    threads = rung.threads(c)
    found = needs(threads % 32 == 0 and 32 <= threads <= 1024,
                   f"{threads} threads per block: must be a multiple of 32 from 32 to 1024")  # fmt: skip
    smem = rung.smem_bytes(c)
    return found + needs(smem <= MAX_DYNAMIC_SMEM, f"{smem} bytes of dynamic shared memory, over {MAX_DYNAMIC_SMEM}")


def reuse_cgma(c: Config) -> float:
    """FLOPs per element of A or B brought on chip: a BM x BN tile reuses each one BN or BM times."""
    return 2 * c["BM"] * c["BN"] / (c["BM"] + c["BN"])


def warp_threads(c: Config) -> int:
    return (c["BM"] // c["WM"]) * (c["BN"] // c["WN"]) * 32


def warp_rules(c: Config) -> list[str]:
    return needs(c["BM"] % c["WM"] == 0 and c["BN"] % c["WN"] == 0, "warp tiles (WM x WN) must tile the block") + (
        needs(c["WM"] % 16 == 0 and c["WN"] % 16 == 0, "WM and WN must be multiples of 16")
    )


# The N of one wgmma that a rung's tiles take: 128 or 256, and 192 where the
# rung was built for it (tc_tma_store, tc_split_tail: 128 x 192 tiles fill
# 132 SMs in 2.9 waves at 3000 cubed, where 128 x 256 makes 2.2).
WIDTHS = (128, 256)
WIDE = (128, 192, 256)
# tc_tma_store also takes 144: 128 x 144 tiles make 6 x 11 clusters of two at
# 1536 cubed, the 132 SMs once, where 128 x 192 fills 96 of them.
WIDEST_CHOICE = (128, 144, 192, 256)


def wgmma_rules(c: Config, widths: tuple[int, ...] = WIDTHS) -> list[str]:
    names = ", ".join(str(w) for w in widths[:-1]) + f" or {widths[-1]}"
    return needs(c["BM"] % 64 == 0 and c["BM"] <= 256, "BM must be 64, 128, 192 or 256 (64-row warpgroup slabs)") + (
        needs(c["BN"] in widths, f"BN must be {names} (the N of one wgmma)")
    )


# The warp-specialised rungs' setmaxnreg hand-over: registers per thread that
# the producer warpgroup keeps and that each consumer warpgroup claims (enough
# for a 64 x 256 float32 accumulator slab). Template arguments after the
# configuration; pipeline.cuh's RegisterSplit static_asserts the sum the rules
# below check, and the multiples of 8 setmaxnreg takes.
PRODUCER_REGS = 40
CONSUMER_REGS = 232
REGISTER_SPLIT = Config(PRODUCER_REGS=PRODUCER_REGS, CONSUMER_REGS=CONSUMER_REGS)
MAX_REGISTERS = sm_limits((9, 0)).max_regs_per_block


def launch_registers(warpgroups: int) -> int:
    """The registers a block of ``warpgroups`` warpgroups holds from its launch
    (__launch_bounds__(threads, 1): 64K / threads a thread, in steps of 8, at
    most 248). setmaxnreg only moves registers within them: a consumer's
    setmaxnreg.inc that would need more waits for ever (a 32 + 2 x 240 split,
    65,536 against the 64,512 of three warpgroups, hung on an H100)."""
    threads = warpgroups * WARPGROUP
    return min(MAX_REGISTERS // threads // 8 * 8, 248) * threads


def split_fits(producer: int, consumer: int, consumers: int) -> bool:
    return (producer + consumer * consumers) * WARPGROUP <= launch_registers(consumers + 1)


# Three consumer warpgroups (BM = 192; tc_tma_store, built for them) share the
# 65,536 registers of four warpgroups: 32 for the producer and 160 for each
# consumer, room for 64 x 192 float32 sums (96 a thread) and their addresses,
# not for 64 x 256 (128 a thread). 192 x 192 tiles are cuBLAS's at 3000 cubed.
THREE_CONSUMER_SPLIT = Config(PRODUCER_REGS=32, CONSUMER_REGS=160)
THREE_CONSUMERS = ("tc_tma_store",)


def register_split(rung_id: str, consumers: int) -> Config:
    """The setmaxnreg split of a rung's block of ``consumers`` consumer warpgroups."""
    return THREE_CONSUMER_SPLIT if consumers == 3 and rung_id in THREE_CONSUMERS else REGISTER_SPLIT


def specialised_rules(c: Config, widths: tuple[int, ...] = WIDTHS, rung_id: str = "") -> list[str]:
    consumers = c["BM"] // 64
    split = register_split(rung_id, consumers)
    wide = consumers == 3 and rung_id in THREE_CONSUMERS and c["BN"] > 192
    return (
        wgmma_rules(c, widths)
        + needs(
            split_fits(split["PRODUCER_REGS"], split["CONSUMER_REGS"], consumers),
            f"{consumers} consumer warpgroups do not fit the registers a block holds",
        )
        + needs(not wide, "three consumers (BM = 192) hold 64 x 192 sums at most in their 160 registers: BN <= 192")
        + needs(c["STAGES"] >= 2, "STAGES must be at least 2")
    )


def persistent_rules(c: Config, widths: tuple[int, ...] = WIDTHS, rung_id: str = "") -> list[str]:
    return specialised_rules(c, widths, rung_id) + needs(c["GROUP_M"] >= 1, "GROUP_M must be at least 1")


def ring_bytes(c: Config, extra_barriers: int) -> int:
    """STAGES x (BM + BN) swizzled rows of 128 bytes, then 8-byte mbarriers."""
    return c["STAGES"] * (c["BM"] + c["BN"]) * ROW_BYTES + 8 * extra_barriers * c["STAGES"]


# tc_tma_store: each consumer warpgroup stages C in C_BOXES boxes of its 64
# rows x 128 bytes. A template argument of tc_tma_store (08_tma_store.cu
# static_asserts that a box is a warpgroup's rows) and the box of C's tensor map.
C_BOX_ROWS = 64


def c_boxes_bytes(c: Config) -> int:
    return c["BM"] // 64 * c["C_BOXES"] * C_BOX_ROWS * ROW_BYTES


# Every rung from tc_mma on: rows of A and B in whole 16-byte pieces (16-byte copies, TMA row strides).
ROWS_16 = 16
HOPPER: dict[str, Any] = dict(min_cc=(9, 0), archs=("sm_90a",), tma=True, dynamic_smem=True, k_bytes_multiple=ROWS_16)


def _grid(rung: Rung, c: Config) -> Callable[[Shape, int], Dim3]:
    """One block per tile; persistent rungs: one per tile too, as the work to
    share (the runner launches no more blocks than the GPU holds at once)."""
    if rung.grid is not None:
        return rung.grid(c)
    bm, bn = c["BM"], c["BN"]
    if not rung.persistent:
        return lambda s, b: (cdiv(s.n, bn), cdiv(s.m, bm), 1)
    # A cluster's blocks share one tile column: the work comes in whole clusters.
    return lambda s, b: (cdiv(s.m, bm * rung.cluster) * cdiv(s.n, bn) * rung.cluster, 1, 1)


def _fixed(rung: Rung, consumers: int) -> Config:
    """The rung's launch facts, its register split the one for ``consumers`` (THREE_CONSUMERS)."""
    return rung.fixed | register_split(rung.id, consumers) if "CONSUMER_REGS" in rung.fixed else rung.fixed


def build(rung: Rung, c: Config) -> KernelSpec:
    bm, bn = rung.tile(c)
    smem = rung.smem_bytes(c) if rung.dynamic_smem else 0
    constraints: tuple[Constraint, ...] = rung.constraints + (rung.shape_rules(c) if rung.shape_rules else ())
    if not rung.persistent and rung.grid is None:
        constraints += (grid_rows_fit(bm),)
    problem = TENSOR
    clustered = rung.cluster_size(c) if rung.cluster_size else rung.cluster
    c_box_rows = rung.fixed.get("C_BOX_ROWS", 0)  # C is a tensor map with boxes of these rows (0: a pointer)
    if rung.tma:
        # TMA boxes: BM rows of A and BN rows of B, each split between the blocks that multicast it.
        sharing = rung.multicast(c) if rung.multicast else rung.cluster
        sharing_a = rung.multicast_a(c) if rung.multicast_a else 1
        boxes = {"boxes": (bm // sharing_a, bn // sharing), "c_box_rows": c_box_rows}
        problem = Problem("tensor", partial(prepare_tensor, **boxes), tensor_device_bytes,
                          operands=partial(tensor_operands, **boxes))  # fmt: skip
    return tensor_core_spec(
        rung, c, family="tensor", source_doc=SOURCE_DOC, grid=_grid(rung, c), constraints=constraints, smem=smem,
        # A and B once (element size), C written once in float32: counted in input elements.
        min_elems_moved=lambda s: s.m * s.k + s.n * s.k + 2 * s.m * s.n,
        any_size_alternative="tc_wmma", problem=problem, template_fixed=_fixed(rung, bm // 64), cluster=clustered,
    )  # fmt: skip


def tensor_core_spec(
    rung: Rung, c: Config, *, family: str, source_doc: str, grid: Callable[[Shape, int], Dim3],
    constraints: tuple[Constraint, ...], smem: int, min_elems_moved: Callable[[Shape], int],
    any_size_alternative: str, problem: Problem, template_fixed: Mapping[str, int], cluster: int,
) -> KernelSpec:  # fmt: skip
    """A tensor-core rung's catalogue entry, this ladder's or the 8-bit one's
    (kernels/lowp/family.py): what both build alike from the rung and its
    configuration, with what each ``family`` decides passed in."""
    threads, cgma = rung.threads(c), rung.cgma(c)
    c_box_rows = rung.fixed.get("C_BOX_ROWS", 0)  # C is a tensor map with boxes of these rows (0: a pointer)
    return KernelSpec(
        id=rung.id,
        source=f"{family}/{rung.source}",
        function=rung.id,
        source_doc=source_doc,
        summary=rung.summary,
        dtypes=rung.dtypes,
        block_edges=(),
        grid=grid,
        block=lambda s, b: (threads, 1, 1),
        constraints=constraints,
        dynamic_smem_bytes=lambda s, b, dtype: smem,
        k_bytes_multiple=rung.k_bytes_multiple,
        # A tensor map of C: its rows' stride must be whole 16-byte pieces too.
        n_bytes_multiple=16 if c_box_rows else 0,
        min_elems_moved=min_elems_moved,
        cgma=lambda s, b: cgma,
        any_size_alternative=any_size_alternative,
        problem=problem,
        templated_on_edge=False,
        template_extra=tuple(c.values()),
        template_params=tuple(c),
        template_fixed=tuple(template_fixed.values()),
        archs=rung.archs,
        min_cc=rung.min_cc,
        cluster=(cluster, 1, 1) if cluster > 1 else None,
        persistent=rung.persistent,
        dependent_launch=rung.dependent_launch,
        workspace_bytes=rung.workspace(c) if rung.workspace else None,
        sass=rung.sass,
    )
