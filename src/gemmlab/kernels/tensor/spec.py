"""The tensor-core ladder: from WMMA fragments to Hopper's TMA + wgmma with
warp specialisation, persistent blocks and clusters (docs/tensor-ladder.md).

Every rung computes C = A . B^T, with A stored M x K and B stored N x K (both
row-major, "K-major": the layout the tensor cores read without a transpose,
and a linear layer's y = x . W^T), C in float32, accumulated in float32. The
element types:

- ``bfloat16`` and ``float16``: 16-bit inputs, FP32 accumulation;
- ``tf32``: float32 inputs that the tensor cores read with a 10-bit mantissa;
- ``bfloat16-out``: bfloat16 inputs, FP32 accumulation and a bfloat16 C (the
  sums rounded to nearest even); the rungs that store C by TMA take it.

The cuBLAS baseline runs the same layout and types through ``cublasGemmEx``
(compute type CUBLAS_COMPUTE_32F, or CUBLAS_COMPUTE_32F_FAST_TF32 for tf32),
with the same output type.

Rungs from tc_mma on take K with rows of whole 16-byte pieces (K a multiple
of 8 for 16-bit types, of 4 for tf32): 16-byte copies and TMA tensor maps
need 16-byte row strides. tc_wmma takes any K and is the fallback. The Hopper
rungs get their operands as TMA tensor maps, built here for each run
(``cuTensorMapEncodeTiled`` through cuda.core) and passed by value.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from gemmlab.core.arch import sm_limits
from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.ladder import Config, Ladder, Rung, cdiv, grid_rows_fit, grid_y_fits, needs
from gemmlab.kernels.spec import Constraint, KernelSpec
from gemmlab.problems.base import Problem
from gemmlab.problems.tensor import (
    BF16_OUT,
    DTYPES,
    DTYPES_16,
    ROW_BYTES,
    TENSOR,
    prepare_tensor,
    tensor_device_bytes,
    tensor_operands,
)

SOURCE_DOC = "gemmlab tensor-core ladder (beyond the documents)"
MAX_DYNAMIC_SMEM = sm_limits((9, 0)).max_smem_per_block_optin  # the Hopper rungs' opt-in limit per block
WARPGROUP = 128


# --- the rungs ----------------------------------------------------------------


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


def _warp_rules(c: Config) -> list[str]:
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


def _wgmma_rules(c: Config, widths: tuple[int, ...] = WIDTHS) -> list[str]:
    names = ", ".join(str(w) for w in widths[:-1]) + f" or {widths[-1]}"
    return needs(c["BM"] % 64 == 0 and c["BM"] <= 256, "BM must be 64, 128, 192 or 256 (64-row warpgroup slabs)") + (
        needs(c["BN"] in widths, f"BN must be {names} (the N of one wgmma)")
    )


# The warp-specialised rungs' setmaxnreg hand-over: registers per thread that
# the producer warpgroup keeps and that each consumer warpgroup claims (enough
# for a 64 x 256 float32 accumulator slab). Template arguments after the
# configuration; hopper.cuh's RegisterSplit static_asserts the sum the rules
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


def _specialised_rules(c: Config, widths: tuple[int, ...] = WIDTHS, rung_id: str = "") -> list[str]:
    consumers = c["BM"] // 64
    split = register_split(rung_id, consumers)
    wide = consumers == 3 and rung_id in THREE_CONSUMERS and c["BN"] > 192
    return (
        _wgmma_rules(c, widths)
        + needs(
            split_fits(split["PRODUCER_REGS"], split["CONSUMER_REGS"], consumers),
            f"{consumers} consumer warpgroups do not fit the registers a block holds",
        )
        + needs(not wide, "three consumers (BM = 192) hold 64 x 192 sums at most in their 160 registers: BN <= 192")
        + needs(c["STAGES"] >= 2, "STAGES must be at least 2")
    )


def _persistent_rules(c: Config, widths: tuple[int, ...] = WIDTHS, rung_id: str = "") -> list[str]:
    return _specialised_rules(c, widths, rung_id) + needs(c["GROUP_M"] >= 1, "GROUP_M must be at least 1")


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
HOPPER = dict(min_cc=(9, 0), archs=("sm_90a",), tma=True, dynamic_smem=True, k_bytes_multiple=ROWS_16)

RUNGS: tuple[Rung, ...] = (
    Rung(
        id="tc_wmma",
        source="01_wmma.cu",
        summary="WMMA fragments (16 x 16 x 16, tf32 16 x 16 x 8) from padded shared tiles; any M, N, K",
        dtypes=DTYPES,
        default=Config(BM=128, BN=128, BK=32, WM=64, WN=32),
        search=(Config(BK=16), Config(WM=32)),
        threads=warp_threads,
        smem_bytes=lambda c: 0,
        sass=("HMMA",),
        min_cc=(8, 0),  # mma.sync with bf16, cp.async
        rules=lambda c: (
            _warp_rules(c)
            + needs(c["BK"] % 16 == 0, "BK must be a multiple of 16")
            # Static shared memory: padded rows of BK + 8 tf32 elements (the widest type).
            + needs((c["BM"] + c["BN"]) * (c["BK"] + 8) * 4 <= 48 * 1024, "the tf32 tiles must fit 48 KB")
        ),
        cgma=reuse_cgma,
    ),
    Rung(
        id="tc_mma",
        source="02_mma.cu",
        summary="mma.sync m16n8k16 fed by ldmatrix.x4 from 128-byte-swizzled tiles; 16-byte loads",
        dtypes=DTYPES_16,
        default=Config(BM=128, BN=128, WM=64, WN=32),
        search=(Config(WM=32, WN=64), Config(BM=64, WM=32, WN=32), Config(BN=64, WM=32, WN=32)),
        threads=warp_threads,
        smem_bytes=lambda c: 0,
        sass=("HMMA", "LDSM"),
        min_cc=(8, 0),  # mma.sync with bf16, cp.async
        rules=_warp_rules,
        cgma=reuse_cgma,
        k_bytes_multiple=ROWS_16,
    ),
    Rung(
        id="tc_mma_pipeline",
        source="03_mma_pipeline.cu",
        summary="tc_mma fed by a ring of STAGES cp.async stages",
        dtypes=DTYPES_16,
        default=Config(BM=128, BN=128, WM=64, WN=32, STAGES=3),
        search=(Config(STAGES=4), Config(BN=256, WN=64), Config(WM=32, WN=64), Config(BM=256, WN=64)),
        threads=warp_threads,
        smem_bytes=lambda c: ring_bytes(c, 0),
        sass=("HMMA", "LDSM", "LDGSTS"),
        min_cc=(8, 0),  # mma.sync with bf16, cp.async
        rules=lambda c: _warp_rules(c) + needs(c["STAGES"] >= 2, "STAGES must be at least 2"),
        cgma=reuse_cgma,
        dynamic_smem=True,
        k_bytes_multiple=ROWS_16,
    ),
    Rung(
        id="tc_wgmma",
        source="04_wgmma.cu",
        summary="sm_90a: TMA tile loads on mbarriers, wgmma from shared memory; one barrier per tile",
        dtypes=DTYPES,
        default=Config(BM=128, BN=128, STAGES=4),
        search=(Config(BN=256, STAGES=3), Config(STAGES=5), Config(BM=64, BN=256)),
        threads=lambda c: c["BM"] // 64 * WARPGROUP,
        smem_bytes=lambda c: ring_bytes(c, 1),
        sass=("HGMMA", "UTMALDG"),
        rules=lambda c: _wgmma_rules(c) + needs(c["STAGES"] >= 1, "STAGES must be at least 1"),
        cgma=reuse_cgma,
        **HOPPER,
    ),
    Rung(
        id="tc_warpspecialized",
        source="05_warpspecialized.cu",
        summary="sm_90a: a TMA producer warpgroup, wgmma consumer warpgroups, full/empty barriers, setmaxnreg",
        dtypes=DTYPES,
        default=Config(BM=128, BN=256, STAGES=4),
        search=(Config(STAGES=3), Config(BN=128, STAGES=6), Config(BM=256, BN=128)),
        threads=lambda c: (c["BM"] // 64 + 1) * WARPGROUP,
        smem_bytes=lambda c: ring_bytes(c, 2),
        sass=("HGMMA", "UTMALDG", "USETMAXREG"),
        rules=_specialised_rules,
        cgma=reuse_cgma,
        fixed=REGISTER_SPLIT,
        **HOPPER,
    ),
    Rung(
        id="tc_persistent",
        source="06_persistent.cu",
        summary="sm_90a: tc_warpspecialized with one block per SM over tiles in GROUP_M-row groups (L2 order)",
        dtypes=DTYPES,
        default=Config(BM=128, BN=256, STAGES=4, GROUP_M=8),
        search=(Config(GROUP_M=4), Config(GROUP_M=16), Config(STAGES=3), Config(BM=256, BN=128)),
        threads=lambda c: (c["BM"] // 64 + 1) * WARPGROUP,
        smem_bytes=lambda c: ring_bytes(c, 2),
        sass=("HGMMA", "UTMALDG", "USETMAXREG"),
        rules=_persistent_rules,
        persistent=True,
        cgma=reuse_cgma,
        fixed=REGISTER_SPLIT,
        **HOPPER,
    ),
    Rung(
        id="tc_cluster",
        source="07_cluster.cu",
        summary="sm_90a: tc_persistent in clusters of 2 blocks along M sharing B by TMA multicast",
        dtypes=DTYPES,
        default=Config(BM=128, BN=256, STAGES=4, GROUP_M=8),
        search=(Config(GROUP_M=4), Config(GROUP_M=16), Config(STAGES=3)),
        threads=lambda c: (c["BM"] // 64 + 1) * WARPGROUP,
        smem_bytes=lambda c: ring_bytes(c, 2),
        sass=("HGMMA", "UTMALDG", "USETMAXREG"),
        rules=_persistent_rules,
        persistent=True,
        cluster=2,
        cgma=reuse_cgma,
        fixed=REGISTER_SPLIT,
        **HOPPER,
    ),
    Rung(
        id="tc_tma_store",
        source="08_tma_store.cu",
        summary="sm_90a: tc_cluster storing C (float32, or bfloat16) from swizzled shared boxes by TMA",
        dtypes=(*DTYPES, BF16_OUT),
        default=Config(BM=128, BN=256, STAGES=4, GROUP_M=8, C_BOXES=2),
        search=(
            Config(C_BOXES=1),
            Config(STAGES=3, C_BOXES=4),
            Config(GROUP_M=16),
            Config(BN=192),
            Config(BN=144),
            # 192 x 192, three consumers: 94% of cuBLAS at 3000 on an H100 where 128 x 192 made 86%; with
            # STAGES = 3 (C_BOXES = 2, the same shared memory) 83% (docs/tensor-ladder.md, round 9).
            Config(BM=192, BN=192, C_BOXES=1),
            # Boxes for a warpgroup's whole 64 x 192 slab of bfloat16 C (3): one fence, then every store
            # (08_tma_store.cu). 8192 x 8192 x 256 on an H200: 67.6 us against 70.6 with C_BOXES = 2
            # (docs/tensor-ladder.md, round 15).
            Config(BN=192, C_BOXES=3),
        ),
        threads=lambda c: (c["BM"] // 64 + 1) * WARPGROUP,
        smem_bytes=lambda c: ring_bytes(c, 2) + c_boxes_bytes(c),
        sass=("HGMMA", "UTMALDG", "UTMASTG", "USETMAXREG"),
        rules=lambda c: (
            _persistent_rules(c, WIDEST_CHOICE, "tc_tma_store") + needs(c["C_BOXES"] >= 1, "C_BOXES must be at least 1")
        ),
        persistent=True,
        cluster=2,
        fixed=REGISTER_SPLIT | Config(C_BOX_ROWS=C_BOX_ROWS),  # tc_cluster's split, then its own boxes of C
        cgma=reuse_cgma,
        **HOPPER,
    ),
)


# --- candidate rungs (issue 21) --------------------------------------------------
#
# Rungs written after the newest stored tensor benchmark (benchmarks/results/
# *_tensor.json, which docs/tensor-ladder.md and tests/test_worklog.py hold the
# catalogue to). LADDER.configs() and LADDER.variant() know them, and so does
# the dispatcher's search (catalogue.ladder); they move into RUNGS, and with it
# into the catalogue, in the change that stores a benchmark measuring them.

# tc_any_k: 16-byte pieces that cover a 128-byte slice of a row starting anywhere.
RAW_ROW_BYTES = 9 * 16


def _any_k_bytes(c: Config) -> int:
    """Two swizzled tiles of (BM + BN) rows of 128 bytes, then STAGES raw stages of 144-byte rows."""
    rows = c["BM"] + c["BN"]
    return 2 * rows * ROW_BYTES + c["STAGES"] * rows * RAW_ROW_BYTES


def _split_k_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """x along N, y along M; with a cluster of two, x along M (rounded up to
    whole clusters), so that a cluster's blocks share one strip of B."""
    cluster = c["CLUSTER"]
    if cluster == 1:
        return lambda s, b: (cdiv(s.n, c["BN"]), cdiv(s.m, c["BM"]), c["SPLITS"])
    return lambda s, b: (cdiv(cdiv(s.m, c["BM"]), cluster) * cluster, cdiv(s.n, c["BN"]), c["SPLITS"])


