"""The tensor-core ladder without a GPU: every rung and searched configuration
compiles for its architectures with no spills, its SASS holds the instructions
it claims, and what it cannot take is refused in words."""

from __future__ import annotations

import dataclasses
import re
from importlib import resources

import numpy as np
import pytest

from gemmlab.backends.nvrtc import compile_kernel
from gemmlab.core.dtypes import DTYPE_ITEMSIZE
from gemmlab.core.errors import CompileError, ConstraintError, DeviceLimitError, UnknownName
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec
from gemmlab.kernels.tensor import family
from gemmlab.kernels.tensor import spec as tensor
from gemmlab.measure.sanitize import small_shapes
from gemmlab.measure.sass import find_tool, missing_claims, opcodes_of, sass_opcodes, tensor_core_ops, total
from gemmlab.problems import base as problem_base
from gemmlab.problems import tensor as tensor_problem
from gemmlab.problems.tensor import ROW_BYTES

IDS = [r.id for r in tensor.RUNGS]
NEEDS_CUOBJDUMP = pytest.mark.skipif(find_tool("cuobjdump") is None, reason="cuobjdump is not installed")


def _archs(spec: KernelSpec) -> list[str]:
    return list(spec.archs) or ["sm_80", "sm_90"]


def test_rungs_are_in_the_catalogue_in_order() -> None:
    ids = catalogue.kernel_ids()
    assert [i for i in ids if catalogue.get(i).source.startswith("tensor/")] == IDS


@pytest.mark.slow
@pytest.mark.parametrize("kernel_id", IDS)
def test_every_configuration_compiles_without_spills(kernel_id: str) -> None:
    configs = catalogue.configs(kernel_id)
    assert len(configs) >= 2, "a search space to tune over"
    for config in configs:
        spec = catalogue.variant(kernel_id, config)
        for arch in _archs(spec):
            for dtype in spec.dtypes:
                res = compile_kernel(spec, 0, dtype, arch).resources
                assert res.spill_bytes == 0 and res.stack_bytes == 0, (kernel_id, config, arch, dtype)
                assert res.registers > 0


@NEEDS_CUOBJDUMP
@pytest.mark.parametrize("kernel_id", IDS)
def test_sass_holds_the_claimed_instructions(kernel_id: str) -> None:
    spec = catalogue.get(kernel_id)
    assert spec.sass, "every rung names the instructions it stands for"
    for dtype in spec.dtypes:
        ops = sass_opcodes(compile_kernel(spec, 0, dtype, _archs(spec)[-1]).cubin)
        assert not missing_claims(spec.sass, ops), (kernel_id, dtype, missing_claims(spec.sass, ops))
        assert tensor_core_ops(ops)
        # No FP32 FMA does the product's work: the few FFMAs allowed are index arithmetic.
        assert sum(v for k, v in ops.items() if k.startswith("FFMA")) < 16, (kernel_id, dtype)


def test_sass_opcodes_keep_their_shapes_and_formats() -> None:
    """A wgmma's opcode is read whole (its shape has a lower-case x), and a line
    predicated on !PT, which never runs, is not counted."""
    text = """
        /*0a70*/                   QGMMA.64x128x32.F32.E5M2.E5M2 R24, gdesc[UR4], R24, gsb0 ;
        /*0a80*/              @!P0 FFMA R1, R2, R3, R4 ;
        /*0a90*/             @!PT LDS RZ, [RZ] ;
        /*0aa0*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR8], R24 ;
    """
    ops = opcodes_of(text)
    assert ops == {"QGMMA.64x128x32.F32.E5M2.E5M2": 1, "FFMA": 1, "HGMMA.64x256x16.F32.BF16": 1}
    assert total(ops, "QGMMA") == 1 and missing_claims(("QGMMA", "LDS"), ops) == ["LDS"]


@NEEDS_CUOBJDUMP
def test_the_fp32_ladder_claims_differ() -> None:
    """The harness's check can fail: an FP32 rung's SASS has no HMMA."""
    ops = sass_opcodes(compile_kernel(catalogue.get("sgemm_multistage"), 0, "float32", "sm_90").cubin)
    assert missing_claims(("HMMA",), ops) == ["HMMA"]
    assert not tensor_core_ops(ops)


def test_hopper_rungs_refuse_other_architectures() -> None:
    spec = catalogue.get("tc_warpspecialized")
    assert spec.compile_arch("sm_90") == "sm_90a"
    assert spec.compile_arch("sm_90a") == "sm_90a"
    with pytest.raises(DeviceLimitError, match="sm_90a only"):
        spec.compile_arch("sm_80")
    with pytest.raises(DeviceLimitError, match=r"8\.0 or newer"):
        catalogue.get("tc_mma").compile_arch("sm_75")
    assert catalogue.get("tc_mma").compile_arch("sm_86") == "sm_86"


