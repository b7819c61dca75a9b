"""The tensor-core ladder without a GPU: every rung and searched configuration
compiles for its architectures with no spills, its SASS holds the instructions
it claims, and what it cannot take is refused in words."""

from __future__ import annotations

import numpy as np
import pytest

from gemmlab.backends.nvrtc import compile_kernel
from gemmlab.core.dtypes import DTYPE_ITEMSIZE
from gemmlab.core.errors import ConstraintError, DeviceLimitError, UnknownName
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec
from gemmlab.kernels.tensor import spec as tensor
from gemmlab.measure.sanitize import small_shapes
from gemmlab.measure.sass import find_tool, missing_claims, sass_opcodes, tensor_core_ops
from gemmlab.problems import tensor as tensor_problem

IDS = [r.id for r in tensor.RUNGS]
NEEDS_CUOBJDUMP = pytest.mark.skipif(find_tool("cuobjdump") is None, reason="cuobjdump is not installed")


def _archs(spec: KernelSpec) -> list[str]:
    return list(spec.archs) or ["sm_80", "sm_90"]


def test_rungs_are_in_the_catalogue_in_order() -> None:
    ids = catalogue.kernel_ids()
    assert [i for i in ids if i.startswith("tc_")] == IDS


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
    assert point.dynamic_smem == 4 * (128 + 256) * 128 + 2 * 4 * 8
    assert spec.threads_per_block(Shape.square(4096), 0) == 3 * 128


def test_bf16_rounding_is_nearest_even() -> None:
    one_ulp = 2.0**-7  # bf16 keeps 7 fraction bits
    x = np.array([1.0, 1 + one_ulp / 2, 1 + 1.5 * one_ulp, -2.5, 1 + one_ulp / 4], dtype=np.float32)
    bits = tensor_problem._bf16_bits(np, x)
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
    assert point.dynamic_smem == 4 * (128 + 256) * 128 + 2 * 4 * 8 + 2 * 2 * 64 * 128
    with pytest.raises(ConstraintError, match="bytes of dynamic shared memory"):
        catalogue.variant("tc_tma_store", {"C_BOXES": 4})
    with pytest.raises(ConstraintError, match="C_BOXES must be at least 1"):
        catalogue.variant("tc_tma_store", {"C_BOXES": 0})
