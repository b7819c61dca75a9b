"""`reproduce`, sweeps and end-to-end timing on a real GPU, at reduced sizes."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gemmlab.core.shapes import Shape
from gemmlab.store.store import Store
from gemmlab.studies.reproduce import reproduce

pytestmark = pytest.mark.gpu


def test_reproduce_two_small_experiments(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        poznan = reproduce(["poznan-group1"], store, sizes=[176], progress=False)
        arequipa = reproduce(["arequipa-any-size"], store, sizes=[1000], progress=False)
        for (outcome,) in (poznan, arequipa):
            assert outcome.status == "done" and outcome.summary is not None
            assert not outcome.summary.failed, outcome.summary.failed
        rows = store.rows()
        (run,) = store.runs()[:1]
    assert len([r for r in rows if r["experiment"] == "poznan-group1"]) == 9
    assert len([r for r in rows if r["experiment"] == "arequipa-any-size"]) == 3
    for r in rows:
        assert r["error"] <= r["tolerance"] and r["gflops"] > 0 and r["median_ms"] > 0
        assert r["gpu_name"] and r["cc"] and r["registers"]
        assert r["cgma_analytic"] is not None
    assert run["driver_version"] and run["runtime_version"] and run["nvrtc_version"]


@pytest.mark.whole_gpu  # compares the end-to-end rate with the kernel's own
def test_reproduce_kursk_end_to_end_and_cpu(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        (outcome,) = reproduce(["kursk-cpu-gpu"], store, sizes=[256], progress=False)
        assert outcome.summary is not None and not outcome.summary.failed, outcome.summary.failed
        rows = store.rows("kursk-cpu-gpu")
    gpu = [r for r in rows if not r["kernel"].startswith("cpu_")]
    cpu = [r for r in rows if r["kernel"].startswith("cpu_")]
    assert {r["variant"] for r in gpu} == {"pinned", "pageable"} and len(cpu) == 3
    for r in gpu:
        assert r["h2d_ms"] > 0 and r["d2h_ms"] > 0 and r["host_memory"] == r["variant"]
        # The copies only add time: end to end is slower than the kernel alone.
        assert 0 < r["e2e_gflops"] < r["gflops"]


def test_end_to_end_int32() -> None:
    from gemmlab.measure.endtoend import measure

    rows = measure("naive_i32", Shape(128, 64, 96), 8, reps=3, copy_reps=2)
    assert [r["variant"] for r in rows] == ["pinned", "pageable"]
    assert all(r["error"] == 0.0 and r["e2e_gflops"] > 0 for r in rows)


def test_brno_at_a_small_size(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        (outcome,) = reproduce(["brno-transpose"], store, sizes=[512], progress=False)
        if outcome.status == "not built yet":
            pytest.skip(f"{', '.join(outcome.missing)} not in the catalogue yet")
        assert outcome.summary is not None and not outcome.summary.failed, outcome.summary.failed
        rows = store.rows("brno-transpose")
    assert len(rows) == 11 and all(r["metric"] == "gbs" and r["gbytes_per_s"] > 0 for r in rows)


@pytest.mark.smoke  # the command line, an experiment, the store and the report
def test_cli_reproduce_writes_the_report(tmp_path: Path) -> None:
    from gemmlab.cli.app import app

    db, out = tmp_path / "r.sqlite", tmp_path / "report"
    args = ["reproduce", "poznan-group1", "--sizes", "176", "--db", str(db), "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    again = CliRunner().invoke(app, args)
    assert "0 measured and stored, 9 already stored" in again.output
    try:
        import gemmlab.report  # noqa: F401
    except ModuleNotFoundError:
        assert "report is not built yet" in result.output
    else:
        assert (out / "index.html").is_file()
