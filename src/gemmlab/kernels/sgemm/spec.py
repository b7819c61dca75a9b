"""The FP32 ladder beyond the documents: SGEMM from a coalesced naive kernel to
a multistage cp.async pipeline, one idea per rung (docs/sgemm-ladder.md).

Every rung computes C = alpha * A.B + beta * C in float32 with FP32 FFMA (no
tensor cores), row-major (A is M x K, B is K x N), for any M, N, K, and takes
the same arguments: ``(a, b, c_in, c_out, m, n, k, alpha, beta)``. The C that
beta scales is a separate, read-only input, so every launch (warm-up, timed,
checked) computes the same output, and the runner's NaN poison in ``c_out``
still catches any output a kernel leaves unwritten.

A rung's tile sizes are template parameters. ``LADDER.kernels`` holds one
catalogue entry per rung at its default configuration, chosen for H100/H200
(sm_90: 132 SMs, 228 KB of shared memory and 64K registers per SM).
``LADDER.configs(kernel_id)`` lists the configurations a rung accepts within
the thread, shared-memory and register limits, and ``LADDER.variant(kernel_id,
config)`` returns the catalogue entry for one of them: what a tuner enumerates
(through gemmlab.kernels.catalogue.configs and variant).

Analytic CGMA here counts global-memory access instructions of one thread: a
16-byte load is one access, as it is one request in Nsight Compute's
``l1tex__t_requests`` (the measured CGMA), although it moves 4 floats.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gemmlab.core.arch import sm_limits
from gemmlab.core.shapes import MAX_INDEX, Dim3, Shape
from gemmlab.kernels.ladder import Config, Ladder, Rung, cdiv, grid_rows_fit, grid_y_fits, needs
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


# --- the rungs ----------------------------------------------------------------


def _tile_cgma(rows: int, cols: int, a_per_access: int, b_per_access: int) -> float:
    """FLOPs per global access of a thread in a block that computes a rows x cols
    tile of C: per step of K the block reads rows elements of A and cols of B
    (a_per_access and b_per_access elements per access) for 2 rows cols FLOPs;
    every thread has the same share of both."""
    return 2 * rows * cols / (rows / a_per_access + cols / b_per_access)


def _blocktile_rules(c: Config, threads: int, vec: int) -> list[str]:
    """Rules of the block-tiled kernels' loads: every thread moves the same
    number of vec-element pieces of each tile."""
    bm, bn, bk = c["BM"], c["BN"], c["BK"]
    return needs(
        (bm * bk) % (vec * threads) == 0 and (bk * bn) % (vec * threads) == 0,
        f"the {bm}x{bk} A tile and the {bk}x{bn} B tile must split evenly into {threads} threads' "
        f"pieces of {vec} element{'s' if vec > 1 else ''}",
    )


def _thread_tile_rules(c: Config) -> list[str]:
    return needs(c["BM"] % c["TM"] == 0 and c["BN"] % c["TN"] == 0, "thread tiles (TM x TN) must tile the block tile")


def _vector_rules(c: Config) -> list[str]:
    return needs(
        c["BK"] % 4 == 0 and c["BN"] % 4 == 0 and c.get("TM", 4) % 4 == 0 and c.get("TN", 4) % 4 == 0,
        "BK, BN, TM and TN must be multiples of 4 (whole float4s)",
    )


def _swizzle_rules(c: Config) -> list[str]:
    return needs(c["BK"] in SWIZZLE_BK, f"BK must be one of {SWIZZLE_BK} (the A-tile swizzle)") + needs(
        c["BM"] % 32 == 0, "BM must be a multiple of 32 (the A-tile swizzle)"
    )


def _warp_rules(c: Config) -> list[str]:
    return needs(
        c["BM"] % c["WM"] == 0 and c["BN"] % c["WN"] == 0, "warp tiles (WM x WN) must tile the block tile"
    ) + needs(c["WM"] % 16 == 0 and c["WN"] % 32 == 0, "WM must be a multiple of 16 and WN of 32")


def _warp_threads(c: Config) -> int:
    return (c["BM"] // c["WM"]) * (c["BN"] // c["WN"]) * 32


def _limits(rung: Rung, c: Config) -> list[str]:
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


def _spec(rung: Rung, c: Config) -> KernelSpec:
    rows, cols = rung.tile(c)
    threads = rung.threads(c)
    block: Dim3 = rung.block(c) if rung.block else (threads, 1, 1)
    cgma = rung.cgma(c)
    # Grouped rungs (GROUP_M) launch GROUP_M blocks along x per column of tiles,
    # one grid row per GROUP_M rows of tiles (see 10_swizzle_l2.cu).
    group = c.get("GROUP_M", 1)
    grid = lambda s, b: (cdiv(s.n, cols) * group, cdiv(cdiv(s.m, rows), group), 1)
    constraints = (grid_rows_fit(rows * group),)
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


def _warp_rung(rung_id: str, source: str, summary: str, default: Config, choices: dict[str, tuple[int, ...]],
               stages: Callable[[Config], int], a_per_access: int, search: tuple[Config, ...] = (),
               grid: Callable[[Config], Callable[[Shape, int], Dim3]] | None = None,
               workspace: Callable[[Config], Callable[[Shape, int], int]] | None = None,
               dependent_launch: bool = False) -> Rung:  # fmt: skip
    """sgemm_warptile and the rungs built on it: BM, BN, BK, WM, WN, then their own, then MIN_BLOCKS."""
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
        threads=_warp_threads,
        outputs=lambda c: c["WM"] * c["WN"] // 32,
        max_accumulators=MAX_ACCUMULATORS,
        fragments=lambda c: c["WM"] // 4 + c["WN"] // 8,
        smem_bytes=lambda c: 4 * stages(c) * c["BK"] * (c["BM"] + c["BN"]),
        # B arrives in 16-byte pieces; A in 16-byte loads (warptile) or 4-byte copies (cp.async rungs).
        cgma=lambda c: _tile_cgma(c["BM"], c["BN"], a_per_access, 4),
        rules=lambda c: (
            _warp_rules(c)
            + _swizzle_rules(c)
            + _vector_rules(c)
            + _blocktile_rules(c, _warp_threads(c), 4)
            + needs(c.get("STAGES", 2) >= 2, "STAGES must be at least 2")
            + needs(c.get("GROUP_M", 1) >= 1, "GROUP_M must be at least 1")
            + needs(c.get("SPLITS", 2) >= 2, "SPLITS must be at least 2 (one slice is sgemm_small_tile)")
        ),
    )


def _thread_tile_threads(c: Config) -> int:
    return (c["BM"] // c["TM"]) * (c["BN"] // c["TN"])


def _vector_rung(rung_id: str, source: str, summary: str, swizzled: bool) -> Rung:
    """sgemm_vectorized and sgemm_swizzled."""
    return Rung(
        id=rung_id,
        source=source,
        summary=summary,
        default=Config(BM=128, BN=128, BK=8, TM=8, TN=8, MIN_BLOCKS=2),
        choices={"BM": (64, 128), "BN": (128,), "BK": (8, 16), "TM": (8,), "TN": (4, 8), "MIN_BLOCKS": (1, 2)},
        threads=_thread_tile_threads,
        outputs=lambda c: c["TM"] * c["TN"],
        max_accumulators=MAX_ACCUMULATORS,
        fragments=lambda c: c["TM"] + c["TN"],
        smem_bytes=lambda c: 4 * c["BK"] * (c["BM"] + c["BN"]),
        cgma=lambda c: _tile_cgma(c["BM"], c["BN"], 4, 4),
        rules=lambda c: (
            _thread_tile_rules(c)
            + _vector_rules(c)
            + _blocktile_rules(c, _thread_tile_threads(c), 4)
            + (_swizzle_rules(c) if swizzled else [])
        ),
    )


# sgemm_large_tile's default: a 128 x 256 tile of 8 warps of 64 x 64, a ring of
# three stages of BK = 16, one block per SM.
LARGE_TILE_DEFAULT = Config(BM=128, BN=256, BK=16, WM=64, WN=64, STAGES=3, MIN_BLOCKS=1)

# The configurations rungs 11 and 12 try besides their default. Each differs
# from it in one thing: the tile's orientation, the ring's depth, BK, and the
# warp's shape (8 x 16 per thread).
LARGE_TILE_SEARCH = (
    LARGE_TILE_DEFAULT | Config(BM=256, BN=128),
    LARGE_TILE_DEFAULT | Config(STAGES=2),
    LARGE_TILE_DEFAULT | Config(STAGES=4),
    LARGE_TILE_DEFAULT | Config(BK=8, STAGES=4),
    LARGE_TILE_DEFAULT | Config(WM=32, WN=128),
)


def _large_tile_rules(c: Config) -> list[str]:
    """Rung 11's requirements: warp tiles, the A tile's swizzle, whole float4
    pieces shared evenly by the threads, a ring, and two fragment buffers."""
    return (
        _warp_rules(c)
        + _swizzle_rules(c)
        + _vector_rules(c)
        + _blocktile_rules(c, _warp_threads(c), 4)
        + needs(c["STAGES"] >= 2, "STAGES must be at least 2")
        + needs(c["BK"] % 2 == 0, "BK must be even (the two fragment buffers alternate)")
    )


# The default configuration of rungs 13 onward (sgemm_spread_copies to
# sgemm_padded_b): sgemm_large_tile's tile with four stages instead of three.
SPREAD_DEFAULT = LARGE_TILE_DEFAULT | Config(STAGES=4)


def _spread_rules(c: Config) -> list[str]:
    """What rung 13's copies add: each warp's copy is laid out for 8 warps and whole sectors."""
    return (
        needs(_warp_threads(c) == 256, "the copies are laid out for 8 warps: (BM / WM) x (BN / WN) must be 8")
        + needs(c["BK"] % 8 == 0, "BK must be a multiple of 8 (a warp copies 8 k-slices of A at once)")
        + needs(c["BN"] % 32 == 0, "BN must be a multiple of 32 (a warp copies 32 columns of B at once)")
    )


# sgemm_stream_k's search: LARGE_TILE_SEARCH less the 256 x 128 tile, for which
# ptxas spills (64 bytes on sm_90, 88 on sm_80: the piece-of-work bookkeeping
# around the main loop leaves it no register to spare).
STREAM_K_SEARCH = tuple(c for c in LARGE_TILE_SEARCH if (c["BM"], c["BN"]) != (256, 128))


# sgemm_stream_k's grid counts a work unit per STREAM_K_MIN_RUN k-tiles of each
# tile, so that with fewer tiles than SMs the runner's clamp (no more blocks
# than the GPU holds) still gives every SM a run of at least this many k-tiles
# where the problem has them; with more tiles than SMs the clamp gives one
# block per resident slot, as before.
STREAM_K_MIN_RUN = 8


def stream_k_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """sgemm_stream_k's work units (the runner launches no more blocks than the GPU holds)."""

    def grid(s: Shape, block_edge: int) -> Dim3:
        tiles = cdiv(s.m, c["BM"]) * cdiv(s.n, c["BN"])
        return (tiles * cdiv(cdiv(s.k, c["BK"]), STREAM_K_MIN_RUN), 1, 1)

    return grid


