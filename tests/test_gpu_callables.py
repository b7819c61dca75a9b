"""Users' Python kernels on the GPU: the examples (Triton, CuPy, torch, Numba)
run verified and timed beside cuBLAS through the runner and the command line,
and a launch that refuses CUDA-graph capture keeps its events' timing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gemmlab.cli import app
from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.measure.run import RunResult, run

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# Square, and one shape no tile divides (the Triton kernel's masks, the Numba kernel's bounds check).
SHAPES = (Shape.square(1024), Shape(1000, 700, 300))


def example(name: str) -> str:
    return str(EXAMPLES / name / "matmul.py")


def run_example(name: str, shape: Shape, block_edge: int | None = None) -> RunResult:
    spec = catalogue.get(example(name))
    return run(spec.id, shape, block_edge, reps=5, max_seconds=2.0, spec=spec)


def assert_measured(result: RunResult, kernel: str) -> None:
    assert result.kernel == kernel and result.backend == "python"
    assert result.error <= result.tolerance
    assert result.baseline_name is not None and result.ratio_to_baseline is not None and result.ratio_to_baseline > 0
    assert result.source.endswith(f"{kernel}.py") and result.grid == (0, 0, 0)
    assert result.timing.median_ms > 0


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("block_edge", [None, 64])
def test_the_triton_example_runs_verified_beside_cublas(shape: Shape, block_edge: int | None) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    result = run_example("triton_matmul", shape, block_edge)
    assert_measured(result, "triton_matmul/matmul")
    assert result.dtype == "float16" and "GemmEx float16" in result.baseline_name
    assert result.block_edge == (block_edge or 128) and result.config == {"BLOCK_N": 128, "BLOCK_K": 32}
    # Read from the kernel the wrapper returned, after its first launch.
    assert result.resources.registers > 0 and result.resources.smem_bytes > 0


@pytest.mark.parametrize("shape", [*SHAPES, Shape.square(64)], ids=str)
def test_the_cupy_example_runs_verified_beside_cublas(shape: Shape) -> None:
    result = run_example("cupy_matmul", shape)
    assert_measured(result, "cupy_matmul/matmul")
    assert result.resources.registers is None  # cuBLAS's code is not the function's to show


def test_the_torch_example_runs_verified_beside_cublas() -> None:
    pytest.importorskip("torch")
    result = run_example("torch_matmul", Shape.square(1024))
    assert_measured(result, "torch_matmul/matmul")
    assert result.dtype == "float16"


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_the_numba_example_runs_verified_beside_cublas(shape: Shape) -> None:
    try:
        result = run_example("numba_matmul", shape, 16)
    except GemmlabError as exc:
        if "nvvm" in str(exc).lower():
            pytest.skip(f"Numba cannot compile CUDA kernels here: {exc}")
        if "module 'numpy' has no attribute" in str(exc):
            # numba-cuda built against an older NumPy (the H100 machine of 2026-11-23:
            # np.row_stack, gone from NumPy 2.x, inside numba-cuda's launch path).
            pytest.skip(f"this machine's numba-cuda does not work with its NumPy: {exc.cause}")
        raise
    assert_measured(result, "numba_matmul/matmul")
    assert result.block_edge == 16


runner = CliRunner()


@pytest.mark.parametrize("name", ["triton_matmul", "cupy_matmul"])
def test_run_takes_a_python_file_on_the_command_line(name: str) -> None:
    if name == "triton_matmul":
        pytest.importorskip("triton")
    out = runner.invoke(app, ["run", example(name), "--size", "1024", "--reps", "5", "--json"])
    assert out.exit_code == 0, out.output
    row = json.loads(out.output)
    assert row["kernel"] == f"{name}/matmul" and row["backend"] == "python"
    assert row["error"] <= row["tolerance"] and row["ratio_to_baseline"] > 0
    table = runner.invoke(app, ["run", example(name), "--size", "512", "--reps", "3"])
    assert table.exit_code == 0, table.output
    assert "chosen by the function" in table.output and "ratio to library" in table.output


def test_a_launch_that_refuses_capture_is_issued_back_to_back_and_leaves_the_stream_usable() -> None:
    """A stream synchronize is illegal while capturing: the capture fails, the
    stream leaves capture mode, and the batch is the calls issued back to back."""
    from gemmlab.core import gpu
    from gemmlab.measure import activity, series

    cp = gpu.cupy()
    stream = cp.cuda.Stream(non_blocking=True)
    counter = cp.zeros(1, dtype=cp.int32)

    def launch() -> None:
        cp.add(counter, 1, out=counter)
        stream.synchronize()

    timed = series.Series.__new__(series.Series)
    timed.stream = stream  # all that making a batch uses
    with stream:
        batch = timed.batch(series.Side(activity.CALL, lambda i: launch(), checked=False), 3)
        assert not batch.graphed and not stream.is_capturing()
        batch.run()
    assert int(counter.get()[0]) >= 3
