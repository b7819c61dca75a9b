"""The report's summary (versions, ladders against cuBLAS and the peak, the
documents' machines against ours, the ladder chart) and the warnings told to
a reader; rows built by hand, no GPU and no database."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemmlab.report import model, summary, write_report
from gemmlab.report.warning_text import explain

GPU = "NVIDIA H100 80GB HBM3"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
RUN = {
    "gpu_name": GPU, "cc": "9.0", "date": "2026-11-20T10:00:00+00:00", "driver_version": "12.8",
    "runtime_version": "12.9", "nvrtc_version": "13.0", "gemmlab_version": "0.4.0", "git_revision": "abc1234",
}  # fmt: skip


def ladder_row(kernel: str, n: int, ratio: float, gflops: float | None = None, **extra: object) -> dict:
    """A row of `gemmlab sweep` for an FP32 rung: cuBLAS's time / ours is ``ratio``."""
    return {**RUN, "experiment": None, "kernel": kernel, "m": n, "n": n, "k": n, "block_edge": None,
            "dtype": "float32", "variant": "", "metric": "gflops", "median_ms": 1.0, "gflops": gflops,
            "ratio_to_baseline": ratio, "warnings": [], **extra}  # fmt: skip


def ladder(rows: list[dict], peaks: list[dict] | None = None) -> summary.LadderResult:
    (result,) = summary.ladder_results(model.build_sections(rows), peaks or [])
    return result


LADDER_ROWS = [
    ladder_row("sgemm_coalesced", 1024, 0.12),
    ladder_row("sgemm_coalesced", 4096, 0.08),
    ladder_row("sgemm_smem", 1024, 0.95),  # the best at 1024, not at the largest size
    ladder_row("sgemm_smem", 4096, 0.15),
    ladder_row("sgemm_warptile", 1024, 0.60),
    ladder_row("sgemm_warptile", 4096, 0.70, gflops=35_000.0),
]
FFMA_PEAK = {"gpu_name": GPU, "dtype": "float32", "family": "ffma", "instruction": "fma.rn.f32", "gflops": 50_000.0}


def test_versions_line_names_the_device_and_each_version() -> None:
    rows = [{**ladder_row("sgemm_smem", 1024, 0.5), "nvrtc_version": None}]
    line = summary.versions_line(rows)
    assert f"{GPU} (compute capability 9.0)" in line
    assert "CUDA driver 12.8" in line and "CUDA runtime 12.9" in line
    assert "NVRTC not recorded" in line
    assert "gemmlab 0.4.0 (git abc1234)" in line


def test_results_without_a_version_are_counted() -> None:
    rows = [ladder_row("sgemm_smem", 1024, 0.5), {**ladder_row("sgemm_smem", 2048, 0.5), "driver_version": None}]
    assert "CUDA driver 12.8 (not recorded for 1 of 2 results)" in summary.versions_line(rows)


def test_two_runs_with_different_versions_are_both_named() -> None:
    rows = [ladder_row("sgemm_smem", 1024, 0.5), ladder_row("sgemm_smem", 2048, 0.5, nvrtc_version="13.1")]
    assert "NVRTC 13.0 and 13.1" in summary.versions_line(rows)


def test_a_ladders_best_kernel_is_the_best_at_its_largest_size() -> None:
    result = ladder(LADDER_ROWS)
    assert result.largest == (4096, 4096, 4096)
    rung, rate = result.best()
    assert (rung, rate.share) == ("sgemm_warptile", 0.70)
    text = summary.ladder_text(result)[0]
    assert "FP32 ladder, float32" in text
    assert "is sgemm_warptile, at 70% of cuBLAS's speed" in text and "N = 4096" in text


def test_share_of_the_stored_peak_of_the_same_gpu_and_type() -> None:
    other_gpu = {**FFMA_PEAK, "gpu_name": "NVIDIA H200", "gflops": 70_000.0}
    other_type = {**FFMA_PEAK, "dtype": "bfloat16", "gflops": 900_000.0}
    result = ladder(LADDER_ROWS, [other_gpu, other_type, FFMA_PEAK])
    text = " ".join(summary.ladder_text(result))
    assert "35,000 GFLOP/s, 70% of the measured peak of 50,000 GFLOP/s (ffma, fma.rn.f32)" in text