def _stream_k_workspace(c: Config) -> Callable[[Shape, int], int]:
    """sgemm_stream_k's workspace for ``blocks`` blocks: two arrival counters
    per block (4 bytes each, padded to 16 bytes), then two partial tiles of
    BM x BN floats per block (see 14_stream_k.cu)."""
    tile_bytes = 4 * c["BM"] * c["BN"]
    return lambda s, blocks: cdiv(8 * blocks, 16) * 16 + 2 * blocks * tile_bytes


# Rung 16's widest strip: a remainder of M % BM or N % BN up to this goes to
# edge blocks, each of which takes this many columns (rows below the tiles) or
# rows (columns right of them), one per lane of a warp. Passed to the kernel
# as a template argument (edge_strips.cuh static_asserts what it relies on).
EDGE_MAX = 32
# k-slices per chunk of a strip's operand that an edge block stages: one per
# thread of the tiles' 256 (a template argument too).
EDGE_KC = 256
EDGE_FACTS = Config(EDGE_MAX=EDGE_MAX, EDGE_KC=EDGE_KC)


def tiled_extent(extent: int, tile: int) -> int:
    """How much of ``extent`` sgemm_edge_strips's tiles cover: all of it, or
    all but a last strip of 1 .. EDGE_MAX (tiled_extent in edge_strips.cuh)."""
    rest = extent % tile
    return extent - rest if extent >= tile and rest <= EDGE_MAX else extent


