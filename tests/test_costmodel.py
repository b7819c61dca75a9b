"""The dispatcher's cost model, its correction by measured picks, the tables
gemmlab ships, and a tuning that keeps what ran before unless something beats
it (issue 50). No GPU: the model and the tables are read, the runner is a fake."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from dispatch_fakes import fake_result
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.store.records import Config, Pick
from gemmlab.store.store import Store
from gemmlab.studies import costmodel, dispatch, shipped
from gemmlab.studies import dispatch_tuning as tuning
from gemmlab.studies.candidates import Device
from gemmlab.studies.costmodel import Calibration, GPUModel, predict
from gemmlab.studies.suite import load_suite

ROOT = Path(__file__).resolve().parents[1]
H200 = GPUModel("NVIDIA H200", (9, 0), 132, 1.98, 4814.0)


def _predict(kernel: str, shape: Shape, dtype: str = "float32", gpu: GPUModel = H200, **changes):
    spec = catalogue.variant(kernel, catalogue.ladder(kernel).rung(kernel).config(changes))
    return predict(kernel, spec, shape, dtype, gpu, dispatch.resident(kernel, spec))


def _h200_choice(shape: Shape, dtype: str) -> dispatch.Choice:
    picks = shipped.shipped_picks("NVIDIA H200")
    return dispatch.choose(picks, shape, dtype, "sm_90a", gpu=H200)


# -- the model ------------------------------------------------------------------------


def test_a_tile_mostly_outside_c_costs_its_whole_area() -> None:
    # N = 24: a 128 x 256 tile computes 232 columns of nothing, a 64 x 64 one 40.
    big = _predict("sgemm_padded_b", Shape(1597, 24, 2069))
    small = _predict("sgemm_small_tile", Shape(1597, 24, 2069))
    assert big.padded_share == pytest.approx(1597 * 24 / (13 * 128 * 256))
    assert small.padded_share == pytest.approx(1597 * 24 / (25 * 64 * 64))
    # Per SM, the big tile's block computes 8 times the small one's area, faster per FLOP.
    assert big.compute_us > 2 * small.compute_us


def test_waves_are_counted_whole_unless_the_rung_shares_the_last_ones_out() -> None:
    # 2304 cubed: 18 x 9 = 162 tiles of 128 x 256 on 132 SMs, one tile each at a time.
    assert _predict("tc_persistent", Shape.square(2304), "bfloat16").waves == 2
    assert _predict("tc_persistent", Shape.square(2048), "bfloat16").waves == 1
    # The same tiles, the last ones' k-steps shared out: about 1.23 waves.
    shared = _predict("tc_split_tail", Shape.square(2304), "bfloat16", MAX_SLICES=1)
    assert 1.0 < shared.waves < 1.3


def test_a_split_k_fix_up_by_one_block_is_paid_and_a_cluster_reduction_is_not() -> None:
    shape = Shape(36, 24, 3286)
    split = _predict("sgemm_split_k", shape, SPLITS=16)
    # One 64 x 64 tile in 16 slices, one block per SM: each slice's k-steps, then
    # 17 partial tiles of 16 KiB through one SM at 64 bytes per clock; one wave.
    unit = 2 * 64 * 64 * 3286 / 16 / (256 * 1.98e3 * costmodel.EFFICIENCY["sgemm_split_k"])
    spec = catalogue.variant("sgemm_split_k", {"SPLITS": 16})
    slice_us = costmodel._wave_us(1, dispatch.resident("sgemm_split_k", spec), 4, unit)
    fix_up = 17 * 64 * 64 * 4 / (64 * 1.98e3)
    assert split.compute_us == pytest.approx(slice_us + fix_up + costmodel.WAVE_US)
    cluster = _predict("sgemm_cluster_split_k", Shape(36, 24, 3286))
    assert "sgemm_cluster_split_k" in costmodel.CLUSTER_REDUCTION and cluster.compute_us > 0


def test_clusters_that_leave_sms_idle_take_more_waves() -> None:
    # Clusters of 8 blocks fill 120 of 132 SMs at once (measured on an H200), of 2 all 132.
    assert costmodel.cluster_sms(132, 8) == 120 and costmodel.cluster_sms(132, 2) == 132
    assert costmodel.cluster_sms(132, 1) == 132 and costmodel.cluster_sms(66, 8) == 60
    # 128 x 128 tiles of 2048 x 1024 in 8 slices: 1024 units; 8 waves on 128 SMs, 9 on 120.
    shape = Shape(2048, 1024, 1024)
    assert _predict("sgemm_cluster_split_k", shape, BN=128, WN=32, SPLITS=8).waves == 9


def test_the_shorter_of_compute_and_memory_is_mostly_hidden() -> None:
    prediction = _predict("tc_small", Shape(96, 8192, 8192), "bfloat16", SPLITS=2)
    longer, shorter = max(prediction.compute_us, prediction.memory_us), min(prediction.compute_us, prediction.memory_us)
    assert prediction.us == pytest.approx(prediction.fixed_us + longer + costmodel.UNHIDDEN * shorter)


def test_no_launch_is_predicted_faster_than_the_launch_itself() -> None:
    for kernel, dtype in (("sgemm_small_tile", "float32"), ("tc_small", "bfloat16"), ("tc_gemv", "bfloat16")):
        prediction = _predict(kernel, Shape(1, 16, 16) if kernel == "tc_gemv" else Shape.square(16), dtype)
        assert prediction.us >= H200.launch_us


def test_memory_bound_shapes_are_priced_by_their_bytes() -> None:
    # 96 x 8192 x 8192 in bfloat16: B alone is 128 MiB, about 33 us at 85% of 4.8 TB/s.
    best = dispatch.model_ranked(Shape(96, 8192, 8192), "bfloat16", "sm_90a", H200, Calibration())[0].prediction
    assert best.memory_us == pytest.approx((96 * 8192 * 2 + 8192 * 8192 * 2 + 96 * 8192 * 4) / (4814 * 0.85e3))
    assert best.memory_us >= best.compute_us


# -- the correction -------------------------------------------------------------------


def _measured(kernel: str, shape: Shape, ms: float, dtype: str = "float32", **changes) -> Pick:
    config = catalogue.ladder(kernel).rung(kernel).config(changes)
    return Pick(gpu_name=H200.name, cc="9.0", dtype=dtype, m=shape.m, n=shape.n, k=shape.k, kernel=kernel,
                config=Config.of(config), median_ms=ms, cublas_ms=ms, verified=True)  # fmt: skip


def test_a_configuration_measured_near_the_shape_corrects_it_by_its_own_ratio() -> None:
    measured = _measured("sgemm_padded_b", Shape.square(4096), 3.0)
    calibration = Calibration.of([measured], H200, dispatch.resident)
    ratio = 3000.0 / _predict("sgemm_padded_b", Shape.square(4096)).us
    config = measured.config.values
    near = calibration.correction("float32", "sgemm_padded_b", config, Shape.square(4500))
    assert near.factor == pytest.approx(ratio) and "measured at 4096" in near.basis


def test_a_measurement_far_away_gives_way_to_the_prior() -> None:
    # The first version applied one tiny shape's ratio (launch latency) to 4096 cubed and
    # predicted sgemm_small_tile three times faster than it runs.
    tiny = _measured("sgemm_small_tile", Shape.square(128), 0.0046)
    big = _measured("sgemm_padded_b", Shape.square(4096), 3.0)
    calibration = Calibration.of([tiny, big], H200, dispatch.resident)
    far = calibration.correction("float32", "sgemm_small_tile", tiny.config.values, Shape.square(4096))
    prior = costmodel.UNTIMED_PENALTY * calibration_median(calibration, "float32")
    assert far.factor == pytest.approx(prior, rel=1e-6)


def calibration_median(calibration: Calibration, dtype: str) -> float:
    import statistics

    return statistics.median(r for (d, _, _), rows in calibration.by_config.items() if d == dtype for _, r in rows)


def test_an_untimed_rung_must_look_clearly_faster_to_displace_a_timed_one() -> None:
    big = _measured("sgemm_padded_b", Shape.square(4096), 3.0)
    calibration = Calibration.of([big], H200, dispatch.resident)
    untimed = calibration.correction("float32", "sgemm_stream_k", {}, Shape.square(4096))
    ratio = 3000.0 / _predict("sgemm_padded_b", Shape.square(4096)).us
    assert untimed.factor == pytest.approx(costmodel.UNTIMED_PENALTY * ratio)
    assert "not timed" in untimed.basis


def test_a_measured_pick_moves_the_choice_near_it() -> None:
    """The table corrects the model: a configuration measured far faster than
    the model expects at a shape wins the shapes near it."""
    shape, near = Shape(3000, 3000, 3000), Shape(3100, 2900, 3000)
    ranked = dispatch.model_ranked(near, "float32", "sm_90a", H200, Calibration())
    runner_up = ranked[5].candidate
    fast = _measured(runner_up.kernel, shape, 1e-4, **runner_up.config)
    chosen = dispatch.choose([fast], near, "float32", "sm_90a", gpu=H200)
    assert (chosen.kernel, chosen.config) == (runner_up.kernel, runner_up.config)
    assert "measured at 3000" in chosen.basis


def test_an_unseen_shape_gets_the_models_fastest_candidate() -> None:
    rng = random.Random(50)
    picks = shipped.shipped_picks("NVIDIA H200")
    calibration = Calibration.of(picks, H200, dispatch.resident)
    for _ in range(6):
        shape = Shape(*(round(2 ** rng.uniform(4, 14)) for _ in range(3)))
        for dtype in ("float32", "bfloat16"):
            chosen = dispatch.choose(picks, shape, dtype, "sm_90a", gpu=H200, calibration=calibration)
            ranked = dispatch.model_ranked(shape, dtype, "sm_90a", H200, calibration, picks)
            assert chosen.reason == dispatch.MODEL
            assert chosen.predicted_us == pytest.approx(min(r.us for r in ranked))


# -- the cases the issue measured, with the H200 table gemmlab ships --------------------


def test_n_of_24_in_float32_gets_a_small_tile() -> None:
    # 1597 x 24 x 2069: a 128 x 256-tile rung took 395 us against cuBLAS's 14.
    chosen = _h200_choice(Shape(1597, 24, 2069), "float32")
    rows, cols = catalogue.ladder(chosen.kernel).rung(chosen.kernel).tile(chosen.config)
    assert cols <= 64 and rows <= 64, chosen


def test_a_tiny_float32_product_with_long_k_is_not_given_stream_k() -> None:
    # 36 x 24 x 3286: stream-K took 70 us against cuBLAS's 8.
    assert _h200_choice(Shape(36, 24, 3286), "float32").kernel != "sgemm_stream_k"


def test_the_bfloat16_shapes_the_nearest_rule_got_wrong() -> None:
    # 512 x 4096 x 4096 took tc_small (49.5% of cuBLAS); 2048 x 2048 x 8192 took tc_split_k (68.2%).
    assert _h200_choice(Shape(512, 4096, 4096), "bfloat16").kernel != "tc_small"
    assert _h200_choice(Shape(2048, 2048, 8192), "bfloat16").kernel != "tc_split_k"


# -- the shipped tables ---------------------------------------------------------------


def test_the_tables_ship_for_the_h100_and_the_h200_and_every_pick_still_runs() -> None:
    names = {t.gpu_name for t in shipped.tables()}
    assert {"NVIDIA H200", "NVIDIA H100 80GB HBM3"} <= names
    for table in shipped.tables():
        assert table.sources and all((ROOT / source).is_file() for source in table.sources)
        assert {p.dtype for p in table.picks} == {"float32", "bfloat16", "bfloat16-out"}
        for pick in table.picks:
            spec = catalogue.variant(pick.kernel, pick.config.values)
            assert dispatch.accepts(spec, pick.shape, pick.dtype, "sm_90a") is None, pick
            assert pick.verified and pick.median_ms > 0 and pick.gpu_name == table.gpu_name


def test_the_tables_are_package_data() -> None:
    lines = (ROOT / "pyproject.toml").read_text().splitlines()
    package_data = lines[lines.index("[tool.setuptools.package-data]") + 1]
    assert package_data.startswith("gemmlab = [") and '"studies/tables/*.json"' in package_data


def test_a_broken_table_is_named_with_its_fix() -> None:
    from gemmlab.core.errors import GemmlabError

    with pytest.raises(GemmlabError, match=r"tables/x\.json is not one gemmlab wrote") as caught:
        shipped.table_from_dict(json.loads('{"gpu_name": "X", "picks": []}'), "gemmlab/studies/tables/x.json")
    assert "ship_tables.py" in caught.value.fix


def test_a_tuned_pick_replaces_the_shipped_one_for_its_shape() -> None:
    shipped_one = shipped.shipped_picks("NVIDIA H200")[0]
    mine = dataclasses.replace(shipped_one, kernel="sgemm_multistage", median_ms=0.001)
    both = shipped.merged([mine], shipped.shipped_picks("NVIDIA H200"))
    same = [p for p in both if (p.dtype, p.shape) == (mine.dtype, mine.shape)]
    assert same == [mine] and len(both) == len(shipped.shipped_picks("NVIDIA H200"))


def test_matmul_reads_the_shipped_table_unless_told_not_to(monkeypatch, tmp_path: Path) -> None:
    from gemmlab.api import matmul

    matmul.clear_cache()
    assert len(matmul._known(str(tmp_path / "none.sqlite"), "NVIDIA H200").picks) == 93
    monkeypatch.setenv(matmul.NO_SHIPPED_VARIABLE, "1")
    matmul.clear_cache()
    assert matmul._known(str(tmp_path / "none.sqlite"), "NVIDIA H200").picks == []
    matmul.clear_cache()


# -- tuning keeps what ran before unless something beats it ---------------------------


@pytest.mark.parametrize("force", [False, True])
def test_tuning_times_what_ran_before_first_and_keeps_it_when_nothing_beats_it(tmp_path: Path, force: bool) -> None:
    suite_file = tmp_path / "one.toml"
    suite_file.write_text('dtypes = ["float32"]\n[[group]]\nname = "g"\nsquares = [3000]\nreps = 10\n')
    suite = load_suite("full", suite_file)
    before = [_measured("sgemm_multistage", Shape.square(3000), 2.0, BM=64)] if force else []
    expected = tuning.incumbent(before, Shape.square(3000), "float32", Device("GPU X", "9.0", "sm_90a", 132))
    assert expected is not None
    tried: list[tuple[str, dict]] = []

    def runner(spec, shape, **options):
        tried.append((spec.id, spec.config))
        fastest = (spec.id, spec.config) == (expected.kernel, expected.config)
        return fake_result(spec, shape, 1.0 if fastest else 1.5)

    with Store.open(tmp_path / "r.sqlite") as store:
        summary = tuning.tune_suite(suite, store, dtypes=["float32"], runner=runner, shape_seconds=None,
                                      device=Device("GPU X", "9.0", "sm_90a", 132), picks_before=before,
                                      force=force)  # fmt: skip
        picks = store.picks("GPU X")
    assert tried[0] == (expected.kernel, expected.config)
    assert (picks[0].kernel, picks[0].config.values) == (expected.kernel, expected.config)
    assert summary.kept == ["3000 float32"] and "kept what the dispatcher ran before" in "\n".join(summary.lines())
    if force:  # the pick stored before is what ran, and it is what the tuner timed first
        assert expected.kernel == "sgemm_multistage" and expected.config["BM"] == 64


# -- `gemmlab dispatch rank` -----------------------------------------------------------


def test_rank_shows_the_choice_and_the_models_ranking_without_a_gpu() -> None:
    from gemmlab.api.dispatch import rank

    ranking = rank(1597, 24, 2069, "fp32", gpu="NVIDIA H200")
    assert ranking.choice.reason == dispatch.MODEL and ranking.picks == 93
    assert (ranking.ranked[0].candidate.kernel, ranking.ranked[0].candidate.config) == (
        ranking.choice.kernel, ranking.choice.config)  # fmt: skip
    assert [r.us for r in ranking.ranked] == sorted(r.us for r in ranking.ranked)
    tuned = rank(4096, 4096, 4096, "bf16", gpu="NVIDIA H200")
    assert tuned.choice.reason == dispatch.TUNED and tuned.choice.median_ms


def test_rank_on_the_command_line_and_its_refusals() -> None:
    from typer.testing import CliRunner

    from gemmlab.cli.app import app

    runner = CliRunner()
    shown = runner.invoke(app, ["dispatch", "rank", "36", "24", "3286", "--gpu", "NVIDIA H200", "--top", "3"],
                          env={"COLUMNS": "200"})  # fmt: skip
    assert shown.exit_code == 0, shown.output
    assert "float32 36x24x3286 on NVIDIA H200" in shown.output and "the cost model's ranking" in shown.output
    assert shown.output.count("sgemm_") >= 3 and "what corrects its time" in shown.output and "factor" in shown.output
    unknown = runner.invoke(app, ["dispatch", "rank", "8", "8", "8", "--gpu", "GPU Z"])
    assert unknown.exit_code != 0 and "ships no table for a GPU named 'GPU Z'" in unknown.output
    assert "NVIDIA H200" in unknown.output


def test_rank_without_a_gpu_or_a_named_table_says_which_tables_there_are(monkeypatch) -> None:
    from gemmlab.api.dispatch import rank
    from gemmlab.core import gpu
    from gemmlab.core.errors import NoGPUError

    def no_gpu(index: int = 0):
        raise NoGPUError("No NVIDIA driver was found on this machine.", "Install the driver.")

    monkeypatch.setattr(gpu, "describe", no_gpu)
    with pytest.raises(NoGPUError) as caught:
        rank(64, 64, 64)
    assert "No NVIDIA driver" in caught.value.cause and "'NVIDIA H200'" in caught.value.fix


@pytest.mark.parametrize("width", [60, 80, 100, 200])
def test_the_ranking_table_cuts_no_figure_at_any_width(width: int) -> None:
    from rich.console import Console

    from gemmlab.api.dispatch import rank
    from gemmlab.cli.dispatch import ranking_table

    ranking = rank(1597, 24, 2069, "fp32", gpu="NVIDIA H200")
    console = Console(width=width, record=True, color_system=None)
    console.print(ranking_table(ranking, 3, width))
    text = console.export_text()
    assert "…" not in text
    for found in ranking.ranked[:3]:
        assert f"{found.us:.1f}" in text and f"x{found.correction.factor:.2f}" in text


# -- every timed candidate corrects the model, not only the picks ----------------------


def test_the_tuners_other_candidates_correct_the_model_too(tmp_path: Path) -> None:
    suite_file = tmp_path / "one.toml"
    suite_file.write_text('dtypes = ["float32"]\n[[group]]\nname = "g"\nsquares = [3000]\nreps = 10\n')
    device = Device("GPU X", "9.0", "sm_90a", 132)

    def runner(spec, shape, **options):
        return fake_result(spec, shape, 0.5 if spec.id == "sgemm_padded_b" else 0.9)

    with Store.open(tmp_path / "r.sqlite") as store:
        tuning.tune_suite(load_suite("full", suite_file), store, dtypes=["float32"], runner=runner,
                            shape_seconds=None, device=device, picks_before=[])  # fmt: skip
        timed = tuning.stored_timings(store, "GPU X")
        assert tuning.stored_timings(store, "GPU Y") == []
    assert len(timed) > 1 and {t.median_ms for t in timed} == {0.5, 0.9}
    loser = next(t for t in timed if t.median_ms == 0.9)
    calibration = Calibration.of(timed, H200, dispatch.resident)
    near = calibration.correction("float32", loser.kernel, loser.config.values, Shape.square(3100))
    spec = catalogue.variant(loser.kernel, loser.config.values)
    predicted = predict(loser.kernel, spec, Shape.square(3000), "float32", H200, dispatch.resident(loser.kernel, spec))
    assert near.factor == pytest.approx(900.0 / predicted.us) and "measured at 3000" in near.basis


def test_ship_tables_keeps_every_timed_candidate_of_a_run_that_kept_them(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    kept = json.loads((ROOT / "benchmarks/results/2026-11-28g_h200_dispatch-full-fp32.json").read_text())
    pick = kept["results"][0]
    other = {"dtype": pick["dtype"], "m": pick["m"], "n": pick["n"], "k": pick["k"], "kernel": "sgemm_small_tile",
             "config": {}, "median_ms": 1.0, "baseline_median_ms": 0.5}  # fmt: skip
    run = {"device": kept["device"], "results": [pick], "candidates": [other]}
    source = tmp_path / "run.json"
    source.write_text(json.dumps(run))
    script = ROOT / "benchmarks" / "scripts" / "ship_tables.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, str(script), str(source), "--out", str(tmp_path / "tables")],
                          capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "tables" / "nvidia-h200.json").read_text())
    table = shipped.table_from_dict(written, "tables/nvidia-h200.json")
    assert len(table.picks) == 1 and len(table.measurements) == 1
    assert table.measurements[0].kernel == "sgemm_small_tile" and table.measurements[0].median_ms == 1.0
    assert table.model.dram_gbs == pytest.approx(4814.3, abs=0.1)