@pytest.mark.parametrize("kernel_id", IDS[1:])
def test_k_must_be_whole_16_byte_pieces(kernel_id: str) -> None:
    spec = catalogue.get(kernel_id)
    for dtype in spec.dtypes:
        per_piece = 16 // DTYPE_ITEMSIZE[dtype]
        # N = 56: whole 16-byte rows of C too, which the TMA-store rung needs.
        assert not spec.violations(Shape(37, 56, 5 * per_piece), 0, dtype)
        with pytest.raises(ConstraintError, match=f"K = {5 * per_piece + 1} is not a multiple of {per_piece}") as err:
            catalogue.point(kernel_id, Shape(37, 56, 5 * per_piece + 1), dtype=dtype)
        assert "tc_wmma" in err.value.fix


def test_wmma_takes_any_k_and_16_bit_rungs_refuse_tf32() -> None:
    assert not catalogue.get("tc_wmma").violations(Shape(37, 53, 29), 0, "tf32")
    with pytest.raises(ConstraintError, match="no tf32 version"):
        catalogue.point("tc_mma", Shape(64, 64, 64), dtype="tf32")


def test_bad_configurations_are_named() -> None:
    with pytest.raises(ConstraintError, match="BN must be 128 or 256"):
        catalogue.variant("tc_wgmma", {"BN": 192})
    with pytest.raises(ConstraintError, match="bytes of dynamic shared memory"):
        catalogue.variant("tc_warpspecialized", {"STAGES": 6})
    with pytest.raises(UnknownName, match="no parameter"):
        catalogue.variant("tc_persistent", {"TILE": 3})


def test_hopper_shared_memory_is_stages_plus_barriers() -> None:
    spec = catalogue.get("tc_warpspecialized")  # 128 x 256 tiles, 4 stages
    point = catalogue.point("tc_warpspecialized", Shape.square(4096), dtype="bfloat16")
    assert point.dynamic_smem == 4 * (128 + 256) * ROW_BYTES + 2 * 4 * 8
    assert spec.threads_per_block(Shape.square(4096), 0) == 3 * family.WARPGROUP


def test_bf16_rounding_is_nearest_even() -> None:
    one_ulp = 2.0**-7  # bf16 keeps 7 fraction bits
    x = np.array([1.0, 1 + one_ulp / 2, 1 + 1.5 * one_ulp, -2.5, 1 + one_ulp / 4], dtype=np.float32)
    bits = problem_base.bf16_bits(np, x)
    assert bits.dtype == np.uint16
    assert [hex(b) for b in bits] == ["0x3f80", "0x3f80", "0x3f82", "0xc020", "0x3f80"]


def test_cluster_rung_launches_whole_clusters() -> None:
    spec = catalogue.get("tc_cluster")
    assert spec.cluster == (2, 1, 1)
    assert catalogue.get("tc_persistent").cluster is None


def test_persistent_grids_count_tiles_and_whole_clusters() -> None:
    """The runner caps these at what the GPU holds at once; the spec counts the work."""
    shape = Shape(384, 1000, 64)  # 3 x 4 tiles of 128 x 256
    assert catalogue.get("tc_persistent").grid(shape, 0) == (12, 1, 1)
    assert catalogue.get("tc_persistent").persistent
    # Clusters of two 128-row tiles: 2 pairs of rows x 4 columns, two blocks each.
    assert catalogue.get("tc_cluster").grid(shape, 0) == (16, 1, 1)
    assert catalogue.get("tc_warpspecialized").grid(shape, 0) == (4, 3, 1)


def test_tma_store_needs_whole_16_byte_rows_of_c() -> None:
    """C's tensor map needs a row stride of whole 16-byte pieces: N a multiple
    of 4 for float32 C, of 8 for bfloat16 C; the other rungs take any N."""
    spec = catalogue.get("tc_tma_store")
    assert not spec.violations(Shape(37, 52, 64), 0, "bfloat16")
    assert not spec.violations(Shape(37, 56, 64), 0, "bfloat16-out")
    with pytest.raises(ConstraintError, match=r"N = 52 is not a multiple of 8: rows of C \(2-byte") as err:
        catalogue.point("tc_tma_store", Shape(37, 52, 64), dtype="bfloat16-out")
    assert "tc_wmma" in err.value.fix
    with pytest.raises(ConstraintError, match="N = 53 is not a multiple of 4"):
        catalogue.point("tc_tma_store", Shape(37, 53, 64), dtype="tf32")
    assert not catalogue.get("tc_cluster").violations(Shape(37, 53, 64), 0, "bfloat16")
    assert "N x C's element size a multiple of 16 bytes" in spec.needs
    # The sanitizer still gets a ragged shape it takes.
    assert Shape(37, 56, 136) in small_shapes(spec, 0)


def test_bfloat16_out_is_the_tma_store_rungs_alone() -> None:
    assert [r.id for r in tensor.RUNGS if "bfloat16-out" in r.dtypes] == ["tc_tma_store"]
    with pytest.raises(ConstraintError, match="no bfloat16-out version"):
        catalogue.point("tc_cluster", Shape(64, 64, 64), dtype="bfloat16-out")
    assert tensor_problem.input_dtype("bfloat16-out") == "bfloat16"
    assert tensor_problem.baseline_name("bfloat16-out") == "cuBLAS GemmEx bfloat16, FP32 accumulation, bfloat16 C"
    assert tensor_problem.baseline_name("tf32").endswith("float32 C")


