"""The 8-bit ladder without a GPU: the FP8 codec on all 256 codes, the
quantisation and its scales, the tolerance, the rules and refusals, the
optional PyTorch baseline's error, and every rung compiling to the
instructions it stands for."""

from __future__ import annotations

import sys
from fractions import Fraction

import numpy as np
import pytest

from gemmlab.backends.nvrtc import compile_kernel
from gemmlab.core.errors import ConstraintError, GemmlabError
from gemmlab.core.extras import MissingExtra
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.lowp import family
from gemmlab.kernels.lowp import spec as lowp
from gemmlab.measure.sass import find_tool, missing_claims, sass_opcodes, total
from gemmlab.problems import lowp as problem
from gemmlab.problems.lowp import E4M3, E5M2, decode, encode

IDS = [r.id for r in lowp.RUNGS]
CODES = np.arange(256, dtype=np.uint8)
NEEDS_CUOBJDUMP = pytest.mark.skipif(find_tool("cuobjdump") is None, reason="cuobjdump is not installed")


def _e4m3_by_definition(code: int) -> float:
    """OCP FP8 E4M3 read from its bit fields as the standard words them."""
    sign = -1 if code & 0x80 else 1
    exponent, mantissa = (code >> 3) & 0xF, code & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return float("nan")
    if exponent == 0:
        return sign * float(Fraction(mantissa, 8) * Fraction(2) ** -6)
    return sign * float((1 + Fraction(mantissa, 8)) * Fraction(2) ** (exponent - 7))


def test_e4m3_decodes_every_code_as_the_standard_defines() -> None:
    got = decode(np, CODES, E4M3)
    want = np.array([_e4m3_by_definition(c) for c in range(256)])
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.isnan(got).sum() == 2
    assert np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
    assert got[0x7E] == 448 and got[0x01] == 2.0**-9 and got[0x38] == 1.0 and np.signbit(got[0x80])


def test_e5m2_decodes_every_code_as_the_top_byte_of_a_float16() -> None:
    # e5m2 is float16 with the low 8 mantissa bits cut: an independent oracle.
    want = (CODES.astype(np.uint16) << 8).view(np.float16).astype(np.float64)
    got = decode(np, CODES, E5M2)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
    assert got[0x7B] == 57344 and np.isinf(got[0x7C]) and E5M2.max_value == 57344


@pytest.mark.parametrize("fmt", [E4M3, E5M2], ids=lambda f: f.name)
def test_every_finite_code_survives_a_round_trip(fmt) -> None:
    values = decode(np, CODES, fmt)
    finite = np.isfinite(values)
    assert np.array_equal(encode(np, values[finite], fmt), CODES[finite])


@pytest.mark.parametrize("fmt", [E4M3, E5M2], ids=lambda f: f.name)
def test_midpoints_round_to_the_even_code_and_beyond_them_to_the_nearest(fmt) -> None:
    values = decode(np, np.arange(fmt.max_code + 1, dtype=np.uint8), fmt)
    mid = (values[:-1] + values[1:]) / 2
    codes = encode(np, mid, fmt).astype(int)
    lower = np.arange(fmt.max_code)
    assert np.array_equal(codes, np.where(lower % 2 == 0, lower, lower + 1))
    step = (values[1:] - values[:-1]) / 8
    assert np.array_equal(encode(np, mid + step, fmt).astype(int), lower + 1)
    assert np.array_equal(encode(np, mid - step, fmt).astype(int), lower)
    assert np.array_equal(encode(np, -(mid + step), fmt).astype(int), (lower + 1) | 0x80)


def test_e5m2_encoding_is_float16_rounded_to_its_top_byte() -> None:
    halves = np.arange(0x7B80, dtype=np.uint16).view(np.float16)  # every finite float16 below e5m2's saturation
    bits = halves.view(np.uint16).astype(np.uint32)
    want = ((bits + 0x7F + ((bits >> 8) & 1)) >> 8).astype(np.uint8)  # nearest even, on the bits
    assert np.array_equal(encode(np, halves.astype(np.float64), E5M2), want)


