"""Sweeps with a fake runner (no GPU): storing, skipping, refusals, failures,
interruption and resume, including real processes killed mid-sweep."""

from __future__ import annotations

import io
import signal
import sqlite3
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from conftest import database_at
from gemmlab import backends
from gemmlab.backends.nvrtc import Resources
from gemmlab.core.errors import ConstraintError, DeviceLimitError, NoGPUError, UnknownName, VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.core.timing import Timing
from gemmlab.kernels import catalogue
from gemmlab.measure.run import RunResult
from gemmlab.store.store import Store, config_text
from gemmlab.studies.points import SLOW_REPS, SweepPoint, plan, timed_point
from gemmlab.studies.sweep import headline, run_record, sweep

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src"
RUN_INFO = {"gpu_name": "Fake GPU", "cc": "9.0", "command_line": "test"}


def fake_runner(
    kernel: str, shape: Shape, block_edge: int, dtype: str, *, reps: int = 20, warmup: int = 2,
    max_seconds: float = 10.0, variant: str = "", sleep: float = 0.0, refuse: tuple = (), wrong: tuple = (),
    interrupt_at: int | None = None,
) -> RunResult | list[dict]:  # fmt: skip
    """Sleeps like a kernel would, then returns a RunResult with made-up figures.

    Sizes in ``refuse`` raise ConstraintError, in ``wrong`` VerificationError;
    ``interrupt_at`` raises KeyboardInterrupt at that size (Ctrl-C mid-point).
    """
    time.sleep(sleep)
    if shape.m in refuse:
        raise ConstraintError(f"{kernel} cannot take {shape}.", "")
    if shape.m in wrong:
        raise VerificationError(f"{kernel} gave a wrong result on {shape}.", "")
    if shape.m == interrupt_at:
        raise KeyboardInterrupt
    result = RunResult(
        kernel=kernel, backend=backends.for_kernel(kernel).name, m=shape.m, n=shape.n, k=shape.k,
        block_edge=block_edge, dtype=dtype, grid=(1, 1, 1),
        block=(block_edge, block_edge, 1), dynamic_smem=0, resources=Resources(30, 0, 0, 0, 0, 0), arch="sm_90",
        timing=Timing(1.0, 0.9, 1.2, reps), gflops=float(shape.m), gbytes_per_s=1.0, error=0.0, tolerance=1e-5,
    )  # fmt: skip
    if variant == "e2e":
        copies = {"h2d_ms": 0.1, "d2h_ms": 0.1, "e2e_gflops": 1.0}
        return [dict(result.to_dict(), variant=v, host_memory=v, **copies) for v in ("pinned", "pageable")]
    return result


def points(first: int, count: int) -> list[SweepPoint]:
    return [SweepPoint("tiled", Shape.square(16 * i), 16, "float32") for i in range(first, first + count)]


def child_main(argv: list[str]) -> int:
    """A sweep in its own process: DB EXPERIMENT FIRST COUNT SLEEP."""
    db, experiment, first, count, sleep = argv
    with Store.open(db) as store:
        runner = partial(fake_runner, sleep=float(sleep))
        summary = sweep(points(int(first), int(count)), store, experiment, runner=runner, progress=False,
                        run_info=RUN_INFO)  # fmt: skip
    print("\n".join(summary.lines()), flush=True)
    return 130 if summary.interrupted else 0


