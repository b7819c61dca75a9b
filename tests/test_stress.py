"""gemmlab stress without a GPU: the per-launch checker is a fake that gives one
kernel at one shape a wrong result (or faults, or hangs), so the processes,
the tallies, the store, the summary and the seeds are tested as they are.
The checkers are module-level functions so that a spawned worker can import
them (pytest puts this folder on sys.path, which the child inherits)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gemmlab.cli import app
from gemmlab.core.errors import GemmlabError, VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.measure import watchdog
from gemmlab.store.store import SCHEMA_VERSION, Store
from gemmlab.studies import stress as stress_module
from gemmlab.studies.stress import CROSS_BLOCK, StressPlan, default_kernels, draw, replay, stress

KERNELS = ("tiled", "sgemm_stream_k")
# A user's kernel that takes square sizes only (one size argument).
SQUARE_ONLY = str(Path(__file__).resolve().parents[1] / "examples" / "faulty" / "accumulate_into_c" / "matmul.toml")
# The draw that goes wrong: process 1 (seed 0 + 1), its second draw, which is
# sgemm_stream_k's (draws go round the kernels in order).
WRONG_SEED, WRONG_DRAW = 1, 1
WRONG_AT = draw(catalogue.get("sgemm_stream_k"), WRONG_SEED, WRONG_DRAW)
WRONG_LAUNCH = 3


class InProcess:
    """A runner that calls in this process: the orchestration without spawning."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def call(self, label: str, limit_s: float, fn, /, *args, **kwargs):
        self.calls.append(label)
        return fn(*args, **kwargs)

    def close(self) -> None:
        pass


# -- checkers, run in the worker (or here, by InProcess) ---------------------------


def wrong_once(kernel: str, shape: Shape, block_edge: int, dtype: str, *, launches: int) -> float:
    """Right everywhere but at sgemm_stream_k's one drawn point, which goes wrong at its third launch."""
    if kernel == WRONG_AT.kernel and (shape, block_edge, dtype) == (WRONG_AT.shape, WRONG_AT.block_edge,
                                                                      WRONG_AT.dtype):  # fmt: skip
        raise VerificationError(f"{kernel} at {shape}: launch {WRONG_LAUNCH} of {launches}: relative error 317.",
                                "Fix the kernel.")  # fmt: skip
    return 1e-7


def slowly_right(kernel: str, shape: Shape, block_edge: int, dtype: str, *, launches: int) -> float:
    time.sleep(0.005)
    return 1e-7


def fault_or_hang(kernel: str, shape: Shape, block_edge: int, dtype: str, *, launches: int) -> float:
    """tiled faults as CuPy reports an illegal address; sgemm_stream_k never finishes."""
    if kernel == "tiled":
        raise RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")
    while True:
        time.sleep(60)


def counting_load(edge: int, seconds: float) -> int:
    time.sleep(0.01)
    return 4


# -- tests -----------------------------------------------------------------------------


def test_the_default_kernels_are_the_cross_block_and_persistent_ones() -> None:
    kernels = default_kernels()
    persistent = [s.id for s in catalogue.CATALOGUE if s.persistent]
    assert persistent and set(kernels) == set(CROSS_BLOCK) | set(persistent)
    assert len(kernels) == len(set(kernels)) and kernels[: len(CROSS_BLOCK)] == list(CROSS_BLOCK)
    # Read off the rungs (Rung.cross_block): the kernels the hand-written list
    # named, and the persistent FP8 rungs, whose clusters share B by multicast.
    assert set(CROSS_BLOCK) == {"tc_cluster", "tc_tma_store", "sgemm_stream_k", "sgemm_padded_b",
                                "tc_fp8_tma_store", "tc_fp8_blockscaled_tma"}  # fmt: skip
    assert set(kernels) == {*CROSS_BLOCK, "tc_persistent"}


