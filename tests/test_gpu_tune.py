"""The tuner on the GPU: a short search of sgemm_warptile at 1024 stores a
configuration that verifies and is not slower than the catalogue's default;
a short search of a tensor-core rung stores, per element type, a configuration
that verifies in that type and is not used for another."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemmlab.core.shapes import Shape
from gemmlab.kernels.sgemm import spec as sgemm
from gemmlab.store.store import Store
from gemmlab.studies.tune import current_device, tune, tuned_spec

pytestmark = pytest.mark.gpu

KERNEL = "sgemm_warptile"
SHAPE = Shape.square(1024)
# Two runs of one kernel at 1024 (about 0.05 ms a launch) differ by a few per
# cent; the tuned configuration may only lose by more than that if it is worse.
NOISE = 0.9


@pytest.mark.whole_gpu  # the tuner ranks by time, and the test compares two rates
def test_tuned_warptile_verifies_and_keeps_up(tmp_path: Path) -> None:
    from gemmlab.measure.run import run

    with Store.open(tmp_path / "tune.sqlite") as store:
        summary = tune(KERNEL, [SHAPE], store, budget_seconds=20, progress=False)
        assert not summary.rejected and not summary.failed, summary.lines()
        assert "small" in summary.best, summary.lines()
        spec = tuned_spec(KERNEL, SHAPE, store, current_device()[0])
    assert spec is not None and spec.config == summary.best["small"].config

    tuned = run(KERNEL, SHAPE, spec=spec, reps=50, baseline=False)
    default = run(KERNEL, SHAPE, reps=50, baseline=False)
    assert tuned.error < 1e-5 and tuned.config == summary.best["small"].config
    assert default.config == sgemm.LADDER.rung(KERNEL).config()
    assert tuned.gflops >= NOISE * default.gflops, (tuned.config, tuned.gflops, default.gflops)


TC_KERNEL = "tc_wmma"  # every element type, on any GPU from sm_80 on


@pytest.mark.parametrize("dtype", ["bfloat16", "tf32"])
def test_tuned_tensor_rung_verifies_in_its_element_type(tmp_path: Path, dtype: str) -> None:
    from gemmlab.measure.run import run

    with Store.open(tmp_path / "tune.sqlite") as store:
        summary = tune(TC_KERNEL, [SHAPE], store, dtype=dtype, budget_seconds=30, progress=False)
        assert summary.dtype == dtype and not summary.rejected and not summary.failed, summary.lines()
        assert "small" in summary.best, summary.lines()
        device_name = current_device()[0]
        spec = tuned_spec(TC_KERNEL, SHAPE, store, device_name, dtype)
        assert tuned_spec(TC_KERNEL, SHAPE, store, device_name, "float16") is None  # not tuned
    assert spec is not None and spec.config == summary.best["small"].config

    # run() raises VerificationError for a wrong result: returning is verifying.
    result = run(TC_KERNEL, SHAPE, dtype=dtype, spec=spec, reps=20, baseline=False)
    assert result.dtype == dtype and result.config == summary.best["small"].config