def edge_strips_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """sgemm_edge_strips's grid: the tiles, then rows of edge blocks (EDGE_MAX
    columns of the strip below the tiles, or EDGE_MAX rows of the one to their
    right, each), as many rows as those take at the tiles' width."""

    def grid(s: Shape, block_edge: int) -> Dim3:
        m_tiled, n_tiled = tiled_extent(s.m, c["BM"]), tiled_extent(s.n, c["BN"])
        across, down = cdiv(n_tiled, c["BN"]), cdiv(m_tiled, c["BM"])
        edge = (cdiv(s.n, EDGE_MAX) if m_tiled < s.m else 0) + (cdiv(m_tiled, EDGE_MAX) if n_tiled < s.n else 0)
        return (across, down + cdiv(edge, across), 1)

    return grid


def _edge_rules(c: Config) -> list[str]:
    """What rung 16's edge blocks add: the ring's shared memory holds a chunk of
    a strip's operand (EDGE_KC x (EDGE_MAX + 4) floats), then the 8 warps' sums
    (EdgeSplit's static_asserts in edge_strips.cuh)."""
    floats, need = c["STAGES"] * c["BK"] * (c["BM"] + c["BN"]), max(EDGE_KC * (EDGE_MAX + 4), 8 * EDGE_MAX * 32)
    return needs(floats >= need, f"the ring's {floats} floats of shared memory are fewer than an edge block's {need}")


# The blocks of sgemm_padded_b that copy B into its padded form, in whole rows
# of the grid in front of sgemm_edge_strips's (17_padded_b.cu counts the rows
# past rung 16's as theirs). Passed to the kernel as a template argument.
PAD_BLOCKS = 128


def padded_b_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """sgemm_padded_b's grid: sgemm_edge_strips's, and when N % 4 != 0 the
    rows of PAD_BLOCKS blocks (rounded up to whole rows) that copy B first."""
    edge = edge_strips_grid(c)

    def grid(s: Shape, block_edge: int) -> Dim3:
        across, down, _ = edge(s, block_edge)
        return (across, down + (cdiv(PAD_BLOCKS, across) if s.n % 4 else 0), 1)

    return grid


def _padded_b_elems(s: Shape) -> int:
    """sgemm_padded_b's copy of B: K rows of N rounded up to 4 floats, or none
    when N % 4 == 0."""
    return s.k * cdiv(s.n, 4) * 4 if s.n % 4 else 0


def _padded_b_workspace(c: Config) -> Callable[[Shape, int], int]:
    """Two 64-bit counters (16 bytes), then the padded B (see 17_padded_b.cu)."""
    return lambda s, blocks: 16 + 4 * _padded_b_elems(s)


def _padded_b_fits(shape: Shape, block_edge: int) -> str | None:
    elems = _padded_b_elems(shape)
    if elems > MAX_INDEX:
        return f"B padded to rows of a multiple of 4 floats has {elems} elements, over the 2^31 - 1 of 32-bit indexing"
    return None