@pytest.mark.parametrize("kernel", [*default_kernels(), "tiled", "tiled_2x2", "naive", SQUARE_ONLY])
def test_draws_are_shapes_the_kernel_accepts_and_the_same_every_time(kernel: str) -> None:
    spec = catalogue.get(kernel)
    draws = [draw(spec, 7, i, 300) for i in range(40)]
    assert draws == [draw(spec, 7, i, 300) for i in range(40)]
    for d in draws:
        assert not spec.violations(d.shape, d.block_edge, d.dtype), d
        assert max(d.shape.m, d.shape.n, d.shape.k) <= 300 or d.shape in _fallbacks(spec, d.block_edge)
    assert len({d.shape for d in draws}) > 10  # random, not one shape over and over
    assert [d.shape for d in draws] != [d.shape for d in (draw(spec, 8, i, 300) for i in range(40))]


def _fallbacks(spec, edge: int) -> list[Shape]:
    from gemmlab.measure.sanitize import small_shapes

    return small_shapes(spec, edge)


def test_a_wrong_result_is_counted_stored_with_its_seed_and_replayed(tmp_path: Path) -> None:
    plan = StressPlan(KERNELS, processes=2, launches=16 * 2 * 5, launches_per_draw=16)  # 5 draws of each per process
    with Store.open(tmp_path / "r.sqlite") as store:
        result = stress(plan, checker=wrong_once, runner_factory=InProcess, store=store,
                        run_record={"gpu_name": "Fake GPU", "command_line": "test"})  # fmt: skip
        summaries = {row["kernel"]: row for row in store.stress_summaries(result.run_id)}
        failures = store.stress_failures(result.run_id)
        assert store.schema_version == SCHEMA_VERSION
    by_kernel = {s.kernel: s for s in result.summaries}
    assert not result.clean and by_kernel["tiled"].clean
    assert (by_kernel["tiled"].launches, by_kernel["tiled"].wrong) == (160, 0)
    # 10 draws of 16 launches, one of which stopped at its third launch
    assert (by_kernel["sgemm_stream_k"].launches, by_kernel["sgemm_stream_k"].wrong) == (160 - 16 + WRONG_LAUNCH, 1)
    assert 1 < by_kernel["tiled"].shapes <= 10 and by_kernel["tiled"].seeds == (0, 1)
    [failure] = failures
    assert failure == {**failure, "kernel": "sgemm_stream_k", "m": WRONG_AT.shape.m, "n": WRONG_AT.shape.n,
                       "k": WRONG_AT.shape.k, "block_edge": WRONG_AT.block_edge, "dtype": WRONG_AT.dtype,
                       "seed": WRONG_SEED, "process": 1, "draw": WRONG_DRAW, "kind": "wrong"}  # fmt: skip
    assert "relative error 317" in failure["reason"] and failure == {**result.failures[0], **failure}
    assert summaries["sgemm_stream_k"]["wrong"] == 1 and summaries["tiled"]["launches"] == 160
    assert json.loads(summaries["tiled"]["seeds"]) == [0, 1]
    # The stored seed and draw give the same point again, and it is wrong again.
    with pytest.raises(VerificationError, match="launch 3 of 16"):
        replay("sgemm_stream_k", failure["seed"], failure["draw"], max_dim=failure["max_dim"], checker=wrong_once,
               runner=InProcess())  # fmt: skip
    point, error = replay("sgemm_stream_k", WRONG_SEED, WRONG_DRAW + 2, checker=wrong_once, runner=InProcess())
    assert error == 1e-7 and point.shape != WRONG_AT.shape


def test_the_same_seed_gives_the_same_draws_in_each_process() -> None:
    runners: list[InProcess] = []

    def factory() -> InProcess:
        runners.append(InProcess())
        return runners[-1]

    plan = StressPlan(KERNELS, processes=3, launches=4 * 3 * 2, launches_per_draw=4, seed=11)
    stress(plan, checker=slowly_right, runner_factory=factory)
    first = sorted(r.calls for r in runners)
    runners.clear()
    stress(plan, checker=slowly_right, runner_factory=factory)
    assert sorted(r.calls for r in runners) == first and len(first) == 3
    assert all(len(calls) == 4 for calls in first)  # 2 draws of each kernel
    assert len({tuple(calls) for calls in first}) == 3  # each process draws its own shapes
    assert any("(process 2, seed 13, draw 3)" in label for calls in first for label in calls)