def start_child(db: Path, experiment: str, first: int, count: int, sleep: float) -> subprocess.Popen:
    code = f"import sys; sys.path[:0] = [{str(SRC)!r}, {str(TESTS)!r}]; import test_sweep; " \
           "sys.exit(test_sweep.child_main(sys.argv[1:]))"  # fmt: skip
    # SIGINT as a terminal gives it: a test suite started in the background
    # (`.ci/run &` from a script) inherits SIGINT ignored, Python then installs
    # no KeyboardInterrupt handler, and the interrupted child would run to the
    # end (2026-11-24: "395 measured and stored", exit 0).
    return subprocess.Popen(
        [sys.executable, "-c", code, str(db), experiment, str(first), str(count), str(sleep)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip


def stored(db: Path) -> int:
    if not db.exists():
        return 0
    conn = sqlite3.connect(db, timeout=5)
    try:
        return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.OperationalError:  # the child has not created the tables yet
        return 0
    finally:
        conn.close()


def wait_for_rows(db: Path, at_least: int, proc: subprocess.Popen, limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while stored(db) < at_least:
        assert proc.poll() is None, f"the child ended early: {proc.communicate()[0]}"
        assert time.monotonic() < deadline, "the child stored too little in time"
        time.sleep(0.02)


def check_complete(db: Path, expected: int) -> None:
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        counts = conn.execute("SELECT point_key, COUNT(*) FROM results GROUP BY experiment, point_key").fetchall()
        nulls = conn.execute("SELECT COUNT(*) FROM results WHERE gflops IS NULL OR median_ms IS NULL").fetchone()[0]
    finally:
        conn.close()
    assert len(counts) == expected and all(n == 1 for _, n in counts)
    assert nulls == 0


# -- processes ------------------------------------------------------------------


def test_resume_after_sigkill_and_sigint(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    total = 60
    killed = start_child(db, "exp", 1, total, 0.04)
    wait_for_rows(db, 5, killed)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=10)
    after_kill = stored(db)
    assert 5 <= after_kill < total

    stopped = start_child(db, "exp", 1, total, 0.04)
    wait_for_rows(db, after_kill + 5, stopped)
    stopped.send_signal(signal.SIGINT)
    output = stopped.communicate(timeout=20)[0]
    assert stopped.returncode == 130, output
    assert "run the same command again to resume" in output
    after_interrupt = stored(db)
    assert after_kill + 5 <= after_interrupt < total

    with Store.open(db) as store:
        summary = sweep(points(1, total), store, "exp", runner=fake_runner, progress=False, run_info=RUN_INFO)
    assert len(summary.skipped_existing) == after_interrupt
    assert len(summary.done) == total - after_interrupt
    check_complete(db, total)


def test_two_concurrent_sweeps_into_one_database(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    Store.open(db).close()  # both children find the schema in place (they would also race to create it)
    first = start_child(db, "exp", 1, 30, 0.01)
    second = start_child(db, "exp", 16, 30, 0.01)  # overlaps points 16..30 of the first
    outputs = [p.communicate(timeout=60)[0] for p in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, outputs
    check_complete(db, 45)


def test_two_processes_creating_the_database_at_once(tmp_path: Path) -> None:
    db = tmp_path / "fresh.sqlite"
    children = [start_child(db, name, 1, 5, 0.0) for name in ("a", "b")]
    outputs = [p.communicate(timeout=60)[0] for p in children]
    assert [p.returncode for p in children] == [0, 0], outputs
    check_complete(db, 10)


# -- in process -----------------------------------------------------------------


def test_sweep_stores_skips_and_forces(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        first = sweep(points(1, 4), store, "e", runner=fake_runner, progress=False, run_info=RUN_INFO)
        assert len(first.done) == 4 and not first.skipped_existing
        again = sweep(points(1, 6), store, "e", runner=fake_runner, progress=False, run_info=RUN_INFO)
        assert len(again.done) == 2 and len(again.skipped_existing) == 4
        forced = sweep(points(1, 2), store, "e", force=True, runner=fake_runner, progress=False, run_info=RUN_INFO)
        assert len(forced.done) == 2
        rows = store.rows("e")
        assert len(rows) == 6 and len(store.runs()) == 3
        assert rows[0]["cgma_analytic"] == 16.0  # the catalogue's tiled CGMA is the block edge
        nothing = sweep(points(1, 6), store, "e", runner=fake_runner, progress=False, run_info=RUN_INFO)
        assert len(store.runs()) == 3  # a sweep that measures nothing records no run
    assert len(nothing.skipped_existing) == 6


def test_refusals_and_failures_do_not_stop_the_sweep(tmp_path: Path) -> None:
    runner = partial(fake_runner, refuse=(32,), wrong=(48,))
    with Store.open(tmp_path / "r.sqlite") as store:
        summary = sweep(points(1, 5), store, None, runner=runner, progress=False, run_info=RUN_INFO)
        keys = {r["point_key"] for r in store.rows()}
    assert len(summary.done) == 3
    assert summary.refused == [("tiled 32 b16 float32", "tiled cannot take 32.")]
    assert len(summary.failed) == 1 and summary.failed[0][0] == "tiled 48 b16 float32"
    assert not any("|32|" in k or "|48|" in k for k in keys)
    lines = summary.lines()
    assert lines[0].startswith("3 measured and stored") and any(line.startswith("FAILED") for line in lines)


def test_an_unexpected_error_is_a_failure_not_a_crash(tmp_path: Path) -> None:
    def runner(kernel: str, shape: Shape, *args: object, **kwargs: object) -> RunResult | list[dict]:
        if shape.m == 32:
            raise NotImplementedError("calling cuBLAS API during stream capture is currently unsupported")
        return fake_runner(kernel, shape, *args, **kwargs)  # type: ignore[arg-type]

    with Store.open(tmp_path / "r.sqlite") as store:
        summary = sweep(points(1, 3), store, runner=runner, progress=False, run_info=RUN_INFO)
    assert len(summary.done) == 2
    ((label, what),) = summary.failed
    assert label == "tiled 32 b16 float32" and what.startswith("internal error, please report it: NotImplementedError")


def test_device_limits_are_refusals(tmp_path: Path) -> None:
    def runner(*args: object, **kwargs: object) -> None:
        raise DeviceLimitError("needs 2 GiB; the GPU has 1.", "")

    with Store.open(tmp_path / "r.sqlite") as store:
        summary = sweep(points(1, 2), store, runner=runner, progress=False, run_info=RUN_INFO)
    assert len(summary.refused) == 2 and not summary.done


def test_no_gpu_stops_the_sweep(tmp_path: Path) -> None:
    def runner(*args: object, **kwargs: object) -> None:
        raise NoGPUError("no GPU", "")

    with Store.open(tmp_path / "r.sqlite") as store, pytest.raises(NoGPUError):
        sweep(points(1, 2), store, runner=runner, progress=False, run_info=RUN_INFO)


def test_ctrl_c_keeps_what_is_stored(tmp_path: Path) -> None:
    runner = partial(fake_runner, interrupt_at=48)
    with Store.open(tmp_path / "r.sqlite") as store:
        summary = sweep(points(1, 6), store, "e", runner=runner, progress=False, run_info=RUN_INFO)
        assert summary.interrupted and len(summary.done) == 2 and len(store.rows("e")) == 2
        resumed = sweep(points(1, 6), store, "e", runner=fake_runner, progress=False, run_info=RUN_INFO)
    assert len(resumed.skipped_existing) == 2 and len(resumed.done) == 4
    assert "4 not run" in summary.lines()[-1] and "resume" in summary.lines()[-1]


def test_end_to_end_points_store_two_rows(tmp_path: Path) -> None:
    e2e = [SweepPoint("tiled", Shape.square(64), 16, "float32", "e2e")]
    with Store.open(tmp_path / "r.sqlite") as store:
        sweep(e2e, store, "k", runner=fake_runner, progress=False, run_info=RUN_INFO)
        assert sorted(r["variant"] for r in store.rows("k")) == ["pageable", "pinned"]
        again = sweep(e2e, store, "k", runner=fake_runner, progress=False, run_info=RUN_INFO)
    assert len(again.skipped_existing) == 1
    assert e2e[0].keys() == ["tiled|64|64|64|16|float32|pinned|nvrtc|", "tiled|64|64|64|16|float32|pageable|nvrtc|"]


def test_a_point_is_stored_with_its_backend_and_configuration(tmp_path: Path) -> None:
    default = catalogue.get("sgemm_warptile").config

    def runner(kernel: str, *args: object, **kwargs: object) -> RunResult | list[dict]:
        result = fake_runner(kernel, *args, **kwargs)  # type: ignore[arg-type]
        result.config = catalogue.get(kernel).config  # type: ignore[union-attr]
        return result

    point = SweepPoint("sgemm_warptile", Shape.square(256))
    with Store.open(tmp_path / "r.sqlite") as store:
        sweep([point], store, "c", runner=runner, progress=False, run_info=RUN_INFO)
        again = sweep([point], store, "c", runner=runner, progress=False, run_info=RUN_INFO)
        (row,) = store.rows("c")
    assert again.skipped_existing == [point.label]
    assert (row["backend"], row["config"]) == ("nvrtc", config_text(default)) and point.keys() == [row["point_key"]]


def test_rows_from_before_the_configuration_record_are_not_measured_again(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    conn = database_at(db, 4)  # results schema v4: keys without backend or configuration
    conn.execute("INSERT INTO runs (id, started) VALUES (1, 'then')")
    conn.execute("INSERT INTO results (run_id, experiment, point_key, kernel, m, n, k, block_edge, dtype, gflops, "
                 "created) VALUES (1, 'e', 'tiled|16|16|16|16|float32|', 'tiled', 16, 16, 16, 16, 'float32', 1.0, "
                 "'then')")  # fmt: skip
    conn.commit()
    conn.close()
    with Store.open(db) as store:
        summary = sweep(points(1, 2), store, "e", runner=fake_runner, progress=False, run_info=RUN_INFO)
        assert summary.skipped_existing == ["tiled 16 b16 float32"] and len(summary.done) == 1
        forced = sweep(points(1, 1), store, "e", force=True, runner=fake_runner, progress=False, run_info=RUN_INFO)
        rows = store.rows("e")
    assert len(forced.done) == 1 and len(rows) == 2  # measured again, the old row is replaced
    assert all(r["backend"] == "nvrtc" for r in rows)


def test_tuples_are_points(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        summary = sweep([("tiled", Shape.square(64), 16, "float32")], store, runner=fake_runner, progress=False,
                        run_info=RUN_INFO)  # fmt: skip
    assert summary.done == ["tiled 64 b16 float32"]


def test_progress_bar_shows_point_and_figure(tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=150)
    with Store.open(tmp_path / "r.sqlite") as store:
        sweep(points(1, 3), store, runner=partial(fake_runner, wrong=(32,)), run_info=RUN_INFO, console=console)
    text = out.getvalue()
    assert "tiled 48 b16 float32" in text and "48.0 GFLOPS" in text and "3/3" in text
    assert "FAILED" in text


def test_after_point_gets_each_stored_points_rows(tmp_path: Path) -> None:
    seen: list[tuple[str, list[str]]] = []
    record = lambda p, rows: seen.append((p.label, sorted(r["variant"] for r in rows)))
    e2e = SweepPoint("tiled", Shape.square(64), 16, "float32", "e2e")
    with Store.open(tmp_path / "r.sqlite") as store:
        sweep([points(1, 1)[0]], store, "k", runner=fake_runner, progress=False, run_info=RUN_INFO)
        runner = partial(fake_runner, refuse=(32,))
        sweep([*points(1, 2), e2e], store, "k", runner=runner, progress=False, run_info=RUN_INFO, after_point=record)
        ids = {r["id"] for r in store.rows("k")}
    # Stored before, refused (nothing stored: not called), measured now with a row per host memory.
    assert seen == [("tiled 16 b16 float32", [""]), ("tiled 64 b16 float32 e2e", ["pageable", "pinned"])]
    assert len(ids) == 3


def test_plan_lists_what_a_kernel_cannot_take() -> None:
    found, refused = plan(["tiled", "col_buffered", "cpu_blas"], [Shape.square(128), Shape.square(2048)], [16, 22])
    labels = [p.label for p in found]
    assert "tiled 128 b16 float32" in labels and "col_buffered 128 float32" in labels
    assert "cpu_blas 2048 float32" in labels
    refused_labels = [label for label, _ in refused]
    assert "tiled 128 b22 float32" in refused_labels and "col_buffered 2048 float32" in refused_labels
    assert all(why for _, why in refused)
    own, _ = plan(["naive_i32"], [Shape.square(256)])
    assert [p.block_edge for p in own] == [1, 2, 4, 8, 16, 32] and own[0].dtype == "int32"
    with pytest.raises(UnknownName):
        plan(["tiledd"], [Shape.square(64)])


def test_slow_points_get_few_repetitions() -> None:
    slow = timed_point("naive_i32", Shape.square(4096), 1, "int32")
    fast = timed_point("tiled", Shape.square(1024), 32, "float32")
    assert (slow.reps, slow.warmup) == (SLOW_REPS, 1)
    assert (fast.reps, fast.warmup) == (20, 2)
    gpu, host = backends.for_kernel("naive"), backends.for_kernel("cpu_naive")
    assert gpu.predicted_ms("single_block", Shape.square(528), 22) > gpu.predicted_ms("naive", Shape.square(528), 22)
    assert host.predicted_ms("cpu_naive", Shape.square(1024), 0) > 1000


def test_no_analytic_cgma_for_memory_kernels(tmp_path: Path) -> None:
    def copy_runner(*args: object, **kwargs: object) -> dict:
        return dict(fake_runner(*args, **kwargs).to_dict(), metric="gbs")  # type: ignore[arg-type, union-attr]

    with Store.open(tmp_path / "r.sqlite") as store:
        sweep([SweepPoint("copy", Shape(64, 64, 1), 16)], store, runner=copy_runner, progress=False, run_info=RUN_INFO)
        (row,) = store.rows()
    assert row["metric"] == "gbs" and row["cgma_analytic"] is None


def test_headline_picks_the_metric() -> None:
    assert headline({"metric": "gbs", "gbytes_per_s": 1500.0}) == "1,500.0 GB/s"
    assert headline({"metric": "gflops", "gflops": 12.0}) == "12.0 GFLOPS"
    assert "end to end" in headline({"gflops": 12.0, "e2e_gflops": 3.0, "host_memory": "pinned"})


def test_run_record_without_a_gpu_still_describes_the_host() -> None:
    record = run_record("gemmlab sweep")
    assert record["command_line"] == "gemmlab sweep" and record["gemmlab_version"] and record["cpu"]


# -- the command line ---------------------------------------------------------------


def test_cli_sweep_of_cpu_baselines(tmp_path: Path) -> None:
    from gemmlab.cli.app import app

    db = tmp_path / "cli.sqlite"
    args = ["sweep", "--kernels", "cpu_blas", "--sizes", "32,48", "--db", str(db), "--max-seconds", "0.1"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "2 measured and stored" in first.output
    second = CliRunner().invoke(app, args)
    assert "0 measured and stored, 2 already stored" in second.output
    with Store.open(db) as store:
        rows = store.rows(None)
    assert {r["kernel"] for r in rows} == {"cpu_blas"} and all(r["error"] <= r["tolerance"] for r in rows)


def test_cli_sweep_rejects_bad_lists(tmp_path: Path) -> None:
    from gemmlab.cli.app import app

    result = CliRunner().invoke(app, ["sweep", "--kernels", "cpu_blas", "--sizes", "32,x", "--db",
                                      str(tmp_path / "x.sqlite")])  # fmt: skip
    assert result.exit_code == 2 and "whole numbers" in result.output
    result = CliRunner().invoke(app, ["sweep", "--kernels", "tiledd", "--sizes", "32", "--db",
                                      str(tmp_path / "x.sqlite")])  # fmt: skip
    assert result.exit_code == 2 and "Did you mean tiled" in result.output


def test_cli_sweep_with_a_broken_database(tmp_path: Path) -> None:
    from gemmlab.cli.app import app

    db = tmp_path / "junk.sqlite"
    db.write_bytes(b"x" * 4096)
    result = CliRunner().invoke(app, ["sweep", "--kernels", "cpu_blas", "--sizes", "32", "--db", str(db)])
    assert result.exit_code == 2 and "not a usable results database" in result.output
    assert "Traceback" not in result.output and db.read_bytes() == b"x" * 4096
