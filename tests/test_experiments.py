"""The documents' experiments as points, and `reproduce` with a fake runner."""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gemmlab.core.errors import GemmlabError, ProfilerError, UnknownName
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.report import model, plots
from gemmlab.store.store import Store
from gemmlab.studies import experiments, reference
from gemmlab.studies.experiments.base import REPRODUCE_REPS, Experiment, Layout, Series, matrix_or_vector
from gemmlab.studies.points import SLOW_REPS
from gemmlab.studies.reproduce import PROFILER_GIVE_UP, Profiler, profile_experiment, reproduce
from test_sweep import RUN_INFO, fake_runner

# Points per experiment at the documents' sizes.
EXPECTED_POINTS = {
    "poznan-group1": 3 * 3 * 3,
    "poznan-group2": 4 * 5 * 2,
    # + cpu_blocked (int32) at 256, 512, 1024, + the int8 tensor-core rungs (beyond the report) at 4 sizes
    "int32-lab": 2 * 4 * 6 + 3 + 2 * 4,
    "brno-transpose": 2 * (1 + 5 * 2),  # vecadd, then 5 tiled/untiled kernels x 2 tiles, at 2 sizes
    "arequipa-any-size": 3 * 3,
    # GPU: naive_uncoalesced 4, col/row_buffered 3 each, tiled 4 x 6, blocked_x4 4 x 4; CPU: naive 3, others 4 + 4
    "kursk-cpu-gpu": 4 + 3 + 3 + 24 + 16 + 3 + 4 + 4,
}
# A layout for experiments made up by a test, which no report shows.
NO_PLOTS = Layout("t", ())


def test_the_six_experiments() -> None:
    assert experiments.names() == list(EXPECTED_POINTS)
    for e in experiments.EXPERIMENTS:
        assert e.title and e.source_doc and e.kernels and e.sizes


# The documents that printed no measurements: the only experiments without published figures.
WITHOUT_PUBLISHED = {"arequipa-any-size"}


def test_the_registry_names_each_experiment_once() -> None:
    assert len(set(experiments.names())) == len(experiments.EXPERIMENTS)
    assert all(experiments.find(e.name) is e for e in experiments.EXPERIMENTS)
    assert experiments.find("my-own-sweep") is None


@pytest.mark.parametrize("experiment", experiments.EXPERIMENTS, ids=lambda e: e.name)
def test_every_experiment_has_its_published_figures_and_layout(experiment: Experiment) -> None:
    if experiment.name in WITHOUT_PUBLISHED:
        assert experiment.published is None
    else:
        assert experiment.published is not None and experiment.published.rows()
        # Every published kernel that gemmlab has is one this experiment measures.
        measured = set(experiment.kernels)
        assert {r.kernel_id for r in experiment.published.rows() if r.kernel_id} <= measured
    layout = experiment.layout
    assert isinstance(layout, Layout) and layout.title and layout.plots
    for spec in layout.plots:
        inspect.signature(plots.PLOTS[spec.kind]).bind(None, None, **dict(spec.options))
    assert set(layout.published_metrics) <= {m.key for m in model.METRICS}
    assert set(layout.published_metrics.values()) <= reference.METRICS


def test_an_experiment_cannot_be_written_without_its_published_figures_and_layout() -> None:
    series = (Series(("tiled",), (128,), (16,)),)
    with pytest.raises(TypeError, match="published"):
        Experiment("t", "t", "t", series)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="layout"):
        Experiment("t", "t", "t", series, None)  # type: ignore[call-arg]


@pytest.mark.parametrize("name", list(EXPECTED_POINTS))
def test_point_counts(name: str) -> None:
    experiment = experiments.get(name)
    if experiment.missing_kernels():
        pytest.skip(f"{', '.join(experiment.missing_kernels())} not in the catalogue yet")
    found = experiment.points()
    assert len(found) == EXPECTED_POINTS[name]
    assert len({(p.kernel, p.shape, p.block_edge, p.dtype, p.variant) for p in found}) == len(found)


def test_kursk_leaves_out_what_cannot_run_and_says_why() -> None:
    found, left_out = experiments.get("kursk-cpu-gpu").plan()
    reasons = dict(left_out)
    assert "1024 threads" in reasons["col_buffered 2048 float32 e2e"]
    assert "1024 threads" in reasons["row_buffered 2048 float32 e2e"]
    assert "minutes" in reasons["cpu_naive 2048"]
    gpu = [p for p in found if not p.kernel.startswith("cpu_")]
    assert gpu and all(p.variant == "e2e" for p in gpu)
    assert {p.block_edge for p in gpu if p.kernel == "tiled"} == {1, 2, 4, 8, 16, 32}
    assert {p.block_edge for p in gpu if p.kernel == "blocked_x4"} == {4, 8, 16, 32}
    assert Counter(p.kernel for p in found if p.kernel.startswith("cpu_")) == {
        "cpu_naive": 3, "cpu_blocked": 4, "cpu_blas": 4,
    }  # fmt: skip


