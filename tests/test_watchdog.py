"""The watchdog without a GPU: fake runners that hang, die, fault or give a
wrong answer in the worker process, and sweeps that store them as failures and
go on. The runners are module-level functions so that the spawned worker can
import them (pytest puts this folder on sys.path, which the child inherits)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from gemmlab import backends
from gemmlab.backends.nvrtc import Resources, argument_size, check_declared_arguments, compile_kernel
from gemmlab.core.errors import ConstraintError, DeclarationError, KernelStopped, VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.core.timing import Timing
from gemmlab.kernels import catalogue
from gemmlab.measure import watchdog
from gemmlab.measure.run import RunResult
from gemmlab.store.store import Store
from gemmlab.studies.points import SweepPoint, plan
from gemmlab.studies.sweep import _isolated, sweep

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RUN_INFO = {"gpu_name": "Fake GPU", "cc": "9.0", "command_line": "test"}
# Short enough to keep the tests quick, long enough for a fake point on a busy machine.
LIMIT_S = 2.0


# -- runners, run in the worker ----------------------------------------------------


def sleep_forever(*args: object, **kwargs: object) -> None:
    while True:
        time.sleep(60)


def die(code: int) -> None:
    os._exit(code)


def complain_and_die() -> None:
    print("a message of the dying worker", file=sys.stderr, flush=True)
    os._exit(3)


def kill_myself() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def start_a_child_and_hang(pid_file: Path) -> None:
    """Like a compile in a fresh process: something the worker started, which a kill must take too."""
    child = subprocess.Popen(["sleep", "600"])
    pid_file.write_text(str(child.pid))
    sleep_forever()


def wrong() -> None:
    raise VerificationError("k gave a wrong result.", "Fix the kernel.")


def illegal_address() -> None:
    # What CuPy raises when a stream synchronises after a kernel's wild store.
    raise RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")


def unpicklable_error() -> None:
    class Local(Exception):
        pass

    raise Local("made inside a function, so it does not pickle")


def fake_point(
    kernel: str, shape: Shape, block_edge: int, dtype: str, *, reps: int = 20, warmup: int = 2,
    max_seconds: float = 10.0, variant: str = "", hang: int = 0, die_at: int = 0, wrong_at: int = 0,
    refuse: int = 0, fault: int = 0,
) -> RunResult:  # fmt: skip
    """A sweep's runner: misbehaves at the sizes named, else a made-up result carrying its process id."""
    actions = {hang: sleep_forever, die_at: partial(die, 7), wrong_at: wrong, fault: illegal_address}
    if shape.m in actions:
        actions[shape.m]()
    if shape.m == refuse:
        raise ConstraintError(f"{kernel} cannot take {shape}.", "")
    return RunResult(
        kernel=backends.kernel_id(kernel), backend=backends.for_kernel(kernel).name, m=shape.m, n=shape.n, k=shape.k,
        block_edge=block_edge, dtype=dtype, grid=(1, 1, 1), block=(block_edge, block_edge, 1), dynamic_smem=0,
        resources=Resources(30, 0, 0, 0, 0, 0), arch="sm_90", timing=Timing(1.0, 0.9, 1.2, reps),
        gflops=float(os.getpid()), gbytes_per_s=1.0, error=0.0, tolerance=1e-5,
    )  # fmt: skip


def points(*sizes: int) -> list[SweepPoint]:
    return [SweepPoint("tiled", Shape.square(n), 16, "float32") for n in sizes]


# -- the worker --------------------------------------------------------------------


def test_a_hang_is_stopped_with_its_limit_and_the_next_call_runs_in_a_fresh_process() -> None:
    with watchdog.Worker() as worker:
        first = worker.call("p1", LIMIT_S, os.getpid)
        assert worker.call("p1", LIMIT_S, os.getpid) == first  # one process serves call after call
        started = time.monotonic()
        with pytest.raises(KernelStopped) as stopped:
            worker.call("tiled 512 b16 float32", 0.5, sleep_forever)
        assert time.monotonic() - started < 5
        fresh = worker.call("p3", LIMIT_S, os.getpid)
    assert stopped.value.kind == "hang"
    assert "tiled 512 b16 float32" in str(stopped.value) and "time limit of 0.5 s" in str(stopped.value)
    assert fresh != first
    with pytest.raises(ProcessLookupError):
        os.kill(first, 0)  # the hung process is gone


def test_a_kill_takes_what_the_worker_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    with watchdog.Worker() as worker, pytest.raises(KernelStopped):
        worker.call("p", LIMIT_S, start_a_child_and_hang, pid_file)
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


