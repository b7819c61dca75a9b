"""Property: every shape a kernel does not accept is refused, with the broken
constraint named, before anything touches the GPU."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemmlab.core import gpu
from gemmlab.core.errors import ConstraintError, UnknownName
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue

# Sizes around the interesting edges: 1, primes, tile multiples and one off.
EDGY = st.sampled_from([1, 2, 3, 7, 13, 31, 32, 33, 63, 64, 65, 97, 127, 128, 129, 176, 509, 1000, 1024, 1025])
SIZES = st.one_of(EDGY, st.integers(-3, 2100))
KERNELS = st.sampled_from([s.id for s in catalogue.CATALOGUE if s.problem.name == "matmul"])
EDGES = st.one_of(st.integers(-1, 40), st.none())
DTYPES = st.sampled_from(["float32", "int32", "float64", None])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kernel_id=KERNELS, m=SIZES, n=SIZES, k=SIZES, edge=EDGES, dtype=DTYPES)
def test_refused_before_any_launch(monkeypatch_gpu, kernel_id, m, n, k, edge, dtype) -> None:
    from gemmlab.measure.run import run

    spec = catalogue.get(kernel_id)
    shape = Shape(m, n, k)
    try:
        p = catalogue.point(kernel_id, shape, edge, dtype)
    except ConstraintError as exc:
        text = str(exc)
        assert kernel_id in text and "cannot run" in text
        with pytest.raises(ConstraintError):
            run(kernel_id, shape, edge, dtype)  # raises before the GPU is asked for
        return
    # Accepted: every stated constraint holds, and the grid fits the hardware.
    assert not spec.violations(shape, p.block_edge, p.dtype)
    assert all(v <= 2**31 - 1 for v in p.grid[:1]) and all(v <= 65535 for v in p.grid[1:])
    assert p.spec.threads_per_block(shape, p.block_edge) <= 1024


# A name ending in .cu, .toml or .py (or naming a file) is read as the path of
# a user's kernel, whose refusal is a DeclarationError (tests/test_user_kernels.py).
KNOWN = {*catalogue.kernel_ids(), *catalogue.candidate_ids()}


@given(name=st.text(min_size=1, max_size=12).filter(lambda s: s not in KNOWN and not catalogue.is_file_name(s)))
def test_unknown_kernel_names(name: str) -> None:
    with pytest.raises(UnknownName):
        catalogue.get(name)


@pytest.fixture
def monkeypatch_gpu():
    """Make any attempt to reach the GPU fail the test loudly."""
    mp = pytest.MonkeyPatch()

    def touched():
        raise AssertionError("the GPU was asked for before the constraints were checked")

    mp.setattr(gpu, "_cupy", touched)
    yield
    mp.undo()
