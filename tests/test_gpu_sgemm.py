"""The FP32 ladder on the GPU: every rung verified against float64 on odd,
aligned and large shapes, every configuration of the search space on two
shapes, in-place C, and compute-sanitizer's memcheck and racecheck."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import marked_smoke
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.sgemm import spec as sgemm
from gemmlab.measure.sanitize import check
from gemmlab.problems import sgemm as sgemm_problem
from gemmlab.problems.base import Prepared

pytestmark = pytest.mark.gpu

LADDER = [spec.id for spec in sgemm.SGEMM_KERNELS]
# Rungs outside the catalogue until a stored benchmark measures them, run through
# run(..., spec=); the sanitizer (by catalogue id) does not reach them:
# benchmarks/scripts/sgemm_next.py --sanitize does.
CANDIDATES = [r.id for r in sgemm.CANDIDATE_RUNGS]
SHAPES = [
    Shape(1, 1, 1),
    Shape(17, 33, 65),
    Shape(127, 129, 131),
    Shape(100, 132, 130),  # rows of B and C align to 16 bytes, rows of A do not
    Shape(100, 130, 132),  # rows of A align, rows of B and C do not
    Shape(300, 257, 64),  # unaligned rows of B, no partial K tile: the block crossing N copies whole tiles
    Shape(50, 2, 48),  # B narrower than one 4-element piece
    Shape.square(256),
    Shape.square(1000),
    Shape.square(4096),
]


def _takes(kernel_id: str, config: dict, shape: Shape) -> bool:
    """Whether the configuration accepts the shape (sgemm_skinny takes M of 16 at
    most, sgemm_skinny_n N of 16: tests/test_gpu_sgemm_shapes.py gives them shapes of their own)."""
    return not catalogue.variant(kernel_id, config).violations(shape, 0, "float32")


CASES = [(kid, s) for kid in LADDER + CANDIDATES for s in SHAPES if _takes(kid, {}, s)]
CONFIG_CASES = [
    (kid, c, s)
    for kid in LADDER + CANDIDATES
    for c in catalogue.configs(kid)
    for s in (Shape(127, 129, 131), Shape.square(256))
    if _takes(kid, c, s)
]
# In-place C at an odd shape: 127 rows and 129 columns, or 13 of either for the rungs that take few
# (one row for sgemm_gemv_split's default).
IN_PLACE = [(kid, next(s for s in (Shape(127, 129, 131), Shape(13, 129, 131), Shape(127, 13, 131),
                                   Shape(1, 129, 131))
                       if _takes(kid, {}, s)))
            for kid in LADDER + CANDIDATES]  # fmt: skip


@pytest.mark.parametrize(
    ("kernel_id", "shape"),
    marked_smoke(CASES, ("sgemm_multistage", Shape.square(256))),
    ids=[f"{k}-{s}" for k, s in CASES],
)
def test_rung_verifies(kernel_id: str, shape: Shape) -> None:
    from gemmlab.measure.run import run

    result = run(kernel_id, shape, reps=2, warmup=1, baseline=False, spec=catalogue.variant(kernel_id, {}))
    assert result.error < 1e-5
    assert result.gflops > 0


@pytest.mark.parametrize(
    ("kernel_id", "config", "shape"),
    CONFIG_CASES,
    ids=[f"{k}-{tuple(c.values())}-{s}" for k, c, s in CONFIG_CASES],
)
def test_every_config_verifies(monkeypatch: pytest.MonkeyPatch, kernel_id: str, config: dict, shape: Shape) -> None:
    from gemmlab.measure.run import run

    monkeypatch.setitem(catalogue._BY_ID, kernel_id, catalogue.variant(kernel_id, config))
    result = run(kernel_id, shape, reps=1, warmup=1, baseline=False)
    assert result.error < 1e-5


def _in_place(cp, point, rng) -> Prepared:
    """sgemm's problem with c_in and c_out the same buffer; "poison" restores C."""
    prepared = sgemm_problem.prepare_sgemm(cp, point, rng)
    _a, _b, c0, c, _ref, _lib = prepared.buffers
    args = (*prepared.args[:2], c.data.ptr, c.data.ptr, *prepared.args[4:])
    return dataclasses.replace(prepared, args=args, poison=lambda: cp.copyto(c, c0))


@pytest.mark.parametrize(("kernel_id", "shape"), IN_PLACE, ids=[f"{k}-{s}" for k, s in IN_PLACE])
def test_in_place_c(monkeypatch: pytest.MonkeyPatch, kernel_id: str, shape: Shape) -> None:
    """c_in == c_out (BLAS's in-place update) gives the same result: each element
    is read once, by the thread that then writes it."""
    from gemmlab.measure.run import run

    spec = catalogue.variant(kernel_id, {})
    problem = dataclasses.replace(sgemm_problem.SGEMM, prepare=_in_place)
    monkeypatch.setitem(catalogue._BY_ID, kernel_id, dataclasses.replace(spec, problem=problem))
    result = run(kernel_id, shape, reps=1, warmup=1, baseline=False)
    assert result.error < 1e-5


def test_unwritten_output_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A grid one block-row short leaves NaN in C: the run is refused."""
    from gemmlab.core.errors import VerificationError
    from gemmlab.measure.run import run

    spec = catalogue.get("sgemm_multistage")
    short = dataclasses.replace(spec, grid=lambda s, b: (-(-s.n // 128), max(1, -(-s.m // 128) - 1), 1))
    monkeypatch.setitem(catalogue._BY_ID, "sgemm_multistage", short)
    with pytest.raises(VerificationError):
        run("sgemm_multistage", Shape.square(512), reps=1, warmup=1, baseline=False)


@pytest.mark.whole_gpu  # a ratio of two timings
def test_against_cublas_at_4096() -> None:
    from gemmlab.core import gpu
    from gemmlab.measure.run import run

    result = run("sgemm_multistage", Shape.square(4096), reps=5)
    assert result.baseline_name == sgemm_problem.baseline_name()
    assert result.ratio_to_baseline is not None and result.ratio_to_baseline > 0.3
    # FP32 FFMA, not TF32: under the FFMA peak at the boost clock (TF32 tensor cores run several times above it).
    peak = gpu.describe(0).peak_fp32_gflops
    assert result.baseline_gflops is not None and peak is not None and result.baseline_gflops < peak


def test_cublas_baseline_computes_the_same_sgemm() -> None:
    """The baseline does the kernels' work, alpha A.B + beta C, and matches the
    float64 reference after one call (it then updates its C in place)."""
    from gemmlab.core import gpu
    from gemmlab.problems.base import relative_error

    cp = gpu.cupy()
    point = catalogue.point("sgemm_lean_loop", Shape(300, 520, 136))
    prepared = sgemm_problem.prepare_sgemm(cp, point, cp.random.default_rng(3))
    _a, _b, _c_in, _c_out, ref, lib_out = prepared.buffers
    prepared.baseline()
    cp.cuda.get_current_stream().synchronize()
    assert relative_error(cp, lib_out, ref) < 1e-5
    prepared.baseline()  # a second call: C = alpha A.B + beta (last C), no longer the reference
    cp.cuda.get_current_stream().synchronize()
    assert relative_error(cp, lib_out, ref) > 1e-3


@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_sanitizer_clean(tool: str) -> None:
    report = check(LADDER, tool)
    assert report.points >= len(LADDER)
    assert report.clean, report.findings()
