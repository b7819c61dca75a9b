"""The tuner with a fake runner (no GPU): the fastest verified configuration
wins, wrong and uncompilable ones never do, every candidate is stored at once
and skipped on the next run (resume after Ctrl-C), size classes, the budget,
both ladders and their element types kept apart, the tables of an older
gemmlab brought forward, `gemmlab tune` and `gemmlab run` picking the tuned
configuration."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import database_at
from gemmlab.backends.nvrtc import Resources
from gemmlab.cli.app import app
from gemmlab.core.errors import CompileError, ConstraintError, GemmlabError, UnknownName, VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.core.timing import Timing, gflops
from gemmlab.kernels import catalogue
from gemmlab.kernels.sgemm import spec as sgemm
from gemmlab.kernels.spec import KernelSpec
from gemmlab.kernels.tensor import spec as tensor
from gemmlab.measure.run import RunResult
from gemmlab.store.schema import TUNER_HISTORY
from gemmlab.store.store import SCHEMA_VERSION, Store, config_text
from gemmlab.studies import tune
from gemmlab.studies.candidates import Device

KERNEL = "sgemm_warptile"
CONFIGS = catalogue.configs(KERNEL)
DEVICE = Device("Fake H200", "9.0", "sm_90a", 132)
CUBLAS_GFLOPS = 50_000.0
# The fake speed of each configuration: later in the list is faster. The two
# fastest are the traps: the very fastest gives a wrong result, the next does not compile.
WRONG = CONFIGS[-1]
BROKEN = CONFIGS[-2]
FASTEST_GOOD = CONFIGS[-3]


def speed(config: dict, shape: Shape, dtype: str = "float32") -> float:
    """GFLOPS of a configuration at a shape: 10,000 + 1,000 per place in the list."""
    return 10_000.0 + 1_000.0 * CONFIGS.index(config)


class FakeRunner:
    """Stands in for measure_candidate: deterministic figures, one wrong result,
    one compile error; ``interrupt_after`` raises KeyboardInterrupt (Ctrl-C) on that call."""

    def __init__(self, interrupt_after: int | None = None, sleep: float = 0.0, speeds=speed) -> None:
        self.calls: list[tuple[dict, Shape, bool]] = []
        self.dtypes: list[str] = []
        self.interrupt_after = interrupt_after
        self.sleep = sleep
        self.speeds = speeds

    def __call__(self, spec: KernelSpec, shape: Shape, *, dtype: str, reps: int, warmup: int, max_seconds: float,
                 baseline: bool) -> RunResult:  # fmt: skip
        config = spec.config
        self.calls.append((config, shape, baseline))
        self.dtypes.append(dtype)
        time.sleep(self.sleep)
        if self.interrupt_after is not None and len(self.calls) > self.interrupt_after:
            raise KeyboardInterrupt
        if config == WRONG:
            raise VerificationError(f"{spec.id} gave a wrong result on {shape}.", "")
        if config == BROKEN:
            raise CompileError(f"NVRTC could not compile {spec.id}.", "")
        value = self.speeds(config, shape, dtype)
        ms = 2 * shape.m * shape.n * shape.k / (value * 1e6)
        result = RunResult(
            kernel=spec.id, m=shape.m, n=shape.n, k=shape.k, block_edge=0, dtype=dtype, grid=(1, 1, 1),
            block=(256, 1, 1), dynamic_smem=0, resources=Resources(128, 16384, 0, 0, 0, 1), arch="sm_90",
            timing=Timing(ms, ms * 0.98, ms * 1.05, reps), gflops=gflops(2 * shape.m * shape.n * shape.k, ms),
            gbytes_per_s=1.0, error=1e-7, tolerance=1e-5, config=config,
        )  # fmt: skip
        if baseline:
            result.baseline_gflops = CUBLAS_GFLOPS
            result.ratio_to_baseline = result.gflops / CUBLAS_GFLOPS
        return result


def candidates(db: Path) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM tuned_candidates ORDER BY id")]
    finally:
        conn.close()


def tuned_rows(db: Path) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM tuned ORDER BY size_class")]
    finally:
        conn.close()


def run_tune(db: Path, runner: FakeRunner, sizes=(1024,), **kwargs) -> tune.TuneSummary:
    with Store.open(db) as store:
        return tune.tune(KERNEL, list(sizes), store, runner=runner, device=DEVICE, progress=False, **kwargs)


# -- size classes -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        (Shape.square(1), "small"),
        (Shape.square(1024), "small"),
        (Shape.square(1025), "medium"),
        (Shape.square(4096), "medium"),
        (Shape.square(4097), "large"),
        (Shape(64, 64, 8192), "large"),  # the largest dimension decides
        (Shape(4096, 1024, 2048), "medium"),
    ],
)
def test_size_class(shape: Shape, expected: str) -> None:
    assert tune.size_class(shape) == expected


# -- the search -------------------------------------------------------------------


def test_picks_the_fastest_verified_config(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    runner = FakeRunner()
    summary = run_tune(db, runner)

    assert summary.total == len(CONFIGS) and len(summary.measured) == len(CONFIGS) - 2
    assert [label for label, _ in summary.rejected] == [f"1024 {tune.config_label(WRONG)}"]
    assert len(summary.skipped) == 1 and "NVRTC" in summary.skipped[0][1]
    best = summary.best["small"]
    assert best.config == FASTEST_GOOD
    assert best.gflops == pytest.approx(speed(FASTEST_GOOD, Shape.square(1024)))
    assert best.default_gflops == pytest.approx(speed(CONFIGS[0], Shape.square(1024)))
    assert best.ratio_to_cublas == pytest.approx(best.gflops / CUBLAS_GFLOPS)
    # cuBLAS is timed once per shape, beside the first candidate (the default).
    assert [(c, baseline) for c, _s, baseline in runner.calls if baseline] == [(CONFIGS[0], True)]

    rows = candidates(db)
    assert len(rows) == len(CONFIGS)
    by_status = {r["status"] for r in rows}
    assert by_status == {"ok", "rejected", "skipped"}
    wrong = next(r for r in rows if json.loads(r["config"]) == WRONG)
    assert wrong["status"] == "rejected" and wrong["gflops"] is None and "wrong result" in wrong["reason"]
    assert all(r["gpu_name"] == "Fake H200" and r["cc"] == "9.0" and r["size_class"] == "small" for r in rows)
    ok = [r for r in rows if r["status"] == "ok"]
    assert all(r["median_ms"] > 0 and r["gflops"] > 0 and r["error"] == 1e-7 for r in ok)

    (stored,) = tuned_rows(db)
    assert json.loads(stored["config"]) == FASTEST_GOOD
    assert stored["kernel"] == KERNEL and stored["size_class"] == "small" and stored["gpu_name"] == "Fake H200"
    assert json.loads(stored["shapes"]) == [[1024, 1024, 1024]]


def test_resume_after_interruption(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    cut = FakeRunner(interrupt_after=4)
    first = run_tune(db, cut)
    assert first.interrupted and len(first.measured) == 4
    assert first.best == {} and any("run the same command again" in line for line in first.lines())
    assert len(candidates(db)) == 4  # each stored the moment it was measured
    assert tuned_rows(db) == []  # nothing chosen from a search cut short by Ctrl-C

    again = FakeRunner()
    second = run_tune(db, again)
    assert not second.interrupted
    assert len(second.already) == 4 and len(again.calls) == len(CONFIGS) - 4
    # The four stored are not measured again; the one cut short by Ctrl-C is.
    assert [c for c, _s, _b in again.calls] == CONFIGS[4:]
    assert [c for c, _s, _b in cut.calls] == CONFIGS[:5]
    assert second.best["small"].config == FASTEST_GOOD
    # cuBLAS was timed in the first run; its figure is still there for the ratio.
    assert second.best["small"].ratio_to_cublas == pytest.approx(second.best["small"].gflops / CUBLAS_GFLOPS)

    third = FakeRunner()
    summary = run_tune(db, third)
    assert third.calls == [] and len(summary.already) == len(CONFIGS)
    assert summary.best["small"].config == FASTEST_GOOD
    assert len(candidates(db)) == len(CONFIGS)


def test_force_measures_again(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    run_tune(db, FakeRunner())
    again = FakeRunner()
    run_tune(db, again, force=True)
    assert len(again.calls) == len(CONFIGS)
    assert len(candidates(db)) == len(CONFIGS)  # replaced, not added


def test_rejected_is_never_best_even_when_everything_else_fails(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    summary = run_tune(db, FakeRunner(), configs=[WRONG, BROKEN])
    assert summary.best == {} and summary.unchosen == ["small"]
    assert tuned_rows(db) == []
    with Store.open(db) as store:
        assert tune.tuned_spec(KERNEL, Shape.square(1024), store, DEVICE.name) is None


def test_size_classes_are_tuned_apart_and_shapes_of_one_class_together(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"

    def speeds(config: dict, shape: Shape, dtype: str) -> float:
        # The default is best at 2048, the third configuration at 4096 and in
        # geometric mean over both; at 8192 the second wins.
        table = {
            2048: {0: 30_000, 1: 10_000, 2: 29_000},
            4096: {0: 30_000, 1: 10_000, 2: 40_000},
            8192: {0: 30_000, 1: 35_000, 2: 20_000},
        }
        return float(table[shape.m].get(CONFIGS.index(config), 1_000))

    summary = run_tune(db, FakeRunner(speeds=speeds), sizes=(2048, 4096, 8192))
    assert set(summary.best) == {"medium", "large"}
    assert summary.best["medium"].config == CONFIGS[2]
    assert summary.best["medium"].shapes == (Shape.square(2048), Shape.square(4096))
    assert summary.best["medium"].gflops == pytest.approx((29_000 * 40_000) ** 0.5)
    assert summary.best["large"].config == CONFIGS[1]
    with Store.open(db) as store:
        assert tune.tuned_spec(KERNEL, Shape.square(3000), store, DEVICE.name).config == CONFIGS[2]
        assert tune.tuned_spec(KERNEL, Shape(8192, 8192, 1024), store, DEVICE.name).config == CONFIGS[1]
        assert tune.tuned_spec(KERNEL, Shape.square(512), store, DEVICE.name) is None  # small was not tuned


def test_best_config_needs_every_shape_of_the_class() -> None:
    a, b = Shape.square(2048), Shape.square(4096)
    rows = [
        {"config": "x", "m": 2048, "n": 2048, "k": 2048, "gflops": 90.0, "status": "ok"},  # fast, but 2048 only
        {"config": "y", "m": 2048, "n": 2048, "k": 2048, "gflops": 40.0, "status": "ok"},
        {"config": "y", "m": 4096, "n": 4096, "k": 4096, "gflops": 10.0, "status": "ok"},
        {"config": "z", "m": 2048, "n": 2048, "k": 2048, "gflops": 99.0, "status": "rejected"},
    ]
    assert tune.best_config(rows, [a, b]) == ("y", pytest.approx(20.0))
    assert tune.best_config(rows, [a]) == ("x", 90.0)
    assert tune.best_config([], [a]) is None


def test_budget_stops_starting_candidates(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    runner = FakeRunner(sleep=0.05)
    summary = run_tune(db, runner, budget_seconds=0.12)
    assert summary.out_of_budget and 1 <= len(runner.calls) < len(CONFIGS)
    assert summary.not_run == len(CONFIGS) - len(runner.calls)
    assert summary.best["small"].config in CONFIGS[: len(runner.calls)]
    assert any("time budget spent" in line for line in summary.lines())

    nothing = FakeRunner()
    summary = run_tune(db, nothing, budget_seconds=0)
    assert nothing.calls == [] and summary.out_of_budget
    assert summary.best["small"].config in CONFIGS[: len(runner.calls)]  # chosen among the stored


def test_devices_are_kept_apart(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    run_tune(db, FakeRunner())
    other = FakeRunner()
    with Store.open(db) as store:
        tune.tune(KERNEL, [1024], store, runner=other, device=DEVICE._replace(name="Fake H100"), progress=False)
        assert len(other.calls) == len(CONFIGS)  # nothing measured on the H200 counts here
        assert tune.tuned_spec(KERNEL, Shape.square(1024), store, "Fake H100") is not None
        assert tune.tuned_spec(KERNEL, Shape.square(1024), store, "Fake A100") is None


def test_refusals(tmp_path: Path) -> None:
    with Store.open(tmp_path / "t.sqlite") as store:
        with pytest.raises(UnknownName, match="Unknown tunable kernel 'tiled'"):
            tune.tune("tiled", [1024], store, runner=FakeRunner(), device=DEVICE, progress=False)
        with pytest.raises(GemmlabError, match="at least 10"):
            tune.tune(KERNEL, [1024], store, runner=FakeRunner(), device=DEVICE, progress=False, reps=3)


def test_progress_bar_runs(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    out = io.StringIO()
    with Store.open(tmp_path / "t.sqlite") as store:
        tune.tune(KERNEL, [1024], store, runner=FakeRunner(), device=DEVICE, budget_seconds=60,
                  console=Console(file=out, force_terminal=False, width=200))  # fmt: skip
    text = out.getvalue()
    assert "rejected" in text and "skipped" in text


# -- both ladders, each element type apart ---------------------------------------

TC_KERNEL = "tc_wgmma"  # bfloat16, float16 and tf32
TC_CONFIGS = catalogue.configs(TC_KERNEL)
# The fastest configuration of each element type: another for each.
TC_FASTEST = {"bfloat16": 1, "float16": 2, "tf32": 3}


def tc_speed(config: dict, shape: Shape, dtype: str) -> float:
    return 100_000.0 if TC_CONFIGS.index(config) == TC_FASTEST[dtype] else 50_000.0


def run_tc_tune(db: Path, runner: FakeRunner, dtype: str | None) -> tune.TuneSummary:
    with Store.open(db) as store:
        return tune.tune(TC_KERNEL, [1024], store, dtype=dtype, runner=runner, device=DEVICE, progress=False)


def test_each_kernel_belongs_to_its_ladder() -> None:
    # The tuner searches the catalogue's ladders, and nothing else.
    tunable = {spec.id for ladder in catalogue.LADDERS for spec in ladder.kernels}
    from gemmlab.kernels.lowp import spec as lowp

    assert tunable == {spec.id for spec in (*sgemm.SGEMM_KERNELS, *tensor.TENSOR_KERNELS, *lowp.LOWP_KERNELS)}
    with pytest.raises(UnknownName, match="tunable kernel"):
        tune.resolved_dtype("tiled")
    for spec in sgemm.SGEMM_KERNELS:
        assert tune.default_config(spec.id) == spec.config  # the catalogue entry's
        assert tune.resolved_dtype(spec.id) == "float32"
    for spec in tensor.TENSOR_KERNELS:
        assert tune.default_config(spec.id) == spec.config
        assert tune.resolved_dtype(spec.id) == spec.dtypes[0]
    assert catalogue.ladder(KERNEL).name == "FP32 ladder" and catalogue.ladder(TC_KERNEL).name == "tensor-core ladder"
    variant = catalogue.variant(TC_KERNEL, TC_CONFIGS[1])
    assert variant.id == TC_KERNEL and variant.config == TC_CONFIGS[1]


def test_unknown_kernels_and_dtypes_are_refused_in_words() -> None:
    with pytest.raises(UnknownName) as found:
        tune.resolved_dtype("tiled")
    # Every tunable kernel of both ladders is listed.
    assert all(spec.id in found.value.fix for spec in (*sgemm.SGEMM_KERNELS, *tensor.TENSOR_KERNELS))
    with pytest.raises(UnknownName, match="Did you mean tc_mma"):
        tune.resolved_dtype("tc_mmma")
    with pytest.raises(ConstraintError, match="tc_mma has no tf32 version") as found:
        tune.resolved_dtype("tc_mma", "tf32")
    assert found.value.fix == "Use --dtype bfloat16 or float16."
    with pytest.raises(ConstraintError, match="no bfloat16 version"):
        tune.resolved_dtype(KERNEL, "bfloat16")
    assert tune.resolved_dtype(TC_KERNEL, "tf32") == "tf32"


def test_element_types_are_tuned_and_stored_apart(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    default = FakeRunner(speeds=tc_speed)
    summary = run_tc_tune(db, default, None)
    assert summary.dtype == "bfloat16" and set(default.dtypes) == {"bfloat16"}
    assert summary.best["small"].config == TC_CONFIGS[TC_FASTEST["bfloat16"]]
    assert summary.best["small"].dtype == "bfloat16" and "(bfloat16)" in summary.lines()[0]

    # The same configurations at the same shape: nothing measured in bfloat16 counts for tf32.
    tf32 = FakeRunner(speeds=tc_speed)
    summary = run_tc_tune(db, tf32, "tf32")
    assert len(tf32.calls) == len(TC_CONFIGS) and set(tf32.dtypes) == {"tf32"} and summary.already == []
    assert summary.best["small"].config == TC_CONFIGS[TC_FASTEST["tf32"]]

    rows = candidates(db)
    assert len(rows) == 2 * len(TC_CONFIGS)
    assert sorted(r["dtype"] for r in rows) == ["bfloat16"] * len(TC_CONFIGS) + ["tf32"] * len(TC_CONFIGS)
    assert {(r["dtype"], json.loads(r["config"]) == TC_CONFIGS[TC_FASTEST[r["dtype"]]]) for r in tuned_rows(db)} == {
        ("bfloat16", True),
        ("tf32", True),
    }

    again = FakeRunner(speeds=tc_speed)
    assert len(run_tc_tune(db, again, "bfloat16").already) == len(TC_CONFIGS) and again.calls == []

    shape = Shape.square(1000)
    with Store.open(db, readonly=True) as store:
        for dtype in ("bfloat16", "tf32"):
            spec = tune.tuned_spec(TC_KERNEL, shape, store, DEVICE.name, dtype)
            assert spec is not None and spec.config == TC_CONFIGS[TC_FASTEST[dtype]]
        assert tune.tuned_spec(TC_KERNEL, shape, store, DEVICE.name).config == TC_CONFIGS[TC_FASTEST["bfloat16"]]
        assert tune.tuned_spec(TC_KERNEL, shape, store, DEVICE.name, "float16") is None  # not tuned
        assert tune.tuned_spec(KERNEL, shape, store, DEVICE.name) is None


# -- the tables of an older gemmlab ------------------------------------------------

OLD_CONFIG = json.dumps(CONFIGS[1])  # template order, as the tuner wrote it before results schema v5


def make_old_file(path: Path, tuner_layout: int) -> None:
    """A results database as gemmlab wrote it before v5: results schema v4, and
    the tuner's tables as the tuner of ``tuner_layout`` left them (1: no dtype;
    2: with it), with one candidate and one choice of sgemm_warptile at 1024."""
    conn = database_at(path, 4)
    for steps in TUNER_HISTORY[:tuner_layout]:
        for statement in steps:
            conn.execute(statement)
    conn.execute(
        "INSERT INTO tuned_candidates (id, gpu_name, cc, kernel, size_class, m, n, k, config, status, median_ms, "
        "gflops, error, date) VALUES (7, ?, ?, ?, 'small', 1024, 1024, 1024, ?, 'ok', 0.1, 20000.0, 1e-7, 'then')",
        (DEVICE.name, DEVICE.cc, KERNEL, OLD_CONFIG),
    )
    conn.execute(
        "INSERT INTO tuned (gpu_name, cc, kernel, size_class, config, gflops, shapes, date) "
        "VALUES (?, ?, ?, 'small', ?, 20000.0, '[[1024, 1024, 1024]]', 'then')",
        (DEVICE.name, DEVICE.cc, KERNEL, OLD_CONFIG),
    )
    conn.commit()
    conn.close()


@pytest.mark.parametrize("tuner_layout", [1, 2])
def test_tables_of_an_older_gemmlab_are_read_and_brought_forward(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tuner_layout: int
) -> None:
    db = tmp_path / "old.sqlite"
    make_old_file(db, tuner_layout)
    monkeypatch.setattr(tune, "current_device", lambda: DEVICE)
    shape = Shape.square(1024)
    # Read as it is (read-only, no migration): rows from before dtypes are float32.
    assert tune.stored_tuned_spec(KERNEL, shape, db).config == CONFIGS[1]
    assert tune.stored_tuned_spec(TC_KERNEL, shape, db) is None
    with Store.open(db, readonly=True) as store:
        assert store.schema_version == 4

    runner = FakeRunner()
    summary = run_tune(db, runner)
    assert summary.already == [f"1024 {tune.config_label(CONFIGS[1])}"]  # the old candidate still counts
    assert CONFIGS[1] not in [c for c, _s, _b in runner.calls]
    with Store.open(db) as store:
        assert store.schema_version == SCHEMA_VERSION and store.integrity_check() == "ok"
    old = next(r for r in candidates(db) if r["id"] == 7)
    assert (old["dtype"], old["gflops"], old["date"]) == ("float32", 20000.0, "then")
    assert old["config"] == config_text(CONFIGS[1])  # brought to the one stored form
    assert {r["dtype"] for r in candidates(db)} == {"float32"}
    (chosen,) = tuned_rows(db)
    # Chosen among old and new candidates alike: the old one's 20,000 GFLOPS beats the fake figures.
    assert chosen["dtype"] == "float32" and json.loads(chosen["config"]) == CONFIGS[1]
    assert summary.best["small"].gflops == pytest.approx(20000.0)
    assert list(summary.best["small"].config) == list(CONFIGS[1])  # shown in template order
    assert tune.stored_tuned_spec(KERNEL, shape, db).config == CONFIGS[1]


def test_a_new_file_has_the_tuner_tables(tmp_path: Path) -> None:
    Store.open(tmp_path / "t.sqlite").close()
    conn = sqlite3.connect(tmp_path / "t.sqlite")
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert {"tuned", "tuned_candidates"} <= names and not any(name.endswith("_v2") for name in names)


# -- reading tuned configurations -------------------------------------------------


def test_tuned_spec(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    with Store.open(db) as store:
        assert tune.tuned_spec(KERNEL, Shape.square(1024), store, DEVICE.name) is None  # nothing tuned yet
    run_tune(db, FakeRunner())
    with Store.open(db, readonly=True) as store:
        spec = tune.tuned_spec(KERNEL, Shape(1000, 17, 3), store, DEVICE.name)
        assert spec is not None and spec.id == KERNEL and spec.config == FASTEST_GOOD
        assert spec.template_extra == tuple(FASTEST_GOOD.values())
        assert tune.tuned_spec("sgemm_multistage", Shape.square(1024), store, DEVICE.name) is None


def test_a_config_the_kernel_no_longer_takes_is_ignored(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    run_tune(db, FakeRunner())
    conn = sqlite3.connect(db)
    conn.execute("UPDATE tuned SET config = ?", (json.dumps({"BM": 128, "TILE": 7}),))
    conn.commit()
    conn.close()
    with Store.open(db) as store:
        assert tune.tuned_spec(KERNEL, Shape.square(1024), store, DEVICE.name) is None


def test_a_tuned_spec_goes_through_point_and_names_its_config() -> None:
    variant = catalogue.variant(KERNEL, FASTEST_GOOD)
    point = catalogue.point(KERNEL, Shape.square(1024), spec=variant)
    assert point.spec is variant
    assert variant.config == FASTEST_GOOD
    assert catalogue.get(KERNEL).config == sgemm.LADDER.rung(KERNEL).config()
    assert catalogue.get("tiled").config is None


# -- the command line -------------------------------------------------------------

cli = CliRunner()


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> FakeRunner:
    runner = FakeRunner()
    monkeypatch.setattr(tune, "measure_candidate", runner)
    monkeypatch.setattr(tune, "current_device", lambda: DEVICE)
    return runner


def test_cli_tune(tmp_path: Path, fake_gpu: FakeRunner) -> None:
    db = tmp_path / "t.sqlite"
    result = cli.invoke(app, ["tune", KERNEL, "--sizes", "1024,4096", "--db", str(db)], env={"COLUMNS": "250"})
    # A wrong result is a kernel bug: the best is stored, and the exit code says so.
    assert result.exit_code == 4, result.output
    assert "REJECTED (wrong result)" in result.output and "skipped:" in result.output
    assert "tuned on Fake H200" in result.output and "small" in result.output and "medium" in result.output
    assert len(fake_gpu.calls) == 2 * len(CONFIGS)
    assert {r["size_class"] for r in tuned_rows(db)} == {"small", "medium"}

    again = cli.invoke(app, ["tune", KERNEL, "--sizes", "1024,4096", "--db", str(db)], env={"COLUMNS": "250"})
    assert f"0 candidates measured and stored, {2 * len(CONFIGS)} already stored" in again.output
    assert len(fake_gpu.calls) == 2 * len(CONFIGS)


def test_cli_tune_interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_gpu: FakeRunner) -> None:
    fake_gpu.interrupt_after = 2
    result = cli.invoke(app, ["tune", KERNEL, "--sizes", "1024", "--db", str(tmp_path / "t.sqlite")])
    assert result.exit_code == 130
    assert "interrupted" in result.output


def test_cli_tune_refuses_before_creating_anything(tmp_path: Path, fake_gpu: FakeRunner) -> None:
    db = tmp_path / "t.sqlite"
    result = cli.invoke(app, ["tune", "tiled", "--db", str(db)])
    assert result.exit_code == 2 and "Unknown tunable kernel 'tiled'" in result.output
    result = cli.invoke(app, ["tune", KERNEL, "--sizes", "0", "--db", str(db)])
    assert result.exit_code == 2 and "positive" in result.output
    result = cli.invoke(app, ["tune", KERNEL, "--reps", "3", "--db", str(db)])
    assert result.exit_code == 2
    assert not db.exists()


def test_cli_tune_lists_both_ladders_for_an_unknown_kernel(tmp_path: Path, fake_gpu: FakeRunner) -> None:
    db = tmp_path / "t.sqlite"
    result = cli.invoke(app, ["tune", "tiled", "--db", str(db)], env={"COLUMNS": "250"})
    assert result.exit_code == 2
    assert "Unknown tunable kernel 'tiled'" in result.output
    assert "FP32 ladder's sgemm_coalesced" in result.output and "tensor-core ladder's tc_wmma" in result.output
    result = cli.invoke(app, ["tune", "tc_mma", "--dtype", "tf32", "--db", str(db)], env={"COLUMNS": "250"})
    assert result.exit_code == 2 and "tc_mma has no tf32 version" in result.output
    assert fake_gpu.calls == [] and not db.exists()


def test_cli_tune_and_run_a_tensor_kernel_per_dtype(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    fake_gpu: FakeRunner) -> None:  # fmt: skip
    db = tmp_path / "t.sqlite"
    fake_gpu.speeds = tc_speed
    tuned = cli.invoke(app, ["tune", TC_KERNEL, "--dtype", "tf32", "--sizes", "1024", "--db", str(db)],
                       env={"COLUMNS": "250"})  # fmt: skip
    assert tuned.exit_code == 0, tuned.output
    assert f"{TC_KERNEL} (tf32) tuned on Fake H200" in tuned.output and set(fake_gpu.dtypes) == {"tf32"}
    calls: list = []
    monkeypatch.setattr("gemmlab.measure.run.run", fake_run(calls))

    run_tf32 = cli.invoke(app, ["run", TC_KERNEL, "--dtype", "tf32", "--size", "1000", "--db", str(db), "--json"])
    data = json.loads(run_tf32.output)
    assert data["config"] == TC_CONFIGS[TC_FASTEST["tf32"]] and data["config_source"] == "tuned"
    assert calls[-1].config == TC_CONFIGS[TC_FASTEST["tf32"]]

    # bfloat16 (the kernel's first) was not tuned: the tf32 choice is not used for it.
    run_bf16 = cli.invoke(app, ["run", TC_KERNEL, "--size", "1000", "--db", str(db), "--json"])
    data = json.loads(run_bf16.output)
    assert calls[-1] is catalogue.get(TC_KERNEL) and data["config_source"] == "catalogue default"
    assert data["config"] == tensor.LADDER.rung(TC_KERNEL).config()


def fake_run(calls: list):
    def run(kernel_id, shape, block_edge=None, dtype=None, *, spec=None, **kwargs) -> RunResult:
        calls.append(spec)
        used = spec or catalogue.get(kernel_id)
        flat = FakeRunner(speeds=lambda config, shape, dtype: 10_000.0)
        result = flat(used, shape, dtype=dtype or used.dtypes[0], reps=20, warmup=2, max_seconds=1.0, baseline=False)
        result.device = {"name": DEVICE.name}
        return result

    return run


def test_cli_run_uses_the_tuned_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_gpu: FakeRunner) -> None:
    db = tmp_path / "t.sqlite"
    assert cli.invoke(app, ["tune", KERNEL, "--sizes", "1024", "--db", str(db)]).exit_code == 4
    calls: list = []
    monkeypatch.setattr("gemmlab.measure.run.run", fake_run(calls))

    tuned = cli.invoke(app, ["run", KERNEL, "--size", "1000", "--db", str(db), "--json"])
    assert tuned.exit_code == 0, tuned.output
    data = json.loads(tuned.output)
    assert data["config"] == FASTEST_GOOD and data["config_source"] == "tuned"
    assert calls[-1].config == FASTEST_GOOD

    default = cli.invoke(app, ["run", KERNEL, "--size", "1000", "--db", str(db), "--no-tuned", "--json"])
    data = json.loads(default.output)
    assert calls[-1] is catalogue.get(KERNEL)  # the catalogue's own entry, resolved once
    assert data["config"] == sgemm.LADDER.rung(KERNEL).config() and data["config_source"] == "catalogue default"

    other_class = cli.invoke(app, ["run", KERNEL, "--size", "2048", "--db", str(db)], env={"COLUMNS": "200"})
    assert calls[-1] is catalogue.get(KERNEL) and "configuration (catalogue default)" in other_class.output

    table = cli.invoke(app, ["run", KERNEL, "--size", "1000", "--db", str(db)], env={"COLUMNS": "200"})
    assert "configuration (tuned)" in table.output and tune.config_label(FASTEST_GOOD) in table.output


def test_cli_run_takes_a_given_configuration_over_the_tuned_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_gpu: FakeRunner
) -> None:
    db = tmp_path / "t.sqlite"
    assert cli.invoke(app, ["tune", KERNEL, "--sizes", "1024", "--db", str(db)]).exit_code == 4
    calls: list = []
    monkeypatch.setattr("gemmlab.measure.run.run", fake_run(calls))
    default = sgemm.LADDER.rung(KERNEL).config()
    other = next(c for c in sgemm.LADDER.configs(KERNEL) if c not in (FASTEST_GOOD, default))
    changed = {key: value for key, value in other.items() if value != default[key]}
    text = ",".join(f"{key}={value}" for key, value in changed.items())
    given = cli.invoke(app, ["run", KERNEL, "--size", "1000", "--db", str(db), "--config", text, "--json"])
    assert given.exit_code == 0, given.output
    data = json.loads(given.output)
    assert data["config"] == other and data["config_source"] == "given" and calls[-1].config == other

    # Row/column scales on the persistent FP8 rung: reachable from the command line.
    fp8 = cli.invoke(app, ["run", "tc_fp8_tma_store", "--size", "256", "--dtype", "e4m3-bf16", "--db", str(db),
                           "--config", "SCALING=1", "--json"])  # fmt: skip
    assert fp8.exit_code == 0, fp8.output
    assert json.loads(fp8.output)["config"]["SCALING"] == 1 and calls[-1].config["SCALING"] == 1


@pytest.mark.parametrize(
    ("kernel", "text", "words"),
    [
        ("tc_fp8_tma_store", "SCALING", "'SCALING' is not KEY=VALUE"),
        ("tc_fp8_tma_store", "SCALING=one", "'SCALING=one' is not KEY=VALUE"),
        ("tc_fp8_tma_store", "SCALING=1,SCALING=0", "--config gives SCALING twice"),
        ("tc_fp8_tma_store", "FOO=1", "tc_fp8_tma_store has no parameter FOO. Its parameters: BM, BN"),
        ("tc_fp8_tma_store", "SCALING=2", "SCALING must be one of 0 (tensor), 1 (rowcol)"),
        ("naive", "BM=64", "Unknown tunable kernel 'naive'"),
    ],
)
def test_cli_run_refuses_a_configuration_in_words(kernel: str, text: str, words: str) -> None:
    # Refused before any GPU is needed: the configuration is built first.
    result = cli.invoke(app, ["run", kernel, "--size", "256", "--config", text], env={"COLUMNS": "400"})
    assert result.exit_code != 0 and words in " ".join(result.output.split())


def test_cli_run_without_a_database_creates_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 fake_gpu: FakeRunner) -> None:  # fmt: skip
    calls: list = []
    monkeypatch.setattr("gemmlab.measure.run.run", fake_run(calls))
    monkeypatch.chdir(tmp_path)
    result = cli.invoke(app, ["run", KERNEL, "--size", "1000", "--json"])
    assert result.exit_code == 0, result.output
    assert calls == [catalogue.get(KERNEL)] and json.loads(result.output)["config_source"] == "catalogue default"
    assert list(tmp_path.iterdir()) == []
