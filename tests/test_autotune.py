"""Autotuning on first call (issue 50): the model's few best candidates for a
shape with no pick of its own are verified and timed, the fastest is stored,
and every later call runs it. No GPU: the runner and the device are fakes."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from dispatch_fakes import fake_result
from gemmlab.core.errors import GemmlabError, VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.store.store import Store
from gemmlab.studies import autotune, dispatch
from gemmlab.studies.candidates import Device
from gemmlab.studies.costmodel import Calibration, GPUModel

H200 = GPUModel("NVIDIA H200", (9, 0), 132, 1.98, 4814.0)
DEVICE = Device("NVIDIA H200", "9.0", "sm_90a", 132, H200)
SHAPE = Shape(1597, 24, 2069)


def test_the_models_best_candidates_are_timed_and_the_fastest_stored(tmp_path: Path) -> None:
    ranked = dispatch.model_ranked(SHAPE, "float32", "sm_90a", H200, Calibration())[: autotune.TOP]
    fastest = ranked[2].candidate  # not the model's first: the measurement decides
    tried = []

    def runner(spec, shape, **options):
        tried.append((spec.id, spec.config))
        return fake_result(spec, shape, 0.01 if (spec.id, spec.config) == (fastest.kernel, fastest.config) else 0.02)

    with Store.open(tmp_path / "r.sqlite") as store:
        pick = autotune.autotune_shape(store, SHAPE, "float32", DEVICE, [], runner=runner)
        stored = store.picks("NVIDIA H200")
    assert tried == [(r.candidate.kernel, r.candidate.config) for r in ranked]
    assert (pick.kernel, pick.config.values, pick.median_ms) == (fastest.kernel, fastest.config, 0.01)
    assert stored == [dataclasses.replace(pick, id=stored[0].id, created=stored[0].created)]
    chosen = dispatch.choose(stored, SHAPE, "float32", "sm_90a", gpu=H200)
    assert (chosen.reason, chosen.kernel, chosen.config) == (dispatch.TUNED, fastest.kernel, fastest.config)


def test_when_no_candidate_verifies_the_error_names_each_failure(tmp_path: Path) -> None:
    def runner(spec, shape, **options):
        raise VerificationError(f"{spec.id} wrote the wrong answer", "fix it")

    with Store.open(tmp_path / "r.sqlite") as store, pytest.raises(GemmlabError) as caught:
        autotune.autotune_shape(store, SHAPE, "float32", DEVICE, [], runner=runner)
    assert "none of the model's 4 best candidates verified" in str(caught.value)
    assert "wrote the wrong answer" in str(caught.value) and "without autotune=True" in caught.value.fix
    with Store.open(tmp_path / "r.sqlite", readonly=True) as store:
        assert store.picks() == []  # nothing stored


def test_matmul_autotunes_once_per_shape_and_then_reads_the_pick(tmp_path: Path, monkeypatch) -> None:
    from gemmlab.api import matmul
    from gemmlab.measure import gemm

    info = SimpleNamespace(name="GPU Y", cc=(9, 0), arch="sm_90a", sm_count=132, sm_clock_mhz=1980.0,
                           peak_bandwidth_gbs=4814.0)  # fmt: skip
    monkeypatch.setattr(gemm, "device_info", lambda index=0: info)
    calls = []

    def runner(spec, shape, **options):
        calls.append(spec.id)
        return fake_result(spec, shape, 0.01)

    monkeypatch.setattr(autotune, "_on_device", lambda index: runner)
    monkeypatch.setattr(autotune, "compile_candidates", lambda *args: None)
    db = tmp_path / "r.sqlite"
    matmul.clear_cache()
    plain, _ = matmul.dispatch(SHAPE, "float32", db)
    assert plain.reason == dispatch.MODEL and not calls and not db.exists()
    matmul.clear_cache()
    tuned, _ = matmul.dispatch(SHAPE, "float32", db, autotune=True)
    assert tuned.reason == dispatch.TUNED and len(calls) == autotune.TOP
    matmul.clear_cache()
    monkeypatch.setenv(matmul.AUTOTUNE_VARIABLE, "1")
    again, _ = matmul.dispatch(SHAPE, "float32", db)  # the pick is stored: nothing is timed again
    assert again.reason == dispatch.TUNED and len(calls) == autotune.TOP
    matmul.clear_cache()


def test_a_database_that_cannot_be_written_is_warned_about_and_the_model_runs(tmp_path: Path, monkeypatch) -> None:
    from gemmlab.api import matmul
    from gemmlab.core.errors import StoreError
    from gemmlab.measure import gemm

    info = SimpleNamespace(name="GPU Y", cc=(9, 0), arch="sm_90a", sm_count=132, sm_clock_mhz=1980.0,
                           peak_bandwidth_gbs=4814.0)  # fmt: skip
    monkeypatch.setattr(gemm, "device_info", lambda index=0: info)

    def locked(*args) -> None:  # what Store.open raises for a database another process holds
        raise StoreError("r.sqlite is locked by another process (waited 30 s).", "Wait for it, or give another db.")

    monkeypatch.setattr(matmul, "_autotune_into", locked)
    matmul.clear_cache()
    with pytest.warns(UserWarning, match="could not store its autotuned pick") as caught:
        choice, _ = matmul.dispatch(SHAPE, "float32", tmp_path / "r.sqlite", autotune=True)
    assert choice.reason == dispatch.MODEL
    assert "locked by another process" in str(caught[0].message) and "choice runs instead" in str(caught[0].message)
    matmul.clear_cache()