@pytest.mark.parametrize(
    ("kernel", "dtype", "inputs"),
    [
        ("tc_tma_store", "bfloat16-out", "bfloat16"),
        ("tc_fp8_tma_store", "e4m3-bf16", "e4m3"),
        ("tc_fp8_tma_store", "e5m2-bf16", "e5m2"),
        # The mixed pair's share is of the pair's own measured peak, in either C type.
        ("tc_fp8_tma_store", "e5m2xe4m3", "e5m2xe4m3"),
        ("tc_fp8_tma_store", "e5m2xe4m3-bf16", "e5m2xe4m3"),
    ],
)
def test_a_second_c_type_takes_the_peak_of_its_inputs(kernel: str, dtype: str, inputs: str) -> None:
    # A bfloat16 C changes what is stored, not what the tensor cores run: the share is of the inputs' peak.
    rows = [ladder_row(kernel, 4096, 1.0, gflops=900_000.0, dtype=dtype)]
    peak = {"gpu_name": GPU, "dtype": inputs, "family": "wgmma", "instruction": "wgmma", "gflops": 1_800_000.0}
    other = {**peak, "dtype": "float32", "gflops": 60_000.0}
    text = " ".join(summary.ladder_text(ladder(rows, [other, peak])))
    assert "900,000 GFLOP/s, 50% of the measured peak of 1,800,000 GFLOP/s" in text


def test_a_missing_peak_is_said_not_invented() -> None:
    text = " ".join(summary.ladder_text(ladder(LADDER_ROWS, [{**FFMA_PEAK, "gpu_name": "NVIDIA H200"}])))
    assert f"No measured peak is stored for float32 on {GPU}" in text
    assert "of the measured peak" not in text


def test_the_chart_shows_each_rung_at_the_largest_size_all_share() -> None:
    result = ladder([*LADDER_ROWS, ladder_row("sgemm_warptile", 8192, 0.8)])
    assert result.chart_size() == (4096, 4096, 4096)  # 8192: warptile alone
    assert result.bars() == [("sgemm_coalesced", 0.08), ("sgemm_smem", 0.15), ("sgemm_warptile", 0.70)]
    assert result.best() == ("sgemm_warptile", summary.Rate(0.8, None))  # at 8192, the largest size measured


def test_without_a_size_all_share_the_chart_marks_the_rungs_not_measured() -> None:
    rows = [ladder_row("sgemm_warptile", 4096, 0.7), ladder_row("sgemm_coalesced", 1024, 0.1)]
    result = ladder(rows)
    assert result.chart_size() == (4096, 4096, 4096)
    assert result.bars() == [("sgemm_coalesced", None), ("sgemm_warptile", 0.7)]


def test_the_biggest_step_is_named() -> None:
    text = summary.ladder_text(ladder(LADDER_ROWS))[-1]
    assert text == "The largest step at N = 4096: sgemm_smem to sgemm_warptile, +55 points of cuBLAS's speed."


def published_times(experiment: str, kernel: str) -> dict[tuple[int, int | None], float]:
    section = model.build_sections([{**RUN, "experiment": experiment, "kernel": kernel, "n": 8, "warnings": []}])[0]
    return {cell: value for cell, (value, _) in section.published.values(kernel, "time_ms").items()}


def test_a_documents_speed_up_is_the_median_over_the_cells_both_measured() -> None:
    published = published_times("poznan-group1", "naive")
    cells = sorted(published)[:3]
    rows = [
        {**RUN, "experiment": "poznan-group1", "kernel": "naive", "m": n, "n": n, "k": n, "block_edge": block,
         "dtype": "float32", "variant": "", "metric": "gflops", "median_ms": published[(n, block)] / ratio,
         "warnings": []}
        for (n, block), ratio in zip(cells, (10.0, 40.0, 20.0), strict=True)
    ]  # fmt: skip
    (found,) = summary.speedups(model.build_sections(rows)[0])
    assert found.device == "NVIDIA GeForce GT 240"
    assert sorted(found.ratios) == pytest.approx([10.0, 20.0, 40.0])
    assert found.median == pytest.approx(20.0)
    text = summary.speedup_text(found)
    assert "20x as fast, the median over 3 cells both measured; range 10x to 40x; compared by kernel time" in text


def test_a_section_without_published_figures_gives_no_speed_up(tmp_path: Path) -> None:
    rows = [
        {**RUN, "experiment": "arequipa-any-size", "kernel": "tiled_any_size", "m": 1000, "n": 1000, "k": 1000,
         "block_edge": 16, "dtype": "float32", "variant": "", "metric": "gflops", "median_ms": 1.0, "gflops": 2.0,
         "warnings": []},
        ladder_row("sgemm_smem", 1024, 0.5),
    ]  # fmt: skip
    for section in model.build_sections(rows):
        assert summary.speedups(section) == []
    text = write_report(rows, tmp_path / "out", occupancy=False).read_text()
    assert "id='findings'" in text and "against the document" not in text


