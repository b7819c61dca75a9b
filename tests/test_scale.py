"""The Dask pool (gemmlab.studies.scale) on CPU: a local cluster of worker processes, inline, and its errors."""

from __future__ import annotations

import itertools
import os
import sys
import time

import pytest

from gemmlab.core.errors import GemmlabError
from gemmlab.studies.scale import INLINE, Outcome, Pool

pytest.importorskip("distributed", reason="the scale extra (distributed) is not installed")


def square(x: int) -> int:
    return x * x


def square_but_three(x: int) -> int:
    if x == 3:
        raise ValueError("three is refused")
    return x * x


def die_on_five(x: int) -> int:
    if x == 5:
        os._exit(1)  # what a kernel fault does to the process that launched it
    return x * x


def pinned_gpu(_: object) -> str:
    return os.environ.get("CUDA_VISIBLE_DEVICES", "")


def hold_the_gpu(_: object) -> tuple[float, float]:
    """When this item held the (one, shared) GPU: it sleeps while holding it."""
    from gemmlab.studies.scale import gpu_to_itself

    with gpu_to_itself():
        start = time.time()
        time.sleep(0.5)
        return start, time.time()


def share_or_time(x: int) -> tuple[str, float, float]:
    """Even items share the GPU for 0.6 s, odd ones time alone for 0.3 s."""
    from gemmlab.studies.scale import gpu_shared, gpu_to_itself

    kind, hold = ("time", 0.3) if x % 2 else ("share", 0.6)
    with gpu_to_itself() if kind == "time" else gpu_shared():
        start = time.time()
        time.sleep(hold)
        return kind, start, time.time()


@pytest.fixture(scope="module")
def pool():
    with Pool(gpus=0, cpu_workers=2) as p:
        yield p


def outcomes(pool: Pool, fn, items) -> dict:
    return dict(pool.map(fn, items))


def test_local_cluster_maps_every_item_on_its_workers(pool):
    assert pool.workers == 2
    assert pool.describe() == "local Dask cluster: 2 CPU workers (no GPU)"
    got = outcomes(pool, square, range(10))
    assert got == {x: Outcome(value=x * x) for x in range(10)}


def test_an_exception_is_that_items_error_and_the_rest_complete(pool):
    got = outcomes(pool, square_but_three, range(6))
    assert got[3].value is None and "ValueError: three is refused" in got[3].error
    assert isinstance(got[3].exception, ValueError)
    assert {x: o.value for x, o in got.items() if x != 3} == {x: x * x for x in (0, 1, 2, 4, 5)}


def test_a_worker_that_dies_costs_its_item_only(pool):
    got = outcomes(pool, die_on_five, range(8))
    assert "Dask worker running it died" in got[5].error
    assert {x: o.value for x, o in got.items() if x != 5} == {x: x * x for x in range(8) if x != 5}
    # The nanny started a fresh worker: the pool is whole for the next call.
    assert outcomes(pool, square, [7]) == {7: Outcome(value=49)}


def test_two_workers_sharing_a_gpu_time_one_after_the_other(pool):
    """Both CPU workers see no CUDA_VISIBLE_DEVICES, so they share device 0's
    lock: the four items' held spans never overlap."""
    spans = sorted(o.value for o in outcomes(pool, hold_the_gpu, range(4)).values())
    assert len(spans) == 4
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(spans))


def test_nothing_shares_the_gpu_while_one_times(pool):
    """Two workers, shared and alone holds mixed: no timing span overlaps any other span."""
    spans = [o.value for o in outcomes(pool, share_or_time, range(8)).values()]
    timed = [s for s in spans if s[0] == "time"]
    assert len(spans) == 8 and len(timed) == 4
    for kind, start, end in timed:
        others = [s for s in spans if s != (kind, start, end)]
        assert all(o[2] <= start or o[1] >= end for o in others), (start, end, others)


def test_outside_dask_the_gpu_is_held_without_waiting():
    start, end = hold_the_gpu(None)
    assert 0.5 <= end - start < 5


def test_the_gpu_key_names_the_host_and_the_pinned_device(monkeypatch):
    import socket

    from gemmlab.studies.scale import gpu_key

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,4")
    assert gpu_key() == f"gemmlab-gpu-{socket.gethostname()}-3"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpu_key().endswith("-0")