PARENT = """
import os, sys, time
from gemmlab.measure import watchdog
worker = watchdog.Worker()
open(sys.argv[1], "w").write(str(worker.call("p", 60, os.getpid)))
worker.call("p", 600, time.sleep, 600)
"""


def test_a_worker_dies_with_a_parent_killed_outright(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(pid_file)], env=env)
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and parent.poll() is None, "the worker did not start"
            time.sleep(0.05)
    finally:
        parent.kill()  # SIGKILL: no cleanup runs in the parent
        parent.wait()
    worker = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(worker)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed and waiting for its new parent to reap it, does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


@pytest.mark.parametrize(
    ("runner", "words"),
    [(partial(die, 3), "exit code 3"), (kill_myself, "SIGKILL")],
)
def test_a_worker_that_dies_is_a_fault(runner: object, words: str) -> None:
    with watchdog.Worker() as worker:
        with pytest.raises(KernelStopped) as stopped:
            worker.call("p", LIMIT_S, runner)
        assert worker.call("next", LIMIT_S, os.getpid) > 0  # and the worker starts again
    assert stopped.value.kind == "fault" and words in str(stopped.value) and "p" in str(stopped.value)


def test_a_poisoning_cuda_error_is_a_fault_naming_it() -> None:
    with watchdog.Worker() as worker:
        first = worker.call("p", LIMIT_S, os.getpid)
        with pytest.raises(KernelStopped) as stopped:
            worker.call("fault/matmul 256", LIMIT_S, illegal_address)
        assert worker.call("next", LIMIT_S, os.getpid) != first
    message = str(stopped.value)
    assert stopped.value.kind == "fault" and "CUDA_ERROR_ILLEGAL_ADDRESS (700" in message
    assert "fault/matmul 256" in message and "gemmlab check" in message


def test_exceptions_come_back_as_raised() -> None:
    with watchdog.Worker() as worker:
        first = worker.call("p", LIMIT_S, os.getpid)
        with pytest.raises(VerificationError) as raised:
            worker.call("p", LIMIT_S, wrong)
        assert (raised.value.cause, raised.value.fix) == ("k gave a wrong result.", "Fix the kernel.")
        with pytest.raises(RuntimeError, match="Local: made inside a function"):
            worker.call("p", LIMIT_S, unpicklable_error)
        assert worker.call("p", LIMIT_S, os.getpid) == first  # an exception does not cost the process


def test_poisoning_errors_are_found_by_name_in_the_chain() -> None:
    try:
        try:
            raise RuntimeError("CUDA_ERROR_MISALIGNED_ADDRESS: misaligned address")
        finally:
            raise ValueError("freeing the pool failed")  # the second error of a teardown
    except ValueError as exc:
        found = watchdog.poisoning_error(exc)
    assert found is not None and found.code == 716
    assert watchdog.poisoning_error(RuntimeError("cudaErrorLaunchFailure: unspecified launch failure")).code == 719
    assert watchdog.poisoning_error(RuntimeError("cudaErrorInvalidValue: invalid argument")) is None


def test_time_limits() -> None:
    assert watchdog.time_limit(1.0, 30, 2.0) == watchdog.FLOOR_S + 4.0
    # A point predicted at 1 s a launch, 10 launches: 20 x 10 s.
    assert watchdog.time_limit(1000.0, 10, 0.0) == 200.0
    assert watchdog.point_time_limit("tiled", Shape.square(256), 16, reps=20, warmup=2, max_seconds=2.0) == 64.0


# -- sweeps --------------------------------------------------------------------------


def test_a_sweep_stores_faults_hangs_and_wrong_results_and_goes_on(tmp_path: Path) -> None:
    runner = partial(fake_point, hang=32, die_at=48, wrong_at=64, fault=80, refuse=96)
    with Store.open(tmp_path / "r.sqlite") as store:
        summary = sweep(points(16, 32, 48, 64, 80, 96, 112), store, "e", runner=runner, progress=False,
                        run_info=RUN_INFO, isolate=True, timeout=LIMIT_S)  # fmt: skip
        rows = store.rows("e")
        failures = {f["m"]: f for f in store.failures("e")}
    assert summary.done == ["tiled 16 b16 float32", "tiled 112 b16 float32"]
    assert summary.refused == [("tiled 96 b16 float32", "tiled cannot take 96.")]
    assert [label for label, _ in summary.failed] == [f"tiled {n} b16 float32" for n in (32, 48, 64, 80)]
    assert {m: f["kind"] for m, f in failures.items()} == {32: "hang", 48: "fault", 64: "wrong", 80: "fault"}
    assert f"time limit of {LIMIT_S:g} s" in failures[32]["reason"] and "tiled 32 b16 float32" in failures[32]["reason"]
    assert "exit code 7" in failures[48]["reason"]
    assert failures[64]["reason"].startswith("wrong: tiled 64 b16 float32: ")
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in failures[80]["reason"]
    assert all(f["run_id"] == rows[0]["run_id"] and f["backend"] == "nvrtc" for f in failures.values())
    # The points after each hang or fault ran in fresh processes, and none of them is this one.
    pids = {r["m"]: int(r["gflops"]) for r in rows}
    assert pids[16] != pids[112] and os.getpid() not in pids.values()


