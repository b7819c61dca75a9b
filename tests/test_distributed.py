"""The distributed ladder without GPUs: the partition arithmetic (who owns
which block, the ring's order, SUMMA's panels), the overlap and scaling
formulas, the launcher's errors, the rows it stores, and, where torch is
installed, the whole ladder over two CPU processes talking through gloo."""

from __future__ import annotations

import importlib.util
import itertools
import json
from pathlib import Path

import pytest

from gemmlab.cli.app import run_cli
from gemmlab.core.errors import GemmlabError
from gemmlab.core.extras import MissingExtra
from gemmlab.store.store import Store
from gemmlab.studies.distributed import launch, plan
from gemmlab.studies.distributed.plan import Grid, Span

HAS_TORCH = importlib.util.find_spec("torch") is not None


def covered(spans: list[tuple[Span, Span]], rows: int, cols: int) -> list[list[int]]:
    """How many times each element of a rows x cols matrix is covered by the (rows, cols) spans."""
    count = [[0] * cols for _ in range(rows)]
    for r, c in spans:
        for i in range(r.start, r.stop):
            for j in range(c.start, c.stop):
                count[i][j] += 1
    return count


@pytest.mark.parametrize("algorithm", plan.ALGORITHMS)
@pytest.mark.parametrize("world", [1, 2, 4, 6])
def test_every_element_of_c_has_exactly_one_owner(algorithm: str, world: int) -> None:
    m, n, k = 12, 24, 12
    blocks = [plan.blocks(algorithm, m, n, k, world, r) for r in range(world)]
    assert covered([(b.c_rows, b.c_cols) for b in blocks], m, n) == [[1] * n for _ in range(m)]


@pytest.mark.parametrize("world", [2, 4])
def test_each_algorithm_starts_from_a_partition_of_its_sharded_operand(world: int) -> None:
    m = n = k = 8
    # allgather: A by rows, B by columns, each element once.
    ag = [plan.blocks("allgather_gemm", m, n, k, world, r) for r in range(world)]
    assert covered([(b.a_rows, b.a_k) for b in ag], m, k) == [[1] * k for _ in range(m)]
    assert covered([(b.b_k, b.b_cols) for b in ag], k, n) == [[1] * n for _ in range(k)]
    # K split: A by columns, B by rows, the same K span on both sides.
    ks = [plan.blocks("gemm_reduce_scatter", m, n, k, world, r) for r in range(world)]
    assert all(b.a_k == b.b_k for b in ks)
    assert covered([(b.a_rows, b.a_k) for b in ks], m, k) == [[1] * k for _ in range(m)]


def test_summa_blocks_follow_the_grid() -> None:
    grid = Grid(2, 3)
    b = plan.blocks("summa", 4, 6, 12, 6, grid.rank_of(1, 2), grid)
    assert (b.c_rows, b.c_cols) == (Span(2, 4), Span(4, 6))
    assert b.a_k == Span(8, 12)  # A's K cut in 3 (grid columns), block 2
    assert b.b_k == Span(6, 12)  # B's K cut in 2 (grid rows), block 1


def test_grid_parsing_and_groups() -> None:
    assert Grid.parse("1x2") == Grid(1, 2)
    assert Grid.squarest(8) == Grid(2, 4) and Grid.squarest(2) == Grid(1, 2) and Grid.squarest(9) == Grid(3, 3)
    g = Grid(2, 2)
    assert g.row_ranks(1) == [2, 3] and g.col_ranks(1) == [1, 3]
    with pytest.raises(GemmlabError, match="RxC"):
        Grid.parse("2by2")


def test_the_ring_visits_every_chunk_once_in_neighbour_order() -> None:
    world = 4
    for rank in range(world):
        order = plan.ring_sources(rank, world)
        assert sorted(order) == list(range(world)) and order[0] == rank
    # What rank r multiplies at step s + 1 is what its left neighbour multiplied at step s.
    for rank in range(world):
        _, left = plan.ring_neighbours(rank, world)
        for step in range(world - 1):
            assert plan.ring_sources(rank, world)[step + 1] == plan.ring_sources(left, world)[step]
    assert plan.ring_neighbours(0, 2) == (1, 1)


@pytest.mark.parametrize("grid", [Grid(1, 2), Grid(2, 1), Grid(2, 3), Grid(2, 2)])
def test_summa_panels_tile_k_and_each_lies_in_one_owner_block(grid: Grid) -> None:
    k = 24
    panels = plan.summa_panels(k, grid, per_block=2)
    assert [p.k.start for p in panels] == sorted({p.k.start for p in panels})
    assert panels[0].k.start == 0 and panels[-1].k.stop == k
    assert all(a.k.stop == b.k.start for a, b in itertools.pairwise(panels))
    for p in panels:
        a_block = plan.split(k, grid.cols, p.a_owner_col)
        b_block = plan.split(k, grid.rows, p.b_owner_row)
        assert a_block.start <= p.k.start and p.k.stop <= a_block.stop
        assert b_block.start <= p.k.start and p.k.stop <= b_block.stop


