"""The persistent FP8 rungs on the GPU (tc_fp8_tma_store,
tc_fp8_blockscaled_tma): every element type (float32 and bfloat16 C), with
and without clusters, on shapes with ragged edges, part tiles of K, a
cluster's second tile row past M, and more tiles than the GPU holds blocks
(so every block walks several tiles and its ring runs on across them)."""

from __future__ import annotations

import importlib.util

import pytest

from gemmlab.core import gpu
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.problems.lowp import MIXED

pytestmark = pytest.mark.gpu

RUNGS = ["tc_fp8_tma_store", "tc_fp8_blockscaled_tma"]
# N in whole 16-byte rows of C (a multiple of 8 serves both C types).
SHAPES = [
    Shape(256, 256, 256),
    Shape(300, 520, 144),  # ragged M and N; one 128-wide K tile and a part tile of 16
    Shape(1, 40, 272),  # one row; two K tiles and a part
    Shape(200, 136, 48),  # K under one tile; N past one block of B's scales
    Shape(130, 264, 400),  # a clustered pair's second block: its first slab has rows 128-191, its second none (M = 130)
    Shape(2304, 1160, 272),  # 18 x 10 = 180 tiles: more than 132 SMs hold, so blocks walk on to a second tile
]
CASES = [(k, d, c) for k in RUNGS for d in catalogue.get(k).dtypes for c in (1, 2)]
# Row/column scales (tc_fp8_tma_store's SCALING = 1), in the tiles that differ in how a thread's columns lie.
ROWCOL = [{"CLUSTER": c} for c in (1, 2)] + [{"BN": 192, "CLUSTER": 1}, {"BN": 144}, {"BM": 64, "BN": 128, "STAGES": 8}]


def _hopper() -> bool:
    return gpu.describe(0).arch == "sm_90"


@pytest.mark.parametrize(("kernel_id", "dtype", "cluster"), CASES, ids=[f"{k}-{d}-c{c}" for k, d, c in CASES])
def test_persistent_fp8_rung_verifies_on_awkward_shapes(kernel_id: str, dtype: str, cluster: int) -> None:
    from gemmlab.measure.run import run

    if not _hopper():
        pytest.skip(f"{kernel_id} needs sm_90a")
    spec = catalogue.variant(kernel_id, {"CLUSTER": cluster})
    for shape in SHAPES:
        result = run(kernel_id, shape, dtype=dtype, reps=1, warmup=1, baseline=False, spec=spec)
        assert 0 <= result.error <= result.tolerance, (shape, result.error, result.tolerance)


@pytest.mark.parametrize("config", ROWCOL, ids=[str(c) for c in ROWCOL])
@pytest.mark.parametrize("dtype", catalogue.get("tc_fp8_tma_store").dtypes)
def test_row_column_scales_verify_on_awkward_shapes(config: dict, dtype: str) -> None:
    """Each sum times its row's scale of A and its column's of B in the epilogue:
    ragged edges, where a thread's rows or columns lie past M or N, included."""
    from gemmlab.measure.run import run

    if not _hopper():
        pytest.skip("tc_fp8_tma_store needs sm_90a")
    spec = catalogue.variant("tc_fp8_tma_store", {**config, "SCALING": 1})
    for shape in SHAPES:
        result = run("tc_fp8_tma_store", shape, dtype=dtype, reps=1, warmup=1, baseline=False, spec=spec)
        assert 0 <= result.error <= result.tolerance, (shape, result.error, result.tolerance)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed (the torch extra)")