@pytest.mark.parametrize("fmt", [E4M3, E5M2], ids=lambda f: f.name)
def test_out_of_range_saturates_and_nan_stays_nan(fmt) -> None:
    codes = encode(np, np.array([1e9, -1e9, np.inf, np.nan]), fmt)
    assert list(codes[:3]) == [fmt.max_code, fmt.max_code | 0x80, fmt.max_code]
    assert np.isnan(decode(np, codes[3:], fmt)[0])


def test_drawn_data_would_overflow_e4m3_unscaled() -> None:
    x = problem.draw(np, np.random.default_rng(1), 64, 300)
    assert np.abs(x).max() > 10 * E4M3.max_value


@pytest.mark.parametrize("scaling", problem.SCALINGS)
def test_quantised_values_are_close_and_each_group_reaches_the_largest_code(scaling: str) -> None:
    rows, k, per_group = 130, 300, 128
    x = problem.draw(np, np.random.default_rng(2), rows, k)
    q = problem.quantise(np, x, E4M3, scaling, per_group)
    expected = {"tensor": (1,), "rowcol": (rows,), "block": (3, 2)}[scaling]  # block: (K blocks, row blocks)
    assert q.scales.shape == expected and q.scales.dtype == np.float32
    full = problem.expand(np, problem.group_max(np, x, scaling, per_group), rows, k, scaling, per_group)
    # e4m3 keeps 3 mantissa bits: half a step is 2^-4 of a value; subnormals err by half of 2^-9 of the group's top.
    assert np.all(np.abs(q.exact - x) <= 2.0**-4 * np.abs(x) + 2.0**-10 / E4M3.max_value * full * 1.0001)
    codes = q.codes & 0x7F
    assert codes.max() == E4M3.max_code


def test_block_scales_are_k_block_first() -> None:
    x = np.zeros((2, 256))
    x[0, :128], x[0, 128:], x[1, :128], x[1, 128:] = 448.0, 896.0, 4480.0, 44.8
    q = problem.quantise(np, x, E4M3, "block", 1)
    assert np.allclose(q.scales, [[1.0, 10.0], [2.0, 0.1]])
    assert np.allclose(q.exact, x, rtol=2.0**-23, atol=0)  # the largest code times a float32 scale


def test_the_tolerance_follows_how_long_the_tensor_cores_sum() -> None:
    promoted, whole = problem.fp8_tolerance(128), problem.fp8_tolerance(4096)
    assert promoted == pytest.approx(1e-4 + 4 * 2.0**-13)
    assert whole == pytest.approx(1e-4 + 128 * 2.0**-13) and whole > 20 * promoted
    assert family._chain(lowp.LADDER.rung("tc_fp8_wgmma"), {"PROMOTE": 0}) == 0
    assert family._chain(lowp.LADDER.rung("tc_fp8_wgmma"), {"PROMOTE": 1}) == 128


def test_the_baseline_without_pytorch_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    point = catalogue.point("tc_int8_mma", Shape(64, 64, 64))
    with pytest.raises(MissingExtra) as error:
        problem.torch_baseline(None, point, None, None, None)
    assert "gemmlab[torch]" in error.value.fix and "torch._int_mm" in str(error.value)
    # The run itself goes on without a baseline.
    assert problem.baseline_for(None, point, "tensor", None, None, None) == (None, None)