def test_shapes_that_do_not_divide_are_refused_with_the_dimension() -> None:
    with pytest.raises(GemmlabError, match="K = 10"):
        plan.check_shape("summa", 8, 9, 10, 6, Grid(2, 3))
    with pytest.raises(GemmlabError, match="2 ranks, not 4"):
        plan.check_shape("summa", 8, 8, 8, 4, Grid(1, 2))
    with pytest.raises(GemmlabError, match="M = 9"):
        plan.check_shape("gemm_reduce_scatter", 9, 8, 8, 2)
    plan.check_shape("allgather_gemm", 8, 8, 7, 2)  # K is never cut here


def test_weak_scaling_keeps_each_gpus_share() -> None:
    assert plan.global_shape("strong", 4096, 2) == (4096, 4096, 4096)
    m, n, k = plan.global_shape("weak", 4096, 4)
    assert plan.flops(m, n, k) / 4 == plan.flops(4096, 4096, 4096)


def test_overlap_efficiency_definition() -> None:
    assert plan.overlap_efficiency(2.0, 6.0, 6.0) == 1.0  # the communication wholly hidden
    assert plan.overlap_efficiency(2.0, 6.0, 8.0) == 0.0  # one after the other
    assert plan.overlap_efficiency(2.0, 6.0, 7.0) == 0.5
    assert plan.overlap_efficiency(2.0, 6.0, 9.0) == -0.5  # overlapping slowed both
    assert plan.overlap_efficiency(0.0, 6.0, 6.0) is None


def test_rates_and_scaling_efficiency() -> None:
    assert plan.tflops_per_gpu(1000, 1000, 1000, 2, 1.0) == pytest.approx(1.0)
    assert plan.scaling_efficiency("strong", 10.0, 5.0, 2) == 1.0
    assert plan.scaling_efficiency("weak", 10.0, 12.5, 2) == 0.8


def test_algorithm_names_are_checked() -> None:
    assert plan.parse_algorithms("summa,allgather_gemm") == ("allgather_gemm", "summa")
    assert plan.parse_algorithms(None) == plan.ALGORITHMS
    with pytest.raises(GemmlabError, match="cannon"):
        plan.parse_algorithms("cannon")


def test_setup_round_trips_through_json() -> None:
    setup = plan.Setup(("summa",), (("weak", 64),), grid="1x2", reps=2)
    assert plan.Setup.from_json(json.loads(json.dumps(setup.to_json()))) == setup
    assert setup.grid_for(2) == Grid(1, 2) and setup.grid_for(1) == Grid(1, 1)


def test_one_gpu_measures_strong_scaling_only() -> None:
    assert launch.points_for(["strong", "weak"], [64], 1) == (("strong", 64),)
    assert launch.points_for(["strong", "weak"], [64], 2) == (("strong", 64), ("weak", 64))


def test_the_cublasmp_baseline_refuses_torchs_nccl_2_28_with_the_fix() -> None:
    from gemmlab.core.extras import MissingExtra

    plan.check_nccl((2, 29, 2))
    plan.check_nccl((2, 30, 4))
    with pytest.raises(
        MissingExtra, match=r"needs NCCL 2\.29\.2 or newer; this process loaded NCCL 2\.28\.9"
    ) as caught:
        plan.check_nccl((2, 28, 9))
    assert "nvidia-nccl-cu13>=2.29.2" in caught.value.fix and "--algorithms" in caught.value.fix


def test_torchrun_command_and_environment() -> None:
    cmd = launch.torchrun_command(2, Path("s.json"), Path("out"), python="py")
    assert cmd[:3] == ["py", "-m", "torch.distributed.run"] and "--nproc-per-node=2" in cmd
    assert cmd[cmd.index("-m", 3) + 1] == launch.RANK_PROGRAM
    assert launch.launch_env({"PATH": "/bin"}) == {"PATH": "/bin", "NCCL_NVLS_ENABLE": "0"}


def test_fewer_gpus_than_asked() -> None:
    with pytest.raises(GemmlabError, match="over 2 GPUs was asked for, and this machine shows 1") as info:
        launch.check_gpus([1, 2], 1)
    assert "--gpus 1" in info.value.fix
    launch.check_gpus([1, 2], 2)


def test_missing_torch_names_the_extra() -> None:
    with pytest.raises(MissingExtra, match=r"gemmlab\[multigpu\]"):
        launch.require_torch(find=lambda name: None)