@pytest.mark.parametrize("dtype", ["e4m3-bf16", "e5m2xe4m3-bf16"])
def test_row_column_baseline_computes_the_same_product(dtype: str) -> None:
    """PyTorch's row-wise torch._scaled_mm, given the scales as problems/lowp.py
    hands them over, gives the float64 reference within the rung's tolerance,
    and the runner times it beside the rung."""
    import cupy as cp
    import torch

    from gemmlab.measure.run import run
    from gemmlab.problems import lowp

    if not _hopper():
        pytest.skip("tc_fp8_tma_store needs sm_90a")
    spec = catalogue.variant("tc_fp8_tma_store", {"SCALING": 1})
    point = catalogue.point(spec.id, Shape(256, 384, 512), dtype=dtype, spec=spec)
    prepared = point.spec.problem.prepare(cp, point, cp.random.default_rng(4))
    arrays = prepared.arrays
    sa, sb = lowp.torch_rowcol_scales(torch, arrays["scale_a"], arrays["scale_b"])
    kinds = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    fa, fb = (kinds[f] for f in lowp.fp8_inputs(dtype))
    a, b = torch.from_dlpack(arrays["A"]).view(fa), torch.from_dlpack(arrays["B"]).view(fb)
    c = torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16).double()
    ref = torch.from_dlpack(prepared.buffers[5])  # the float64 reference (problems/lowp.py's buffer order)
    error = float((c - ref).norm() / ref.norm())
    assert error <= lowp.fp8_tolerance(128, bf16_c=True), error
    result = run("tc_fp8_tma_store", Shape.square(1024), dtype=dtype, reps=3, spec=spec)
    assert result.error <= result.tolerance
    assert "row/column scales" in result.baseline_name and "bfloat16 C" in result.baseline_name
    assert result.baseline_gflops and result.baseline_gflops > 0


def test_repeated_launches_agree() -> None:
    """The same inputs launched again give the same C: no state (barrier phase,
    box turn) leaks from one launch into the next."""
    from gemmlab.measure.run import run

    if not _hopper():
        pytest.skip("tc_fp8_tma_store needs sm_90a")
    shape = Shape(1024, 1024, 1024)
    first = run("tc_fp8_tma_store", shape, dtype="e4m3", reps=5, warmup=2, baseline=False, seed=5)
    again = run("tc_fp8_tma_store", shape, dtype="e4m3", reps=1, warmup=1, baseline=False, seed=5)
    assert first.error <= first.tolerance and first.error == again.error


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed (the torch extra)")
@pytest.mark.parametrize("dtype", ["e4m3", "e4m3-bf16", *MIXED])
def test_scaled_mm_baseline_in_the_same_c_type(dtype: str) -> None:
    from gemmlab.measure.run import run

    if not _hopper():
        pytest.skip("tc_fp8_tma_store needs sm_90a")
    result = run("tc_fp8_tma_store", Shape.square(1024), dtype=dtype, reps=3)
    assert result.error <= result.tolerance
    assert ("bfloat16 C" if dtype.endswith("-bf16") else "float32 C") in result.baseline_name
    assert ("e5m2 x e4m3" in result.baseline_name) == (dtype in MIXED)
    assert result.baseline_gflops and result.baseline_gflops > 0


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed (the torch extra)")
@pytest.mark.parametrize("dtype", MIXED)
def test_the_mixed_baseline_computes_the_same_product(dtype: str) -> None:
    """cuBLASLt's e5m2 x e4m3 product, given A's codes as e5m2 and B's as e4m3
    the way problems/lowp.py hands them over, gives the float64 reference within
    the rung's tolerance; read the other way round it would not."""
    import cupy as cp
    import torch

    from gemmlab.problems import lowp

    if not _hopper():
        pytest.skip("tc_fp8_tma_store needs sm_90a")
    point = catalogue.point("tc_fp8_tma_store", Shape(256, 384, 512), dtype=dtype)
    prepared = point.spec.problem.prepare(cp, point, cp.random.default_rng(6))
    arrays = prepared.arrays
    sa, sb = (torch.from_dlpack(arrays[k]).reshape(()) for k in ("scale_a", "scale_b"))
    out = torch.bfloat16 if dtype in lowp.BF16_C else torch.float32
    ref = torch.from_dlpack(prepared.buffers[5])  # the float64 reference (problems/lowp.py's buffer order)

    def error(fa: torch.dtype, fb: torch.dtype) -> float:
        a, b = torch.from_dlpack(arrays["A"]).view(fa), torch.from_dlpack(arrays["B"]).view(fb)
        c = torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=out).double()
        return float((c - ref).norm() / ref.norm())

    assert error(torch.float8_e5m2, torch.float8_e4m3fn) <= lowp.fp8_tolerance(128, out == torch.bfloat16)
    # Swapped, the error is large, or NaN (e4m3 codes past e5m2's finite ones).
    assert not error(torch.float8_e4m3fn, torch.float8_e5m2) <= 0.1