def test_block_scales_get_the_library_baseline_only_where_it_was_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch._scaled_mm takes DeepGEMM's block scales for e4m3 with every size a
    multiple of 128 (the case checked on an H100); elsewhere the run has no baseline."""
    monkeypatch.setattr(problem, "torch_baseline", lambda *args: args[-1])  # the scaling the call would use

    def baseline(shape: Shape, dtype: str = "e4m3") -> tuple:
        point = catalogue.point("tc_fp8_blockscaled_tma", shape, dtype=dtype)
        return problem.baseline_for(None, point, "block", None, None, None)

    call, name = baseline(Shape.square(256))
    assert call == "block" and "block scales" in name and "float32 C" in name
    assert "bfloat16 C" in baseline(Shape.square(256), "e4m3-bf16")[1]
    assert baseline(Shape(256, 256, 144)) == (None, None)  # K not whole blocks
    assert baseline(Shape(256, 200, 256)) == (None, None)
    assert baseline(Shape.square(256), "e5m2") == (None, None)
    assert baseline(Shape.square(256), "e5m2-bf16") == (None, None)


def test_e5m2_gets_no_library_baseline_in_either_c_type(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuBLASLt (and so torch._scaled_mm) multiplies no e5m2 matrix by another:
    an e5m2 run verifies and is timed alone rather than beside other work."""
    monkeypatch.setattr(problem, "torch_baseline", lambda *args: args[-1])

    def baseline(dtype: str) -> tuple:
        point = catalogue.point("tc_fp8_tma_store", Shape.square(256), dtype=dtype)
        return problem.baseline_for(None, point, "tensor", None, None, None)

    assert baseline("e4m3")[0] == "tensor" and "float32 C" in baseline("e4m3")[1]
    assert "bfloat16 C" in baseline("e4m3-bf16")[1]
    assert baseline("e5m2") == (None, None) and baseline("e5m2-bf16") == (None, None)


def test_the_mixed_pair_gets_cublaslts_mixed_product_with_per_tensor_scales(monkeypatch: pytest.MonkeyPatch) -> None:
    """A in e5m2 times B in e4m3 is one of cuBLASLt's FP8 pairs: with per-tensor
    scales, and with row/column ones and a bfloat16 C, the baseline is the same
    mixed product; with row/column scales and a float32 C there is none."""
    monkeypatch.setattr(problem, "torch_baseline", lambda *args: args[-1])

    def baseline(dtype: str, scaling: str) -> tuple:
        spec = catalogue.variant("tc_fp8_tma_store", {"SCALING": int(scaling == "rowcol")})
        point = catalogue.point(spec.id, Shape.square(256), dtype=dtype, spec=spec)
        return problem.baseline_for(None, point, scaling, None, None, None)

    call, name = baseline("e5m2xe4m3", "tensor")
    assert call == "tensor" and "e5m2 x e4m3, per-tensor scales, float32 C" in name
    assert "e5m2 x e4m3, per-tensor scales, bfloat16 C" in baseline("e5m2xe4m3-bf16", "tensor")[1]
    call, name = baseline("e5m2xe4m3-bf16", "rowcol")
    assert call == "rowcol" and "e5m2 x e4m3, row/column scales, bfloat16 C" in name
    assert baseline("e5m2xe4m3", "rowcol") == (None, None)


def test_rungs_are_in_the_catalogue_and_tunable() -> None:
    ids = catalogue.kernel_ids()
    assert [i for i in ids if catalogue.get(i).source.startswith("lowp/")] == IDS
    for kernel_id in IDS:
        assert len(catalogue.configs(kernel_id)) >= 2


def test_row_column_scales_get_pytorchs_product_only_with_a_bfloat16_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """PyTorch's row-wise _scaled_mm writes bfloat16 only: with a float32 C the
    run has no baseline rather than a library call doing other work."""
    monkeypatch.setattr(problem, "torch_baseline", lambda *args: args[-1])
    spec = catalogue.variant("tc_fp8_tma_store", {"SCALING": 1})

    def baseline(shape: Shape, dtype: str) -> tuple:
        point = catalogue.point(spec.id, shape, dtype=dtype, spec=spec)
        return problem.baseline_for(None, point, "rowcol", None, None, None)

    call, name = baseline(Shape.square(256), "e4m3-bf16")
    assert call == "rowcol" and "row/column scales" in name and "bfloat16 C" in name and "cuBLASLt" not in name
    assert baseline(Shape.square(256), "e4m3") == (None, None)
    assert baseline(Shape(256, 200, 256), "e4m3-bf16") == (None, None)  # N not a multiple of 16