def _large_rung(
    rung_id: str,
    source: str,
    summary: str,
    default: Config = LARGE_TILE_DEFAULT,
    rules: Callable[[Config], list[str]] = _large_tile_rules,
    persistent: bool = False,
    workspace: Callable[[Config], Callable[[Shape, int], int]] | None = None,
    search: tuple[Config, ...] = LARGE_TILE_SEARCH,
    grid: Callable[[Config], Callable[[Shape, int], Dim3]] | None = None,
    constraints: tuple[Constraint, ...] = (),
    fixed: Config | None = None,
) -> Rung:
    """sgemm_large_tile onwards: one block of 8 warps per SM, up to 128
    accumulators and two fragment buffers per thread, dynamic shared memory."""
    return Rung(
        id=rung_id,
        source=source,
        summary=summary,
        default=default,
        search=search,
        threads=_warp_threads,
        outputs=lambda c: c["WM"] * c["WN"] // 32,
        # Two buffers of fragments: the slice in use and the next one.
        fragments=lambda c: 2 * (c["WM"] // 4 + c["WN"] // 8),
        smem_bytes=lambda c: 4 * c["STAGES"] * c["BK"] * (c["BM"] + c["BN"]),
        cgma=lambda c: _tile_cgma(c["BM"], c["BN"], 1, 4),
        rules=rules,
        max_accumulators=128,
        dynamic_smem=True,
        persistent=persistent,
        workspace=workspace,
        grid=grid,
        constraints=constraints,
        fixed=fixed or {},
    )


# --- rungs 18 to 20: the shapes the large tiles lose (issue 21) -----------------

# sgemm_small_tile's default: 64 x 64 tiles of four 32 x 32 warp tiles (32
# outputs a thread), rung 9's three stages of BK = 16 (24 KB), and registers
# capped for four blocks per SM (128 a thread).
SMALL_TILE_DEFAULT = Config(BM=64, BN=64, BK=16, WM=32, WN=32, STAGES=3, MIN_BLOCKS=4)

# What the tuner tries besides the default (16 in all): the tile from 32 x 32
# (one warp) to 64 x 64 and one 128 x 64 for the sizes between; 16-row warp
# tiles (twice the warps, half the outputs each); BK = 32; two to four stages;
# and a looser register cap.
SMALL_TILE_SEARCH = (
    Config(BK=32),
    Config(STAGES=2),
    Config(STAGES=4),
    Config(WM=16),
    Config(WM=16, STAGES=4),
    Config(MIN_BLOCKS=2),
    Config(BM=32),
    Config(BN=32),
    Config(BM=32, BK=32),
    Config(BN=32, BK=32),
    Config(BM=32, BN=32),
    Config(BM=32, BN=32, WM=16),
    Config(BM=32, BN=32, BK=32),
    Config(BM=32, BN=32, STAGES=4),
    Config(BM=128, MIN_BLOCKS=2),
)

# sgemm_split_k's default: sgemm_small_tile's tile, K in four slices.
SPLIT_K_DEFAULT = Config(BM=64, BN=64, BK=16, WM=32, WN=32, STAGES=3, SPLITS=4)

# Its search (22 in all): the split count on the 64 x 64 tile, and the tiles
# of 128 x 128 (rung 9's, for C of many tiles and long K), 64 x 128 and 128 x
# 64 (between), and 32 x 32 (for C of very few). The counts are chosen so
# that tiles x SPLITS nearly fills whole waves on the H100's 132 SMs for the
# suite's K-heavy and few-tile shapes: the 128 x 128 tile (155 registers: one
# block of 8 warps per SM) at 1024 x 1024 x 16384 makes 64 tiles, 128 or 256
# blocks in 2 or 4 slices (one or two waves at 97%), and at 128 x 4096 x 4096
# 32 tiles, 128 or 256 blocks in 4 or 8; 64 x 64 (107 registers, 4 blocks per
# SM) at 1024 x 1024 x 16384 makes 256 tiles, 1536 blocks in 6 slices (3 waves
# of 528, 97%).
SPLIT_K_SEARCH = (
    *(Config(SPLITS=s) for s in (2, 3, 6, 8, 12, 16)),
    *(Config(BM=128, BN=128, WN=64, SPLITS=s) for s in (2, 3, 4, 6, 8, 16)),
    *(Config(BM=64, BN=128, WN=64, SPLITS=s) for s in (2, 4, 8)),
    *(Config(BM=128, BN=64, SPLITS=s) for s in (2, 4, 8)),
    *(Config(BM=32, BN=32, SPLITS=s) for s in (4, 8, 16)),
)


def split_k_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """sgemm_split_k's grid: a block per tile of C (x along N, y along M) and slice of K (z)."""
    return lambda s, block_edge: (cdiv(s.n, c["BN"]), cdiv(s.m, c["BM"]), c["SPLITS"])


def _split_k_workspace(c: Config) -> Callable[[Shape, int], int]:
    """One 4-byte counter per tile, padded to 16 bytes, then SPLITS partial
    tiles of BM x BN floats per tile (see 19_split_k.cu). ``blocks`` counts the
    slices too: blocks / SPLITS tiles."""
    tile_bytes = 4 * c["BM"] * c["BN"]
    return lambda s, blocks: cdiv(4 * (blocks // c["SPLITS"]), 16) * 16 + blocks * tile_bytes


# sgemm_cluster_split_k's default: the large tile and four stages of rung 13,
# K in 8 slices, one cluster of 8 blocks per tile (GROUPS = 1: no global memory).
CLUSTER_SPLIT_K_DEFAULT = Config(BM=128, BN=256, BK=16, WM=64, WN=64, STAGES=4, SPLITS=8, GROUPS=1)
MAX_CLUSTER = 8  # the most blocks a portable cluster holds

# Its search (18 in all). A cluster's blocks must all find room in one GPC,
# and the GPU holds fewer clusters than its SMs / SPLITS: an H100 or H200
# holds 15 clusters of 8, 17 of 6, 30 of 4, 39 of 3 and 66 of 2 (one block
# per SM; benchmarks/results/2026-11-24g_h100_cluster-occupancy.txt), so 16
# clusters of 8 or 32 of 4 run as two waves. Hence the counts that fill whole
# clusters (3, 6, 7), and GROUPS > 1: a tile's slices as several clusters of
# 2, whose sums meet in global memory (64 clusters of 2 fit in one wave).
CLUSTER_SPLIT_K_SEARCH = (
    Config(SPLITS=7),
    Config(SPLITS=6),
    Config(SPLITS=4),
    Config(SPLITS=2),
    Config(SPLITS=2, GROUPS=4),
    Config(SPLITS=2, GROUPS=2),
    *(Config(BN=128, WN=32, SPLITS=s) for s in (8, 4, 3, 2)),
    Config(BN=128, WN=32, SPLITS=2, GROUPS=2),
    # BK = 8: half the main loop's code, for short runs of k-tiles, whose warps
    # waited on instruction fetches (benchmarks/results/2026-11-24h_cluster-split-k-profiles.txt).
    Config(BN=128, WN=32, SPLITS=2, GROUPS=2, BK=8),
    Config(BN=128, WN=32, SPLITS=2, BK=8),
    # 64 x 128 and 128 x 64 tiles (8 warps of 32 x 32) for 64 rows or columns
    # against 4096 x 4096: 128 or 256 blocks in clusters of 2. On an H100
    # (2026-11-24o_h100_fp32-skinny.txt) 64 x 4096 x 4096 went from 70.7%
    # of cuBLAS (sgemm_split_k) to 85.8-87.4%, 4096 x 64 x 4096 from 76.8% to 87%.
    Config(BM=64, WM=32, BN=128, WN=32, SPLITS=2, GROUPS=2),
    Config(BM=64, WM=32, BN=128, WN=32, SPLITS=2, GROUPS=4),
    Config(BM=128, BN=64, WM=32, WN=32, SPLITS=2, GROUPS=2),
    Config(BM=128, BN=64, WM=32, WN=32, SPLITS=2, GROUPS=4),
)


def cluster_split_k_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """sgemm_cluster_split_k's grid: GROUPS clusters of SPLITS blocks along x per
    tile column, a row per tile row."""
    return lambda s, block_edge: (cdiv(s.n, c["BN"]) * c["SPLITS"] * c["GROUPS"], cdiv(s.m, c["BM"]), 1)


def _cluster_split_k_smem_bytes(c: Config) -> int:
    """The ring of rung 13, or one BM x BN partial tile of floats if larger (it takes the ring's place)."""
    return 4 * max(c["STAGES"] * c["BK"] * (c["BM"] + c["BN"]), c["BM"] * c["BN"])


def _cluster_vecs(c: Config) -> int:
    """float4s of accumulators per thread (VECS in 23_cluster_split_k.cu)."""
    return (c["WM"] // 16 * 4) * (c["WN"] // 32)


def _cluster_split_k_workspace(c: Config) -> Callable[[Shape, int], int]:
    """With GROUPS > 1: a counter per tile and rank, padded to 16 bytes, then
    per tile, rank and group a slot of the rank's share (at most
    ceil(VECS / SPLITS) float4s of each thread). None needed otherwise."""
    slices, share = c["SPLITS"] * c["GROUPS"], cdiv(_cluster_vecs(c), c["SPLITS"])

    def size(s: Shape, blocks: int) -> int:
        if c["GROUPS"] == 1:
            return 0
        tiles = blocks // slices
        return cdiv(4 * tiles * c["SPLITS"], 16) * 16 + tiles * slices * share * _warp_threads(c) * 16

    return size


def _cluster_split_k_rules(c: Config) -> list[str]:
    vecs = _cluster_vecs(c)
    return (
        _large_tile_rules(c)
        + _spread_rules(c)
        + needs(2 <= c["SPLITS"] <= MAX_CLUSTER, f"SPLITS must be 2 to {MAX_CLUSTER} (a portable cluster's blocks)")
        + needs(
            c["SPLITS"] <= vecs,
            f"SPLITS must be at most the {vecs} float4s of accumulators per thread (each slice adds a share)",
        )
        + needs(c["GROUPS"] >= 1, "GROUPS (clusters per tile) must be at least 1")
    )


# sgemm_skinny's default: all 16 rows, strips of 32 columns (8 lanes of float4s
# side by side, 4 k-rows a warp), 8 warps along K, 8 loads of B in flight.
SKINNY_DEFAULT = Config(ROWS=16, COL_VECS=8, WARPS=8, K_STEPS=8)

# Its search (16 in all): for 8 and 16 rows, the strip's width (4 x COL_VECS
# columns: more blocks when narrower) and the loads in flight (16 loads only
# for 8 rows: with 16 rows ptxas spills on sm_80, 255 registers); for 1, 2 and 4
# rows (decoding's matrix-vector products, bandwidth-bound), configurations
# that keep B's bandwidth: 12 loads in flight per thread and strips of 8 or 16
# columns in blocks of 4 warps (512 or 256 blocks at N = 4096: 2 to 4 per SM),
# or of 32 in blocks of 8. 12 loads, not 16: their addresses and values fit
# 128 registers (ptxas: 93 to 128), so four blocks of 4 warps share an SM; 16
# take 128 to 138, three blocks, and 512 blocks would need two waves.
SKINNY_SEARCH = (
    *(Config(ROWS=r, COL_VECS=v) for r in (8, 16) for v in (4, 8, 16) if (r, v) != (16, 8)),
    Config(ROWS=8, K_STEPS=16),
    *(Config(ROWS=r, COL_VECS=v, WARPS=4, K_STEPS=12) for r in (1, 2, 4) for v in (2, 4)),
    *(Config(ROWS=r, K_STEPS=12) for r in (1, 2, 4)),
)


def skinny_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """sgemm_skinny's grid: a block per strip of 4 x COL_VECS columns of C, all M rows."""
    return lambda s, block_edge: (cdiv(s.n, 4 * c["COL_VECS"]), 1, 1)


def _skinny_chunk(c: Config) -> int:
    """k-rows of one chunk of A (KC in 20_skinny.cu)."""
    return c["WARPS"] * (32 // c["COL_VECS"]) * c["K_STEPS"]


def _skinny_smem_bytes(c: Config) -> int:
    """A chunk of A (ROWS x KC) or, after it, the warps' sums (WARPS x ROWS x 4 COL_VECS), in one array."""
    return 4 * max(c["ROWS"] * _skinny_chunk(c), c["WARPS"] * c["ROWS"] * 4 * c["COL_VECS"])


def _skinny_cgma(c: Config) -> float:
    """Per chunk a thread loads K_STEPS float4s of B and ROWS x KC / threads =
    ROWS x K_STEPS / COL_VECS elements of A, for 2 x ROWS x 4 x K_STEPS FLOPs."""
    rows, vecs = c["ROWS"], c["COL_VECS"]
    return 8 * rows * vecs / (vecs + rows)


def _skinny_rules(c: Config) -> list[str]:
    return (
        needs(c["COL_VECS"] in (2, 4, 8, 16, 32), "COL_VECS must be 2, 4, 8, 16 or 32 (a warp's lanes split evenly)")
        + needs(1 <= c["ROWS"] <= 16, "ROWS must be from 1 to 16 (4 x ROWS sums per thread)")
        + needs(c["K_STEPS"] >= 1, "K_STEPS must be at least 1")
    )


def _block_holds(side: str, parameter: str, held: int, what: str) -> tuple[Constraint, ...]:
    """A skinny rung's limit: a block holds the sums of all ``held`` rows (or
    columns) of C, so M (or N, the ``side``) must not exceed that."""
    why = (
        f"a block holds the sums of {parameter} = {held} {what}; use a configuration with "
        f"{parameter} >= {side.upper()} (16 at most), or a tiled rung such as sgemm_small_tile for more {what}"
    )
    return (at_most(side, held, why),)


def _skinny_rows_fit(c: Config) -> tuple[Constraint, ...]:
    return _block_holds("m", "ROWS", c["ROWS"], "rows")


# sgemm_skinny_n's default: up to 16 columns, 8 lanes along each row of A (128
# bytes per load: whole lines), one row a thread, 4 warps (16 rows a block),
# 8 loads of A in flight per thread.
SKINNY_N_DEFAULT = Config(COLS=16, ROW_LANES=8, THREAD_ROWS=1, WARPS=4, K_STEPS=8)

# Its search (16 in all): the columns a block holds (the dispatcher's ranking
# prefers the fewest that cover N), two rows a thread (each value of B serves
# both), the lanes per row (a warp per row for few rows), the warps (2: twice
# the blocks, 8 rows each) and the loads in flight. Two chunks of B must fit
# 48 KB: at 16 columns and 8 lanes a row, K_STEPS 8 at most; more loads in
# flight come with fewer columns.
SKINNY_N_SEARCH = (
    *(Config(COLS=c) for c in (1, 2, 4, 8)),
    Config(THREAD_ROWS=2),
    Config(THREAD_ROWS=2, COLS=8),
    Config(THREAD_ROWS=2, COLS=4, K_STEPS=16),
    Config(WARPS=8),
    Config(WARPS=2),
    Config(WARPS=2, K_STEPS=16, COLS=8),
    Config(K_STEPS=4),
    Config(K_STEPS=16, COLS=8),
    Config(ROW_LANES=4),
    Config(ROW_LANES=32, K_STEPS=2),
    Config(ROW_LANES=32, K_STEPS=4, COLS=1),
)


def _skinny_n_rows(c: Config) -> int:
    """Rows of C one block computes (BR in 21_skinny_n.cu)."""
    return c["WARPS"] * (32 // c["ROW_LANES"]) * c["THREAD_ROWS"]


def skinny_n_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """sgemm_skinny_n's grid: a block per BR rows of C, all N columns."""
    return lambda s, block_edge: (cdiv(s.m, _skinny_n_rows(c)), 1, 1)


def _skinny_n_smem_bytes(c: Config) -> int:
    """Two chunks of B: KC / 4 groups of 4 k-rows each, each padded to 4 x (COLS | 1) floats."""
    return 2 * 4 * c["ROW_LANES"] * c["K_STEPS"] * 4 * (c["COLS"] | 1)


def _skinny_n_cgma(c: Config) -> float:
    """Per chunk a thread loads K_STEPS x THREAD_ROWS float4s of A and KC x
    COLS / threads elements of B, for 8 x K_STEPS x THREAD_ROWS x COLS FLOPs."""
    a_loads = c["K_STEPS"] * c["THREAD_ROWS"]
    b_loads = 4 * c["ROW_LANES"] * c["K_STEPS"] * c["COLS"] / (32 * c["WARPS"])
    return 8 * a_loads * c["COLS"] / (a_loads + b_loads)


def _skinny_n_rules(c: Config) -> list[str]:
    return (
        needs(c["COLS"] in (1, 2, 4, 8, 16), "COLS must be 1, 2, 4, 8 or 16")
        + needs(c["ROW_LANES"] in (4, 8, 16, 32), "ROW_LANES must be 4, 8, 16 or 32 (a warp's lanes split evenly)")
        + needs(c["THREAD_ROWS"] >= 1 and c["K_STEPS"] >= 1, "THREAD_ROWS and K_STEPS must be at least 1")
        + needs(
            _skinny_n_smem_bytes(c) <= 48 * 1024,
            "two chunks of B (2 x 4 x ROW_LANES x K_STEPS x 4 x (COLS | 1) bytes) must fit 48 KB of static "
            "shared memory: fewer K_STEPS, ROW_LANES or COLS",
        )
    )


def _skinny_n_cols_fit(c: Config) -> tuple[Constraint, ...]:
    return _block_holds("n", "COLS", c["COLS"], "columns")


# sgemm_gemv_split's default (issue 21, third round): one row, strips of 128
# columns (a warp reads 512 contiguous bytes of a row of B), 4 warps, 3 quads
# (12 loads of B) in flight per thread, K in 16 slices: 32 x 16 = 512 blocks
# at N = 4096, one wave of 4 per SM on 132.
GEMV_SPLIT_DEFAULT = Config(ROWS=1, COL_VECS=32, WARPS=4, QUADS=3, SPLITS=16)

# Its search (13 in all): 2 and 4 rows (4 with 2 quads: the quads' A registers
# grow with the rows), the split count for fewer or more blocks (8: 256 blocks,
# two per SM; 32: two waves), 8-warp blocks, the loads in flight, and strips of
# 32 or 64 columns (128 or 256 bytes of a row per lane group) with fewer slices
# for the same 512 blocks.
GEMV_SPLIT_SEARCH = (
    Config(ROWS=2),
    Config(ROWS=4, QUADS=2),
    Config(SPLITS=8),
    Config(SPLITS=32),
    Config(WARPS=8, SPLITS=8),
    Config(QUADS=2),
    Config(QUADS=4),
    Config(COL_VECS=8, SPLITS=4),
    Config(COL_VECS=8, SPLITS=4, ROWS=2),
    Config(COL_VECS=8, SPLITS=4, ROWS=4, QUADS=2),
    Config(COL_VECS=16, SPLITS=8),
    Config(ROWS=2, SPLITS=8),
)


def gemv_split_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """sgemm_gemv_split's grid: a block per strip of 4 x COL_VECS columns (x) and slice of K (y)."""
    return lambda s, block_edge: (cdiv(s.n, 4 * c["COL_VECS"]), c["SPLITS"], 1)


def _gemv_split_workspace(c: Config) -> Callable[[Shape, int], int]:
    """One 4-byte counter per strip, padded to 16 bytes, then SPLITS partial
    strips of ROWS x 4 COL_VECS floats per strip (see 22_gemv_split.cu)."""
    strip_bytes = 4 * c["ROWS"] * 4 * c["COL_VECS"]
    return lambda s, blocks: cdiv(4 * (blocks // c["SPLITS"]), 16) * 16 + blocks * strip_bytes


def _gemv_split_rules(c: Config) -> list[str]:
    return (
        needs(c["COL_VECS"] in (8, 16, 32), "COL_VECS must be 8, 16 or 32 (row pieces of whole 128-byte lines)")
        + needs(1 <= c["ROWS"] <= 4, "ROWS must be from 1 to 4 (a quad holds ROWS float4s of A)")
        + needs(c["QUADS"] >= 1, "QUADS must be at least 1")
        + needs(c["SPLITS"] >= 2, "SPLITS must be at least 2 (one slice is sgemm_skinny's job)")
    )


def _gemv_rows_fit(c: Config) -> tuple[Constraint, ...]:
    rows = c["ROWS"]
    why = (
        f"a block holds the sums of ROWS = {rows} rows; use a configuration with ROWS >= M (4 at most), "
        "or sgemm_skinny for up to 16 rows"
    )
    return (at_most("m", rows, why),)


RUNGS: tuple[Rung, ...] = (
    Rung(
        id="sgemm_coalesced",
        source="01_coalesced.cu",
        summary="one output per thread, threadIdx.x along a row of C (coalesced B and C), any size",
        default=Config(BX=32, BY=32),
        choices={"BX": (32,), "BY": (8, 16, 32)},
        threads=lambda c: c["BX"] * c["BY"],
        tile=lambda c: (c["BY"], c["BX"]),
        block=lambda c: (c["BX"], c["BY"], 1),
        outputs=lambda c: 1,
        fragments=lambda c: 2,
        max_accumulators=MAX_ACCUMULATORS,
        smem_bytes=lambda c: 0,
        cgma=lambda c: 1.0,
    ),
    Rung(
        id="sgemm_smem",
        source="02_smem.cu",
        summary="TILE x TILE tiles of A and B in shared memory, zero-filled at the edges",
        default=Config(TILE=32),
        choices={"TILE": (16, 32)},
        threads=lambda c: c["TILE"] ** 2,
        tile=lambda c: (c["TILE"], c["TILE"]),
        block=lambda c: (c["TILE"], c["TILE"], 1),
        outputs=lambda c: 1,
        fragments=lambda c: 2,
        max_accumulators=MAX_ACCUMULATORS,
        smem_bytes=lambda c: 2 * 4 * c["TILE"] ** 2,
        cgma=lambda c: float(c["TILE"]),
    ),
    Rung(
        id="sgemm_1d_blocktile",
        source="03_1d_blocktile.cu",
        summary="BM x BN block tile; each thread TM outputs down a column of C",
        default=Config(BM=64, BN=64, BK=8, TM=8),
        choices={"BM": (64, 128), "BN": (64,), "BK": (8,), "TM": (8, 16)},
        threads=lambda c: c["BM"] * c["BN"] // c["TM"],
        outputs=lambda c: c["TM"],
        fragments=lambda c: 2,
        max_accumulators=MAX_ACCUMULATORS,
        smem_bytes=lambda c: 4 * c["BK"] * (c["BM"] + c["BN"]),
        cgma=lambda c: _tile_cgma(c["BM"], c["BN"], 1, 1),
        rules=lambda c: (
            needs(c["BM"] % c["TM"] == 0, "TM must divide BM") + _blocktile_rules(c, c["BM"] * c["BN"] // c["TM"], 1)
        ),
    ),
    Rung(
        id="sgemm_2d_blocktile",
        source="04_2d_blocktile.cu",
        summary="BM x BN block tile; each thread a TM x TN outer product; scalar loads, any size and alignment",
        default=Config(BM=128, BN=128, BK=8, TM=8, TN=8),
        # BK = 16 compiles too, but at 64 x 64 tiles ptxas needs 254 of its 255 registers.
        choices={"BM": (64, 128), "BN": (64, 128), "BK": (8,), "TM": (8,), "TN": (8,)},
        threads=_thread_tile_threads,
        outputs=lambda c: c["TM"] * c["TN"],
        fragments=lambda c: c["TM"] + c["TN"],
        max_accumulators=MAX_ACCUMULATORS,
        smem_bytes=lambda c: 4 * c["BK"] * (c["BM"] + c["BN"]),
        cgma=lambda c: _tile_cgma(c["BM"], c["BN"], 1, 1),
        rules=lambda c: _thread_tile_rules(c) + _blocktile_rules(c, _thread_tile_threads(c), 1),
    ),
    _vector_rung(
        "sgemm_vectorized",
        "05_vectorized.cu",
        "2-D block tile with float4 loads and stores; A tile stored transposed",
        swizzled=False,
    ),
    _vector_rung(
        "sgemm_swizzled",
        "06_swizzled.cu",
        "sgemm_vectorized with an XOR-swizzled A tile and split B fragments: no bank conflicts",
        swizzled=True,
    ),
    _warp_rung(
        "sgemm_warptile",
        "07_warptile.cu",
        "block tile -> warp tile (WM x WN) -> 4 x 4 thread micro-tiles",
        default=Config(BM=128, BN=128, BK=16, WM=32, WN=64, MIN_BLOCKS=2),
        choices={**WARP_TILES, "MIN_BLOCKS": (1, 2)},
        stages=lambda c: 1,
        a_per_access=4,
    ),
    _warp_rung(
        "sgemm_double_buffer",
        "08_double_buffer.cu",
        "sgemm_warptile fed by cp.async into two shared-memory stages",
        default=Config(BM=128, BN=128, BK=16, WM=32, WN=64, MIN_BLOCKS=2),
        choices={**WARP_TILES, "MIN_BLOCKS": (1, 2)},
        stages=lambda c: 2,
        a_per_access=1,
    ),
    _warp_rung(
        "sgemm_multistage",
        "09_multistage.cu",
        "sgemm_double_buffer with a ring of STAGES cp.async stages",
        default=Config(BM=128, BN=128, BK=16, WM=32, WN=64, STAGES=3, MIN_BLOCKS=2),
        choices={**WARP_TILES, "STAGES": (3, 4), "MIN_BLOCKS": (1, 2)},
        stages=lambda c: c["STAGES"],
        a_per_access=1,
    ),
    _warp_rung(
        "sgemm_swizzle_l2",
        "10_swizzle_l2.cu",
        "sgemm_multistage with blocks ordered in groups of GROUP_M tile rows for L2 reuse",
        default=Config(BM=128, BN=128, BK=16, WM=32, WN=64, STAGES=3, GROUP_M=8, MIN_BLOCKS=2),
        # The tile of sgemm_multistage's default; only the order of the blocks varies.
        choices={
            "BM": (128,),
            "BN": (128,),
            "BK": (16,),
            "WM": (32,),
            "WN": (64,),
            "STAGES": (3,),
            "GROUP_M": (4, 8, 16),
            "MIN_BLOCKS": (2,),
        },
        stages=lambda c: c["STAGES"],
        a_per_access=1,
    ),
    _large_rung(
        "sgemm_large_tile",
        "11_large_tile.cu",
        "one block per SM (MIN_BLOCKS = 1): 128 x 256 block tile, 16 x 8 outputs per thread, "
        "next k-slice's fragments loaded while the current one is used",
    ),
    _large_rung(
        "sgemm_lean_loop",
        "12_lean_loop.cu",
        "sgemm_large_tile with each thread's copies worked out once: no bounds arithmetic in the main loop",
    ),
    _large_rung(
        "sgemm_spread_copies",
        "13_spread_copies.cu",
        "sgemm_lean_loop with a tile's copies issued a share per k-slice, each warp's copy reading whole sectors",
        default=SPREAD_DEFAULT,
        rules=lambda c: _large_tile_rules(c) + _spread_rules(c),
    ),
    _large_rung(
        "sgemm_stream_k",
        "14_stream_k.cu",
        "sgemm_spread_copies in persistent blocks; the last partial wave of tiles and the full one before it shared "
        "out along K (stream-K), their partial sums added by the last block to arrive",
        default=SPREAD_DEFAULT,
        rules=lambda c: _large_tile_rules(c) + _spread_rules(c),
        persistent=True,
        workspace=_stream_k_workspace,
        search=STREAM_K_SEARCH,
        grid=stream_k_grid,
    ),
    _large_rung(
        "sgemm_column_order",
        "15_column_order.cu",
        "sgemm_spread_copies (not stream-K) with each k-slice's FFMAs issued a column of outputs at a time",
        default=SPREAD_DEFAULT,
        rules=lambda c: _large_tile_rules(c) + _spread_rules(c),
    ),
    _large_rung(
        "sgemm_edge_strips",
        "16_edge_strips.cu",
        "sgemm_column_order on whole tiles; a last strip of up to 32 rows or columns of C in small blocks at the "
        "end of the grid",
        default=SPREAD_DEFAULT,
        rules=lambda c: _large_tile_rules(c) + _spread_rules(c) + _edge_rules(c),
        grid=edge_strips_grid,
        fixed=EDGE_FACTS,
    ),
    # Rung 17, whole: everything it takes from the rungs below it is named here.
    _large_rung(
        "sgemm_padded_b",
        "17_padded_b.cu",
        "sgemm_edge_strips that, when N % 4 != 0, first copies B with its rows padded to 16 bytes, so the tiles "
        "copy B 16 bytes at a time at every N",
        default=SPREAD_DEFAULT,  # rung 13's: rung 11's tile, four stages
        rules=lambda c: (
            _large_tile_rules(c)  # rung 11: warp tiles, the A swizzle, float4 pieces, a ring, two fragment buffers
            + _spread_rules(c)  # rung 13: copies laid out for 8 warps and whole sectors
            + _edge_rules(c)  # rung 16: the ring's shared memory holds an edge block's chunk and sums
        ),
        grid=padded_b_grid,  # rung 16's grid, then PAD_BLOCKS in whole rows when N % 4 != 0
        workspace=_padded_b_workspace,  # its own: two counters and the padded B
        constraints=(Constraint("B padded to whole 16-byte rows fits 32-bit indexing", _padded_b_fits),),
        fixed=EDGE_FACTS | Config(PAD_BLOCKS=PAD_BLOCKS),  # rung 16's strips, then its own copy's blocks
    ),
)


# Rungs written after the newest stored benchmark (benchmarks/results/*_sgemm.json,
# which docs/sgemm-ladder.md and tests/test_worklog.py hold the catalogue to).
# LADDER.configs() and LADDER.variant() know them, and gemmlab.measure.run.run(kernel_id,
# shape, spec=LADDER.variant(kernel_id, {})) runs them; they move into RUNGS, and with
# it into the catalogue, in the change that stores a benchmark measuring them.
CANDIDATE_RUNGS: tuple[Rung, ...] = (
    _warp_rung(
        "sgemm_small_tile",
        "18_small_tile.cu",
        "sgemm_multistage's ring on 32 to 64-row, 32 to 64-column block tiles, several blocks per SM: every SM busy "
        "at 512 to 1024",
        default=SMALL_TILE_DEFAULT,
        choices={},
        stages=lambda c: c["STAGES"],
        a_per_access=1,
        search=SMALL_TILE_SEARCH,
        dependent_launch=True,  # waits as its first statement (18_small_tile.cu; docs/dispatch.md, 2026-11-28)
    ),
    _warp_rung(
        "sgemm_split_k",
        "19_split_k.cu",
        "sgemm_small_tile's blocks with K cut into SPLITS slices (grid z); the last slice of a tile to finish adds "
        "the partial tiles in slice order",
        default=SPLIT_K_DEFAULT,
        choices={},
        stages=lambda c: c["STAGES"],
        a_per_access=1,
        search=SPLIT_K_SEARCH,
        grid=split_k_grid,
        workspace=_split_k_workspace,
        dependent_launch=True,  # waits as its first statement (19_split_k.cu)
    ),
    Rung(
        id="sgemm_skinny",
        source="20_skinny.cu",
        summary="M of 1 to ROWS (16 at most): a block per strip of columns reads B once, down K, for all M rows; A "
        "staged in shared memory, sums added by shuffles and in shared memory",
        default=SKINNY_DEFAULT,
        search=SKINNY_SEARCH,
        threads=lambda c: 32 * c["WARPS"],
        tile=lambda c: (c["ROWS"], 4 * c["COL_VECS"]),
        grid=skinny_grid,
        shape_rules=_skinny_rows_fit,
        outputs=lambda c: 4 * c["ROWS"],
        fragments=lambda c: 4 * c["K_STEPS"],
        max_accumulators=MAX_ACCUMULATORS,
        smem_bytes=_skinny_smem_bytes,
        cgma=_skinny_cgma,
        rules=_skinny_rules,
    ),
    Rung(
        id="sgemm_skinny_n",
        source="21_skinny_n.cu",
        summary="N of 1 to COLS (16 at most): a few lanes per row of A read it along K in 16-byte loads; B's chunk "
        "in shared memory serves every row; sums added by shuffles",
        default=SKINNY_N_DEFAULT,
        search=SKINNY_N_SEARCH,
        threads=lambda c: 32 * c["WARPS"],
        tile=lambda c: (_skinny_n_rows(c), c["COLS"]),
        grid=skinny_n_grid,
        shape_rules=_skinny_n_cols_fit,
        outputs=lambda c: c["THREAD_ROWS"] * c["COLS"],
        # A's loads in flight, and one float4 of B.
        fragments=lambda c: 4 * c["K_STEPS"] * c["THREAD_ROWS"] + 4,
        max_accumulators=MAX_ACCUMULATORS,
        smem_bytes=_skinny_n_smem_bytes,
        cgma=_skinny_n_cgma,
        rules=_skinny_n_rules,
    ),
    Rung(
        id="sgemm_gemv_split",
        source="22_gemv_split.cu",
        summary="M of 1 to ROWS (4 at most): strips of columns read in whole lines, K cut into SPLITS slices, "
        "no barrier in the loop; the last slice of a strip to finish adds the partial strips in slice order",
        default=GEMV_SPLIT_DEFAULT,
        search=GEMV_SPLIT_SEARCH,
        threads=lambda c: 32 * c["WARPS"],
        tile=lambda c: (c["ROWS"], 4 * c["COL_VECS"]),
        grid=gemv_split_grid,
        workspace=_gemv_split_workspace,
        shape_rules=_gemv_rows_fit,
        outputs=lambda c: 4 * c["ROWS"],
        # The quads in flight: 4 float4s of B and ROWS of A each.
        fragments=lambda c: c["QUADS"] * (16 + 4 * c["ROWS"]),
        max_accumulators=MAX_ACCUMULATORS,
        smem_bytes=lambda c: 4 * c["WARPS"] * c["ROWS"] * 4 * c["COL_VECS"],
        # Per quad a thread loads 4 float4s of B and ROWS float4s of A for 32 ROWS FLOPs.
        cgma=lambda c: 32 * c["ROWS"] / (4 + c["ROWS"]),
        rules=_gemv_split_rules,
    ),
    replace(
        _large_rung(
            "sgemm_cluster_split_k",
            "23_cluster_split_k.cu",
            "sm_90: the large tile with K cut into SPLITS slices, a tile's slices one thread-block cluster; the "
            "partial tiles added in slice order through distributed shared memory, each block adding its share",
            default=CLUSTER_SPLIT_K_DEFAULT,
            rules=_cluster_split_k_rules,
            search=CLUSTER_SPLIT_K_SEARCH,
            grid=cluster_split_k_grid,
            workspace=_cluster_split_k_workspace,
        ),
        smem_bytes=_cluster_split_k_smem_bytes,
        cluster_size=lambda c: c["SPLITS"],
        min_cc=(9, 0),
        dependent_launch=True,  # waits as its first statement (23_cluster_split_k.cu)
    ),
)

LADDER = Ladder("FP32 ladder", RUNGS, _limits, _spec, candidates=CANDIDATE_RUNGS)
SGEMM_KERNELS: tuple[KernelSpec, ...] = LADDER.kernels


def outputs_per_thread(spec: KernelSpec) -> int:
    return LADDER.rung(spec.id).outputs(spec.config or {})


def threads_per_block(spec: KernelSpec) -> int:
    return LADDER.rung(spec.id).threads(spec.config or {})


def block_tile(spec: KernelSpec) -> tuple[int, int]:
    """Rows x columns of C one block computes."""
    return LADDER.rung(spec.id).tile(spec.config or {})
