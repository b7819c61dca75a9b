"""gemmlab stress on a real GPU: two correct kernels in two processes beside a
cuBLAS load find no wrong result and store their summary; a kernel that is
always wrong and one that faults are counted and stored as such, and the run
goes on past them.

The command runs in a child process with a time limit of its own, so that a
stress run that never ends shows as a failed test, not a frozen test run.
Both load the whole GPU (the load and the workers), so they run in the tier
that has it to itself: about a minute and a half in all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import gemmlab_process
from gemmlab.store.store import Store

pytestmark = [pytest.mark.gpu, pytest.mark.whole_gpu]

ROOT = Path(__file__).resolve().parents[1]
EXIT_FAILED = 4


def test_a_short_stress_with_load_finds_no_wrong_result_and_stores_its_summary(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    done = gemmlab_process("stress", "tiled", "sgemm_stream_k", "--processes", "2", "--seconds", "20", "--load",
                   "--launches-per-draw", "8", "--db", str(db), "--json", limit_s=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    assert answer["failures"] == [] and answer["load_gemms"] > 0
    by_kernel = {s["kernel"]: s for s in answer["summaries"]}
    assert set(by_kernel) == {"tiled", "sgemm_stream_k"}
    for summary in by_kernel.values():
        assert summary["launches"] >= 8 and summary["shapes"] >= 1 and summary["processes"] == 2
        assert summary["wrong"] + summary["faults"] + summary["hangs"] + summary["errors"] == 0
    with Store.open(db, readonly=True) as store:
        stored = {row["kernel"]: row for row in store.stress_summaries(answer["run_id"])}
        assert store.stress_failures() == [] and store.runs()[0]["gpu_name"]
    assert {k: stored[k]["launches"] for k in stored} == {k: by_kernel[k]["launches"] for k in by_kernel}


def test_a_wrong_kernel_and_a_faulting_one_are_counted_and_stored(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    wrong, fault = "examples/faulty/accumulate_into_c/matmul.toml", "examples/faulty/fault/matmul.toml"
    done = gemmlab_process("stress", wrong, fault, "--processes", "1", "--launches", "8", "--launches-per-draw", "4",
                   "--db", str(db), "--json", limit_s=300)  # fmt: skip
    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
    assert "--replay SEED:DRAW" in done.stderr
    answer = json.loads(done.stdout)
    by_kernel = {s["kernel"]: s for s in answer["summaries"]}
    assert by_kernel["accumulate_into_c/matmul"]["wrong"] == 2  # two draws, each wrong at its first launch
    assert by_kernel["accumulate_into_c/matmul"]["launches"] == 2
    assert by_kernel["fault/matmul"]["faults"] == 2  # the second draw ran in a fresh worker
    with Store.open(db, readonly=True) as store:
        kinds = sorted((row["kernel"], row["kind"], row["draw"]) for row in store.stress_failures())
    assert kinds == [("accumulate_into_c/matmul", "wrong", 0), ("accumulate_into_c/matmul", "wrong", 2),
                     ("fault/matmul", "fault", 1), ("fault/matmul", "fault", 3)]  # fmt: skip