@pytest.mark.slow
def test_row_column_scales_compile_without_spills_in_every_configuration() -> None:
    """SCALING is not searched (it changes the work), so the search's spill check
    does not reach it: every searched configuration of the persistent rung, with
    row/column scales, in every C type."""
    for config in catalogue.configs("tc_fp8_tma_store"):
        spec = catalogue.variant("tc_fp8_tma_store", {**config, "SCALING": 1})
        for dtype in spec.dtypes:
            res = compile_kernel(spec, 0, dtype, "sm_90a").resources
            assert res.spill_bytes == 0 and res.stack_bytes == 0, (config, dtype)


@pytest.mark.parametrize(
    ("kernel_id", "config", "words"),
    [
        ("tc_fp8_mma", {"SCALING": 3}, "SCALING must be one of 0 (tensor), 1 (rowcol), 2 (block)"),
        ("tc_fp8_wgmma", {"SCALING": 2}, "SCALING must be one of 0 (tensor), 1 (rowcol)"),
        ("tc_fp8_wgmma", {"BN": 256}, "PROMOTE=1 needs BN = 128"),
        ("tc_fp8_blockscaled", {"BN": 256}, "BN must be 128: one block of B's scales"),
        ("tc_int8_mma", {"STAGES": 1}, "STAGES must be at least 2"),
        ("tc_int8_wgmma", {"BM": 256}, "4 consumer warpgroups do not fit the registers a block holds"),
        ("tc_fp8_tma_store", {"SCALING": 2}, "SCALING must be one of 0 (tensor), 1 (rowcol)"),
        ("tc_fp8_tma_store", {"BN": 160}, "BN must be 128, 144, 192 or 256: one or two passes"),
        ("tc_fp8_tma_store", {"BM": 192}, "BM must be 64 or 128"),
        ("tc_fp8_tma_store", {"CLUSTER": 4}, "CLUSTER must be 1 or 2"),
        ("tc_fp8_tma_store", {"STAGGER": 1, "BM": 64}, "STAGGER=1 needs BM = 128"),
        ("tc_fp8_blockscaled_tma", {"STAGGER": 2}, "STAGGER must be 0 or 1"),
        ("tc_fp8_blockscaled_tma", {"C_BOXES": 0}, "C_BOXES must be at least 1"),
        ("tc_fp8_blockscaled_tma", {"STAGES": 8}, "bytes of dynamic shared memory, over"),
    ],
)
def test_bad_configurations_are_named(kernel_id: str, config: dict, words: str) -> None:
    with pytest.raises(ConstraintError, match=words.replace("(", r"\(").replace(")", r"\)")):
        catalogue.variant(kernel_id, config)


def test_shapes_and_types_the_rungs_cannot_take_are_named() -> None:
    with pytest.raises(ConstraintError, match="not a multiple of 16"):
        catalogue.point("tc_int8_mma", Shape(64, 64, 72))
    with pytest.raises(ConstraintError, match="int32 sum of K int8 products"):
        catalogue.point("tc_int8_wgmma", Shape(64, 64, 2**17))
    with pytest.raises(ConstraintError, match="has no int8 version"):
        catalogue.point("tc_fp8_mma", Shape(64, 64, 64), dtype="int8")
    assert catalogue.get("tc_fp8_mma").compile_arch("sm_89") == "sm_89"