def test_a_resumed_sweep_runs_failed_points_again_and_keeps_results(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        sweep(points(16, 32), store, "e", runner=partial(fake_point, die_at=32), progress=False,
              run_info=RUN_INFO, isolate=True, timeout=LIMIT_S)  # fmt: skip
        (kept,) = store.rows("e")
        assert [f["kind"] for f in store.failures("e")] == ["fault"]
        resumed = sweep(points(16, 32), store, "e", runner=fake_point, progress=False, run_info=RUN_INFO,
                        isolate=True, timeout=LIMIT_S)  # fmt: skip
        assert resumed.skipped_existing == ["tiled 16 b16 float32"] and resumed.done == ["tiled 32 b16 float32"]
        assert store.failures("e") == [] and kept in store.rows("e")


def test_failures_in_process_are_stored_too(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        summary = sweep(points(16, 64), store, None, runner=partial(fake_point, wrong_at=64), progress=False,
                        run_info=RUN_INFO)  # fmt: skip
        (failure,) = store.failures(None)
    assert len(summary.done) == 1 and failure["kind"] == "wrong" and failure["m"] == 64


def test_users_kernels_run_in_the_worker_and_are_stored_under_their_ids(tmp_path: Path) -> None:
    names = [str(EXAMPLES / "faulty" / "fault" / "matmul.toml"), str(EXAMPLES / "naive_define" / "matmul.toml")]
    planned, refused = plan(names, [Shape.square(256)])
    assert [p.label for p in planned] == [
        "fault/matmul 256 b16 float32",
        *(f"naive_define/matmul 256 b{e} float32" for e in (16, 8, 32)),
    ] and not refused
    with Store.open(tmp_path / "r.sqlite") as store:
        summary = sweep(planned, store, "u", runner=partial(fake_point, die_at=256), progress=False,
                        run_info=RUN_INFO, isolate=True, timeout=LIMIT_S)  # fmt: skip
        failures = store.failures("u")
    # Each point died in the worker (a fault), never in this process, and is stored with its declaration.
    assert len(summary.failed) == 4 and {f["kind"] for f in failures} == {"fault"}
    assert {f["kernel"] for f in failures} == {"fault/matmul", "naive_define/matmul"}
    assert all(f["source"].endswith("matmul.toml") for f in failures)


def test_which_points_the_worker_runs() -> None:
    mine = catalogue.get(str(EXAMPLES / "naive_define" / "matmul.toml")).id
    user_point, catalogue_point = SweepPoint(mine, Shape.square(256), 16), points(256)[0]
    host_point = SweepPoint("cpu_blas", Shape.square(256))
    # By default (None) a user's kernel only; asked (True) every GPU kernel; never a host one.
    assert [_isolated(p, None) for p in (user_point, catalogue_point, host_point)] == [True, False, False]
    assert [_isolated(p, True) for p in (user_point, catalogue_point, host_point)] == [True, True, False]
    assert [_isolated(p, False) for p in (user_point, catalogue_point, host_point)] == [False, False, False]


# -- the examples and the declaration check ------------------------------------------


@pytest.mark.parametrize("name", ["hang", "fault"])
def test_the_faulty_examples_compile_for_sm_90(name: str) -> None:
    spec = catalogue.get(str(EXAMPLES / "faulty" / name / "matmul.toml"))
    compiled = compile_kernel(spec, 16, "float32", "sm_90")
    assert spec.id == f"{name}/matmul" and compiled.cubin and compiled.resources.registers > 0


def test_a_declaration_is_checked_against_the_parameter_sizes() -> None:
    spec = catalogue.get(str(EXAMPLES / "naive_define" / "matmul.toml"))
    args = (1 << 40, 2 << 40, 3 << 40, np.int32(256))
    assert [argument_size(a) for a in args] == [8, 8, 8, 4]
    check_declared_arguments(spec, [8, 8, 8, 4], args)  # as declared: no error
    check_declared_arguments(spec, None, args)  # a driver that cannot tell: no error
    with pytest.raises(DeclarationError) as size:
        check_declared_arguments(spec, [8, 8, 8, 8], args)  # the function takes `long long n`
    assert "argument 4, declared as n, is 8 bytes" in str(size.value) and "4 bytes" in str(size.value)
    with pytest.raises(DeclarationError) as count:
        check_declared_arguments(spec, [8, 8, 8, 4, 4], args)
    assert "takes 5 arguments" in str(count.value) and "lists 4: A, B, C, n" in str(count.value)


def test_destructors_failing_after_a_fault_are_not_printed_but_others_are(capsys, monkeypatch) -> None:
    from gemmlab.measure.watchdog import _quiet_about_lost_context

    class Buffer:
        def __init__(self, exc: BaseException) -> None:
            self.exc = exc

        def __del__(self) -> None:
            raise self.exc

    monkeypatch.setattr(sys, "unraisablehook", _quiet_about_lost_context)
    Buffer(RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered"))
    assert capsys.readouterr().err == ""
    Buffer(ValueError("something else"))
    assert "something else" in capsys.readouterr().err


def test_what_the_worker_prints_goes_to_its_log_named_when_it_fails(capfd) -> None:
    with watchdog.Worker() as worker, pytest.raises(KernelStopped) as stopped:
        worker.call("p", 30, complain_and_die)
    assert "a message of the dying worker" not in capfd.readouterr().err
    log = Path(stopped.value.fix.rsplit(" are in ", 1)[1].rstrip("."))
    assert "a message of the dying worker" in log.read_text()
    log.unlink()
    with watchdog.Worker() as worker:  # a worker that printed nothing leaves no file behind
        assert worker.call("p", 30, abs, -2) == 2
        quiet = worker.log
    assert quiet is not None and not quiet.exists()


def _leaves_processes_behind() -> list[int]:
    """In the worker: a process in a group of its own, and a daemon in a
    session of its own, both sleeping; their pids."""
    import os
    import subprocess

    grouped = subprocess.Popen(["sleep", "300"], preexec_fn=os.setpgrp)
    daemon = subprocess.Popen(["sleep", "300"], start_new_session=True)
    return [grouped.pid, daemon.pid]


def test_closing_a_worker_ends_what_it_started_even_outside_its_group() -> None:
    """Issue 48/49: a submission's processes must end with its stage, also one
    that left the worker's process group or started a session of its own."""
    import os
    import time

    from gemmlab.core import processes
    from gemmlab.measure.watchdog import Worker

    with Worker() as worker:
        pids = worker.call("leaves processes", 60, _leaves_processes_behind)
        assert all(os.path.exists(f"/proc/{pid}") for pid in pids)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(processes.parents().get(pid) for pid in pids):
        time.sleep(0.05)
    alive = [pid for pid in pids if pid in processes.parents() and "Z" not in _state(pid)]
    assert alive == []


def _orphans_a_daemon(marker: str) -> None:
    """In the worker: a process that starts a daemon (a session of its own)
    and exits at once, as a submission imported in the sanitizer's run does."""
    import subprocess
    import sys

    sleeper = "[sys.executable, '-c', 'import time; time.sleep(300)', sys.argv[1]]"
    starter = f"import subprocess, sys; subprocess.Popen({sleeper}, start_new_session=True)"
    subprocess.run([sys.executable, "-c", starter, marker], check=True)


def _marked(marker: str) -> list[int]:
    from gemmlab.core import processes

    found = []
    for pid in processes.parents():
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes() and "Z" not in _state(pid):
                found.append(pid)
        except OSError:
            continue
    return found


def test_closing_a_worker_ends_a_daemon_whose_parent_had_already_exited() -> None:
    """Seen on an H200 on 2026-11-29: a submission that starts sleepers at its
    import left 220 of them behind a graded class, started from the
    sanitizer's run of Python, which had exited; they went to init and out of
    reach. The worker adopts its descendants' orphans (a child subreaper)."""
    import time
    import uuid

    marker = f"gemmlab-orphan-{uuid.uuid4().hex}"
    with watchdog.Worker() as worker:
        worker.call("orphans a daemon", 60, _orphans_a_daemon, marker)
        assert _marked(marker), "the daemon did not start"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _marked(marker):
        time.sleep(0.05)
    left = _marked(marker)
    for pid in left:  # a failing run must not leave it sleeping
        os.kill(pid, 9)
    assert left == []


def _state(pid: int) -> str:
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return "gone"
    return stat[stat.rindex(")") + 2 :].split()[0]