def test_inline_runs_here_without_dask(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # importing it would fail
    with Pool(INLINE) as p:
        got = outcomes(p, square_but_three, range(5))
        assert p.workers == 1 and "inline" in p.describe()
    assert got[3].error and {x: o.value for x, o in got.items() if x != 3} == {0: 0, 1: 1, 2: 4, 4: 16}


def test_missing_dask_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(GemmlabError, match=r"gemmlab\[scale\]"):
        Pool()


def test_a_bad_address_says_which_and_how_to_start_one():
    with pytest.raises(GemmlabError) as caught:
        Pool("tcp://127.0.0.1:9").open()
    assert "tcp://127.0.0.1:9" in caught.value.cause and "dask scheduler" in caught.value.fix


def test_a_running_cluster_is_used_by_its_address():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as c:
        with Pool(c.scheduler_address) as p:
            assert p.workers == 1 and c.scheduler_address in p.describe()
            assert outcomes(p, square, [2, 3]) == {2: Outcome(value=4), 3: Outcome(value=9)}


def test_one_worker_per_gpu_each_pinned_to_its_own():
    with Pool(gpus=2) as p:
        assert p.describe() == "local Dask cluster: 2 workers (GPU 0, GPU 1)"
        seen = {o.value for _, o in p.map(pinned_gpu, range(8))}
    assert seen <= {"0", "1"} and seen  # every item ran on a worker pinned to one GPU


# -- a sweep on the pool (gemmlab.studies.sweep with ``pool``) -------------------------

POINT_FIELDS = ("kernel", "m", "n", "k", "block_edge", "dtype", "variant", "backend")


def stored_points(db) -> set[tuple]:
    from gemmlab.store.store import Store

    with Store.open(db) as store:
        return {tuple(r[f] for f in POINT_FIELDS) for r in store.rows(None)}


def fault_on_48(kernel, shape, block_edge, dtype, **options):
    """A runner whose 48 x 48 point ends its process (a kernel fault's effect); the others are measured."""
    from gemmlab.studies.sweep import measure_point

    if shape.m == 48:
        os._exit(1)
    return measure_point(kernel, shape, block_edge, dtype, **options)


def test_a_sweep_on_the_pool_stores_what_the_sequential_one_does(pool, tmp_path):
    from gemmlab.core.shapes import Shape
    from gemmlab.store.store import Store
    from gemmlab.studies.points import plan
    from gemmlab.studies.sweep import sweep

    points, _ = plan(["cpu_blas"], [Shape.square(n) for n in (32, 40, 64)], dtype="float32", reps=3)
    points += plan(["cpu_blas"], [Shape.square(16)], dtype="int32", reps=3)[0]
    for db, on in ((tmp_path / "here.sqlite", None), (tmp_path / "pool.sqlite", pool)):
        with Store.open(db) as store:
            summary = sweep(points, store, progress=False, max_seconds=0.05, pool=on)
        assert len(summary.done) == 4 and not summary.failed
    assert stored_points(tmp_path / "pool.sqlite") == stored_points(tmp_path / "here.sqlite")
    assert len(stored_points(tmp_path / "here.sqlite")) == 4
    with Store.open(tmp_path / "pool.sqlite") as store:  # resumable: nothing is run twice
        again = sweep(points, store, progress=False, max_seconds=0.05, pool=pool)
    assert not again.done and len(again.skipped_existing) == 4


def test_a_point_whose_worker_dies_is_stored_as_a_fault(pool, tmp_path):
    from gemmlab.core.shapes import Shape
    from gemmlab.store.store import Store
    from gemmlab.studies.points import plan
    from gemmlab.studies.sweep import sweep

    points, _ = plan(["cpu_blas"], [Shape.square(n) for n in (32, 48, 64)], dtype="float32", reps=3)
    with Store.open(tmp_path / "f.sqlite") as store:
        summary = sweep(points, store, progress=False, max_seconds=0.05, runner=fault_on_48, pool=pool)
        failures = store.failures(None)
    assert sorted(summary.done) == ["cpu_blas 32 float32", "cpu_blas 64 float32"]
    assert [label for label, _ in summary.failed] == ["cpu_blas 48 float32"]
    assert [(f["m"], f["kind"]) for f in failures] == [(48, "fault")] and "died" in failures[0]["reason"]
    assert {p[1] for p in stored_points(tmp_path / "f.sqlite")} == {32, 64}


def test_cli_sweep_on_local_workers(tmp_path):
    from typer.testing import CliRunner

    from gemmlab.cli.app import app

    db = tmp_path / "cli.sqlite"
    args = ["sweep", "--kernels", "cpu_blas", "--sizes", "32,48", "--db", str(db), "--max-seconds", "0.05",
            "--workers", "2"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "local Dask cluster: 2 CPU workers" in result.output and "2 measured and stored" in result.output
    assert {p[1] for p in stored_points(db)} == {32, 48}


def test_cli_sweep_with_a_bad_scheduler_says_so(tmp_path):
    from typer.testing import CliRunner

    from gemmlab.cli.app import app

    args = ["sweep", "--kernels", "cpu_blas", "--sizes", "32", "--db", str(tmp_path / "x.sqlite"),
            "--scheduler", "tcp://127.0.0.1:9"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "tcp://127.0.0.1:9" in result.output and "Traceback" not in result.output


def test_reproduce_on_the_pool_stores_every_point_of_the_experiment(pool, tmp_path):
    from gemmlab.store.store import Store
    from gemmlab.studies.reproduce import reproduce
    from test_sweep import RUN_INFO, fake_runner

    with Store.open(tmp_path / "r.sqlite") as store:
        (outcome,) = reproduce(["poznan-group1"], store, sizes=[256], runner=fake_runner, progress=False,
                               run_info=RUN_INFO, pool=pool)  # fmt: skip
        assert outcome.status == "done" and len(outcome.summary.done) == 6 and not outcome.summary.failed
        assert len(store.rows("poznan-group1")) == 6
        (again,) = reproduce(["poznan-group1"], store, sizes=[256], runner=fake_runner, progress=False, pool=pool)
    assert not again.summary.done and len(again.summary.skipped_existing) == 6


def stall_on_three(x: int) -> int:
    """Never answers for 3 (a kernel that spins for ever, as the worker sees it)."""
    if x == 3:
        time.sleep(3600)
    return x


def test_an_item_past_its_time_limit_is_a_hang_and_its_worker_is_restarted(pool):
    start = time.monotonic()
    found = dict(pool.map(stall_on_three, range(6), limit_s=lambda item: 2.0))
    assert time.monotonic() - start < 60  # not the hour the item would take
    assert found[3].hung and "time limit of 2 s" in found[3].error
    assert {x: o.value for x, o in found.items() if x != 3} == {0: 0, 1: 1, 2: 2, 4: 4, 5: 5}
    assert not any(o.hung for x, o in found.items() if x != 3)
    # The restarted worker takes items again.
    assert {x: o.value for x, o in pool.map(square, [7, 8])} == {7: 49, 8: 64}


def stall_on_48(kernel, shape, block_edge, dtype, **options):
    """A runner whose 48 x 48 point never answers (a spinning kernel); the others get made-up figures."""
    from test_sweep import fake_runner

    if shape.m == 48:
        time.sleep(3600)
    return fake_runner(kernel, shape, block_edge, dtype, **options)


def test_a_gpu_point_past_its_time_limit_on_the_pool_is_stored_as_a_hang(pool, tmp_path):
    from gemmlab.core.shapes import Shape
    from gemmlab.store.store import Store
    from gemmlab.studies.points import SweepPoint
    from gemmlab.studies.sweep import sweep

    points = [SweepPoint("tiled", Shape.square(n), 16, "float32") for n in (32, 48, 64)]
    with Store.open(tmp_path / "h.sqlite") as store:
        summary = sweep(points, store, progress=False, runner=stall_on_48, pool=pool, timeout=2.0)
        failures = store.failures(None)
    assert sorted(summary.done) == ["tiled 32 b16 float32", "tiled 64 b16 float32"], summary.lines()
    assert [(f["m"], f["kind"]) for f in failures] == [(48, "hang")]
    assert "time limit of 2 s" in failures[0]["reason"] and "--timeout" in failures[0]["reason"]


def child_answer(x: int) -> int:
    """Starts a process of its own, as grading's watchdog does on a worker."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as children:
        return children.apply(abs, (-x,))


def test_a_local_worker_may_start_processes_of_its_own(pool):
    found = outcomes(pool, child_answer, [3])
    assert found[3].ok, found[3].error
    assert found[3].value == 3