@pytest.mark.parametrize("dtype", ["e5m2", "e5m2-bf16"])
def test_e5m2_runs_verified_with_no_baseline(dtype: str) -> None:
    """cuBLASLt takes no e5m2 x e5m2 product: the run verifies and times the
    rung and says it has no baseline, in either C type."""
    from gemmlab.measure.run import run

    if not _hopper():
        pytest.skip("tc_fp8_tma_store needs sm_90a")
    result = run("tc_fp8_tma_store", Shape.square(1024), dtype=dtype, reps=3)
    assert 0 <= result.error <= result.tolerance and result.gflops > 0
    assert result.baseline_name is None and result.baseline_gflops is None


PROMOTE_256 = [("e4m3", 2), ("e4m3-bf16", 2), ("e4m3", 1)]


@pytest.mark.parametrize(("dtype", "cluster"), PROMOTE_256, ids=[f"{d}-c{c}" for d, c in PROMOTE_256])
def test_promotion_every_256_k_verifies_on_awkward_shapes(dtype: str, cluster: int) -> None:
    """PROMOTE_K = 256 sums two K tiles per promotion; an odd count of K tiles
    (K = 272: three) gets a fourth wholly past K, which TMA fills with zeros."""
    from gemmlab.measure.run import run

    if not _hopper():
        pytest.skip("tc_fp8_tma_store needs sm_90a")
    spec = catalogue.variant("tc_fp8_tma_store", {"BN": 128, "STAGES": 6, "PROMOTE_K": 256, "CLUSTER": cluster})
    for shape in SHAPES:
        result = run("tc_fp8_tma_store", shape, dtype=dtype, reps=1, warmup=1, baseline=False, spec=spec)
        assert 0 <= result.error <= result.tolerance, (shape, result.error, result.tolerance)


def test_promotion_every_256_k_stays_inside_its_derived_bound_at_large_k() -> None:
    """At K = 8192 (64 K tiles, 32 promotions) the error of the longer chain stays
    within 1e-4 + 8 x 2^-13, the bound problems/lowp.py derives for it."""
    from gemmlab.measure.run import run

    if not _hopper():
        pytest.skip("tc_fp8_tma_store needs sm_90a")
    shape = Shape(256, 256, 8192)
    spec = catalogue.variant("tc_fp8_tma_store", {"BN": 128, "STAGES": 6, "PROMOTE_K": 256})
    result = run("tc_fp8_tma_store", shape, dtype="e4m3", reps=1, warmup=1, baseline=False, spec=spec, seed=3)
    assert result.tolerance == pytest.approx(1e-4 + 8 * 2.0**-13)
    assert 0 <= result.error <= result.tolerance, (result.error, result.tolerance)


