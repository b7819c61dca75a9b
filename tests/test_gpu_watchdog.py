"""The watchdog on a real GPU: a kernel that faults and one that never finishes,
in a sweep beside a good kernel and alone in `gemmlab run`, and a declaration
whose argument sizes do not match the compiled function.

The commands run in a child process with a time limit of their own, so that a
watchdog that fails shows as a failed test, not a frozen test run. About a
minute in all: the hang costs its time limit twice (20 s and 10 s)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from conftest import gemmlab_process
from gemmlab.core.errors import DeclarationError
from gemmlab.core.shapes import Shape
from gemmlab.store.store import Store

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
EXIT_FAILED = 4


# The hang spins on every SM for its whole time limit: the other tests' timings
# would suffer beside it, so these run in the tier that has the GPU to itself.
@pytest.mark.whole_gpu
def test_a_sweep_stores_the_good_kernel_and_the_fault_and_the_hang_as_failures(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    kernels = "examples/faulty/fault/matmul.toml,examples/naive_define/matmul.toml,examples/faulty/hang/matmul.toml"
    done = gemmlab_process(
        "sweep", "--kernels", kernels, "--sizes", "256", "--timeout", "20", "--db", str(db), limit_s=240
    )
    output = done.stdout + done.stderr
    assert done.returncode == EXIT_FAILED, output
    with Store.open(db) as store:
        rows = store.rows(None)
        failures = {f["kernel"]: f for f in store.failures(None)}
    # naive_define's three edges (8, 16, 32) all measured, verified and stored.
    assert sorted(r["block_edge"] for r in rows) == [8, 16, 32], output
    assert {r["kernel"] for r in rows} == {"naive_define/matmul"}
    assert all(r["error"] <= r["tolerance"] and r["gflops"] > 0 for r in rows)
    assert set(failures) == {"fault/matmul", "hang/matmul"}, output
    fault, hang = failures["fault/matmul"], failures["hang/matmul"]
    assert fault["kind"] == "fault" and "fault/matmul 256 b16 float32" in fault["reason"]
    assert any(name in fault["reason"] for name in ("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED"))
    assert hang["kind"] == "hang" and "time limit of 20 s" in hang["reason"]
    assert fault["source"].endswith("fault/matmul.toml") and fault["run_id"] == rows[0]["run_id"]
    assert "FAILED: fault/matmul 256 b16 float32" in output and "FAILED: hang/matmul 256 b16 float32" in output


@pytest.mark.whole_gpu
def test_run_stops_a_hang_with_a_message() -> None:
    started = time.monotonic()
    done = gemmlab_process("run", "examples/faulty/hang/matmul.toml", "--size", "256", "--timeout", "10", limit_s=90)
    elapsed = time.monotonic() - started
    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
    assert "hang: hang/matmul 256" in done.stderr and "time limit of 10 s" in done.stderr
    assert "Traceback" not in done.stderr
    assert elapsed < 30, f"the hang took {elapsed:.0f} s to stop"


def test_argument_sizes_are_checked_against_the_compiled_function(tmp_path: Path) -> None:
    from gemmlab.measure.run import run

    folder = tmp_path / "wide_n"
    folder.mkdir()
    (folder / "matmul.cu").write_text(
        'extern "C" __global__ void matmul_wide(const float *A, const float *B, float *C, long long n)\n'
        "{\n"
        "    long long row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;\n"
        "    float sum = 0.0f;\n"
        "    for (long long i = 0; i < n; i++) sum += A[row * n + i] * B[i * n + col];\n"
        "    C[row * n + col] = sum;\n"
        "}\n"
    )
    (folder / "matmul.toml").write_text(
        'function = "matmul_wide"\nproblem = "matmul"\ndtypes = ["float32"]\narguments = ["A", "B", "C", "n"]\n'
        'grid = ["n // 16", "n // 16"]\nblock = ["16", "16"]\n'
    )
    with pytest.raises(DeclarationError) as refused:
        run(str(folder / "matmul.toml"), Shape.square(64), reps=3)
    message = str(refused.value)
    assert "wide_n/matmul: argument 4, declared as n, is 8 bytes" in message and "an int of 4 bytes" in message
