"""The SGEMM worklog's measured tables are the stored benchmark, not a copy by hand."""

from __future__ import annotations

import json

import worklog


def test_doc_matches_newest_stored_benchmark() -> None:
    path = worklog.newest_benchmark()
    bench = json.loads(path.read_text())
    doc = worklog.DOC.read_text()
    expected = worklog.render(doc, bench, str(path.relative_to(worklog.REPO)))
    assert doc == expected, "docs/sgemm-ladder.md is stale: run `python3 benchmarks/worklog.py`"


def test_every_rung_measured_at_4096_with_cublas_ratio() -> None:
    bench = json.loads(worklog.newest_benchmark().read_text())
    at_4096 = {r["kernel"]: r for r in bench["results"] if r["m"] == r["n"] == r["k"] == 4096}
    from gemmlab.kernels.sgemm.spec import SGEMM_KERNELS

    assert {s.id for s in SGEMM_KERNELS} <= set(at_4096)
    for r in at_4096.values():
        assert r["error"] <= r["tolerance"]
        assert 0 < r["ratio_to_baseline"] < 2
    assert all(not s["tensor_core"] for s in bench["sass"].values())


def test_tensor_doc_matches_newest_stored_benchmark() -> None:
    doc_path, pattern, section_of = worklog.SECTIONS["tensor"]
    path = worklog.newest_benchmark(worklog.RESULTS, pattern)
    bench = json.loads(path.read_text())
    doc = doc_path.read_text()
    expected = worklog.render(doc, bench, str(path.relative_to(worklog.REPO)), section_of)
    assert doc == expected, "docs/tensor-ladder.md is stale: run `python3 benchmarks/worklog.py`"


def test_every_tensor_rung_measured_in_every_type_with_its_claimed_sass() -> None:
    bench = json.loads(worklog.newest_benchmark(worklog.RESULTS, "*_tensor.json").read_text())
    from gemmlab.kernels.tensor.spec import TENSOR_KERNELS

    measured = {(r["kernel"], r["dtype"]) for r in bench["results"] if r["m"] == r["n"] == r["k"] == 4096}
    assert {(s.id, d) for s in TENSOR_KERNELS for d in s.dtypes} <= measured
    for r in bench["results"]:
        assert r["error"] <= r["tolerance"]
        assert 0 < r["ratio_to_baseline"] < 3
    for kid, by_dtype in bench["sass"].items():
        for entry in by_dtype.values():
            assert entry["tensor_core"] and not entry["missing"], kid