@NEEDS_CUOBJDUMP
@pytest.mark.parametrize("kernel_id", IDS)
def test_defaults_compile_to_their_claimed_instructions(kernel_id: str) -> None:
    spec = catalogue.get(kernel_id)
    archs = list(spec.archs) or ["sm_89", "sm_90"]
    for dtype in spec.dtypes:
        for arch in archs:
            compiled = compile_kernel(spec, 0, dtype, arch)
            assert compiled.resources.spill_bytes == 0, (kernel_id, dtype, arch)
            ops = sass_opcodes(compiled.cubin)
            assert not missing_claims(spec.sass, ops), (kernel_id, dtype, arch, missing_claims(spec.sass, ops))


@NEEDS_CUOBJDUMP
def test_fp8_mma_sync_is_native_on_sm_89_and_emulated_on_sm_90() -> None:
    spec = catalogue.get("tc_fp8_mma")
    ada = sass_opcodes(compile_kernel(spec, 0, "e4m3", "sm_89").cubin)
    hopper = sass_opcodes(compile_kernel(spec, 0, "e4m3", "sm_90").cubin)
    assert total(ada, "QMMA") > 0 and total(ada, "HMMA") == 0
    assert total(hopper, "QMMA") == 0 and total(hopper, "HMMA") > 0


@pytest.mark.slow
@pytest.mark.parametrize("kernel_id", IDS)
def test_every_configuration_compiles_without_spills(kernel_id: str) -> None:
    for config in catalogue.configs(kernel_id):
        spec = catalogue.variant(kernel_id, config)
        for arch in list(spec.archs) or ["sm_89", "sm_90"]:
            for dtype in spec.dtypes:
                res = compile_kernel(spec, 0, dtype, arch).resources
                assert res.spill_bytes == 0 and res.stack_bytes == 0, (kernel_id, config, arch, dtype)


PERSISTENT_FP8 = ["tc_fp8_tma_store", "tc_fp8_blockscaled_tma"]


@pytest.mark.parametrize("kernel_id", PERSISTENT_FP8)
def test_persistent_fp8_rungs_launch_in_clusters_and_store_c_by_tma(kernel_id: str) -> None:
    spec = catalogue.get(kernel_id)
    assert spec.persistent and spec.cluster == (2, 1, 1)
    mixed = {"e5m2xe4m3", "e5m2xe4m3-bf16"} if kernel_id == "tc_fp8_tma_store" else set()
    assert set(spec.dtypes) == {"e4m3", "e5m2", "e4m3-bf16", "e5m2-bf16"} | mixed
    # 4096 / 256 cluster rows x 16 tile columns x 2 blocks: one block per 128 x 256 tile.
    assert spec.grid(Shape.square(4096), 0) == (512, 1, 1)
    alone = catalogue.variant(kernel_id, {"CLUSTER": 1})
    assert alone.cluster is None and alone.grid(Shape(300, 520, 64), 0) == (3 * 3, 1, 1)
    narrow = catalogue.variant(kernel_id, {"BN": 128, "STAGES": 5, "CLUSTER": 1})
    assert narrow.grid(Shape(300, 520, 64), 0) == (3 * 5, 1, 1)
    # 4 stages of 48 KB, two consumers' two 8 KB boxes of C, 8 barriers; block scales add
    # each stage's 128 + 4 floats of scales and a third barrier (scales_free).
    blocks = kernel_id == "tc_fp8_blockscaled_tma"
    scales = 4 * (128 + 4) * 4 + 4 * 8 if blocks else 0
    assert spec.dynamic_smem_bytes(Shape.square(64), 0, "e4m3") == 4 * 384 * 128 + 2 * 2 * 64 * 128 + scales + 8 * 8
    assert spec.dynamic_smem_bytes(Shape.square(64), 0, "e4m3") <= 227 * 1024