def split_k_workspace(c: Config) -> Callable[[Shape, int], int]:
    """tc_split_k's workspace: one 4-byte counter per tile of the grid (a
    cluster's padding tile too), padded to 16 bytes, then SPLITS partial tiles
    of BM x BN floats per tile (10_split_k.cu)."""
    grid = _split_k_grid(c)

    def size(s: Shape, blocks: int) -> int:
        x, y, _ = grid(s, blocks)
        tiles = x * y
        return cdiv(4 * tiles, 16) * 16 + tiles * c["SPLITS"] * c["BM"] * c["BN"] * 4

    return size


def _split_tail_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """Clusters of two along M, MAX_SLICES per cluster tile of 2 BM x BN: as
    many as can share the k-tiles of the fewest tiles (the runner launches no
    more than the GPU holds at once)."""
    return lambda s, b: (cdiv(s.m, 2 * c["BM"]) * cdiv(s.n, c["BN"]) * 2 * c["MAX_SLICES"], 1, 1)


def split_tail_workspace(c: Config) -> Callable[[Shape, int], int]:
    """tc_split_tail's workspace for a grid of ``blocks`` (clusters of two): a
    4-byte counter per block, padded to 16 bytes, then two BM x BN float32
    partials per block (each block row of a cluster numbers the pieces of the
    split tiles below twice the clusters; 13_split_tail.cu)."""
    return lambda s, blocks: cdiv(4 * blocks, 16) * 16 + 2 * blocks * c["BM"] * c["BN"] * 4