def test_constraint_skipping() -> None:
    e = Experiment("t", "t", "t", (Series(("tiled", "tiled_2x2"), (128, 176), (16, 22)),), None, NO_PLOTS)
    found, left_out = e.plan()
    labels = {p.label for p in found}
    assert {"tiled 128 b16 float32", "tiled 176 b16 float32", "tiled 176 b22 float32"} <= labels
    left = dict(left_out)
    assert "not a multiple of the block edge (22)" in left["tiled 128 b22 float32"]
    # tiled_2x2 needs twice the edge: 176 is a multiple of 44 but not of 32.
    assert "twice the block edge (32)" in left["tiled_2x2 176 b16 float32"]
    assert "tiled_2x2 176 b22 float32" in labels
    assert e.block_edges == (16, 22) and e.sizes == (128, 176)


def test_slow_int32_points_are_planned_short() -> None:
    found = experiments.get("int32-lab").points()
    by_label = {p.label: p for p in found}
    assert by_label["naive_i32 4096 b1 int32"].reps == SLOW_REPS
    assert by_label["tiled_i32 4096 b1 int32"].warmup == 1
    assert by_label["tiled_i32 4096 b32 int32"].reps == REPRODUCE_REPS
    assert by_label["cpu_blocked 1024 int32"].dtype == "int32"


def test_the_int32_lab_shows_int8_tensor_cores_beyond_the_report() -> None:
    e = experiments.get("int32-lab")
    by_label = {p.label: p for p in e.points()}
    for kernel in ("tc_int8_mma", "tc_int8_wgmma"):
        assert by_label[f"{kernel} 4096 int8"].dtype == "int8"
        assert catalogue.get(kernel).source_doc.endswith("(beyond the documents)")
    assert any("Beyond the report" in note and "tc_int8_wgmma" in note for note in e.notes)


def test_brno_shapes() -> None:
    experiment = experiments.get("brno-transpose")
    assert matrix_or_vector("vecadd", 4000) == Shape(1, 16_000_000, 1)
    assert matrix_or_vector("transpose_tiled", 4000) == Shape(4000, 4000, 1)
    if not experiment.missing_kernels():
        shapes = {p.shape for p in experiment.points()}
        assert Shape(4000, 4000, 1) in shapes and Shape(16384, 16384, 1) in shapes


def test_sizes_can_be_replaced() -> None:
    found = experiments.get("poznan-group1").points(sizes=[176])
    assert len(found) == 9 and {p.shape for p in found} == {Shape.square(176)}
    kursk, left_out = experiments.get("kursk-cpu-gpu").plan(sizes=[2048])
    assert not any(p.kernel == "cpu_naive" for p in kursk) and "cpu_naive 2048" in dict(left_out)


def test_unknown_experiment_suggests_close_names() -> None:
    with pytest.raises(UnknownName, match="Did you mean poznan-group1"):
        experiments.get("poznan-grup1")
    with pytest.raises(UnknownName):
        experiments.select(["poznan-group1", "nope"])
    assert len(experiments.select(None)) == 6


def test_an_experiment_with_missing_kernels_is_not_built_yet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    future = Experiment("future", "t", "t", (Series(("tiled", "warp_specialised"), (128,), (16,)),), None, NO_PLOTS)
    assert future.missing_kernels() == ["warp_specialised"]
    monkeypatch.setitem(experiments._BY_NAME, "future", future)
    with Store.open(tmp_path / "r.sqlite") as store:
        (outcome,) = reproduce(["future"], store, runner=fake_runner, progress=False, run_info=RUN_INFO)
        assert store.rows() == []
    assert outcome.status == "not built yet" and outcome.missing == ["warp_specialised"]