SCHEDULES = [
    ("tc_fp8_tma_store", {"STAGGER": 1}, "e4m3"),
    ("tc_fp8_tma_store", {"STAGGER": 1, "CLUSTER": 1}, "e4m3-bf16"),
    ("tc_fp8_tma_store", {"BN": 128, "STAGES": 6, "STAGGER": 1, "PROMOTE_K": 256}, "e4m3"),
    ("tc_fp8_blockscaled_tma", {"STAGGER": 1}, "e4m3"),
    ("tc_fp8_blockscaled_tma", {"STAGGER": 1, "CLUSTER": 1}, "e5m2"),
    ("tc_fp8_tma_store", {"BN": 256, "STAGES": 4}, "e4m3-bf16"),
    ("tc_fp8_tma_store", {"BN": 256, "STAGES": 3, "C_BOXES": 4}, "e4m3"),
    ("tc_fp8_tma_store", {"BN": 256, "STAGES": 4, "STAGGER": 1, "CLUSTER": 1}, "e5m2"),
    ("tc_fp8_blockscaled_tma", {"BN": 256, "STAGES": 4, "STAGGER": 1}, "e4m3"),
    ("tc_fp8_blockscaled_tma", {"BN": 128, "STAGES": 5}, "e4m3-bf16"),
    ("tc_fp8_tma_store", {"BN": 128, "STAGES": 6, "PROMOTE_K": 256}, "e4m3"),
    ("tc_fp8_tma_store", {"BN": 192}, "e4m3-bf16"),
    ("tc_fp8_tma_store", {"BN": 192, "CLUSTER": 1, "STAGGER": 1}, "e4m3"),
    # 144 columns: C's last box overlaps the one before it (both C types).
    ("tc_fp8_tma_store", {"BN": 144, "STAGES": 6, "C_BOXES": 1}, "e4m3"),
    ("tc_fp8_tma_store", {"BN": 144, "STAGES": 5, "CLUSTER": 1}, "e4m3-bf16"),
]


@pytest.mark.parametrize(("kernel_id", "config", "dtype"), SCHEDULES, ids=[f"{k}-{c}-{d}" for k, c, d in SCHEDULES])
def test_stagger_and_two_pass_tiles_verify_on_awkward_shapes(kernel_id: str, config: dict, dtype: str) -> None:
    """STAGGER = 1: slab 1 starts its first group once slab 0's has completed
    (named barrier 3); BN = 256: two passes of 128 columns a stage through one
    partial slab, each with its own block of B's scales. The shapes include
    K = 48 (one group per tile), N ragged against 256 (a second pass wholly
    or partly past N), blocks walking several tiles, and a second slab with
    no rows of its own, which must still take part in the stagger (a missed
    arrival would hang, not mis-sum)."""
    from gemmlab.measure.run import run

    if not _hopper():
        pytest.skip(f"{kernel_id} needs sm_90a")
    spec = catalogue.variant(kernel_id, config)
    for shape in SHAPES:
        result = run(kernel_id, shape, dtype=dtype, reps=2, warmup=1, baseline=False, spec=spec)
        assert 0 <= result.error <= result.tolerance, (shape, result.error, result.tolerance)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed (the torch extra)")
@pytest.mark.parametrize("dtype", ["e4m3", "e4m3-bf16"])
def test_block_scaled_baseline_computes_the_same_product(dtype: str) -> None:
    """torch._scaled_mm with the block scales laid out as problems/lowp.py
    hands them over gives the float64 reference within the rung's own
    tolerance (a wrong layout was off by 30% on an H100), and the runner
    times it beside the rung."""
    import cupy as cp
    import torch

    from gemmlab.measure.run import run
    from gemmlab.problems import lowp

    if not _hopper():
        pytest.skip("tc_fp8_blockscaled_tma needs sm_90a")
    point = catalogue.point("tc_fp8_blockscaled_tma", Shape(256, 384, 512), dtype=dtype)
    prepared = point.spec.problem.prepare(cp, point, cp.random.default_rng(4))
    arrays = prepared.arrays
    sa, sb = lowp.torch_block_scales(torch, arrays["scale_a"], arrays["scale_b"])
    fp8 = torch.float8_e4m3fn
    a = torch.from_dlpack(arrays["A"]).view(fp8)
    b = torch.from_dlpack(arrays["B"]).view(fp8)
    out = torch.bfloat16 if dtype == "e4m3-bf16" else torch.float32
    c = torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=out).double()
    ref = torch.from_dlpack(prepared.buffers[5])  # the float64 reference (problems/lowp.py's buffer order)
    error = float((c - ref).norm() / ref.norm())
    assert error <= lowp.fp8_tolerance(128, bf16_c=dtype == "e4m3-bf16"), error
    result = run("tc_fp8_blockscaled_tma", Shape.square(1024), dtype=dtype, reps=3)
    assert result.error <= result.tolerance
    assert "block scales" in result.baseline_name and result.baseline_gflops > 0
