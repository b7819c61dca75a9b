"""Nsight Compute on the GPU: the counters of naive and tiled agree with their structure,
and the tensor cores' operations of the tensor-core kernels with 2*M*N*K.

Skipped without a GPU (conftest) or without ncu. The expectations are derived
in tests/test_profile.py from the block edge and the warp size.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from conftest import needs_tool
from gemmlab.core import gpu
from gemmlab.core.errors import DeviceLimitError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.measure.ncu.command import find_ncu, profile_point
from test_profile import expected_cgma, expected_requests

# One Nsight Compute at a time: in a shard run by pytest-xdist, these tests share one worker.
pytestmark = [pytest.mark.gpu, pytest.mark.xdist_group("ncu")]
N = 256


needs_ncu = needs_tool(find_ncu, "Nsight Compute")


@needs_ncu
@pytest.mark.parametrize("kernel_id", ["naive", "tiled"])
@pytest.mark.parametrize("edge", [8, 16, 32])
def test_flops_and_cgma_match_the_structure(kernel_id: str, edge: int) -> None:
    r = profile_point(kernel_id, Shape.square(N), edge)
    assert r.flops_measured == 2 * N**3
    assert r.cgma_measured == pytest.approx(expected_cgma(kernel_id, N, edge), rel=0.02)
    loads, stores = expected_requests(kernel_id, N, edge)
    assert r.global_ld_requests == pytest.approx(loads, rel=0.02)
    assert r.global_st_requests == pytest.approx(stores, rel=0.02)
    assert r.error is not None and r.error <= 1e-5
    assert 0 < r.achieved_occupancy <= r.theoretical_occupancy + 1e-9
    assert r.gips and r.gips > 0


@needs_ncu
def test_int32_counts_at_least_one_integer_instruction_per_multiply_add() -> None:
    r = profile_point("naive_i32", Shape.square(N), 16)
    assert r.flops_measured >= N**3
    loads, stores = expected_requests("naive_i32", N, 16)
    assert r.global_ld_requests == pytest.approx(loads, rel=0.02)
    assert r.global_st_requests == pytest.approx(stores, rel=0.02)
    assert r.error == 0.0


@needs_ncu
@pytest.mark.parametrize(
    ("kernel_id", "dtype"), [("tc_mma", "bfloat16"), ("tc_wgmma", "bfloat16"), ("tc_wgmma", "tf32")]
)
def test_tensor_core_flops_are_two_per_multiply_add(kernel_id: str, dtype: str) -> None:
    """512 is a multiple of every tile (128 x 128, and one 128-byte stage along K): no MMA falls
    past the matrix's edge, so the tensor path's count is the model exactly."""
    try:
        catalogue.get(kernel_id).compile_arch(gpu.describe(0).arch)
    except DeviceLimitError as exc:
        pytest.skip(exc.cause)
    shape = Shape.square(512)
    r = profile_point(kernel_id, shape, dtype=dtype)
    assert r.tensor_flops == 2 * shape.m * shape.n * shape.k == r.flops_model
    assert r.flops_measured >= r.tensor_flops
    assert "tensor-core operations" in r.ops_counter
    assert r.tensor_pipe_pct is not None and 0 < r.tensor_pipe_pct <= 100
    assert r.error is not None


@pytest.mark.whole_gpu  # rates
def test_measured_ceilings_are_plausible() -> None:
    from gemmlab.measure.roofline import measure_ceilings

    compute, bandwidth = measure_ceilings(gemm_size=4096, copy_bytes=2**28, reps=5)
    assert math.isfinite(compute) and compute > 1_000  # any GPU since Pascal does over 1 TFLOP/s in SGEMM
    assert math.isfinite(bandwidth) and bandwidth > 100


@needs_ncu
@pytest.mark.whole_gpu  # stores and checks the measured ceilings, rates
def test_sweep_profile_stores_metrics_and_ceilings_and_the_report_draws_the_roofline(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from gemmlab.cli.app import app
    from gemmlab.report import write_report
    from gemmlab.store.store import Store

    db = tmp_path / "r.sqlite"
    args = ["sweep", "--kernels", "naive,tiled", "--sizes", str(N), "--blocks", "16", "--db", str(db), "--profile"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "2 profiled, 0 already profiled" in result.output
    with Store.open(db) as store:
        rows = store.rows(None)
    assert len(rows) == 2
    for r in rows:
        assert r["gips"] > 0 and r["dram_bytes"] > 0 and r["cgma_measured"] > 0 and r["profile_json"]
        assert r["peak_gflops_measured"] > 1_000 and r["bandwidth_gbs_measured"] > 100
    index = write_report(db, tmp_path / "report", occupancy=False)
    assert (index.parent / "no-experiment" / "roofline.png").read_bytes().startswith(b"\x89PNG")
    assert "no-experiment/roofline.png" in index.read_text()