def test_reproduce_two_experiments_and_resume(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        started = []
        record = lambda e, n: started.append((e.name, n))
        outcomes = reproduce(["poznan-group1", "kursk-cpu-gpu"], store, sizes=[256], runner=fake_runner,
                             progress=False, run_info=RUN_INFO, on_start=record)  # fmt: skip
        assert [o.status for o in outcomes] == ["done", "done"]
        assert started == [("poznan-group1", 6), ("kursk-cpu-gpu", 16)]  # edge 22 is refused at 256
        kursk_rows = store.rows("kursk-cpu-gpu")
        assert len(store.rows("poznan-group1")) == 6
        # 13 GPU points (1 + 1 + 1 + 6 tiled + 4 blocked_x4) x (pinned, pageable) + 3 CPU points
        assert len(kursk_rows) == 13 * 2 + 3
        again = reproduce(["poznan-group1"], store, sizes=[256], runner=fake_runner, progress=False)
    assert again[0].summary is not None and len(again[0].summary.skipped_existing) == 6


def test_reproduce_stops_after_an_interrupted_experiment(tmp_path: Path) -> None:
    runner = partial(fake_runner, interrupt_at=176)
    with Store.open(tmp_path / "r.sqlite") as store:
        outcomes = reproduce(["poznan-group1", "arequipa-any-size"], store, runner=runner, progress=False,
                             run_info=RUN_INFO)  # fmt: skip
    assert [o.status for o in outcomes] == ["interrupted"]


def fake_profile(kernel: str, shape: Shape, block_edge: int, dtype: str) -> dict:
    return {"gips": 1.5, "cgma_measured": float(block_edge or 1), "inst_executed": 1e6, "kernel": kernel,
            "dram_bytes": 4.0 * 3 * shape.m * shape.n}  # fmt: skip


def broken_profile(*args: object) -> dict:
    raise ProfilerError("ncu is not installed.", "Install it.")


def test_profile_fills_every_row_of_a_point(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        reproduce(["kursk-cpu-gpu"], store, sizes=[256], runner=fake_runner, progress=False, run_info=RUN_INFO)
        summary = profile_experiment(store, "kursk-cpu-gpu", fake_profile)
        assert summary.profiled == 13 and not summary.failed
        rows = store.rows("kursk-cpu-gpu")
        assert all(r["gips"] == 1.5 for r in rows if not r["kernel"].startswith("cpu_"))
        assert all(r["gips"] is None for r in rows if r["kernel"].startswith("cpu_"))
        assert profile_experiment(store, "kursk-cpu-gpu", fake_profile).already == 13


def test_profile_failures(tmp_path: Path) -> None:
    calls = []

    def flaky(kernel: str, shape: Shape, block_edge: int, dtype: str) -> dict:
        calls.append(kernel)
        if block_edge == 8:
            raise GemmlabError("ncu timed out", "")
        return fake_profile(kernel, shape, block_edge, dtype)

    with Store.open(tmp_path / "r.sqlite") as store:
        reproduce(["poznan-group1"], store, sizes=[176], runner=fake_runner, progress=False, run_info=RUN_INFO)
        summary = profile_experiment(store, "poznan-group1", flaky)
        assert summary.profiled == 6 and len(summary.failed) == 3 and summary.stopped is None
        # A broken profiler fails every point alike: it stops, the timings stay.
        stopped = profile_experiment(store, "poznan-group1", broken_profile, force=True)
        assert len(store.rows("poznan-group1")) == 9
    assert stopped.profiled == 0 and len(stopped.failed) == PROFILER_GIVE_UP
    assert stopped.stopped == "ncu is not installed. Install it."
    lines = stopped.lines()
    assert lines[0] == "0 profiled, 0 already profiled" and len(lines) == 2
    assert lines[1].startswith(f"profiling stopped after {PROFILER_GIVE_UP} points failed alike: ncu is not installed")
    assert "timings are stored" in lines[1]


def test_a_stopped_profiler_stays_stopped(tmp_path: Path) -> None:
    calls: list[str] = []

    def counting(*args: object) -> dict:
        calls.append(str(args[0]))
        return broken_profile()

    with Store.open(tmp_path / "r.sqlite") as store:
        reproduce(["poznan-group1", "arequipa-any-size"], store, sizes=[176], runner=fake_runner, progress=False,
                  run_info=RUN_INFO)  # fmt: skip
        profiler = Profiler(counting)
        profiler.profile(store, store.rows("poznan-group1"))
        later = profiler.profile(store, store.rows("arequipa-any-size"))
    assert len(calls) == PROFILER_GIVE_UP and later.profiled == 0 and not later.failed
    assert profiler.summary.stopped and len(profiler.summary.failed) == PROFILER_GIVE_UP


def test_the_profiler_gives_old_runs_the_ceilings_of_this_one(tmp_path: Path) -> None:
    ceilings = {"peak_gflops_measured": 50_000.0, "bandwidth_gbs_measured": 4_000.0}
    with Store.open(tmp_path / "r.sqlite") as store:
        reproduce(["arequipa-any-size"], store, sizes=[1000], runner=fake_runner, progress=False, run_info=RUN_INFO)
        profiler = Profiler(fake_profile, ceilings=ceilings, gpu_name=RUN_INFO["gpu_name"])
        assert profiler.profile(store, store.rows("arequipa-any-size")).profiled == 3
        rows = store.rows("arequipa-any-size")
    assert all(r["peak_gflops_measured"] == 50_000.0 and r["bandwidth_gbs_measured"] == 4_000.0 for r in rows)
    assert all(r["dram_bytes"] for r in rows)


def test_cli_reproduce_list_and_unknown() -> None:
    from gemmlab.cli.app import app

    listed = CliRunner().invoke(app, ["reproduce", "--list"])
    assert listed.exit_code == 0 and "kursk-cpu-gpu" in listed.output and "points" in listed.output
    unknown = CliRunner().invoke(app, ["reproduce", "kursk"])
    assert unknown.exit_code == 2 and "Did you mean kursk-cpu-gpu" in unknown.output


CEILINGS = (50_000.0, 4_000.0)


def fake_profiling(monkeypatch: pytest.MonkeyPatch, profile_point: Callable[..., dict] = fake_profile) -> list[str]:
    """Every GPU point runs through fake_runner on RUN_INFO's GPU and profiles through
    ``profile_point``; ncu is 'found' and the ceilings are CEILINGS. Returns the kernels
    profiled, in order."""
    from gemmlab.measure import ncu, roofline
    from gemmlab.studies import sweep as sweep_module

    profiled: list[str] = []

    def recording(kernel: str, *args: object) -> dict:
        profiled.append(kernel)
        return profile_point(kernel, *args)

    monkeypatch.setattr(sweep_module, "measure_point", fake_runner)
    monkeypatch.setattr(sweep_module, "run_record", lambda: dict(RUN_INFO))
    monkeypatch.setattr(ncu.command, "find_ncu", lambda: "/fake/ncu")
    monkeypatch.setattr(ncu.command, "profile_point", recording)
    monkeypatch.setattr(roofline, "measure_ceilings", lambda: CEILINGS)
    return profiled


def no_ncu(monkeypatch: pytest.MonkeyPatch) -> None:
    from gemmlab.measure import ncu

    def missing() -> str:
        raise ncu.command.missing_ncu_error()

    monkeypatch.setattr(ncu.command, "find_ncu", missing)


def test_cli_reproduce_profile_then_the_roofline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gemmlab.cli.app import app

    profiled = fake_profiling(monkeypatch)
    db, out = tmp_path / "r.sqlite", tmp_path / "rep"
    args = ["reproduce", "arequipa-any-size", "--sizes", "1000", "--db", str(db), "--out", str(out), "--profile"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "3 measured and stored" in result.output and "3 profiled, 0 already profiled" in result.output
    assert "50,000 GFLOP/s, 4,000 GB/s" in result.output
    assert profiled == ["tiled_any_size"] * 3
    with Store.open(db) as store:
        rows = store.rows("arequipa-any-size")
        (run,) = store.runs()
    assert len(rows) == 3 and all(r["gips"] == 1.5 and r["dram_bytes"] for r in rows)
    assert (run["peak_gflops_measured"], run["bandwidth_gbs_measured"]) == CEILINGS
    roofline = out / "arequipa-any-size" / "roofline.png"
    assert (
        roofline.read_bytes().startswith(b"\x89PNG")
        and "arequipa-any-size/roofline.png" in (out / "index.html").read_text()
    )
    again = CliRunner().invoke(app, args)  # resumed: measured and profiled already
    assert again.exit_code == 0 and "0 profiled, 3 already profiled" in again.output


def test_cli_reproduce_profile_without_ncu_keeps_the_timings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from gemmlab.cli.app import app

    fake_profiling(monkeypatch)
    no_ncu(monkeypatch)
    monkeypatch.setitem(sys.modules, "gemmlab.report", None)  # as if the report were not written yet
    db = tmp_path / "r.sqlite"
    args = ["reproduce", "arequipa-any-size", "--sizes", "1000", "--db", str(db), "--out", str(tmp_path / "rep")]
    result = CliRunner().invoke(app, [*args, "--profile"])
    assert result.exit_code == ProfilerError.exit_code, result.output  # nothing could be profiled
    assert "3 measured and stored" in result.output and "report is not built yet" in result.output
    assert "Nsight Compute (ncu) was not found" in result.output and "Profiling is off" in result.output
    assert "Traceback" not in result.output
    with Store.open(db) as store:
        assert len(store.rows("arequipa-any-size")) == 3
    assert CliRunner().invoke(app, args).exit_code == 0  # without --profile nothing is missing


def test_cli_sweep_profiles_each_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gemmlab.cli.app import app
    from gemmlab.core import gpu

    profiled = fake_profiling(monkeypatch)
    monkeypatch.setattr(gpu, "cupy", lambda: None)
    db = tmp_path / "r.sqlite"
    args = ["sweep", "--kernels", "tiled,cpu_blas", "--sizes", "64,128", "--blocks", "16", "--db", str(db)]
    plain = CliRunner().invoke(app, [*args, "--sizes", "64"])
    assert plain.exit_code == 0, plain.output
    assert profiled == []  # no --profile, no profiler
    result = CliRunner().invoke(app, [*args, "--profile"])
    assert result.exit_code == 0, result.output
    # 64 was stored by the plain sweep and is profiled now; 128 right after it is measured; CPU points never.
    assert "2 measured and stored, 2 already stored" in result.output
    assert "2 profiled, 0 already profiled" in result.output
    assert profiled == ["tiled", "tiled"]
    with Store.open(db) as store:
        rows = store.rows(None)
        runs = store.runs()
    tiled = [r for r in rows if r["kernel"] == "tiled"]
    assert len(tiled) == 2 and all(r["gips"] == 1.5 for r in tiled)
    assert all(r["gips"] is None for r in rows if r["kernel"] == "cpu_blas")
    # This run's ceilings; the plain sweep's run gets them too (same GPU), so its point sits under the roofline.
    assert [(r["peak_gflops_measured"], r["bandwidth_gbs_measured"]) for r in runs] == [CEILINGS, CEILINGS]


def test_cli_sweep_profile_failures_keep_the_timings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gemmlab.cli.app import app
    from gemmlab.core import gpu

    profiled = fake_profiling(monkeypatch, broken_profile)
    monkeypatch.setattr(gpu, "cupy", lambda: None)
    db = tmp_path / "r.sqlite"
    args = ["sweep", "--kernels", "tiled", "--sizes", "64,128,256,512,1024", "--blocks", "16", "--db", str(db)]
    result = CliRunner().invoke(app, [*args, "--profile"], terminal_width=400)
    assert result.exit_code == ProfilerError.exit_code, result.output
    assert len(profiled) == PROFILER_GIVE_UP  # then it stops; the sweep goes on
    assert "5 measured and stored" in result.output and "0 profiled" in result.output
    assert f"profiling stopped after {PROFILER_GIVE_UP} points failed alike: ncu is not installed" in result.output
    assert "The timings are stored" in result.output
    with Store.open(db) as store:
        assert len(store.rows(None)) == 5

    # Some points profiled, others not: the command succeeds.
    def flaky(kernel: str, shape: Shape, *args: object) -> dict:
        if shape.m == 64:
            raise GemmlabError("ncu timed out.", "")
        return fake_profile(kernel, shape, *args)  # type: ignore[arg-type]

    fake_profiling(monkeypatch, flaky)
    partly = CliRunner().invoke(app, [*args, "--profile"], terminal_width=400)
    assert partly.exit_code == 0, partly.output
    assert "4 profiled" in partly.output and "not profiled: tiled 64 b16 float32: ncu timed out." in partly.output


def test_cli_sweep_profile_without_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gemmlab.cli.app import app
    from gemmlab.core import gpu

    profiled = fake_profiling(monkeypatch)
    no_ncu(monkeypatch)
    monkeypatch.setattr(gpu, "cupy", lambda: None)
    db = tmp_path / "r.sqlite"
    result = CliRunner().invoke(app, ["sweep", "--kernels", "tiled", "--sizes", "64", "--blocks", "16", "--db",
                                      str(db), "--profile"])  # fmt: skip
    assert result.exit_code == ProfilerError.exit_code, result.output
    assert "1 measured and stored" in result.output and "Profiling is off" in result.output and not profiled
    cpu_only = CliRunner().invoke(app, ["sweep", "--kernels", "cpu_blas", "--sizes", "32", "--db", str(db),
                                        "--max-seconds", "0.1", "--profile"])  # fmt: skip
    assert cpu_only.exit_code == 0 and "nothing to profile" in cpu_only.output
