"""The report's sections for what is no document's experiment: the distributed
ladder (communication, GEMM and overlap, not the generic template) and the
stress runs; and the experiments a report is asked for. Databases built with
fake rows through the store, no GPU."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gemmlab.cli.app import app
from gemmlab.report import distributed, stress, write_report
from gemmlab.store.store import Store
from gemmlab.studies.distributed import launch

FIXTURE = Path(__file__).parent / "fixtures" / "report_rows.json"
GPU = "NVIDIA H200"
RUN = {"gpu_name": GPU, "cc": "9.0", "cpu": "Intel(R) Xeon(R) Platinum 8480C", "gemmlab_version": "0.5.0"}


def ladder_row(**extra: object) -> dict:
    """A row as the distributed ladder's rank 0 answers it (launch.store_row's input)."""
    row = {
        "algorithm": "summa", "gpus": 2, "device": "cuda", "scaling": "strong", "size": 4096, "m": 4096,
        "n": 4096, "k": 4096, "grid": "1x2", "median_ms": 2.0, "min_ms": 1.9, "max_ms": 2.5, "reps": 5,
        "comm_ms": 0.75, "gemm_ms": 1.5, "overlap_efficiency": 0.33, "tflops_per_gpu": 34.4, "error": 1e-6,
        "tolerance": 1e-4, "verified": True, "local_gemm": "gemmlab.matmul", "fallback_reason": None,
    }  # fmt: skip
    return {**row, **extra}


LADDER = [
    ladder_row(gpus=1, grid="1x1", median_ms=3.6, comm_ms=0.0, gemm_ms=3.6, overlap_efficiency=None),
    ladder_row(),
    ladder_row(gpus=2, scaling="weak", m=8192, median_ms=4.0, tflops_per_gpu=34.0),
    ladder_row(algorithm="allgather_gemm", grid=None, median_ms=2.4, comm_ms=1.0, gemm_ms=1.6,
               overlap_efficiency=0.08, fallback_reason="ConstraintError: K is odd", local_gemm="torch.matmul"),
]  # fmt: skip


def distributed_db(path: Path, rows: list[dict] = LADDER, run: dict | None = None) -> Path:
    with Store.open(path) as store:
        run_id = store.start_run(run if run is not None else RUN)
        store.add_results(run_id, launch.EXPERIMENT, [launch.store_row(r) for r in rows])
    return path


def stress_summary(kernel: str, **extra: object) -> dict:
    row = {"kernel": kernel, "launches": 3200, "wrong": 0, "faults": 0, "hangs": 0, "errors": 0, "shapes": 200,
           "processes": 4, "seeds": json.dumps([0, 1, 2, 3]), "load": 1, "seconds": 60.0}  # fmt: skip
    return {**row, **extra}


def stress_failure(kernel: str, draw: int) -> dict:
    return {"kernel": kernel, "m": 129, "n": 64, "k": 33, "block_edge": 16, "dtype": "float32", "seed": 2,
            "process": 2, "draw": draw, "max_dim": 600, "kind": "wrong",
            "reason": "relative error 0.31 over tolerance 1e-05"}  # fmt: skip


def add_stress(path: Path) -> None:
    with Store.open(path) as store:
        run_id = store.start_run({**RUN, "started": "2026-11-29T06:41:07+00:00"})
        summaries = [stress_summary("tc_cluster", wrong=2), stress_summary("sgemm_stream_k")]
        store.add_stress(run_id, summaries, [stress_failure("tc_cluster", 41), stress_failure("tc_cluster", 57)])


def page(index: Path) -> str:
    return index.read_text()


# --------------------------------------------------------------------------
# Distributed results


def test_distributed_points_read_back_what_the_store_keeps() -> None:
    rows = [{**launch.store_row(r), "experiment": launch.EXPERIMENT, **RUN} for r in LADDER]
    found = distributed.points(rows)
    assert [(p.algorithm, p.gpus, p.scaling) for p in found] == [
        ("allgather_gemm", 2, "strong"),
        ("summa", 1, "strong"),
        ("summa", 2, "strong"),
        ("summa", 2, "weak"),
    ]  # ladder order, then scaling, size and GPU count
    two = found[2]
    assert (two.comm_ms, two.gemm_ms, two.overlap, two.tflops_per_gpu) == (0.75, 1.5, 0.33, 34.4)
    assert (two.grid, two.local_gemm, two.verified, two.device) == ("1x2", "gemmlab.matmul", True, GPU)
    # Against the one-GPU point of the same algorithm and size: strong t1 / (P tP), weak t1 / tP.
    assert two.scaling_efficiency == pytest.approx(3.6 / (2 * 2.0))
    assert found[3].scaling_efficiency == pytest.approx(3.6 / 4.0)
    assert found[1].overlap is None and found[0].scaling_efficiency is None  # no one-GPU allgather_gemm
    assert found[0].notes == ["gemmlab.matmul failed, torch.matmul ran instead: ConstraintError: K is odd"]


def test_distributed_results_get_their_own_section(tmp_path: Path) -> None:
    db = distributed_db(tmp_path / "r.sqlite")
    index = write_report(db, tmp_path / "out", occupancy=False)
    text = page(index)
    start = text.index("<section id='distributed'>")
    section = text[start : text.index("</section>", start)]
    assert "<h2>Distributed GEMM</h2>" in section and f"<caption>On {GPU}</caption>" in section
    assert "<th>comm alone [ms]</th><th>GEMM alone [ms]</th><th>overlap</th>" in section
    assert "<td>summa 1x2</td><td>2</td><td>strong</td><td>4096x4096x4096</td><td>2.000</td><td>34.4</td>" in section
    assert "<td>0.750</td><td>1.500</td><td>33%</td><td>90%</td>" in section
    assert "torch.matmul ran instead: ConstraintError: K is odd" in section
    # Not the generic template: no section per experiment and GPU, no block edge, no empty panels.
    assert text.count("<section") == 1
    assert "unknown GPU" not in text and "b = —" not in text and "no data" not in text
    assert not (tmp_path / "out" / "distributed" / "summa_vs_size.png").exists()
    assert "<a href='#distributed'>Distributed GEMM</a>" in text and "4 distributed results" in text
    assert f"Measured on {GPU} (compute capability 9.0) with CUDA driver" in text
    lines = list(csv.DictReader(io.StringIO((tmp_path / "out" / "distributed" / "distributed.csv").read_text())))
    assert len(lines) == 4 and {line["comm_ms"] for line in lines} >= {"0.75", "1"}


def test_distributed_runs_on_the_cpu_say_so(tmp_path: Path) -> None:
    rows = [ladder_row(device="cpu"), ladder_row(device="cpu", gpus=1, grid="1x1")]
    db = distributed_db(tmp_path / "r.sqlite", rows, run={"cpu": "AMD EPYC 9654", "gemmlab_version": "0.5.0"})
    text = page(write_report(db, tmp_path / "out", occupancy=False))
    assert "<caption>On AMD EPYC 9654 (gloo: the times mean nothing)</caption>" in text
    assert "Measured on the CPU, AMD EPYC 9654; gemmlab 0.5.0." in text
    assert "CUDA driver" not in text and "GPU not recorded" not in text


def test_the_generic_sections_stay_beside_the_distributed_one(tmp_path: Path) -> None:
    db = distributed_db(tmp_path / "r.sqlite")
    rows = [r for r in json.loads(FIXTURE.read_text()) if r["experiment"] == "arequipa-any-size"]
    with Store.open(db) as store:
        store.add_results(store.start_run(RUN), "arequipa-any-size", rows)
    text = page(write_report(db, tmp_path / "out", occupancy=False))
    assert "<section id='arequipa-any-size'>" in text and "<section id='distributed'>" in text
    assert text.index("<section id='arequipa-any-size'>") < text.index("<section id='distributed'>")
    only = page(write_report(db, tmp_path / "only", occupancy=False, experiments=["distributed"]))
    assert "<section id='arequipa-any-size'>" not in only and "<section id='distributed'>" in only


# --------------------------------------------------------------------------
# Stress runs


def test_stress_runs_reach_the_report(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    add_stress(db)  # a database that holds stress runs and nothing else
    text = page(write_report(db, tmp_path / "out", occupancy=False))
    start = text.index("<section id='stress-runs'>")
    section = text[start : text.index("</section>", start)]
    assert f"Run 1 on {GPU}, 2026-11-29 06:41 UTC: 60 s, 4 processes, seeds 0 to 3, beside a cuBLAS load" in section
    assert "<td>tc_cluster</td><td>3,200</td><td>2</td>" in section
    assert "<td>sgemm_stream_k</td><td>3,200</td><td>0</td>" in section
    assert section.count("gemmlab stress tc_cluster --replay 2:41 --max-dim 600") == 1
    assert "gemmlab stress tc_cluster --replay 2:57 --max-dim 600" in section
    assert "wrong: tc_cluster 129x64x33, block edge 16, float32 (process 2): relative error 0.31" in section
    assert "6,400 checked launches, 2 failed" in text and "1 stress run" in text
    failures = list(csv.DictReader(io.StringIO((tmp_path / "out" / "stress-runs" / "failures.csv").read_text())))
    assert [f["draw"] for f in failures] == ["41", "57"] and failures[0]["replay"].startswith("gemmlab stress")


def test_stress_runs_are_an_experiment_a_report_can_pick(tmp_path: Path) -> None:
    db = distributed_db(tmp_path / "r.sqlite")
    add_stress(db)
    text = page(write_report(db, tmp_path / "a", occupancy=False, experiments=["stress"]))
    assert "<section id='stress-runs'>" in text and "<section id='distributed'>" not in text
    text = page(write_report(db, tmp_path / "b", occupancy=False, experiments=["distributed"]))
    assert "<section id='stress-runs'>" not in text


def test_stress_runs_group_by_run() -> None:
    runs = [{"id": 4, "gpu_name": GPU, "started": "2026-11-29T06:41:07+00:00"}, {"id": 9, "gpu_name": "NVIDIA H100"}]
    summaries = [{**stress_summary("a"), "run_id": 9}, {**stress_summary("b"), "run_id": 4}]
    found = stress.stress_runs(summaries, [{**stress_failure("a", 3), "run_id": 9}], runs)
    assert [(r.run_id, r.device, len(r.summaries), len(r.failures)) for r in found] == [
        (4, GPU, 1, 0),
        (9, "NVIDIA H100", 1, 1),
    ]
    assert found[1].failed == 0  # the tally counts; the listed draws are its detail


# --------------------------------------------------------------------------
# The experiments asked for


def test_an_unknown_experiment_is_named_unknown_on_the_command_line(tmp_path: Path) -> None:
    db = distributed_db(tmp_path / "r.sqlite")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["report", "--db", str(db), "--out", str(out), "--experiments", "nosuch"])
    assert result.exit_code == 2
    assert "Unknown experiment 'nosuch'" in result.output and "Known: poznan-group1" in result.output
    assert "reproduce nosuch" not in result.output and "Traceback" not in result.output
    close = CliRunner().invoke(app, ["report", "--db", str(db), "--out", str(out), "--experiments", "distributd"])
    assert "Did you mean distributed" in close.output
    known = CliRunner().invoke(app, ["report", "--db", str(db), "--out", str(out), "--experiments", "int32-lab"])
    assert known.exit_code == 2
    assert "No results of int32-lab are stored" in known.output and "gemmlab reproduce int32-lab" in known.output
    assert not out.exists()