def test_tma_store_shared_memory_is_ring_barriers_and_c_boxes() -> None:
    point = catalogue.point("tc_tma_store", Shape.square(4096), dtype="bfloat16-out")
    # 4 stages of 128 + 256 rows, 8 barriers, 2 consumers x 2 boxes of 64 rows x 128 bytes.
    assert point.dynamic_smem == 4 * (128 + 256) * ROW_BYTES + 2 * 4 * 8 + 2 * 2 * family.C_BOX_ROWS * ROW_BYTES
    with pytest.raises(ConstraintError, match="bytes of dynamic shared memory"):
        catalogue.variant("tc_tma_store", {"C_BOXES": 4})
    with pytest.raises(ConstraintError, match="C_BOXES must be at least 1"):
        catalogue.variant("tc_tma_store", {"C_BOXES": 0})


SPECIALISED = ("tc_warpspecialized", "tc_persistent", "tc_cluster", "tc_tma_store")


def test_launch_facts_reach_the_kernels_as_template_arguments() -> None:
    """The register split and C's box rows are written once, in the spec: the
    warp-specialised rungs get them as template arguments after their
    configuration and do not define them again; the configuration (what is
    stored with results) leaves them out."""
    split = f"{family.PRODUCER_REGS}, {family.CONSUMER_REGS}"
    for kernel_id in SPECIALISED:
        spec = catalogue.get(kernel_id)
        assert spec.config == tensor.LADDER.rung(kernel_id).config(), kernel_id
        assert not {"PRODUCER_REGS", "CONSUMER_REGS", "C_BOX_ROWS"} & set(spec.config), kernel_id
        facts = f"{split}, {family.C_BOX_ROWS}" if kernel_id == "tc_tma_store" else split
        assert spec.name_expression("bfloat16", 0).endswith(f", {facts}>"), kernel_id
        assert not re.search(r"(constexpr int|enum \{) *(PRODUCER_REGS|CONSUMER_REGS|C_BOX_ROWS)\b", spec.source_text())
    assert not catalogue.get("tc_wgmma").template_fixed
    assert catalogue.get("tc_tma_store").n_bytes_multiple == 16
    assert catalogue.get("tc_cluster").n_bytes_multiple == 0


def test_register_rule_is_the_split_over_the_consumers() -> None:
    """Four consumer warpgroups (BM = 256) would need more than a block's registers; a
    split that fits 64K can still exceed what three warpgroups hold from launch."""
    needed = (family.PRODUCER_REGS + 4 * family.CONSUMER_REGS) * family.WARPGROUP
    assert needed > family.MAX_REGISTERS == 65536
    with pytest.raises(ConstraintError, match="4 consumer warpgroups do not fit the registers a block holds"):
        catalogue.variant("tc_warpspecialized", {"BM": 256, "BN": 128})
    assert not tensor.LADDER.violations(tensor.LADDER.rung("tc_warpspecialized"), {"BM": 128, "BN": 256, "STAGES": 4})
    assert family.launch_registers(3) == 168 * 384 and family.launch_registers(2) == 248 * 256
    assert family.split_fits(24, 240, 2) and family.split_fits(40, 232, 2) and not family.split_fits(32, 240, 2)


@pytest.mark.parametrize(
    ("kernel_id", "fixed", "message"),
    [
        ("tc_warpspecialized", (40, 236), "multiples of 8"),
        ("tc_persistent", (40, 256), "fit the registers the block holds from launch"),
        # 32 + 2 x 240 fits 64K but not the 64,512 three warpgroups hold from launch (it hung on an H100).
        ("tc_persistent", (32, 240), "fit the registers the block holds from launch"),
        ("tc_cluster", (16, 232), "24 to 256"),
        ("tc_tma_store", (40, 232, 32), "64 rows of one warpgroup"),
    ],
)
def test_cuda_code_refuses_facts_the_rules_would_not_allow(kernel_id: str, fixed: tuple, message: str) -> None:
    """The static_asserts stand for the Python rules: other facts fail to compile."""
    spec = dataclasses.replace(catalogue.get(kernel_id), template_fixed=fixed)
    with pytest.raises(CompileError, match=message):
        compile_kernel(spec, 0, "bfloat16", "sm_90a", use_cache=False)


def test_row_bytes_agree_between_python_and_cuda() -> None:
    """The 128-byte swizzle span is stated once per language, not passed: the
    tensor maps' SWIZZLE_128B mode and the CUDA code's descriptor bits and XOR
    pattern fix it, so it cannot change alone. The two statements must agree."""
    folder = resources.files("gemmlab").joinpath("kernels", "tensor")
    tma = re.search(r"constexpr int TMA_ROW_BYTES = (\d+);", folder.joinpath("tma.cuh").read_text())
    mma = re.search(r"constexpr int MMA_BK = (\d+);", folder.joinpath("mma_tiles.cuh").read_text())
    assert tma and mma, "tma.cuh and mma_tiles.cuh state the row once each"
    assert int(tma.group(1)) == ROW_BYTES
    assert int(mma.group(1)) * 2 == ROW_BYTES  # 16-bit elements
