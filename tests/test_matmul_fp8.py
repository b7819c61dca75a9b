"""FP8 through gemmlab.matmul without a GPU (issue 50): what the call takes
and refuses (NumPy arrays stand in for CuPy ones: only shapes, dtypes and
flags are read), the scales as the kernel reads them, and the dispatcher's
choice for the FP8 types."""

from __future__ import annotations

import numpy as np
import pytest

from gemmlab.api import fp8
from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.studies import dispatch


def _codes(rows: int, cols: int) -> np.ndarray:
    return np.zeros((rows, cols), dtype=np.uint8)


def _check(a, b, c=None, *, alpha=1.0, beta=0.0, out_dtype=None, fmt="e4m3"):
    return fp8.check_fp8_operands(a, b, c, alpha=alpha, beta=beta, out_dtype=out_dtype, fmt=fmt)


def test_e4m3_codes_with_b_as_the_transpose_view_of_n_by_k() -> None:
    a, bt = _codes(64, 128), _codes(32, 128)
    assert _check(a, bt.T) == ("e4m3", Shape(64, 32, 128), True)
    assert _check(a, bt.T, out_dtype="bfloat16") == ("e4m3-bf16", Shape(64, 32, 128), True)
    assert _check(a, bt.T, out_dtype="torch.bfloat16")[0] == "e4m3-bf16"
    assert _check(a, np.ascontiguousarray(bt.T)) == ("e4m3", Shape(64, 32, 128), False)  # copied at launch


@pytest.mark.parametrize(
    ("change", "cause", "fix"),
    [
        ({"fmt": "e5m2"}, "takes e4m3 inputs; these are e5m2", "gemmlab run tc_fp8_tma_store"),
        ({"fmt": None}, "not marked as FP8", 'fp8="e4m3"'),
        ({"alpha": 2.0}, "no alpha, beta or input C", "Fold alpha into scale_a"),
        ({"c": np.zeros((64, 32), np.float32), "beta": 1.0}, "no alpha, beta or input C", "beta * c"),
        ({"out_dtype": "float16"}, "not float16", 'out_dtype="bfloat16"'),
    ],
)
def test_what_the_fp8_product_refuses_is_named_with_its_fix(change: dict, cause: str, fix: str) -> None:
    with pytest.raises(GemmlabError) as caught:
        _check(_codes(64, 128), _codes(32, 128).T, **change)
    assert cause in caught.value.cause and fix in caught.value.fix


def test_operands_that_are_not_codes_or_do_not_fit_are_refused() -> None:
    with pytest.raises(GemmlabError, match="FP8 codes are bytes"):
        _check(np.zeros((4, 16), np.float32), _codes(8, 16).T)
    with pytest.raises(GemmlabError, match="columns must equal"):
        _check(_codes(4, 16), _codes(8, 32).T)
    with pytest.raises(GemmlabError, match="neither contiguous nor the transpose view"):
        _check(_codes(4, 16), _codes(32, 32)[::2, :16].T)
    with pytest.raises(GemmlabError, match="a is not C-contiguous"):
        _check(_codes(16, 4).T, _codes(8, 16).T)


def test_a_scale_is_one_float32_on_the_device() -> None:
    assert fp8.device_scale(np, 0.5, "scale_a").tolist() == [0.5]
    assert fp8.device_scale(np, np.array(2.0, np.float32), "scale_b").shape == (1,)
    with pytest.raises(GemmlabError, match="needs scale_a") as caught:
        fp8.device_scale(np, None, "scale_a")
    assert "scale_a=1.0" in caught.value.fix
    with pytest.raises(GemmlabError, match="one float32 value; it is float64 with 3 elements"):
        fp8.device_scale(np, np.ones(3), "scale_b")


def test_the_fp8_product_is_asked_for_by_scales_or_fp8() -> None:
    a = _codes(4, 16)
    assert not fp8.wants_fp8(a, a, None, None, None)
    assert fp8.wants_fp8(a, a, 1.0, None, None) and fp8.wants_fp8(a, a, None, None, "e4m3")


@pytest.mark.parametrize("dtype", ["e4m3", "e4m3-bf16"])
def test_the_dispatcher_takes_only_configurations_that_run_on_a_callers_arrays(dtype: str) -> None:
    """Per-tensor scales and sums promoted into FP32: a block-scaled or a
    non-promoting configuration is never chosen for gemmlab.matmul."""
    from gemmlab.studies.costmodel import Calibration, GPUModel

    ranked = dispatch.model_ranked(Shape(4096, 4096, 4096), dtype, "sm_90a", GPUModel.assumed(), Calibration())
    assert ranked and all(r.candidate.spec.problem.operands is not None for r in ranked)
    assert all(r.candidate.config.get("SCALING", 0) == 0 and r.candidate.config.get("PROMOTE", 1) for r in ranked)
    assert dispatch.DEFAULTS[dtype][0] == "tc_fp8_tma_store"
    non_promoting = catalogue.variant("tc_fp8_wgmma", {"BN": 256, "PROMOTE": 0})
    assert non_promoting.problem.operands is None


def test_a_k_that_breaks_the_tensor_maps_is_refused_by_every_rung() -> None:
    from gemmlab.core.errors import ConstraintError

    with pytest.raises(ConstraintError, match="No kernel of gemmlab takes"):
        dispatch.choose([], Shape(64, 64, 40), "e4m3-bf16", "sm_90a")
