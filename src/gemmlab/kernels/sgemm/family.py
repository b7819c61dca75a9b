"""What the FP32 ladder's rungs share: the sm_90 limits its search spaces are
sized for, the rules several rungs check, the builders of the rungs made alike
(vector_rung, warp_rung), the family's limits on a configuration and the
catalogue entry one configuration builds (kernels/sgemm/spec.py lists the rungs).

Analytic CGMA here counts global-memory access instructions of one thread: a
16-byte load is one access, as it is one request in Nsight Compute's
``l1tex__t_requests`` (the measured CGMA), although it moves 4 floats.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gemmlab.core.arch import sm_limits
from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.ladder import Config, Rung, cdiv, grid_rows_fit, grid_y_fits, needs
from gemmlab.kernels.spec import Constraint, KernelSpec, at_most
from gemmlab.problems.sgemm import SGEMM

SOURCE_DOC = "gemmlab FP32 ladder (beyond the documents)"
# The search spaces are sized for the GPU the defaults are chosen for: sm_90's
# limits, from the occupancy calculator's table. gemmlab.backends.nvrtc.check_device_limits
# refuses, before any launch, what a smaller GPU cannot give (163 KB of dynamic
# shared memory on sm_80, for instance).
_SM90 = sm_limits((9, 0))
# Static shared memory a block may declare without cuFuncSetAttribute (48 KB).
MAX_STATIC_SMEM = _SM90.max_smem_per_block
# Dynamic shared memory a block may use once the kernel opts in
# (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, set by gemmlab.measure.run): 227 KB.
MAX_DYNAMIC_SMEM = _SM90.max_smem_per_block_optin
MAX_THREADS = _SM90.max_threads_per_block
# Shared memory of an SM (228 KB), of which the driver keeps 1 KB per resident block.
SMEM_PER_SM = _SM90.smem_per_sm
SMEM_RESERVED_PER_BLOCK = _SM90.reserved_smem_per_block
MAX_THREADS_PER_SM = _SM90.max_warps_per_sm * 32
REGS_PER_SM = _SM90.regs_per_sm
MAX_REGS_PER_THREAD = _SM90.max_regs_per_thread
# Registers a thread needs beyond its accumulators and operand fragments
# (indices, addresses, loop counters, predicates): a rough allowance, checked
# by compiling every configuration in tests/test_sgemm.py.
REG_OVERHEAD = 40
# Swizzles of the A tile (a_swizzle in the .cu files) need these BK.
SWIZZLE_BK = (4, 8, 16, 32)
# More accumulators than this (a 64 x 64 warp tile on 4 warps holds 128 per
# thread) take ptxas to 200-255 registers: one block per SM and a step from spilling.
MAX_ACCUMULATORS = 64
# The search space of the warp-tiled rungs' tiles.
WARP_TILES = {"BM": (128,), "BN": (128,), "BK": (8, 16), "WM": (32, 64), "WN": (32, 64)}


def tile_cgma(rows: int, cols: int, a_per_access: int, b_per_access: int) -> float:
    """FLOPs per global access of a thread in a block that computes a rows x cols
    tile of C: per step of K the block reads rows elements of A and cols of B
    (a_per_access and b_per_access elements per access) for 2 rows cols FLOPs;
    every thread has the same share of both."""
    return 2 * rows * cols / (rows / a_per_access + cols / b_per_access)


def blocktile_rules(c: Config, threads: int, vec: int) -> list[str]:
    """Rules of the block-tiled kernels' loads: every thread moves the same
    number of vec-element pieces of each tile."""
    bm, bn, bk = c["BM"], c["BN"], c["BK"]
    return needs(
        (bm * bk) % (vec * threads) == 0 and (bk * bn) % (vec * threads) == 0,
        f"the {bm}x{bk} A tile and the {bk}x{bn} B tile must split evenly into {threads} threads' "
        f"pieces of {vec} element{'s' if vec > 1 else ''}",
    )


def thread_tile_rules(c: Config) -> list[str]:
    return needs(c["BM"] % c["TM"] == 0 and c["BN"] % c["TN"] == 0, "thread tiles (TM x TN) must tile the block tile")


def vector_rules(c: Config) -> list[str]:
    return needs(
        c["BK"] % 4 == 0 and c["BN"] % 4 == 0 and c.get("TM", 4) % 4 == 0 and c.get("TN", 4) % 4 == 0,
        "BK, BN, TM and TN must be multiples of 4 (whole float4s)",
    )


def swizzle_rules(c: Config) -> list[str]:
    return needs(c["BK"] in SWIZZLE_BK, f"BK must be one of {SWIZZLE_BK} (the A-tile swizzle)") + needs(
        c["BM"] % 32 == 0, "BM must be a multiple of 32 (the A-tile swizzle)"
    )


def warp_rules(c: Config) -> list[str]:
    return needs(
        c["BM"] % c["WM"] == 0 and c["BN"] % c["WN"] == 0, "warp tiles (WM x WN) must tile the block tile"
    ) + needs(c["WM"] % 16 == 0 and c["WN"] % 32 == 0, "WM must be a multiple of 16 and WN of 32")


def warp_threads(c: Config) -> int:
    return (c["BM"] // c["WM"]) * (c["BN"] // c["WN"]) * 32


def limits(rung: Rung, c: Config) -> list[str]:
    """The thread, shared-memory and register limits the configuration breaks."""
    threads = rung.threads(c)
    min_blocks = c.get("MIN_BLOCKS", 1)
    found = needs(threads % 32 == 0 and 32 <= threads <= MAX_THREADS,
                   f"{threads} threads per block: must be a multiple of 32 from 32 to {MAX_THREADS}")  # fmt: skip
    smem_kind, smem_limit = ("dynamic", MAX_DYNAMIC_SMEM) if rung.dynamic_smem else ("static", MAX_STATIC_SMEM)
    found += needs(
        rung.smem_bytes(c) <= smem_limit,
        f"{rung.smem_bytes(c)} bytes of {smem_kind} shared memory, over {smem_limit}",
    )
    found += needs(
        1 <= min_blocks and threads * min_blocks <= MAX_THREADS_PER_SM,
        f"MIN_BLOCKS = {min_blocks} blocks of {threads} threads do not fit an SM ({MAX_THREADS_PER_SM})",
    )
    found += needs(
        min_blocks * (rung.smem_bytes(c) + SMEM_RESERVED_PER_BLOCK) <= SMEM_PER_SM,
        f"MIN_BLOCKS = {min_blocks} blocks of {rung.smem_bytes(c)} bytes of shared memory do not fit an SM "
        f"({SMEM_PER_SM} bytes, {SMEM_RESERVED_PER_BLOCK} of them reserved per block)",
    )
    found += needs(
        rung.outputs(c) <= rung.max_accumulators,
        f"{rung.outputs(c)} outputs per thread, over {rung.max_accumulators} (registers)",
    )
    budget = min(MAX_REGS_PER_THREAD, REGS_PER_SM // max(1, threads * min_blocks))
    need = rung.outputs(c) + rung.fragments(c) + REG_OVERHEAD
    found += needs(
        need <= budget,
        f"about {need} registers per thread needed ({rung.outputs(c)} accumulators), "
        f"{budget} allowed for {min_blocks} block(s) of {threads} threads per SM",
    )
    return found


def build(rung: Rung, c: Config) -> KernelSpec:
    rows, cols = rung.tile(c)
    threads = rung.threads(c)
    block: Dim3 = rung.block(c) if rung.block else (threads, 1, 1)
    cgma = rung.cgma(c)
    # Grouped rungs (GROUP_M) launch GROUP_M blocks along x per column of tiles,
    # one grid row per GROUP_M rows of tiles (see 10_swizzle_l2.cu).
    group = c.get("GROUP_M", 1)
    grid = lambda s, b: (cdiv(s.n, cols) * group, cdiv(cdiv(s.m, rows), group), 1)
    constraints: tuple[Constraint, ...] = (grid_rows_fit(rows * group),)
    if rung.persistent:
        grid = lambda s, b: (cdiv(s.m, rows) * cdiv(s.n, cols), 1, 1)
        constraints = ()
    if rung.grid is not None:
        grid = rung.grid(c)
        constraints = (grid_y_fits(grid),)
    constraints += rung.constraints + (rung.shape_rules(c) if rung.shape_rules else ())
    dynamic_elems = rung.smem_bytes(c) // 4 if rung.dynamic_smem else 0
    return KernelSpec(
        id=rung.id,
        source=f"sgemm/{rung.source}",
        function=rung.id,
        source_doc=SOURCE_DOC,
        summary=rung.summary,
        dtypes=("float32",),
        block_edges=(),
        grid=grid,
        block=lambda s, b: block,
        constraints=constraints,
        dynamic_smem_elems=lambda s, b: dynamic_elems,
        # Inputs once, C read once (beta != 0) and written once.
        min_elems_moved=lambda s: s.m * s.k + s.k * s.n + 2 * s.m * s.n,
        cgma=lambda s, b: cgma,
        any_size_alternative="sgemm_swizzle_l2",
        problem=SGEMM,
        templated_on_edge=False,
        template_extra=tuple(c.values()),
        template_params=tuple(c),
        template_fixed=tuple(rung.fixed.values()),
        persistent=rung.persistent,
        dependent_launch=rung.dependent_launch,
        workspace_bytes=rung.workspace(c) if rung.workspace else None,
        archs=rung.archs,
        min_cc=rung.min_cc,
        cluster=(rung.cluster_size(c), 1, 1) if rung.cluster_size else None,
    )


def warp_rung(rung_id: str, source: str, summary: str, default: Config, choices: dict[str, tuple[int, ...]],
               stages: Callable[[Config], int], a_per_access: int, search: tuple[Config, ...] = (),
               grid: Callable[[Config], Callable[[Shape, int], Dim3]] | None = None,
               workspace: Callable[[Config], Callable[[Shape, int], int]] | None = None,
               dependent_launch: bool = False, **facts: Any) -> Rung:  # fmt: skip
    """sgemm_warptile and the rungs built on it: BM, BN, BK, WM, WN, then their own, then MIN_BLOCKS.
    ``facts``: the Rung fields the studies read (serves, every_config, default_for, cross_block)."""
    return Rung(
        id=rung_id,
        source=source,
        summary=summary,
        default=default,
        choices=choices,
        search=search,
        grid=grid,
        workspace=workspace,
        dependent_launch=dependent_launch,
        threads=warp_threads,
        outputs=lambda c: c["WM"] * c["WN"] // 32,
        max_accumulators=MAX_ACCUMULATORS,
        fragments=lambda c: c["WM"] // 4 + c["WN"] // 8,
        smem_bytes=lambda c: 4 * stages(c) * c["BK"] * (c["BM"] + c["BN"]),
        # B arrives in 16-byte pieces; A in 16-byte loads (warptile) or 4-byte copies (cp.async rungs).
        cgma=lambda c: tile_cgma(c["BM"], c["BN"], a_per_access, 4),
        rules=lambda c: (
            warp_rules(c)
            + swizzle_rules(c)
            + vector_rules(c)
            + blocktile_rules(c, warp_threads(c), 4)
            + needs(c.get("STAGES", 2) >= 2, "STAGES must be at least 2")
            + needs(c.get("GROUP_M", 1) >= 1, "GROUP_M must be at least 1")
            + needs(c.get("SPLITS", 2) >= 2, "SPLITS must be at least 2 (one slice is sgemm_small_tile)")
        ),
        **facts,
    )


def thread_tile_threads(c: Config) -> int:
    return (c["BM"] // c["TM"]) * (c["BN"] // c["TN"])


def vector_rung(rung_id: str, source: str, summary: str, swizzled: bool) -> Rung:
    """sgemm_vectorized and sgemm_swizzled."""
    return Rung(
        id=rung_id,
        source=source,
        summary=summary,
        default=Config(BM=128, BN=128, BK=8, TM=8, TN=8, MIN_BLOCKS=2),
        choices={"BM": (64, 128), "BN": (128,), "BK": (8, 16), "TM": (8,), "TN": (4, 8), "MIN_BLOCKS": (1, 2)},
        threads=thread_tile_threads,
        outputs=lambda c: c["TM"] * c["TN"],
        max_accumulators=MAX_ACCUMULATORS,
        fragments=lambda c: c["TM"] + c["TN"],
        smem_bytes=lambda c: 4 * c["BK"] * (c["BM"] + c["BN"]),
        cgma=lambda c: tile_cgma(c["BM"], c["BN"], 4, 4),
        rules=lambda c: (
            thread_tile_rules(c)
            + vector_rules(c)
            + blocktile_rules(c, thread_tile_threads(c), 4)
            + (swizzle_rules(c) if swizzled else [])
        ),
    )


def block_holds(side: str, parameter: str, held: int, what: str, most: int = 16) -> tuple[Constraint, ...]:
    """A skinny rung's limit: a block holds the sums of all ``held`` rows (or
    columns) of C, so M (or N, the ``side``) must not exceed that; ``most``:
    the largest ``parameter`` the rung takes."""
    why = (
        f"a block holds the sums of {parameter} = {held} {what}; use a configuration with "
        f"{parameter} >= {side.upper()} ({most} at most), or a tiled rung such as sgemm_small_tile for more {what}"
    )
    return (at_most(side, held, why),)