def test_a_timed_run_stops_on_time_and_shares_the_launches_between_kernels() -> None:
    started = time.monotonic()
    result = stress(StressPlan(KERNELS, processes=2, seconds=1.0, load=True), checker=slowly_right,
                    runner_factory=InProcess, load_burst=counting_load)  # fmt: skip
    assert time.monotonic() - started < 10
    tiled, stream_k = result.summaries
    assert tiled.launches > 0 and abs(tiled.launches - stream_k.launches) <= 2 * 16  # one draw each per process
    assert result.load_gemms > 0 and tiled.load == result.load_gemms and result.clean


def test_faults_and_hangs_in_real_workers_are_stored_and_the_run_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # A hang is known after 2 s; the fault is given time to import this module in a fresh worker.
    monkeypatch.setattr(watchdog, "point_time_limit", lambda kernel, *args, **kwargs: 2.0 if kernel != "tiled" else 60)
    plan = StressPlan(KERNELS, processes=1, launches=2 * 4, launches_per_draw=4)  # two draws of each, one process
    result = stress(plan, checker=fault_or_hang)
    tiled, stream_k = result.summaries
    assert (tiled.faults, tiled.hangs, stream_k.faults, stream_k.hangs) == (2, 0, 0, 2)
    assert [f["kind"] for f in result.failures] == ["fault", "hang", "fault", "hang"]
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in result.failures[0]["reason"]
    assert "time limit of 2 s" in result.failures[1]["reason"] and result.failures[3]["draw"] == 3


def test_a_plan_needs_an_end_and_gpu_kernels() -> None:
    with pytest.raises(GemmlabError, match="--seconds S, --launches N"):
        StressPlan(KERNELS)
    with pytest.raises(GemmlabError, match="runs on the host"):
        stress(StressPlan(("cpu_naive",), launches=1), checker=slowly_right, runner_factory=InProcess)


def test_the_command_prints_the_summary_and_fails_on_a_wrong_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stress_module, "gpu_checker", lambda: wrong_once)
    monkeypatch.setattr(watchdog, "Worker", InProcess)
    monkeypatch.setattr(stress_module.watchdog, "Worker", InProcess)
    monkeypatch.setattr("gemmlab.studies.sweep.run_record", lambda: {"command_line": "test"})
    db = tmp_path / "r.sqlite"
    args = ["stress", *KERNELS, "--processes", "2", "--launches", "160", "--db", str(db)]
    out = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert out.exit_code == VerificationError.exit_code, out.output
    assert "sgemm_stream_k" in out.output and "160" in out.output
    # The line may wrap where the console is narrow (pytest-xdist's workers have no terminal).
    assert f"--replay {WRONG_SEED}:{WRONG_DRAW} --max-dim 600" in " ".join(out.output.split())
    with Store.open(db, readonly=True) as store:
        assert len(store.stress_failures()) == 1 and len(store.stress_summaries()) == 2
    bad = CliRunner().invoke(app, ["stress", "tiled", "--replay", "x:1"])
    assert bad.exit_code != 0 and "SEED:DRAW" in bad.output and "Traceback" not in bad.output


