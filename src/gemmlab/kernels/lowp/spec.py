"""The 8-bit tensor-core ladder (docs/lowp-ladder.md): int8 products summed
in int32, exact, and FP8 (e4m3, e5m2) with scales, summed in FP32.

The layout is the tensor ladder's: C = A . B^T, A stored M x K and B N x K,
both K-major (8-bit wgmma reads B only that way). C is int32 for int8 and
float32 for FP8. A tile row is 128 bytes of K, 128 elements: the span of the
128-byte swizzle, and one block of DeepGEMM's FP8 scales, so a kernel meets
the scales of one K block per tile.

FP8 rungs take scales (problems/lowp.py draws data that would overflow e4m3
unscaled and quantises it) in the mode their SCALING parameter names: 0 one
per tensor, 1 one per row of A and per column of C, 2 by 1 x 128 blocks of A
and 128 x 128 blocks of B. SCALING changes the work, not how it is done, so
no search changes it; choose it with a configuration (``SCALING=1``).
PROMOTE (tc_fp8_wgmma) says whether partial sums leave the tensor cores for
FP32 registers after every 128 K, PROMOTE_K (tc_fp8_tma_store) whether after
every 128 or 256: the tolerance follows both.

Every rung takes K in whole 16-byte pieces (16-byte copies, TMA row
strides); the int8 rungs K under 2^17 as well, so that no int32 sum can
overflow."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.ladder import Config, Ladder, Rung, cdiv, grid_rows_fit, needs
from gemmlab.kernels.spec import Constraint, KernelSpec
from gemmlab.kernels.tensor.family import (
    C_BOX_ROWS,
    CONSUMER_REGS,
    HOPPER,
    PRODUCER_REGS,
    REGISTER_SPLIT,
    ROWS_16,
    WARPGROUP,
    block_limits,
    c_boxes_bytes,
    reuse_cgma,
    ring_bytes,
    split_fits,
    warp_threads,
)
from gemmlab.problems.lowp import FP8, FP8_WITH_BF16, INT8, INT8_MAX_K, MIXED, SCALE_BLOCK, SCALINGS, lowp_problem

SOURCE_DOC = "gemmlab 8-bit tensor-core ladder (beyond the documents)"


def _int8_k_fits(shape: Shape, block_edge: int) -> str | None:
    if shape.k > INT8_MAX_K:
        return f"K = {shape.k} is over {INT8_MAX_K}: an int32 sum of K int8 products (up to 2^14 each) could overflow"
    return None


INT8_K = Constraint(f"K at most {INT8_MAX_K} (int32 sums)", _int8_k_fits)


def _mma_rules(c: Config) -> list[str]:
    threads = warp_threads(c)
    return (
        needs(c["BM"] % c["WM"] == 0 and c["BN"] % c["WN"] == 0, "warp tiles (WM x WN) must tile the block")
        + needs(c["WM"] % 16 == 0 and c["WN"] % 16 == 0, "WM and WN must be multiples of 16")
        + needs(c["STAGES"] >= 2, "STAGES must be at least 2")
        # Every thread issues the same number of 16-byte copies (8 per tile row).
        + needs(
            (c["BM"] * 8) % threads == 0 and (c["BN"] * 8) % threads == 0,
            "each of BM x 8 and BN x 8 16-byte copies must share equally among the threads",
        )
    )


def _scaling_rule(c: Config, modes: tuple[int, ...]) -> list[str]:
    names = ", ".join(f"{i} ({SCALINGS[i]})" for i in modes)
    return needs(c["SCALING"] in modes, f"SCALING must be one of {names}")


def _wgmma_rules(c: Config) -> list[str]:
    consumers = c["BM"] // 64
    return (
        needs(c["BM"] % 64 == 0 and 64 <= c["BM"] <= 256, "BM must be 64, 128, 192 or 256 (64-row warpgroup slabs)")
        + needs(c["BN"] in (128, 256), "BN must be 128 or 256 (the N of one wgmma)")
        + needs(c["STAGES"] >= 2, "STAGES must be at least 2")
        # The tensor ladder's register split (hopper.cuh's RegisterSplit checks the same sum).
        + needs(
            split_fits(PRODUCER_REGS, CONSUMER_REGS, consumers),
            f"{consumers} consumer warpgroups do not fit the registers a block holds",
        )
    )


def _fp8_wgmma_rules(c: Config) -> list[str]:
    # A promoting consumer holds two slabs (the FP32 sums and the tensor cores' partial): 64 x 128 each.
    return (
        _wgmma_rules(c)
        + _scaling_rule(c, (0, 1))
        + needs(c["PROMOTE"] in (0, 1), "PROMOTE must be 0 or 1")
        + needs(not c["PROMOTE"] or c["BN"] == 128, "PROMOTE=1 needs BN = 128 (two accumulator slabs per thread)")
    )


def _blockscaled_rules(c: Config) -> list[str]:
    return _wgmma_rules(c) + needs(c["BN"] == SCALE_BLOCK, "BN must be 128: one block of B's scales per tile")


# The persistent FP8 rungs (fp8_persistent.cuh) stage C as tc_tma_store does:
# each consumer warpgroup in C_BOXES boxes of its 64 rows (C_BOX_ROWS) x 128 bytes.
# Their consumers take 240 registers and leave the producer setmaxnreg's least,
# 24: with BN = 256 a consumer holds 128 sums and a 64-register partial slab,
# and at the tensor ladder's 232 the bfloat16 epilogue spilled.
FP8_PRODUCER_REGS, FP8_CONSUMER_REGS = 24, 240


def _persistent_rules(c: Config) -> list[str]:
    # A consumer holds 64 x BN FP32 sums and one 64 x 128 partial slab (BN = 144 or 192: 64 x BN):
    # 128 to 192 registers of the 240 it claims.
    return (
        needs(c["BM"] in (64, 128), "BM must be 64 or 128 (one or two consumer warpgroups of 64 rows)")
        + needs(
            c["BN"] in (128, 144, 192, 256),
            "BN must be 128, 144, 192 or 256: one or two passes of 128 columns a stage, or one of 144 or 192",
        )
        + needs(c["STAGES"] >= 2, "STAGES must be at least 2")
        + needs(c["GROUP_M"] >= 1, "GROUP_M must be at least 1")
        + needs(c["CLUSTER"] in (1, 2), "CLUSTER must be 1 or 2 (blocks along M sharing B by multicast)")
        + needs(c["C_BOXES"] >= 1, "C_BOXES must be at least 1")
        + needs(c.get("PROMOTE_K", SCALE_BLOCK) in (128, 256), "PROMOTE_K must be 128 or 256 (one or two K tiles)")
        + needs(
            c.get("PROMOTE_K", SCALE_BLOCK) == SCALE_BLOCK or c["BN"] == 128,
            "PROMOTE_K=256 needs BN = 128: at BN = 256 a consumer's registers do not also hold a second "
            "K tile's addresses (ptxas spills with a bfloat16 C), and it ran no faster there "
            "(docs/lowp-ladder.md, round 5)",
        )
        + needs(c["STAGGER"] in (0, 1), "STAGGER must be 0 or 1")
        + needs(
            c["STAGGER"] == 0 or c["BM"] == 128,
            "STAGGER=1 needs BM = 128: two consumer warpgroups, one started behind the other",
        )
        + needs(
            split_fits(FP8_PRODUCER_REGS, FP8_CONSUMER_REGS, c["BM"] // 64),
            f"{c['BM'] // 64} consumer warpgroups do not fit the registers a block holds",
        )
    )


def scale_stage_bytes(c: Config) -> int:
    """fp8_persistent.cuh's STAGE_SCALES floats per stage (block scales): A's rows' and up to 4 of B's."""
    return c["STAGES"] * (c["BM"] + 4) * 4


# The mma.sync rungs: a cp.async ring without barriers.
MMA: dict[str, Any] = dict(dynamic_smem=True, k_bytes_multiple=ROWS_16, threads=warp_threads,
                           smem_bytes=lambda c: ring_bytes(c, 0), cgma=reuse_cgma)  # fmt: skip
PERSISTENT: dict[str, Any] = dict(
    threads=lambda c: (c["BM"] // 64 + 1) * WARPGROUP,
    smem_bytes=lambda c: ring_bytes(c, 2) + c_boxes_bytes(c),
    fixed=Config(PRODUCER_REGS=FP8_PRODUCER_REGS, CONSUMER_REGS=FP8_CONSUMER_REGS, C_BOX_ROWS=C_BOX_ROWS),
    cgma=reuse_cgma, rules=_persistent_rules, persistent=True, dtypes=FP8_WITH_BF16,
)  # fmt: skip
BLOCKSCALED_PERSISTENT = PERSISTENT | dict(
    # a third barrier per stage: scales_free, the consumers' word that the stage's scales are read
    smem_bytes=lambda c: ring_bytes(c, 3) + c_boxes_bytes(c) + scale_stage_bytes(c),
    rules=lambda c: (
        _persistent_rules(c)
        + needs(
            c["BN"] not in (144, 192),
            f"BN={c['BN']} takes per-tensor scales only: with block scales a pass is one 128-column block",
        )
    ),
)
SPECIALISED: dict[str, Any] = dict(threads=lambda c: (c["BM"] // 64 + 1) * WARPGROUP,
                                   smem_bytes=lambda c: ring_bytes(c, 2), fixed=REGISTER_SPLIT,
                                   cgma=reuse_cgma)  # fmt: skip

RUNGS: tuple[Rung, ...] = (
    Rung(
        id="tc_int8_mma",
        source="01_int8_mma.cu",
        summary="int8 mma.sync m16n8k32 (int32 sums, exact) fed by a cp.async ring of swizzled 128-byte rows",
        dtypes=(INT8,),
        default=Config(BM=128, BN=128, WM=64, WN=32, STAGES=3),
        search=(Config(STAGES=4), Config(BN=256, WN=64), Config(WM=32, WN=64)),
        sass=("IMMA", "LDSM", "LDGSTS"),
        min_cc=(8, 0),  # int8 mma.sync m16n8k32, cp.async
        rules=_mma_rules,
        constraints=(INT8_K,),
        **MMA,
    ),
    Rung(
        id="tc_fp8_mma",
        source="02_fp8_mma.cu",
        summary="FP8 mma.sync m16n8k32, FP32 promotion every 128 K; scales per tensor, row/column or 128-blocks",
        dtypes=FP8,
        default=Config(BM=128, BN=128, WM=64, WN=32, STAGES=3, SCALING=0),
        search=(Config(STAGES=4), Config(WM=32, WN=64)),
        # The FP8 multiply itself differs by architecture: QMMA.16832 on sm_89;
        # on sm_90 ptxas converts the bytes to float16 and runs HMMA.16816 (Hopper
        # has FP8 tensor cores only behind wgmma). So the claims are the feeding
        # instructions; tests/test_lowp.py checks the multiply on each architecture.
        sass=("LDSM", "LDGSTS"),
        min_cc=(8, 9),  # FP8 mma.sync
        rules=lambda c: _mma_rules(c) + _scaling_rule(c, (0, 1, 2)),
        **MMA,
    ),
    Rung(
        id="tc_int8_wgmma",
        source="03_int8_wgmma.cu",
        summary="sm_90a: int8 wgmma m64nNk32 (int32 sums) behind a TMA producer warpgroup, full/empty barriers",
        dtypes=(INT8,),
        default=Config(BM=128, BN=256, STAGES=4),
        search=(Config(STAGES=3), Config(BN=128, STAGES=6), Config(BM=64, BN=256)),
        sass=("IGMMA", "UTMALDG", "USETMAXREG"),
        rules=_wgmma_rules,
        constraints=(INT8_K,),
        **SPECIALISED,
        **HOPPER,
    ),
    Rung(
        id="tc_fp8_wgmma",
        source="04_fp8_wgmma.cu",
        summary="sm_90a: FP8 wgmma m64nNk32 warp-specialised; scales per tensor or row/column; PROMOTE every 128 K",
        dtypes=FP8,
        default=Config(BM=128, BN=128, STAGES=4, SCALING=0, PROMOTE=1),
        search=(Config(STAGES=6), Config(BM=64), Config(BN=256, PROMOTE=0)),
        sass=("QGMMA", "UTMALDG", "USETMAXREG"),
        rules=_fp8_wgmma_rules,
        **SPECIALISED,
        **HOPPER,
    ),
    Rung(
        id="tc_fp8_blockscaled",
        source="05_fp8_blockscaled.cu",
        summary="sm_90a: tc_fp8_wgmma with DeepGEMM's 1 x 128 / 128 x 128 scales, applied at each 128-K promotion",
        dtypes=FP8,
        default=Config(BM=128, BN=128, STAGES=4),
        search=(Config(STAGES=6), Config(BM=64, STAGES=8)),
        sass=("QGMMA", "UTMALDG", "USETMAXREG"),
        rules=_blockscaled_rules,
        **SPECIALISED,
        **HOPPER,
    ),
    Rung(
        id="tc_fp8_tma_store",
        source="06_fp8_tma_store.cu",
        summary="sm_90a: persistent FP8 wgmma in clusters, promotion every 128 K, C (float32/bf16) scaled per tensor "
        "or row/column, stored by TMA",
        default=Config(BM=128, BN=256, STAGES=4, GROUP_M=8, CLUSTER=2, C_BOXES=2, PROMOTE_K=128, STAGGER=0, SCALING=0),
        search=(
            Config(STAGGER=1),
            Config(CLUSTER=1),
            Config(CLUSTER=1, STAGGER=1),
            Config(GROUP_M=16),
            Config(STAGES=3, C_BOXES=4),
            # Half of a float32 slab's boxes at once with clusters of one: 100.2% of cuBLASLt at 8192 with a
            # float32 C on an H200, where the default measured 98.2% (2026-11-28m_h200_fp8-f32-epilogue.txt).
            Config(CLUSTER=1, STAGES=3, C_BOXES=4),
            Config(BN=192),
            Config(BN=192, CLUSTER=1),
            Config(BN=128, STAGES=6),
            Config(BN=128, STAGES=6, PROMOTE_K=256),
            Config(BN=128, STAGES=4, C_BOXES=4, PROMOTE_K=256),
            Config(BM=64, BN=128, STAGES=8),
            # BN = 144 (cuBLASLt's tile at 8192) is left out: 72-87.5% of cuBLASLt at 4096 and 8192 on an
            # H100 and an H200 whatever its stages and cluster, where the default measured 94.6-97.7% in
            # the same runs (benchmarks/results/2026-11-25g_h100_fp8-bn144.txt, 2026-11-25h_h200_fp8-bn144.txt).
        ),
        sass=("QGMMA", "UTMALDG", "UTMASTG", "USETMAXREG"),
        cross_block=True,  # clusters of CLUSTER blocks share B by multicast
        # Its types add the mixed pair (A e5m2, B e4m3), a backward pass's product.
        **PERSISTENT
        | dict(rules=lambda c: _persistent_rules(c) + _scaling_rule(c, (0, 1)), dtypes=(*FP8_WITH_BF16, *MIXED)),
        **HOPPER,
    ),
    Rung(
        id="tc_fp8_blockscaled_tma",
        source="07_fp8_blockscaled_tma.cu",
        summary="sm_90a: tc_fp8_tma_store with 1 x 128 / 128 x 128 block scales applied at each promotion",
        default=Config(BM=128, BN=256, STAGES=4, GROUP_M=8, CLUSTER=2, C_BOXES=2, STAGGER=0),
        # CLUSTER=1 and STAGGER=1 at BN = 256 spilled in one C type or the other until the consumers' descriptors
        # moved to uniform registers (docs/lowp-ladder.md, round 10); then CLUSTER=1 measured 100.6-103% of
        # cuBLASLt's block-scaled product at 4096 on an H200 and joined the search; STAGGER=1, 92-94%, did not.
        search=(
            Config(CLUSTER=1),
            Config(CLUSTER=1, GROUP_M=16),
            Config(GROUP_M=16),
            Config(BN=128, STAGES=5),
            Config(BN=128, STAGES=5, STAGGER=1),
            Config(BN=128, STAGES=4, C_BOXES=4),
        ),
        sass=("QGMMA", "UTMALDG", "UTMASTG", "USETMAXREG"),
        cross_block=True,  # tc_fp8_tma_store's clusters
        **BLOCKSCALED_PERSISTENT,
        **HOPPER,
    ),
)

BLOCK_SCALED = {"tc_fp8_blockscaled", "tc_fp8_blockscaled_tma"}


def _scaling(rung: Rung, c: Config) -> str:
    """The scale mode a configuration of the rung reads (int8: none, 'tensor' by convention)."""
    if rung.id in BLOCK_SCALED:
        return "block"
    return SCALINGS[c.get("SCALING", 0)]


def _chain(rung: Rung, c: Config) -> int:
    """K the rung sums in the tensor cores between adds into FP32 registers (0: all of K)."""
    return 0 if c.get("PROMOTE", 1) == 0 else c.get("PROMOTE_K", SCALE_BLOCK)


def _grid(rung: Rung, c: Config) -> Callable[[Shape, int], Dim3]:
    """One block per tile; persistent rungs: one per tile too, as the work to
    share (the runner launches no more than the GPU holds), in whole clusters."""
    bm, bn = c["BM"], c["BN"]
    if not rung.persistent:
        return lambda s, b: (cdiv(s.n, bn), cdiv(s.m, bm), 1)
    cluster = c["CLUSTER"]
    return lambda s, b: (cdiv(s.m, bm * cluster) * cdiv(s.n, bn) * cluster, 1, 1)


def _spec(rung: Rung, c: Config) -> KernelSpec:
    threads = rung.threads(c)
    smem = rung.smem_bytes(c)
    cgma = rung.cgma(c)
    cluster = c.get("CLUSTER", 1)
    boxes = (c["BM"], c["BN"] // cluster) if rung.tma else None
    c_box_rows = rung.fixed.get("C_BOX_ROWS", 0)  # C is a tensor map with boxes of these rows (0: a pointer)
    return KernelSpec(
        id=rung.id,
        source=f"lowp/{rung.source}",
        function=rung.id,
        source_doc=SOURCE_DOC,
        summary=rung.summary,
        dtypes=rung.dtypes,
        block_edges=(),
        grid=_grid(rung, c),
        block=lambda s, b: (threads, 1, 1),
        constraints=rung.constraints if rung.persistent else (grid_rows_fit(c["BM"]), *rung.constraints),
        dynamic_smem_bytes=lambda s, b, dtype: smem,
        k_bytes_multiple=rung.k_bytes_multiple,
        # A tensor map of C: its rows' stride must be whole 16-byte pieces too.
        n_bytes_multiple=16 if c_box_rows else 0,
        # A and B once (1 byte an element), C written once in 4-byte elements: counted in input elements.
        min_elems_moved=lambda s: s.m * s.k + s.n * s.k + 4 * s.m * s.n,
        cgma=lambda s, b: cgma,
        any_size_alternative=rung.id,  # no 8-bit rung takes any K: the advice is the rule itself
        problem=lowp_problem(_scaling(rung, c), _chain(rung, c), boxes, c_box_rows),
        templated_on_edge=False,
        template_extra=tuple(c.values()),
        template_params=tuple(c),
        template_fixed=tuple(rung.fixed.values()),
        archs=rung.archs,
        min_cc=rung.min_cc,
        cluster=(cluster, 1, 1) if cluster > 1 else None,
        persistent=rung.persistent,
        sass=rung.sass,
    )


LADDER = Ladder("8-bit tensor-core ladder", RUNGS, block_limits, _spec)
LOWP_KERNELS: tuple[KernelSpec, ...] = LADDER.kernels