def test_a_bfloat16_c_needs_rows_of_whole_16_byte_pieces() -> None:
    with pytest.raises(ConstraintError, match="N = 100 is not a multiple of 8"):
        catalogue.point("tc_fp8_tma_store", Shape(64, 100, 64), dtype="e4m3-bf16")
    with pytest.raises(ConstraintError, match="N = 102 is not a multiple of 4"):
        catalogue.point("tc_fp8_tma_store", Shape(64, 102, 64), dtype="e4m3")
    catalogue.point("tc_fp8_tma_store", Shape(64, 100, 64), dtype="e4m3")


def test_persistent_fp8_problems_know_their_scales_and_c() -> None:
    assert catalogue.get("tc_fp8_blockscaled_tma").problem is not catalogue.get("tc_fp8_tma_store").problem
    assert problem.fp8_inputs("e4m3-bf16") == ("e4m3", "e4m3") and problem.fp8_inputs("e5m2") == ("e5m2", "e5m2")
    assert problem.fp8_inputs("e5m2-bf16") == ("e5m2", "e5m2")
    assert problem.BF16_C == ("e4m3-bf16", "e5m2-bf16", "e5m2xe4m3-bf16")
    assert problem.fp8_inputs("e5m2xe4m3-bf16") == ("e5m2", "e4m3") and problem.fp8_inputs("e4m3") == ("e4m3", "e4m3")
    # A bfloat16 C adds its rounding to the promoted sums' tolerance.
    assert problem.fp8_tolerance(128, bf16_c=True) == pytest.approx(problem.fp8_tolerance(128) + 4e-3)


PERSISTENT_CONFIGS = [
    *[("tc_fp8_tma_store", {"CLUSTER": c, "STAGGER": t}) for c in (1, 2) for t in (0, 1)],
    ("tc_fp8_blockscaled_tma", {"CLUSTER": 2}),
    ("tc_fp8_blockscaled_tma", {"BN": 128, "STAGES": 5, "STAGGER": 1}),
    *[(k, {"BN": 128, "STAGES": 5, "CLUSTER": c}) for k in PERSISTENT_FP8 for c in (1, 2)],
    ("tc_fp8_tma_store", {"BN": 128, "STAGES": 6, "PROMOTE_K": 256}),
    ("tc_fp8_tma_store", {"BN": 192}),
    ("tc_fp8_tma_store", {"BN": 144, "STAGES": 6, "C_BOXES": 1}),
    ("tc_fp8_tma_store", {"BN": 144, "STAGES": 5, "CLUSTER": 1}),
    ("tc_fp8_tma_store", {"BN": 192, "CLUSTER": 1, "STAGGER": 1}),
    ("tc_fp8_tma_store", {"BN": 128, "STAGES": 6, "PROMOTE_K": 256, "CLUSTER": 1}),
    ("tc_fp8_tma_store", {"BN": 128, "PROMOTE_K": 256, "STAGES": 4, "C_BOXES": 4}),
    ("tc_fp8_tma_store", {"BN": 128, "STAGES": 6, "STAGGER": 1, "PROMOTE_K": 256}),
]


@pytest.mark.parametrize(("kernel_id", "config"), PERSISTENT_CONFIGS, ids=[f"{k}-{c}" for k, c in PERSISTENT_CONFIGS])
def test_persistent_fp8_rungs_compile_without_serialised_wgmma(kernel_id: str, config: dict[str, int]) -> None:
    """ptxas serialises every wgmma (C7518) when it cannot prove the
    accumulators untouched while one runs; the kernel would still verify, at
    a fraction of the rate, so the compile log is the only place to see it."""
    spec = catalogue.variant(kernel_id, config)
    for dtype in spec.dtypes:
        compiled = compile_kernel(spec, 0, dtype, "sm_90a")
        assert compiled.resources.spill_bytes == 0 and compiled.resources.stack_bytes == 0, (kernel_id, dtype)
        assert "serialized" not in compiled.log, (kernel_id, dtype)


