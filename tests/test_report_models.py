"""The programming-models block of `gemmlab report`, from synthetic stored rows;
the compiles it times are stubbed (no NVRTC, Triton or CuTe DSL compile runs)."""

from __future__ import annotations

import csv
import platform
from pathlib import Path

import pytest

from gemmlab.core.errors import CompileError
from gemmlab.kernels import catalogue
from gemmlab.measure import compile_time
from gemmlab.report import write_report
from gemmlab.report.models import code_lines, model_results


def _row(kernel: str, backend: str, gflops: float, baseline: float, *, dtype: str = "bfloat16", n: int = 4096,
         arch: str = "sm_90") -> dict:  # fmt: skip
    return {"experiment": "peers", "kernel": kernel, "backend": backend, "dtype": dtype, "m": n, "n": n, "k": n,
            "block_edge": 0, "variant": "", "median_ms": 1.0, "gflops": gflops, "metric": "gflops",
            "baseline_gflops": baseline, "baseline_name": "cuBLAS GemmEx", "arch": arch, "cc": "9.0",
            "gpu_name": "GPU X", "warnings": []}  # fmt: skip


ROWS = [
    _row("tc_wgmma", "nvrtc", 600e3, 700e3, arch="sm_90a"),
    _row("tc_mma", "", 400e3, 710e3),  # stored before results recorded a backend: a catalogue rung by its id
    _row("triton_tc_blocked", "peers", 500e3, 690e3),
    _row("triton_tc_tma", "peers", 550e3, 705e3),
    _row("sgemm_smem", "nvrtc", 9e3, 50e3, dtype="float32"),  # no peer rung at this point: not in the table
]


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    """Every compile the report times, answered at once: 1.5 s for CUDA C++ rungs, 0.5 s for peers."""
    calls: list[tuple[str, str, str]] = []

    def fake(spec, dtype: str, arch: str) -> float:
        calls.append((spec.id, dtype, arch))
        return 0.5 if spec.backend == "peers" else 1.5

    monkeypatch.setattr(compile_time, "compile_seconds", fake)
    monkeypatch.setattr(compile_time, "installed", lambda module: True)
    return calls


def _models_csv(index: Path) -> list[dict]:
    return list(csv.DictReader((index.parent / "models" / "models.csv").open()))


def test_the_block_shows_each_models_winner_with_its_lines_and_compile_time(
    tmp_path: Path, compiles: list[tuple[str, str, str]]
) -> None:
    index = write_report(ROWS, tmp_path / "report", occupancy=False)
    page = index.read_text()
    assert "<section id='models'>" in page and "models/programming_models.png" in page
    assert "caches off" in page and platform.node() in page and "not of a GPU" in page
    assert (index.parent / "models" / "programming_models.png").is_file()
    # Only the winners compile, once each, for the architecture the results ran on.
    assert sorted(compiles) == [("tc_wgmma", "bfloat16", "sm_90"), ("triton_tc_tma", "bfloat16", "sm_90")]
    (row,) = _models_csv(index)
    assert (row["gpu"], row["arch"], row["dtype"], row["m"]) == ("GPU X", "sm_90", "bfloat16", "4096")
    assert (row["CUDA C++ rung"], row["CUDA C++ TFLOPS"], row["CUDA C++ compile s"]) == ("tc_wgmma", "600.00", "1.50")
    assert (row["Triton rung"], row["Triton compile s"]) == ("triton_tc_tma", "0.50")
    assert row["CuTe DSL rung"] == "" and row["cuBLAS TFLOPS"] == "710.00"
    wgmma_lines = code_lines(compile_time.source_text(catalogue.get("tc_wgmma")))
    tma_lines = code_lines(compile_time.source_text(catalogue.get("triton_tc_tma")))
    assert (int(row["CUDA C++ lines"]), int(row["Triton lines"])) == (wgmma_lines, tma_lines)
    assert f"{wgmma_lines} lines, compile 1.5 s" in page
    text = (index.parent / "models" / "models.txt").read_text()
    assert text.startswith("GPU X (sm_90)") and f"600.0 (tc_wgmma) [{wgmma_lines} lines, 1.5 s compile]" in text


def test_a_report_without_peer_results_has_no_models_block(tmp_path: Path, compiles: list) -> None:
    index = write_report([r for r in ROWS if r["backend"] != "peers"], tmp_path / "report", occupancy=False)
    assert "id='models'" not in index.read_text()
    assert not (index.parent / "models").exists() and compiles == []


def test_a_compile_that_fails_shows_a_dash_and_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail_triton(spec, dtype: str, arch: str) -> float:
        if spec.backend == "peers":
            raise CompileError("ptxas of Triton ran out of registers.", "")
        return 2.0

    monkeypatch.setattr(compile_time, "compile_seconds", fail_triton)
    monkeypatch.setattr(compile_time, "installed", lambda module: True)
    index = write_report(ROWS, tmp_path / "report", occupancy=False)
    page = index.read_text()
    assert "lines, compile -</small>" in page
    assert "triton_tc_tma (bfloat16): ptxas of Triton ran out of registers." in page
    (row,) = _models_csv(index)
    assert row["Triton compile s"] == "" and row["CUDA C++ compile s"] == "2.00"
    assert "compile -" in (index.parent / "models" / "models.txt").read_text()


def test_a_model_not_installed_here_is_named_with_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compile_time, "installed", lambda module: False)
    timed = compile_time.time_compile(catalogue.get("cute_tc_wgmma"), "bfloat16", "sm_90")
    assert timed.seconds is None and timed.reason == "CuTe DSL is not installed here (pip install 'gemmlab[cute]')"


def test_rows_of_other_problems_and_users_kernels_stay_out_of_the_table() -> None:
    rows = [*ROWS, _row("naive_define/matmul", "python", 900e3, 700e3), _row("triton_tc_tma", "peers", 1.0, 2.0,
                                                                              n=2048)]  # fmt: skip
    (results,) = model_results(rows).values()
    kept = {(r["kernel"], r["n"], r["backend"]) for r in results}
    assert kept == {("tc_wgmma", 4096, "nvrtc"), ("tc_mma", 4096, "nvrtc"), ("triton_tc_blocked", 4096, "peers"),
                    ("triton_tc_tma", 4096, "peers"), ("triton_tc_tma", 2048, "peers")}  # fmt: skip
    assert model_results([r for r in ROWS if r["backend"] != "peers"]) == {}


def test_source_text_reads_a_peer_module_and_a_cuda_rung_with_its_headers() -> None:
    peer = compile_time.source_text(catalogue.get("triton_tc_tma"))
    module = Path(catalogue.__file__).parent / "peers" / "triton_tma.py"
    assert peer == module.read_text() and "def launcher(" in peer
    cuda = compile_time.source_text(catalogue.get("tc_wgmma"))
    header = (Path(catalogue.__file__).parent / "tensor" / "wgmma.cuh").read_text()
    assert '#include "wgmma.cuh"' not in cuda and header.strip().splitlines()[-1] in cuda