def _split_k_rules(c: Config) -> list[str]:
    return (
        _specialised_rules(c)
        + needs(c["SPLITS"] >= 2, "SPLITS must be at least 2")
        + needs(c["CLUSTER"] in (1, 2), "CLUSTER must be 1 or 2 (blocks sharing B by TMA multicast)")
    )


# tc_gemv: rows of the big operand per block (the M of one mma.sync).
GEMV_ROWS = 16


def gemv_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """One block per 16 rows of the streamed operand: B's when M is small, else A's."""
    return lambda s, b: (cdiv(s.n if s.m <= c["MAX_M"] else s.m, GEMV_ROWS), 1, 1)


def _gemv_small_side(c: Config) -> tuple[Constraint, ...]:
    most = c["MAX_M"]

    def check(shape: Shape, block_edge: int) -> str | None:
        if min(shape.m, shape.n) > most:
            return (
                f"M = {shape.m} and N = {shape.n} are both over {most}: tc_gemv streams one operand past at most "
                f"{most} rows of the other"
            )
        return None

    return (Constraint(f"M or N at most {most}", check),)


def _gemv_rules(c: Config) -> list[str]:
    return (
        needs(c["MAX_M"] in (8, 16), "MAX_M must be 8 or 16 (one or two 8-column mma operands)")
        + needs(c["UNROLL"] >= 1, "UNROLL must be at least 1")
        + needs(c["PREFETCH"] in (0, 1) and c["NO_L1"] in (0, 1), "PREFETCH and NO_L1 must be 0 or 1")
    )