def _row(**extra: object) -> dict:
    row = {
        "algorithm": "summa", "gpus": 2, "device": "cuda", "scaling": "weak", "size": 64, "m": 128, "n": 64, "k": 64,
        "grid": "1x2", "median_ms": 2.0, "min_ms": 1.9, "max_ms": 2.5, "reps": 5, "comm_ms": 0.5, "gemm_ms": 1.8,
        "overlap_efficiency": 0.6, "tflops_per_gpu": 3.5, "error": 1e-6, "tolerance": 1e-4, "verified": True,
        "local_gemm": "gemmlab.matmul", "fallback_reason": None,
    }  # fmt: skip
    return {**row, **extra}


def test_a_row_is_stored_without_a_schema_change(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        run = store.start_run({})
        one = launch.store_row(_row(gpus=1, scaling="strong", grid=None))
        store.add_results(run, launch.EXPERIMENT, [launch.store_row(_row()), one])
        rows = store.rows(launch.EXPERIMENT)
    assert len(rows) == 2  # the GPU count is part of the point
    two = next(r for r in rows if r["variant"] == "2gpu-weak")
    assert (two["kernel"], two["backend"], two["gflops"]) == ("summa", "nccl", 3500.0)
    assert json.loads(two["config"]) == {"gpus": 2, "grid": "1x2", "scaling": "weak"}
    assert "overlap efficiency 60%" in two["warnings"][0]


def test_a_fallback_and_a_wrong_result_are_told() -> None:
    notes = launch.store_row(_row(fallback_reason="ConstraintError: K", verified=False, error=0.5))["warnings"]
    assert any("torch.matmul ran instead: ConstraintError" in n for n in notes)
    assert any("not verified" in n for n in notes)


def test_with_scaling_compares_with_one_gpu() -> None:
    one = _row(gpus=1, scaling="strong", median_ms=4.0)
    rows = launch.with_scaling([one, _row(scaling="strong", median_ms=2.5), _row(median_ms=5.0)])
    assert [r["scaling_efficiency"] for r in rows] == [1.0, 0.8, 0.8]


def test_a_failed_rank_is_named_with_its_log(tmp_path: Path) -> None:
    (tmp_path / "rank0.json").write_text(json.dumps({"rank": 0, "rows": []}))
    (tmp_path / "rank1.json").write_text(json.dumps({"rank": 1, "error": "RuntimeError: NCCL timeout"}))
    with pytest.raises(launch.RankFailed, match="Rank 1 of 2 failed: RuntimeError: NCCL timeout") as info:
        launch.read_answers(tmp_path, 2, 1, tmp_path / "torchrun.log")
    assert str(tmp_path / "rank1.log") in info.value.fix
    (tmp_path / "rank1.json").unlink()
    with pytest.raises(launch.RankFailed, match="Rank 1 of 2 stopped without an answer"):
        launch.read_answers(tmp_path, 2, -9, tmp_path / "torchrun.log")


def test_cli_refuses_more_gpus_than_present(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from gemmlab.core import gpu

    monkeypatch.setattr(launch, "require_torch", lambda: None)
    monkeypatch.setattr(gpu, "device_count", lambda: 1)
    code = run_cli(["distributed", "--gpus", "2"])
    err = capsys.readouterr().err
    assert code == 2 and "this machine shows 1" in err and "Traceback" not in err


def test_cli_without_torch_names_the_extra(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # what find_spec reads as "not installed"
    code = run_cli(["distributed", "--gpus", "1"])
    assert code == 2 and "gemmlab[multigpu]" in capsys.readouterr().err


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch (pip install 'gemmlab[multigpu]'; the CPU wheel is enough)")
def test_the_ladder_over_two_gloo_processes(tmp_path: Path) -> None:
    db, out = tmp_path / "r.sqlite", tmp_path / "rows.json"
    code = run_cli(["distributed", "--cpu", "--gpus", "1,2", "--sizes", "32", "--scaling", "strong,weak",
                    "--grid", "1x2", "--reps", "2", "--warmup", "1", "--db", str(db), "--out", str(out),
                    "--work-dir", str(tmp_path / "logs")])  # fmt: skip
    assert code == 0, (tmp_path / "logs").glob("*/rank*.log")
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 4 + 8  # one GPU: strong only; two: strong and weak
    assert all(r["verified"] and r["error"] < 1e-6 for r in rows)
    assert {(r["algorithm"], r["gpus"]) for r in rows} == {(a, g) for a in plan.ALGORITHMS for g in (1, 2)}
    with Store.open(db, readonly=True) as store:
        assert len(store.rows(launch.EXPERIMENT)) == 12 and len(store.runs()) == 2