def test_promotion_every_256_k_doubles_the_chain_and_its_tolerance() -> None:
    rung = lowp.LADDER.rung("tc_fp8_tma_store")
    assert family._chain(rung, rung.config({})) == 128
    assert family._chain(rung, rung.config({"BN": 128, "PROMOTE_K": 256})) == 256
    # 8 k = 32 steps in the tensor cores between promotions instead of 4: the bound's linear term doubles.
    assert problem.fp8_tolerance(256) == pytest.approx(1e-4 + 8 * 2.0**-13)
    longer = catalogue.variant("tc_fp8_tma_store", {"BN": 128, "PROMOTE_K": 256})
    assert longer.problem is not catalogue.get("tc_fp8_tma_store").problem
    with pytest.raises(ConstraintError, match="PROMOTE_K must be 128 or 256"):
        catalogue.variant("tc_fp8_tma_store", {"PROMOTE_K": 384})
    # Two K tiles a group do not fit a consumer's registers beside 64 x 256 sums.
    with pytest.raises(ConstraintError, match="PROMOTE_K=256 needs BN = 128"):
        catalogue.variant("tc_fp8_tma_store", {"PROMOTE_K": 256})
    # One pass of 192 columns: per-tensor scales only (a block of B's scales is 128 columns).
    assert catalogue.variant("tc_fp8_tma_store", {"BN": 192}).problem is not None
    with pytest.raises(ConstraintError, match="BN=192 takes per-tensor scales only"):
        catalogue.variant("tc_fp8_blockscaled_tma", {"BN": 192})
    # 144 columns (cuBLASLt's tile at 8192) likewise.
    assert catalogue.variant("tc_fp8_tma_store", {"BN": 144, "STAGES": 5}).problem is not None
    with pytest.raises(ConstraintError, match="BN=144 takes per-tensor scales only"):
        catalogue.variant("tc_fp8_blockscaled_tma", {"BN": 144, "STAGES": 5})
    # Block scales change every 128 K: the block-scaled rung has no such parameter.
    with pytest.raises(GemmlabError, match="PROMOTE_K"):
        catalogue.variant("tc_fp8_blockscaled_tma", {"PROMOTE_K": 256})