# tc_small: tiles of 64 or 128 rows and columns, the slices of K of one tile
# in a cluster (SPLITS blocks along x), their partials added through
# distributed shared memory in the ring they no longer need.
SMALL_SPLITS = (1, 2, 4, 8)  # a portable cluster holds at most 8 blocks


def _small_grid(c: Config) -> Callable[[Shape, int], Dim3]:
    """x: the tile rows, each as SPLITS blocks in a row, PAIR tile rows to a
    cluster (a pair's second row may lie past M); y: the tile columns. With
    PAIR_COLS = 2, x: the tile columns, two to a cluster (the second may lie
    past N); y: the tile rows."""
    pair = c["PAIR"]
    if c["PAIR_COLS"] == 2:
        return lambda s, b: (cdiv(cdiv(s.n, c["BN"]), 2) * 2, cdiv(s.m, c["BM"]), 1)
    return lambda s, b: (cdiv(cdiv(s.m, c["BM"]), pair) * pair * c["SPLITS"], cdiv(s.n, c["BN"]), 1)


def _small_rules(c: Config) -> list[str]:
    ring = c["STAGES"] * (c["BM"] + c["BN"]) * ROW_BYTES
    splits = "SPLITS must be 1, 2, 4 or 8 (a cluster of at most 8 blocks, each adding an equal share of the tile)"
    partial = "the float32 partial tile must fit the ring it reuses: more STAGES"
    return (
        needs(c["BM"] in (64, 128), "BM must be 64 or 128 (one or two consumer warpgroups)")
        + needs(c["BN"] in (64, 128), "BN must be 64 or 128 (the N of one wgmma)")
        + needs(c["STAGES"] >= 2, "STAGES must be at least 2")
        + needs(c["SPLITS"] in SMALL_SPLITS, splits)
        + needs(c["SPLITS"] == 1 or c["BM"] * c["BN"] * 4 <= ring, partial)
        + needs(c["PAIR"] in (1, 2), "PAIR must be 1 or 2 (row tiles sharing B by multicast)")
        + needs(c["PAIR"] * c["SPLITS"] <= 8, "PAIR x SPLITS must be at most 8 (the blocks of a portable cluster)")
        + needs(c["PAIR_COLS"] in (1, 2), "PAIR_COLS must be 1 or 2 (column tiles sharing A by multicast)")
        + needs(
            c["PAIR_COLS"] == 1 or (c["PAIR"] == 1 and c["SPLITS"] == 1),
            "PAIR_COLS = 2 takes PAIR = 1 and SPLITS = 1 (a cluster of the two column tiles only)",
        )
    )


