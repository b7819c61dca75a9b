"""Property (GPU): on any shape a kernel accepts — 1, primes, just above and
below tile multiples — its result matches the float64 reference."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec

pytestmark = pytest.mark.gpu

MATMUL = [s for s in catalogue.CATALOGUE if s.problem.name == "matmul"]


@st.composite
def accepted_points(draw, spec: KernelSpec):
    edge = draw(st.sampled_from(spec.block_edges)) if spec.block_edges else 0
    unit = max(edge, 1) * (2 if spec.id == "tiled_2x2" else 1)
    near = st.sampled_from([1, 2, 3, 5, 7, 11, 13, 31, 37, 61, 127, 251])

    def dim(multiple_needed: bool, cap: int = 300) -> int:
        if multiple_needed:
            return unit * draw(st.integers(1, max(1, cap // unit)))
        return draw(st.one_of(near, st.integers(1, cap), st.sampled_from([unit - 1 or 1, unit + 1, 2 * unit + 1])))

    probe = Shape(unit * 3 + 1, unit * 3 + 1, unit * 3 + 1)
    needs = {d: any(f"{d.upper()} = " in v and "multiple" in v for v in spec.violations(probe, edge, spec.dtypes[0]))
             for d in "mnk"}  # fmt: skip
    shape = Shape(dim(needs["m"]), dim(needs["n"]), dim(needs["k"]))
    if spec.id == "single_block":
        shape = Shape(min(shape.m, 4 * unit), min(shape.n, 4 * unit), shape.k)
    return shape, edge


@pytest.mark.parametrize("spec", MATMUL, ids=lambda s: s.id)
def test_fuzzed_shapes_verify(spec: KernelSpec) -> None:
    from gemmlab.measure.run import run

    @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)
    @given(point=accepted_points(spec))
    def check(point) -> None:
        shape, edge = point
        if spec.violations(shape, edge, spec.dtypes[0]):
            return  # the strategy over-approximates for a few kernels; refused shapes are tested elsewhere
        result = run(spec.id, shape, edge, reps=1, warmup=1, baseline=False)
        assert result.error <= result.tolerance

    check()
