"""check, profile, sweep + report and tune on users' kernels, on the GPU.

Skipped without a GPU (conftest); the check tests without compute-sanitizer
and the profile test without Nsight Compute.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import needs_tool
from gemmlab.core.errors import ProfilerError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.measure.ncu.command import find_ncu, profile_point
from gemmlab.measure.sanitize import check, find_sanitizer
from gemmlab.report import write_report
from gemmlab.store.store import Store
from gemmlab.studies import tune
from gemmlab.studies.points import plan
from gemmlab.studies.sweep import sweep

pytestmark = [pytest.mark.gpu, pytest.mark.xdist_group("ncu")]

ROOT = Path(__file__).resolve().parent.parent
NAIVE = ROOT / "examples" / "naive_define" / "matmul.toml"
TILED = ROOT / "examples" / "tiled_template" / "matmul.toml"
RUN_INFO = {"gpu_name": "test GPU", "cc": "9.0", "command_line": "test"}


needs_sanitizer = needs_tool(find_sanitizer, "compute-sanitizer")
needs_ncu = needs_tool(find_ncu, "Nsight Compute")


@pytest.fixture(autouse=True)
def fresh_declarations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalogue, "_DECLARED", {})


@needs_sanitizer
@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_check_of_naive_define_is_clean(tool: str) -> None:
    report = check([str(NAIVE)], tool)
    assert report.points >= 3  # at least one accepted size per edge
    assert report.clean, report.findings()


@needs_sanitizer
def test_racecheck_names_the_line_of_a_missing_syncthreads(tmp_path: Path) -> None:
    folder = tmp_path / "racy"
    folder.mkdir()
    text = TILED.with_suffix(".cu").read_text()
    second = "__syncthreads();  // and read by everyone before the next one overwrites it"
    assert second in text
    (folder / "matmul.cu").write_text(text.replace(second, "// (second __syncthreads left out)"))
    (folder / "matmul.toml").write_text(TILED.read_text())
    report = check([str(folder / "matmul.toml")], "racecheck")
    assert report.errors > 0, report.output[-3000:]
    # The hazard is reported in the user's own file (the sanitizer prints its
    # name without the folder), at a line of the kernel's loop.
    lines = [int(n) for n in re.findall(r"\bmatmul\.cu:(\d+)", report.output)]
    assert lines, report.findings()
    assert all(18 <= n <= 27 for n in lines), lines


@needs_sanitizer
def test_racecheck_names_the_missing_sync_example() -> None:
    # The shipped example docs/walkthroughs.md points to: its race is named at the lines
    # of its tile loop (the stores into As and Bs, the reads of them).
    report = check([str(ROOT / "examples" / "faulty" / "missing_sync" / "matmul.toml")], "racecheck")
    assert report.errors > 0, report.output[-3000:]
    lines = {int(n) for n in re.findall(r"\bmatmul\.cu:(\d+)", report.output)}
    assert lines and lines <= set(range(19, 27)), lines


@needs_ncu
def test_profile_of_tiled_template() -> None:
    try:
        r = profile_point(str(TILED), Shape.square(512), 16)
    except ProfilerError as exc:  # counters withheld on this machine
        pytest.skip(exc.cause)
    assert r.kernel == "tiled_template/matmul"
    assert r.gips > 0 and r.achieved_occupancy > 0 and r.theoretical_occupancy > 0
    assert r.cgma_measured > 0
    assert r.cgma_analytic is None  # no model of a user's kernel


def test_sweep_of_a_users_kernel_beside_tiled_then_report(tmp_path: Path) -> None:
    points, _ = plan([str(NAIVE), "tiled"], [Shape.square(256), Shape.square(512)], [8, 16])
    assert len(points) == 8
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        summary = sweep(points, store, progress=False, run_info=RUN_INFO, max_seconds=0.5)
        again = sweep(points, store, progress=False, run_info=RUN_INFO, max_seconds=0.5)
        rows = store.rows()
    assert len(summary.done) == 8 and not summary.failed, summary.lines()
    assert len(again.skipped_existing) == 8
    mine = [r for r in rows if r["kernel"] == "naive_define/matmul"]
    assert len(mine) == 4 and all(r["source"] == str(NAIVE) and r["gflops"] > 0 for r in mine)
    index = write_report(db, tmp_path / "report", occupancy=False)
    page = (index.parent / "kernel-naive_define-matmul" / "index.html").read_text()
    assert "naive_define/matmul" in page and "tiled" in page and "cuBLAS" in page
    assert f"{mine[0]['gflops']:,.1f}" in page


def test_tune_over_tiled_templates_tiles(tmp_path: Path) -> None:
    with Store.open(tmp_path / "t.db") as store:
        summary = tune.tune(str(TILED), [512], store, progress=False, max_seconds=1.0)
        name = summary.gpu_name
        chosen = tune.tuned_spec("tiled_template/matmul", Shape.square(512), store, name)
        stored = store.candidates(name, "tiled_template/matmul", "float32")
    assert len(summary.measured) == 3 and not summary.failed and not summary.rejected, summary.lines()
    assert {json.loads(c["config"])["TILE"] for c in stored} == {8, 16, 32}
    best = summary.best["small"]
    assert best.config["TILE"] in (8, 16, 32) and best.gflops > 0
    assert chosen is not None and chosen.block_edges == (best.config["TILE"],)


TRITON = Path(__file__).resolve().parents[1] / "examples" / "triton_matmul" / "matmul.py"


@needs_ncu
def test_profile_of_the_triton_example() -> None:
    pytest.importorskip("triton")
    try:
        r = profile_point(str(TRITON), Shape.square(1024), 64)
    except ProfilerError as exc:  # counters withheld on this machine
        pytest.skip(exc.cause)
    assert r.kernel == "triton_matmul/matmul"
    assert r.gips > 0 and r.achieved_occupancy > 0 and r.cgma_analytic is None


@needs_sanitizer
def test_memcheck_of_the_triton_example_is_clean() -> None:
    pytest.importorskip("triton")
    report = check([str(TRITON)], "memcheck")
    assert report.points > 0 and report.clean, report.findings()