CANDIDATE_RUNGS: tuple[Rung, ...] = (
    Rung(
        id="tc_any_k",
        source="09_any_k.cu",
        summary="sm_90a: wgmma from tiles the threads shift into place from 16-byte cp.async pieces; any K "
        "(odd too), float32 or bfloat16 C",
        dtypes=(*DTYPES_16, BF16_OUT),
        default=Config(BM=128, BN=128, STAGES=3),
        search=(Config(STAGES=4), Config(BN=256, STAGES=2), Config(BM=64, STAGES=4), Config(BM=192, STAGES=2)),
        threads=lambda c: c["BM"] // 64 * WARPGROUP,
        smem_bytes=_any_k_bytes,
        sass=("HGMMA", "LDGSTS"),
        rules=lambda c: _wgmma_rules(c) + needs(c["STAGES"] >= 2, "STAGES must be at least 2"),
        cgma=reuse_cgma,
        min_cc=(9, 0),
        archs=("sm_90a",),
        dynamic_smem=True,
    ),
    Rung(
        id="tc_split_k",
        source="10_split_k.cu",
        summary="sm_90a: tc_warpspecialized over one of SPLITS slices of K per block; the last block of a tile "
        "adds the float32 partials in slice order",
        dtypes=(*DTYPES, BF16_OUT),
        default=Config(BM=128, BN=128, STAGES=4, SPLITS=4, CLUSTER=1),
        search=(
            Config(SPLITS=2),
            Config(SPLITS=3),
            Config(SPLITS=8),
            Config(BN=256, SPLITS=2),
            Config(BN=256, SPLITS=4, STAGES=3),
            Config(BN=256, SPLITS=4, STAGES=4),
            # cuBLAS's kernel at 1024 x 1024 x 16384 on an H100 (its name,
            # benchmarks/results/2026-11-24k_h100_cublas-kernels.txt) is 128 x 128
            # in two slices with a ring of 6 and clusters of two. Deeper rings
            # measured faster there (4 to 7 stages: 58.5 to 53.9 us, 2026-11-24k);
            # clusters of two sharing B slower (62.7 us at 6 stages against 55.3).
            Config(SPLITS=2, STAGES=5),
            Config(SPLITS=2, STAGES=6),
            Config(SPLITS=2, STAGES=7),
            Config(SPLITS=4, STAGES=7),
            Config(SPLITS=2, CLUSTER=2, STAGES=7),
        ),
        threads=lambda c: (c["BM"] // 64 + 1) * WARPGROUP,
        smem_bytes=lambda c: ring_bytes(c, 2),
        sass=("HGMMA", "UTMALDG", "USETMAXREG"),
        rules=_split_k_rules,
        cgma=reuse_cgma,
        fixed=REGISTER_SPLIT,
        grid=_split_k_grid,
        shape_rules=lambda c: (grid_rows_fit(c["BM"]) if c["CLUSTER"] == 1 else grid_y_fits(_split_k_grid(c)),),
        workspace=split_k_workspace,
        cluster_size=lambda c: c["CLUSTER"],
        multicast=lambda c: c["CLUSTER"],
        **HOPPER,
    ),
    Rung(
        id="tc_gemv",
        source="11_gemv.cu",
        summary="mma.sync fed straight from 16-byte loads: one operand streamed past at most MAX_M rows of "
        "the other (M or N of 1 to 16)",
        dtypes=(*DTYPES_16, BF16_OUT),
        # PREFETCH = 1 keeps two batches of loads live per lane (11_gemv.cu's
        # software pipeline; UNROLL = 2 at MAX_M = 16 is 66 registers, UNROLL = 4
        # 142, one block of 8 warps per SM), NO_L1 = 1 streams past L1. Both
        # measured slower on the H100 at the 16-row shapes than loading and
        # multiplying a batch in one iteration (11_gemv.cu's header), so the
        # default is the latter and the tuner tries both.
        default=Config(MAX_M=16, WARPS=8, UNROLL=2, PREFETCH=0, NO_L1=0),
        search=(
            Config(UNROLL=4),
            Config(WARPS=16),
            Config(MAX_M=8, UNROLL=4),
            Config(MAX_M=8, UNROLL=8),
            Config(PREFETCH=1, NO_L1=1),
            Config(PREFETCH=1),
            Config(NO_L1=1),
            Config(WARPS=4, UNROLL=4, PREFETCH=1, NO_L1=1),
            Config(UNROLL=1),
        ),
        threads=lambda c: c["WARPS"] * 32,
        smem_bytes=lambda c: 0,
        sass=("HMMA",),
        rules=_gemv_rules,
        cgma=lambda c: 2 * c["MAX_M"],  # each element of the streamed operand meets up to MAX_M rows
        tile=lambda c: (c["MAX_M"], GEMV_ROWS),
        grid=gemv_grid,
        shape_rules=_gemv_small_side,
        min_cc=(8, 0),  # mma.sync with bf16
        k_bytes_multiple=ROWS_16,
        # Not launched with PDL: with a wait before its first load it ran 4-22%
        # slower on an H200 (docs/dispatch.md, 2026-11-28), where tc_small gained.
    ),
    Rung(
        id="tc_small",
        source="12_small.cu",
        dependent_launch=True,  # 12_small.cu waits after its barriers are set up (docs/dispatch.md, 2026-11-28)
        summary="sm_90a: 64- or 128-wide tiles on a short TMA ring fed by one producer warp; SPLITS slices of K "
        "per tile in a cluster, added in slice order through distributed shared memory",
        dtypes=(*DTYPES, BF16_OUT),
        default=Config(BM=64, BN=128, STAGES=4, SPLITS=1, PAIR=1, PAIR_COLS=1),
        search=(
            Config(BN=64),
            Config(BN=64, SPLITS=2),
            Config(BN=64, SPLITS=4),
            Config(SPLITS=2),
            Config(BM=128),
            Config(BM=128, BN=64, SPLITS=2),
            Config(BM=128, BN=64, SPLITS=4),
            Config(BM=128, SPLITS=4),
            Config(BM=128, SPLITS=8, STAGES=3),  # 96 KB: two blocks per SM
            # Deeper rings (cuBLAS runs 8 stages of 128 x 64 at 1024 and 13 of 64 x 64
            # at 128 x 4096 x 4096 on an H100): measured 2026-11-24k, 4 to 8 stages
            # took 1024 from 93% to 96-100% of cuBLAS, 128 x 4096 x 4096 from 93% to 116-118%.
            Config(BM=128, BN=64, STAGES=8),
            Config(BM=128, BN=64, STAGES=9),
            Config(BN=128, STAGES=8),
            Config(BN=64, STAGES=8),
            Config(BM=128, BN=64, SPLITS=2, STAGES=8),
            # 64 or 128 rows (or columns) against 4096 x 4096 (the full suite's
            # skinny shapes): 64 x 4096 x 4096 from 72.0% to 90.2% of cuBLAS and
            # 4096 x 128 x 4096 from 77.0% to 83.9% on an H100 (2026-11-24k).
            Config(BN=64, SPLITS=2, STAGES=8),
            Config(BN=128, SPLITS=2, STAGES=8),
            # Pairs of column tiles sharing A by multicast (round 13; cuBLAS's
            # clusters at 1000 and 1024, 128 x 64 tiles, 1 x 2): at 1000 the
            # 128 x 64 pair took 8.33 us, 101% of cuBLAS, against 9.35 for the
            # same tiles in row pairs (PAIR = 2, round 12) and 9.60 for the best
            # without pairs (H100, 2026-11-25a_h100_tc-small-column-pairs.txt).
            # Row pairs lost to column pairs wherever both were timed: not searched.
            Config(BM=128, BN=64, STAGES=8, PAIR_COLS=2),
            Config(BN=128, STAGES=8, PAIR_COLS=2),
        ),
        threads=lambda c: c["BM"] // 64 * WARPGROUP + 32,
        smem_bytes=lambda c: ring_bytes(c, 2),
        sass=("HGMMA", "UTMALDG"),
        rules=_small_rules,
        cgma=reuse_cgma,
        grid=_small_grid,
        shape_rules=lambda c: (grid_y_fits(_small_grid(c)),),
        cluster_size=lambda c: c["SPLITS"] * c["PAIR"] * c["PAIR_COLS"],
        multicast=lambda c: c["PAIR"],
        multicast_a=lambda c: c["PAIR_COLS"],
        **HOPPER,
    ),
    Rung(
        id="tc_split_tail",
        source="13_split_tail.cu",
        summary="sm_90a: tc_tma_store over the full waves of tiles, then the last wave's k-tiles shared out "
        "equally across every cluster (stream-K), each tile's pieces added in K order",
        dtypes=(*DTYPES, BF16_OUT),
        # MAX_SLICES = 4: the fastest split at 3000, 3072 and 5120 on an H100 and an
        # H200 (docs/tensor-ladder.md, round 7). MAX_SLICES = 1 would be tc_tma_store.
        default=Config(BM=128, BN=256, STAGES=4, GROUP_M=8, MAX_SLICES=4, C_BOXES=2),
        search=(
            Config(MAX_SLICES=2),
            Config(MAX_SLICES=8),
            Config(MAX_SLICES=16),
            Config(BN=128, STAGES=6),
            Config(BN=128, STAGES=6, MAX_SLICES=16),
            Config(BN=192, MAX_SLICES=4),
        ),
        threads=lambda c: (c["BM"] // 64 + 1) * WARPGROUP,
        smem_bytes=lambda c: ring_bytes(c, 2) + c_boxes_bytes(c),
        sass=("HGMMA", "UTMALDG", "UTMASTG", "USETMAXREG"),
        rules=lambda c: (
            _persistent_rules(c, WIDE)
            + needs(c["MAX_SLICES"] >= 1, "MAX_SLICES must be at least 1")
            + needs(c["C_BOXES"] >= 1, "C_BOXES must be at least 1")
        ),
        persistent=True,
        cluster=2,
        grid=_split_tail_grid,
        cgma=reuse_cgma,
        fixed=REGISTER_SPLIT | Config(C_BOX_ROWS=C_BOX_ROWS),  # tc_tma_store's split and boxes of C
        workspace=split_tail_workspace,
        **HOPPER,
    ),
)


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


def _spec(rung: Rung, c: Config) -> KernelSpec:
    threads = rung.threads(c)
    bm, bn = rung.tile(c)
    smem = rung.smem_bytes(c) if rung.dynamic_smem else 0
    cgma = rung.cgma(c)
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
    return KernelSpec(
        id=rung.id,
        source=f"tensor/{rung.source}",
        function=rung.id,
        source_doc=SOURCE_DOC,
        summary=rung.summary,
        dtypes=rung.dtypes,
        block_edges=(),
        grid=_grid(rung, c),
        block=lambda s, b: (threads, 1, 1),
        constraints=constraints,
        dynamic_smem_bytes=lambda s, b, dtype: smem,
        k_bytes_multiple=rung.k_bytes_multiple,
        # A tensor map of C: its rows' stride must be whole 16-byte pieces too.
        n_bytes_multiple=16 if c_box_rows else 0,
        # A and B once (element size), C written once in float32: counted in input elements.
        min_elems_moved=lambda s: s.m * s.k + s.n * s.k + 2 * s.m * s.n,
        cgma=lambda s, b: cgma,
        any_size_alternative="tc_wmma",
        problem=problem,
        templated_on_edge=False,
        template_extra=tuple(c.values()),
        template_params=tuple(c),
        template_fixed=tuple(_fixed(rung, bm // 64).values()),
        archs=rung.archs,
        min_cc=rung.min_cc,
        cluster=(clustered, 1, 1) if clustered > 1 else None,
        persistent=rung.persistent,
        dependent_launch=rung.dependent_launch,
        workspace_bytes=rung.workspace(c) if rung.workspace else None,
        sass=rung.sass,
    )


LADDER = Ladder("tensor-core ladder", RUNGS, block_limits, _spec, candidates=CANDIDATE_RUNGS)
TENSOR_KERNELS: tuple[KernelSpec, ...] = LADDER.kernels