def test_the_summary_comes_first_with_its_chart_as_png_and_svg(tmp_path: Path) -> None:
    index = write_report(LADDER_ROWS, tmp_path / "out", occupancy=False, peaks=[FFMA_PEAK])
    text = index.read_text()
    stem = ladder(LADDER_ROWS).file_stem
    assert (index.parent / f"{stem}.png").read_bytes().startswith(PNG_SIGNATURE)
    assert "<svg" in (index.parent / f"{stem}.svg").read_text()
    assert f"src='{stem}.png'" in text and f"href='{stem}.svg'" in text
    findings, contents = text.index("<div id='findings'>"), text.index("<ul><li><a href='#no-experiment'>")
    assert findings < contents < text.index("<section id='no-experiment'>")
    assert "70% of the measured peak" in text


def test_the_summary_leads_with_what_the_results_hold_and_says_a_missing_ladder_once_at_its_end(
    tmp_path: Path,
) -> None:
    rows = [{**r, "kernel": "tiled"} for r in LADDER_ROWS[:1]]
    text = write_report(rows, tmp_path / "out", occupancy=False).read_text()
    findings = text[text.index("<div id='findings'>") : text.index("</div>")]
    assert "<h3>Ladders against cuBLAS</h3>" not in findings  # no heading over a negative
    held = findings.index("Reported here: 1 result of (no experiment).")
    missing = findings.index("No ladder against cuBLAS here (FP32 ladder, tensor-core ladder or 8-bit")
    assert held < missing and findings.count("No ladder") == 1
    assert "hold no row" not in text
    assert not list((tmp_path / "out").glob("summary_*.png"))


def test_known_warnings_are_told_to_a_reader() -> None:
    cores = explain("multithreaded (16 cores available)")
    assert "all 16 CPU cores" in cores and "single-thread" in cores
    spread = explain("wide spread: max/min = 1.71 over 20 repetitions")
    assert spread.startswith("The slowest of 20 repetitions took 1.71 times as long as the fastest")
    graph = explain(
        "short kernel (4.2 us): timed by replaying a CUDA graph of 100 launches, so back-to-back launches overlap"
    )
    assert "4.2 µs" in graph and "100 launches replayed" in graph
    clocks = explain("clocks held back during the run: power cap")
    assert "(power cap)" in clocks and "below its full clock" in clocks


def test_an_unknown_warning_is_shown_as_it_is() -> None:
    assert explain("something new: 3 things") == "something new: 3 things"


def test_the_page_shows_the_explanation_once_and_the_csv_keeps_the_stored_text(tmp_path: Path) -> None:
    rows = [ladder_row("sgemm_smem", 1024, 0.5, warnings=["multithreaded (16 cores available)"])]
    text = write_report(rows, tmp_path / "out", occupancy=False).read_text()
    assert text.count("numpy&#x27;s BLAS could use all 16 CPU cores") == 1
    assert "recorded as" not in text and "multithreaded (16 cores available)" not in text
    csv = (tmp_path / "out" / "no-experiment" / "warnings.csv").read_text()
    assert "multithreaded (16 cores available)" in csv and "BLAS could use" not in csv


def test_the_versions_line_names_the_cpu_of_the_cpu_baselines_apart() -> None:
    cpu_row = {**RUN, "experiment": "kursk-cpu-gpu", "kernel": "cpu_naive", "m": 256, "n": 256, "k": 256,
               "block_edge": None, "dtype": "float32", "variant": "", "metric": "gflops", "median_ms": 40.0,
               "warnings": [], "cpu": "Intel(R) Xeon(R) Platinum 8480C", "driver_version": None}  # fmt: skip
    line = summary.versions_line([ladder_row("sgemm_smem", 1024, 0.5), cpu_row])
    assert line.startswith(f"Measured on {GPU} (compute capability 9.0) with CUDA driver 12.8, CUDA runtime 12.9")
    # The CPU row's missing driver is no gap: the driver is counted over the GPU rows alone.
    assert "not recorded for" not in line
    assert "; the CPU results on Intel(R) Xeon(R) Platinum 8480C; gemmlab 0.4.0" in line
    only = summary.versions_line([{**cpu_row, "gpu_name": None, "cc": None}])
    assert only == "Measured on the CPU, Intel(R) Xeon(R) Platinum 8480C; gemmlab 0.4.0 (git abc1234)."


def test_integer_ladders_say_operations() -> None:
    rows = [ladder_row("tc_int8_mma", 4096, 0.5, gflops=400_000.0, dtype="int8")]
    peak = {"gpu_name": GPU, "dtype": "int8", "family": "imma", "instruction": "mma.sync.s8", "gflops": 800_000.0}
    text = " ".join(summary.ladder_text(ladder(rows, [peak])))
    assert "400,000 GOP/s, 50% of the measured peak of 800,000 GOP/s" in text and "FLOP" not in text
