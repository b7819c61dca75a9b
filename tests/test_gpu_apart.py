"""A Python submission measured at arm's length on the GPU (CUDA IPC): an
honest one is timed beside cuBLAS by the grader's clock; hostile ones are
caught or reach nothing. Then one graded whole, through every stage.

Skipped without a GPU (conftest); the graded one also without compute-sanitizer."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import needs_tool
from gemmlab.core.errors import VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.measure.apart import DEVICE, measure_apart, run_apart
from gemmlab.measure.sanitize import find_sanitizer
from gemmlab.studies import grade

pytestmark = pytest.mark.gpu

SHAPE = Shape(512, 384, 256)
DECLARED = 'GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}\n'

HONEST = """
import cupy as cp

def matmul(A, B, C):
    cp.matmul(A, B, out=C)
"""

# Sleeps 20 ms per call, and breaks every clock of its own process.
PATCHES_THE_CLOCK = """
import time
import cupy as cp

_sleep = time.sleep
time.perf_counter = lambda: 0.0
cp.cuda.get_elapsed_time = lambda start, end: 1e-6

def matmul(A, B, C):
    _sleep(0.02)
    cp.matmul(A, B, out=C)
"""

CACHED = """
import cupy as cp

_kept = []

def matmul(A, B, C):
    if not _kept:
        _kept.append(A @ B)
    C[...] = _kept[0]
"""


def submission(tmp_path: Path, name: str, body: str) -> str:
    folder = tmp_path / name
    folder.mkdir()
    path = folder / "matmul.py"
    path.write_text(body + "\n" + DECLARED)
    return str(path)


def test_an_honest_submission_is_timed_beside_cublas_on_the_gpu(tmp_path: Path) -> None:
    result = run_apart(submission(tmp_path, "honest", HONEST), SHAPE, "float32", batches=3, launches=4, limit_s=60.0,
                       memory=DEVICE)  # fmt: skip
    assert result.error <= result.tolerance and result.timing.reps == 3 and result.device.get("name")
    # The same cuBLAS call on both sides: the share is near 1, less the pipe's and Python's overhead.
    assert result.ratio_to_baseline is not None and 0.05 < result.ratio_to_baseline < 3.0


def test_a_patched_clock_on_the_gpu_does_not_reach_the_graders(tmp_path: Path) -> None:
    measured = measure_apart(submission(tmp_path, "clock", PATCHES_THE_CLOCK), SHAPE, "float32", memory=DEVICE,
                             batches=2, launches=2)  # fmt: skip
    assert measured.timing is not None and measured.timing.min_ms >= 15.0


def test_a_cached_answer_on_the_gpu_fails(tmp_path: Path) -> None:
    with pytest.raises(VerificationError, match="launch 2 of 4"):
        measure_apart(submission(tmp_path, "cached", CACHED), SHAPE, "float32", memory=DEVICE, batches=1,
                      launches=4)  # fmt: skip


@needs_tool(find_sanitizer, "compute-sanitizer")
def test_python_submissions_graded_whole(tmp_path: Path) -> None:
    task_path = tmp_path / "task.toml"
    task_path.write_text('name = "apart"\nproblem = "matmul"\ndtypes = ["float32"]\nshapes = [256]\n'
                         "[hidden]\ncount = 1\nseed = 3\nmin = 128\nmax = 384\nmultiple = 32\n"
                         '[grades]\nA = 0.5\npass = "verified"\n[timing]\nreps = 3\ntimeout = 60\n')  # fmt: skip
    task = grade.load_task(task_path)
    example = Path(__file__).resolve().parent.parent / "examples" / "cupy_matmul"
    shutil.copytree(example, tmp_path / "class" / "cupy")
    submission(tmp_path / "class", "cached", CACHED)
    verdicts = {s.name: grade.grade_one(s, task) for s in grade.find_submissions([tmp_path / "class"])}
    assert verdicts["cupy"].stage == grade.GRADED, verdicts["cupy"].reason
    assert verdicts["cupy"].wall_s is not None and verdicts["cupy"].shares
    assert verdicts["cached"].stage in ("sanitize", "verify") and verdicts["cached"].grade == grade.FAIL
