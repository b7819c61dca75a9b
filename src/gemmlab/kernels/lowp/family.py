"""What the 8-bit ladder's rungs share: the int8 rungs' limit on K, the
rules several rungs check, the FP8 persistent rungs' register split, the
keyword sets of each kind of rung (mma.sync, warp-specialised, persistent),
and the catalogue entry one configuration builds (kernels/lowp/spec.py lists
the rungs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.ladder import Config, Rung, cdiv, grid_rows_fit, needs
from gemmlab.kernels.spec import Constraint, KernelSpec
from gemmlab.kernels.tensor.family import (
    C_BOX_ROWS,
    CONSUMER_REGS,
    PRODUCER_REGS,
    REGISTER_SPLIT,
    ROWS_16,
    WARPGROUP,
    c_boxes_bytes,
    reuse_cgma,
    ring_bytes,
    split_fits,
    tensor_core_spec,
    warp_threads,
)
from gemmlab.problems.lowp import FP8_WITH_BF16, INT8_MAX_K, SCALE_BLOCK, SCALINGS, lowp_problem

SOURCE_DOC = "gemmlab 8-bit tensor-core ladder (beyond the documents)"


def _int8_k_fits(shape: Shape, block_edge: int) -> str | None:
    if shape.k > INT8_MAX_K:
        return f"K = {shape.k} is over {INT8_MAX_K}: an int32 sum of K int8 products (up to 2^14 each) could overflow"
    return None


INT8_K = Constraint(f"K at most {INT8_MAX_K} (int32 sums)", _int8_k_fits)


def mma_rules(c: Config) -> list[str]:
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


def scaling_rule(c: Config, modes: tuple[int, ...]) -> list[str]:
    names = ", ".join(f"{i} ({SCALINGS[i]})" for i in modes)
    return needs(c["SCALING"] in modes, f"SCALING must be one of {names}")


def wgmma_rules(c: Config) -> list[str]:
    consumers = c["BM"] // 64
    return (
        needs(c["BM"] % 64 == 0 and 64 <= c["BM"] <= 256, "BM must be 64, 128, 192 or 256 (64-row warpgroup slabs)")
        + needs(c["BN"] in (128, 256), "BN must be 128 or 256 (the N of one wgmma)")
        + needs(c["STAGES"] >= 2, "STAGES must be at least 2")
        # The tensor ladder's register split (pipeline.cuh's RegisterSplit checks the same sum).
        + needs(
            split_fits(PRODUCER_REGS, CONSUMER_REGS, consumers),
            f"{consumers} consumer warpgroups do not fit the registers a block holds",
        )
    )


# The persistent FP8 rungs (fp8_persistent.cuh) stage C as tc_tma_store does:
# each consumer warpgroup in C_BOXES boxes of its 64 rows (C_BOX_ROWS) x 128 bytes.
# Their consumers take 240 registers and leave the producer setmaxnreg's least,
# 24: with BN = 256 a consumer holds 128 sums and a 64-register partial slab,
# and at the tensor ladder's 232 the bfloat16 epilogue spilled.
FP8_PRODUCER_REGS, FP8_CONSUMER_REGS = 24, 240


def persistent_rules(c: Config) -> list[str]:
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


# The mma.sync rungs: a cp.async ring without barriers.
MMA: dict[str, Any] = dict(dynamic_smem=True, k_bytes_multiple=ROWS_16, threads=warp_threads,
                           smem_bytes=lambda c: ring_bytes(c, 0), cgma=reuse_cgma)  # fmt: skip
PERSISTENT: dict[str, Any] = dict(
    threads=lambda c: (c["BM"] // 64 + 1) * WARPGROUP,
    smem_bytes=lambda c: ring_bytes(c, 2) + c_boxes_bytes(c),
    fixed=Config(PRODUCER_REGS=FP8_PRODUCER_REGS, CONSUMER_REGS=FP8_CONSUMER_REGS, C_BOX_ROWS=C_BOX_ROWS),
    cgma=reuse_cgma, rules=persistent_rules, persistent=True, dtypes=FP8_WITH_BF16,
)  # fmt: skip
SPECIALISED: dict[str, Any] = dict(threads=lambda c: (c["BM"] // 64 + 1) * WARPGROUP,
                                   smem_bytes=lambda c: ring_bytes(c, 2), fixed=REGISTER_SPLIT,
                                   cgma=reuse_cgma)  # fmt: skip

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


def build(rung: Rung, c: Config) -> KernelSpec:
    cluster = c.get("CLUSTER", 1)
    boxes = (c["BM"], c["BN"] // cluster) if rung.tma else None
    c_box_rows = rung.fixed.get("C_BOX_ROWS", 0)  # C is a tensor map with boxes of these rows (0: a pointer)
    return tensor_core_spec(
        rung, c, family="lowp", source_doc=SOURCE_DOC, grid=_grid(rung, c),
        constraints=rung.constraints if rung.persistent else (grid_rows_fit(c["BM"]), *rung.constraints),
        smem=rung.smem_bytes(c),
        # A and B once (1 byte an element), C written once in 4-byte elements: counted in input elements.
        min_elems_moved=lambda s: s.m * s.k + s.n * s.k + 4 * s.m * s.n,
        any_size_alternative=rung.id,  # no 8-bit rung takes any K: the advice is the rule itself
        problem=lowp_problem(_scaling(rung, c), _chain(rung, c), boxes, c_box_rows), template_fixed=rung.fixed,
        cluster=cluster,
    )  # fmt: skip