def test_a_v6_database_gains_the_stress_tables_and_keeps_its_failures(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "r.sqlite"
    with Store.open(path) as store:
        store.add_failure(None, None, {"kernel": "tiled", "m": 1, "n": 1, "k": 1, "dtype": "float32", "kind": "wrong",
                                       "reason": "r"})  # fmt: skip
    with sqlite3.connect(path) as conn:  # what gemmlab before stress wrote
        # The tables of v7 (stress) and of the migrations after it (compiles, grades,
        # dispatch), and the columns those added to results (v11's timing methods,
        # v13's measuring facts).
        from gemmlab.store.store import MEASURE_FIELDS

        later = ("stress_failures", "stress_summaries", "compiles", "grades", "dispatch", "meta")
        columns = ("timing_method", "baseline_timing_method", *MEASURE_FIELDS)
        conn.executescript("".join(f"DROP TABLE {t}; " for t in later)
                           + "".join(f"ALTER TABLE results DROP COLUMN {c}; " for c in columns)
                           + "PRAGMA user_version = 6;")  # fmt: skip
    with Store.open(path) as store:
        assert store.schema_version == SCHEMA_VERSION and len(store.failures()) == 1
        run_id = store.start_run({})
        row = {"kernel": "tiled", "m": 5, "n": 33, "k": 96, "block_edge": 16, "dtype": "float32", "seed": 3,
               "process": 3, "draw": 41, "max_dim": 600, "kind": "wrong", "reason": "relative error 317"}  # fmt: skip
        store.add_stress(run_id, [], [row, row])  # one point wrong twice: stored twice
        assert [r["draw"] for r in store.stress_failures(run_id)] == [41, 41] and store.stress_failures(
            run_id + 1
        ) == []
        with pytest.raises(ValueError, match="kind is one of"):
            store.add_stress(run_id, [], [{**row, "kind": "odd"}])
        with pytest.raises(ValueError, match="keys"):
            store.add_stress(run_id, [{"kernel": "tiled"}], [])
        assert len(store.stress_failures()) == 2  # nothing of a refused call was stored


def failing_load(edge: int, seconds: float) -> int:
    raise RuntimeError("out of memory allocating the load's arrays")


def test_a_load_that_fails_is_reported_and_the_run_goes_on() -> None:
    result = stress(StressPlan(KERNELS, processes=1, launches=16 * 2, load=True), checker=slowly_right,
                    runner_factory=InProcess, load_burst=failing_load)  # fmt: skip
    assert result.clean and result.summaries[0].launches == 32 and result.load_gemms == 0
    assert result.load_error == "RuntimeError: out of memory allocating the load's arrays"


def test_ctrl_c_keeps_the_draws_made_so_far(monkeypatch: pytest.MonkeyPatch) -> None:
    interrupted: list[bool] = []

    class Interrupting:
        """A worker's future whose first wait meets Ctrl-C, as the main thread would."""

        def __init__(self, future) -> None:
            self.future = future

        def result(self):
            if not interrupted:
                interrupted.append(True)
                time.sleep(0.5)  # some draws are made meanwhile
                raise KeyboardInterrupt
            return self.future.result()

    class Pool(stress_module.ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):
            future = super().submit(fn, *args, **kwargs)
            return Interrupting(future) if fn is stress_module._process else future

    monkeypatch.setattr(stress_module, "ThreadPoolExecutor", Pool)
    started = time.monotonic()
    result = stress(StressPlan(KERNELS, processes=2, seconds=60), checker=slowly_right, runner_factory=InProcess)
    assert result.interrupted and time.monotonic() - started < 30
    assert result.summaries[0].launches > 0 and result.clean


def test_without_a_gpu_the_command_says_so_before_touching_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gemmlab.core import gpu
    from gemmlab.core.errors import NoGPUError

    def no_gpu() -> None:
        raise NoGPUError("No usable NVIDIA driver or GPU on this machine.", "Run it on a GPU machine.")

    monkeypatch.setattr(gpu, "cupy", no_gpu)
    out = CliRunner().invoke(app, ["stress", "tiled", "--seconds", "5", "--db", str(tmp_path / "r.sqlite")])
    assert out.exit_code == NoGPUError.exit_code and "No usable NVIDIA driver" in out.output
    assert list(tmp_path.iterdir()) == []


def test_every_kernel_the_stress_checks_carries_its_synchronisation_argument() -> None:
    # Issue 23: a kernel that synchronises across blocks or through memory says,
    # in its header comment, what each handshake orders and why that is enough.
    from gemmlab.kernels.spec import kernel_source
    from gemmlab.studies.stress import default_kernels

    review = (Path(__file__).resolve().parent.parent / "docs" / "synchronisation.md").read_text()
    for kernel in default_kernels():
        spec = catalogue.get(kernel)
        lines = kernel_source(spec.source).splitlines()
        header = "\n".join(line for line in lines[: next(i for i, x in enumerate(lines) if not x.startswith("//"))])
        assert "\n// Synchronisation" in header, kernel
        assert f"## {spec.id} " in review, kernel