def half_warp_wavefronts(rows: list[int], bytes_: list[int]) -> int:
    """Wavefronts of one half warp's 8-byte stores into a 128-byte-swizzled box: the
    most threads on one bank (no two threads here write the same word)."""
    load = [0] * 32
    for r, b in zip(rows, bytes_, strict=True):
        word = (((b // 16) ^ (r % 8)) * 16 + b % 16) // 4  # the swizzled chunk, then the 4-byte word
        load[word % 32] += 1
        load[(word + 1) % 32] += 1
    return max(load)


@pytest.mark.parametrize("spread", [False, True])
def test_float32_box_writes_take_one_wavefront_per_half_warp_only_when_spread(spread: bool) -> None:
    """The bank arithmetic of wgmma8.cuh's write_box_spread, replayed: lane l writes row
    R = l / 4 at float 8 g + 2 (l % 4); spread, odd rows write group g ^ 2 instead."""
    worst = 0
    for warp in range(4):
        for g in range(4):
            for half in (range(16), range(16, 32)):
                rows = [16 * warp + lane // 4 for lane in half]
                groups = [g ^ 2 if spread and r % 2 else g for r in rows]
                bytes_ = [4 * (8 * h + 2 * (lane % 4)) for h, lane in zip(groups, half, strict=True)]
                worst = max(worst, half_warp_wavefronts(rows, bytes_))
    assert worst == (1 if spread else 2)


@NEEDS_CUOBJDUMP
def test_float32_c_pays_one_select_per_value_for_its_spread_writes() -> None:
    spec = catalogue.get("tc_fp8_tma_store")
    f32 = sass_opcodes(compile_kernel(spec, 0, "e4m3", "sm_90a").cubin)
    bf16 = sass_opcodes(compile_kernel(spec, 0, "e4m3-bf16", "sm_90a").cubin)
    # BN / 2 = 128 sums a thread, stored as 64 pairs; the bfloat16 epilogue (already conflict-free) selects nothing.
    sums = catalogue.configs("tc_fp8_tma_store")[0]["BN"] // 2
    assert total(f32, "STS") == sums // 2 and total(f32, "FSEL") == sums
    assert total(bf16, "STS") == sums // 2 and total(bf16, "FSEL") == 0


@NEEDS_CUOBJDUMP
@pytest.mark.parametrize(("kernel_id", "dtype"), [(k, d) for k in PERSISTENT_FP8 for d in catalogue.get(k).dtypes])
def test_the_tensor_cores_read_the_inputs_format_and_a_bfloat16_c_is_packed(kernel_id: str, dtype: str) -> None:
    """Each element type's cubin multiplies in its inputs' formats only (QGMMA
    .E4M3.E4M3, .E5M2.E5M2, or .E5M2.E4M3 for the mixed pair) and rounds C to
    bfloat16 (F2FP.BF16) exactly when C is bfloat16."""
    ops = sass_opcodes(compile_kernel(catalogue.get(kernel_id), 0, dtype, "sm_90a").cubin)
    a, b = (f.upper() for f in problem.fp8_inputs(dtype))
    formats = {".".join(k.split(".")[-2:]) for k in ops if k.startswith("QGMMA.")}
    assert formats == {f"{a}.{b}"}
    assert (total(ops, "F2FP") > 0) == (dtype in problem.BF16_C)


@NEEDS_CUOBJDUMP
@pytest.mark.parametrize("kernel_id", PERSISTENT_FP8)
def test_slab_one_starts_behind_only_when_asked(kernel_id: str) -> None:
    """STAGGER = 1 adds one arrival (BAR.ARV, slab 0 after its first group)
    and one wait on named barrier 3 (slab 1 before its first); the default
    has neither."""
    ops = sass_opcodes(compile_kernel(catalogue.get(kernel_id), 0, "e4m3", "sm_90a").cubin)
    staggered = sass_opcodes(compile_kernel(catalogue.variant(kernel_id, {"STAGGER": 1}), 0, "e4m3", "sm_90a").cubin)
    assert ops["BAR.ARV"] == 0 and staggered["BAR.ARV"] >= 1
    assert total(staggered, "BAR") >= total(ops, "BAR") + 2


@pytest.mark.parametrize(("scaling", "rows_per_group"), [("tensor", 1), ("rowcol", 1), ("block", 1), ("block", 128)])
def test_a_renewal_shuffles_rows_within_their_scales_and_keeps_the_exact_values_true(scaling, rows_per_group) -> None:
    """Every timed launch of an FP8 rung gets its operands renewed by a shuffle
    of rows within their scale groups and a negation of half of them (problems/lowp.py:
    _reshuffled): the codes and scales then still decode to the exact values the
    sketch is computed from, and the rows have moved."""
    from gemmlab.problems.lowp import _reshuffled

    rng = np.random.default_rng(3)
    rows, k = 256, 256
    q = problem.quantise(np, problem.draw(np, rng, rows, k), E4M3, scaling, rows_per_group)
    codes, scales = q.codes.copy(), q.scales.copy()
    exact, write = _reshuffled(np, rng, codes, scales, q.exact, scaling, rows_per_group)
    write()
    group_scales = scales.reshape(-1, 1) if scaling != "block" else np.ascontiguousarray(scales.T)
    full = problem.expand(np, group_scales.astype(np.float64), rows, k, scaling, rows_per_group)
    assert np.array_equal(decode(np, codes, E4M3) * full, exact)
    assert not np.array_equal(codes, q.codes)
    if scaling == "block" and rows_per_group == 128:  # rows stay inside their 128-row group
        assert sorted(np.abs(exact[:128]).sum(axis=1)) == sorted(np.abs(q.exact[:128]).sum(axis=1))
