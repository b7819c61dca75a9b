"""Verification that is hard to fool, without a GPU: the guard bands' logic,
the poison's explanation, the precision judgment on synthetic results (NumPy
stands in for CuPy: these functions take the array module), and the faulty,
16-bit and alpha/beta examples read and compile."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from gemmlab.backends.nvrtc import compile_kernel
from gemmlab.core.dtypes import SAME_TYPE_C_TOLERANCE, TOLERANCE
from gemmlab.core.errors import DeclarationError, VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue, user
from gemmlab.problems import base
from gemmlab.problems.matmul import rounded_input_products

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
FAULTY = ("oob_write", "lower_precision", "accumulate_into_c", "missing_sync", "cached_answer")
NEW_EXAMPLES = ("half_naive", "gemm_alpha_beta", "wmma_half")


def guarded(shape: tuple[int, int], dtype: str = "float32") -> base.Guarded:
    guard = base.guarded_empty(np, shape, dtype)
    guard.inner[...] = 1  # what a kernel writes inside
    return guard


def test_untouched_bands_are_clean() -> None:
    assert guarded((100, 70)).damage(np) is None


def test_a_write_one_row_past_the_end_is_named() -> None:
    guard = guarded((100, 70))
    guard.whole[guard.band + 100 * 70 + 3 : guard.band + 100 * 70 + 70] = 0.0  # row 100, from column 3
    found = guard.damage(np)
    assert (
        found
        == "wrote 67 elements outside C: 67 after its end, the first at offset +3 (row 0 past the last row, column 3)"
    )


def test_a_write_before_the_start_is_named_by_the_nearest_offset() -> None:
    guard = guarded((10, 10), "int32")
    guard.whole[guard.band - 5] = 7
    guard.whole[guard.band - 2] = 7
    guard.whole[-1] = 7  # and the very last element of the band after
    found = guard.damage(np)
    assert found is not None and found.startswith("wrote 3 elements outside C")
    assert "2 before its start, the nearest at offset -2" in found and "1 after its end" in found


@pytest.mark.parametrize("dtype", ["float32", "float16", "uint16", "int32", "float64"])
@pytest.mark.parametrize("cols", [1, 7, 100, 1000, 5000, 100_000])
def test_a_band_covers_a_row_and_keeps_the_inside_aligned(dtype: str, cols: int) -> None:
    """The inside starts ALIGN bytes into the allocation or a multiple of it, so
    TMA (16 B), cp.async (16 B) and vector loads see the alignment they would
    have without bands; the band holds a whole row up to MAX_GUARD_BYTES."""
    guard = base.guarded_empty(np, (3, cols), dtype)
    offset = guard.inner.ctypes.data - guard.whole.ctypes.data
    item = np.dtype(dtype).itemsize
    assert offset == guard.band * item and offset % base.ALIGN == 0
    assert guard.band * item >= min(max(cols * item, base.GUARD_BYTES), base.MAX_GUARD_BYTES)
    assert guard.inner.shape == (3, cols) and np.shares_memory(guard.inner, guard.whole)
    assert base.guard_bytes(cols * item) == 2 * guard.band * item


def test_a_vector_output_is_named_without_rows() -> None:
    guard = base.guarded_empty(np, (1, 5000), "float32", "c")
    guard.whole[guard.band + 5000] = 0.0
    assert guard.damage(np) == "wrote 1 element outside c: 1 after its end, the first at offset +0"


def test_poison_left_names_nan_and_integer_poison() -> None:
    out = np.ones((4, 4), np.float32)
    assert base.poison_left(np, out) is None
    out[0, :3] = np.nan
    found = base.poison_left(np, out)
    assert found is not None and found.startswith("3 of 16 elements of C are NaN") and "C[i] += ..." in found
    ints = np.zeros((2, 2), np.int32)
    ints[1, 1] = base.poison_value(np, np.int32)
    assert base.poison_left(np, ints, "the output").startswith("1 of 4 elements of the output are the poison value")


def _inputs(m: int, k: int, n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


def _judge(out: np.ndarray, a: np.ndarray, b: np.ndarray, ref: np.ndarray) -> str | None:
    return base.lower_precision(np, out, ref, TOLERANCE["float32"], lambda: rounded_input_products(np, a, b))


@pytest.mark.parametrize("k", [16, 4096, 16384])
def test_float32_accumulation_in_order_passes_with_margin(k: int) -> None:
    """A sum of K float32 products added one by one (the FFMA loop of a naive
    kernel, the worst order) stays under a third of float32's tolerance at
    K = 16384, and four such partial sums added (split-K) as well."""
    a, b, ref = _inputs(6, k, 5)
    products = a[:, :, None] * b[None, :, :]  # float32, rounded like FMUL
    in_order = np.cumsum(products, axis=1, dtype=np.float32)[:, -1, :]
    parts = [np.cumsum(p, axis=1, dtype=np.float32)[:, -1, :] for p in np.array_split(products, 4, axis=1)]
    split_k = ((parts[0] + parts[1]) + parts[2]) + parts[3]
    for out in (in_order, split_k):
        error = base.relative_error(np, out, ref)
        assert error < TOLERANCE["float32"] / 3, (k, error)
        assert _judge(out, a, b, ref) is None


@pytest.mark.parametrize(("dtype", "named"), [("float16", "float16"), ("bfloat16", "bfloat16")])
def test_inputs_rounded_to_16_bits_are_called_lower_precision(dtype: str, named: str) -> None:
    a, b, ref = _inputs(64, 256, 48)
    out = base.rounded(np, a, dtype) @ base.rounded(np, b, dtype)  # float32 sums of 16-bit values
    error = base.relative_error(np, out, ref)
    assert error > 10 * TOLERANCE["float32"]
    found = _judge(out, a, b, ref)
    assert found is not None and "computes at lower precision than float32" in found
    assert f"it looks like {named} arithmetic" in found


def test_products_rounded_to_half_as_well_are_called_float16() -> None:
    """The faulty example's arithmetic: inputs and each product in __half, the sum in float."""
    a, b, ref = _inputs(32, 512, 32)
    half = lambda x: x.astype(np.float16)
    products = (half(a)[:, :, None] * half(b)[None, :, :]).astype(np.float16).astype(np.float32)
    found = _judge(products.sum(axis=1, dtype=np.float32), a, b, ref)
    assert found is not None and "float16 arithmetic" in found


def test_a_sum_kept_in_half_is_called_lower_precision() -> None:
    """Inputs, products and the running sum in __half (at K = 256, where the
    sum's own rounding already outweighs the inputs')."""
    a, b, ref = _inputs(8, 256, 8)
    products = a.astype(np.float16)[:, :, None] * b.astype(np.float16)[None, :, :]
    out = np.cumsum(products, axis=1, dtype=np.float16)[:, -1, :].astype(np.float32)
    found = _judge(out, a, b, ref)
    assert found is not None and "lower precision than float32" in found


def test_bugs_are_not_called_lower_precision() -> None:
    """Order-1 errors (a wrong index), a few wrong elements, and a float32
    result just over its tolerance are wrong results, not lower precision."""
    a, b, ref = _inputs(64, 64, 64)
    good = (a @ b).astype(np.float32)
    assert _judge(a.T @ b, a, b, ref) is None
    few = good.copy()
    few[3, :5] += 0.5
    assert base.relative_error(np, few, ref) > TOLERANCE["float32"] and _judge(few, a, b, ref) is None
    noisy = good * (1 + 2e-5 * np.random.default_rng(2).standard_normal(good.shape))
    assert base.relative_error(np, noisy, ref) > TOLERANCE["float32"] and _judge(noisy, a, b, ref) is None
    assert _judge(np.full_like(good, np.nan), a, b, ref) is None  # NaN is the poison's to explain
    # Systematic errors on every element, under the ceiling: 5% too large, or
    # beta*C forgotten (4% of C at K = 1024).
    assert _judge(good * 1.05, a, b, ref) is None
    a, b, ref = _inputs(32, 1024, 32)
    beta_c = 0.75 * np.random.default_rng(4).uniform(-1, 1, ref.shape)
    assert 0.01 < base.relative_error(np, a @ b, ref + beta_c) < base.LOW_PRECISION_CEILING
    products = lambda: rounded_input_products(np, a, b, 1.0, beta_c)
    assert base.lower_precision(np, a @ b, ref + beta_c, TOLERANCE["float32"], products) is None


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_16_bit_c_rounded_once_passes_its_tolerance_with_margin(dtype: str) -> None:
    """A user's float16/bfloat16 kernel that sums in float and rounds C once
    errs by that rounding: under half of SAME_TYPE_C_TOLERANCE."""
    rng = np.random.default_rng(3)
    a, b = (base.rounded(np, rng.uniform(-1, 1, s).astype(np.float32), dtype) for s in ((48, 512), (512, 40)))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = base.rounded(np, (a @ b).astype(np.float32), dtype)
    assert base.relative_error(np, out, ref) < SAME_TYPE_C_TOLERANCE[dtype] / 2


def test_bfloat16_storage_round_trips() -> None:
    x = np.array([[1.0, -0.5, 0.1]], np.float32)
    bits = base.random_matrix(np, np.random.default_rng(0), 2, 3, "bfloat16")
    assert bits.dtype == np.uint16 and base.storage(np, "bfloat16") == np.uint16
    assert np.allclose(base.values(np, base.bf16_bits(np, x), "bfloat16"), x, rtol=2**-8)


@pytest.mark.parametrize("example", [*(f"faulty/{f}" for f in FAULTY), *NEW_EXAMPLES])
def test_the_new_examples_read_and_compile_for_sm_90(example: str) -> None:
    spec = catalogue.get(str(EXAMPLES / example / "matmul.toml"))
    assert spec.id == f"{Path(example).name}/matmul" and spec.summary
    for dtype in spec.dtypes:
        res = compile_kernel(spec, (spec.block_edges or (0,))[0], dtype, "sm_90").resources
        assert res.registers > 0 and res.spill_bytes == 0, (spec.id, dtype)


def test_a_16_bit_template_gets_the_cuda_types() -> None:
    spec = catalogue.get(str(EXAMPLES / "half_naive" / "matmul.toml"))
    assert spec.dtypes == ("float16", "bfloat16")
    assert spec.name_expression("float16", 16) == "matmul_half<__half>"
    assert spec.name_expression("bfloat16", 16) == "matmul_half<__nv_bfloat16>"


def test_alpha_and_beta_are_named_arguments() -> None:
    spec = catalogue.get(str(EXAMPLES / "gemm_alpha_beta" / "matmul.toml"))
    assert spec.arguments == ("M", "N", "K", "alpha", "A", "B", "beta", "C")


GEMM = """\
extern "C" __global__ void gemm(const float *A, const float *B, float *C, int n, {scalars})
{{
    C[0] = A[0] * B[0] + n;
}}
"""


def _gemm(tmp_path: Path, scalars: str, arguments: str, dtypes: str = '["float32"]') -> Path:
    (tmp_path / "gemm.cu").write_text(GEMM.format(scalars=scalars))
    path = tmp_path / "gemm.toml"
    path.write_text(
        f'function = "gemm"\nproblem = "matmul"\ndtypes = {dtypes}\narguments = {arguments}\n'
        'grid = ["1"]\nblock = ["1"]\n'
    )
    return path


BOTH = '["A", "B", "C", "n", "alpha", "beta"]'
FLOATS = "float alpha, float beta"


@pytest.mark.parametrize(
    ("scalars", "arguments", "dtypes", "words"),
    [
        (FLOATS, BOTH, '["float32"]', None),
        (FLOATS, BOTH, '["float16"]', None),
        ("int alpha, int beta", BOTH, '["int32"]', None),
        (FLOATS, '["A", "B", "C", "n", "alpha", "gamma"]', '["float32"]', ["unknown argument name 'gamma'"]),
        ("float alpha", '["A", "B", "C", "n", "alpha"]', '["float32"]', ["alpha without beta", "Take both"]),
        ("double alpha, double beta", BOTH, '["float32"]', ["as a float", "`double alpha`", "`float alpha`"]),
        (FLOATS, BOTH, '["int32"]', ["passes alpha as an int"]),
        ("const float *alpha, float beta", BOTH, '["float32"]', ["passes alpha as a float"]),
        (FLOATS, BOTH, '["float64"]', ["'float64' is not an element type", "float16 or bfloat16"]),
    ],
)
def test_scalar_and_dtype_declarations(tmp_path: Path, scalars: str, arguments: str, dtypes: str, words) -> None:
    path = _gemm(tmp_path, scalars, arguments, dtypes)
    if words is None:
        spec = user.load(path)
        assert "alpha" in spec.arguments and "beta" in spec.arguments
        return
    with pytest.raises(DeclarationError) as caught:
        user.load(path)
    text = f"{caught.value.cause} {caught.value.fix}"
    assert all(w in text for w in words), text


def test_no_bands_under_the_sanitizer(monkeypatch: pytest.MonkeyPatch) -> None:
    """`gemmlab check` turns the bands off in its child, so that memcheck sees C's true edges."""
    monkeypatch.setenv(base.NO_BANDS_VARIABLE, "0")
    guard = base.guarded_empty(np, (4, 5), "float32")
    guard.inner[...] = 1
    assert not (guard.whole.view(np.uint8) == base.CANARY).any()
    assert guard.band == 0 and guard.whole.size == 20 and guard.damage(np) is None


# The problems' prepare, poison, redraw and explain run here on NumPy through a
# stand-in for the part of CuPy they use: arrays with a ``.data.ptr``, and a
# cuBLAS handle that is never called (the baselines are only built).
class _DeviceArray(np.ndarray):
    @property
    def data(self) -> SimpleNamespace:  # type: ignore[override]
        return SimpleNamespace(ptr=self.__array_interface__["data"][0])

    def get(self):
        return np.asarray(self)


def _device(x):
    return x.view(_DeviceArray) if isinstance(x, np.ndarray) else x


class _NumPyAsCuPy:
    cuda = SimpleNamespace(device=SimpleNamespace(get_cublas_handle=lambda: 0))

    def __getattr__(self, name: str):
        found = getattr(np, name)
        if callable(found) and not isinstance(found, type):
            return lambda *args, **kwargs: _device(found(*args, **kwargs))
        return found

    def dtype(self, dtype):
        return np.dtype(dtype)

    def RawKernel(self, source: str, name: str):  # CuPy's name
        """The stack's copy kernel (measure/stack.py), on host memory: a table
        of (destination, source) addresses and one length."""
        assert name == "gemmlab_copy_table"

        def copy(grid, block, args):
            dst, src, size = args
            for d, s in zip(np.asarray(dst).tolist(), np.asarray(src).tolist(), strict=True):
                ctypes.memmove(d, s, int(size))

        return copy

    def matmul(self, a, b, out=None):
        if out is None:
            return _device(np.asarray(a) @ np.asarray(b))
        out[...] = np.asarray(a) @ np.asarray(b)
        return out


class _Rng:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def uniform(self, low, high, size):
        return _device(self.rng.uniform(low, high, size))

    def integers(self, low, high, size, dtype):
        return _device(self.rng.integers(low, high, size=size, dtype=dtype))

    def standard_normal(self, size, dtype):
        return _device(self.rng.standard_normal(size=size, dtype=dtype))

    def random(self, size, dtype):
        return _device(self.rng.random(size=size, dtype=dtype))


@pytest.fixture
def fake_cp(monkeypatch: pytest.MonkeyPatch) -> _NumPyAsCuPy:
    import cupy_backends.cuda.libs as libs

    cublas = SimpleNamespace(CUBLAS_COMPUTE_32F=68, CUBLAS_COMPUTE_32F_FAST_TF32=77)
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs.cublas", cublas)
    monkeypatch.setitem(libs.__dict__, "cublas", cublas)  # not setattr: the module's __getattr__ would load cuBLAS
    return _NumPyAsCuPy()


def _prepared(cp, kernel: str, shape, edge, dtype: str):
    spec = catalogue.get(str(EXAMPLES / kernel / "matmul.toml")) if "/" in kernel or kernel in NEW_EXAMPLES else None
    point = catalogue.point(spec.id if spec else kernel, shape, edge, dtype, spec=spec)
    return point.spec.problem.prepare(cp, point, _Rng(1)), point


def _kernel(prepared, dtype: str, arithmetic: str = "float32") -> None:
    """What a kernel computes into C, with its inputs rounded to ``arithmetic`` first."""
    a, b, c = prepared.buffers[:3]
    inputs = [base.values(np, np.asarray(x), dtype).astype(np.float32) for x in (a, b)]
    if arithmetic != "float32":
        inputs = [base.rounded(np, x, arithmetic) for x in inputs]
    result = inputs[0] @ inputs[1]
    if "beta" in prepared.named:
        old = base.values(np, np.asarray(c), dtype).astype(np.float32)
        result = prepared.named["alpha"] * result + prepared.named["beta"] * old
    c[...] = base.bf16_bits(np, result) if dtype == "bfloat16" else result.astype(c.dtype)


CASES = [
    ("tiled_any_size", 16, "float32"),
    ("half_naive", 16, "float16"),
    ("half_naive", 16, "bfloat16"),
    ("gemm_alpha_beta", 16, "float32"),
]


@pytest.mark.parametrize(("kernel", "edge", "dtype"), CASES)
def test_a_matmul_is_poisoned_checked_and_redrawn(fake_cp, kernel: str, edge: int, dtype: str) -> None:
    from gemmlab.measure.run import _checked

    prepared, point = _prepared(fake_cp, kernel, Shape(48, 40, 56), edge, dtype)
    tolerance = prepared.tolerance if prepared.tolerance is not None else TOLERANCE[dtype]
    prepared.poison()
    if "beta" in prepared.named:  # C is an input: refilled with C0, not poisoned
        assert not np.isnan(np.asarray(prepared.buffers[2])).any()
    else:
        assert "elements of C are NaN" in prepared.explain()
    _kernel(prepared, dtype)
    assert _checked(fake_cp, prepared, tolerance, point, "first launch") <= tolerance
    first = np.asarray(prepared.buffers[2]).copy()
    prepared.redraw()
    prepared.poison()
    np.asarray(prepared.buffers[2])[...] = first  # the answer to the first inputs, again
    with pytest.raises(VerificationError, match="ignores its inputs or returns an answer it computed before"):
        _checked(fake_cp, prepared, tolerance, point, "after timing", (float(first.astype(np.float64).sum()),))
    prepared.poison()
    _kernel(prepared, dtype)
    assert _checked(fake_cp, prepared, tolerance, point, "after timing") <= tolerance


@pytest.mark.parametrize("kernel", ["tiled_any_size", "gemm_alpha_beta"])
def test_a_float32_matmul_in_half_is_refused_as_lower_precision(fake_cp, kernel: str) -> None:
    from gemmlab.measure.run import _checked

    prepared, point = _prepared(fake_cp, kernel, Shape(48, 40, 56), 16, "float32")
    prepared.poison()
    _kernel(prepared, "float32", "float16")
    with pytest.raises(VerificationError, match=r"computes at lower precision than float32.*float16 arithmetic"):
        _checked(fake_cp, prepared, TOLERANCE["float32"], point, "first launch")


def test_a_write_past_c_is_refused_before_the_result_is_looked_at(fake_cp) -> None:
    from gemmlab.measure.run import _checked

    prepared, point = _prepared(fake_cp, "tiled_any_size", Shape(48, 40, 56), 16, "float32")
    _kernel(prepared, "float32")
    guard = prepared.guards[0]
    guard.whole[guard.band + 48 * 40 + 5] = 0.0
    with pytest.raises(VerificationError, match=r"wrote 1 element outside C: 1 after its end, the first at offset \+5"):
        _checked(fake_cp, prepared, TOLERANCE["float32"], point, "first launch")


@pytest.mark.parametrize(
    ("kernel", "shape", "edge", "dtype"),
    [
        ("sgemm_multistage", Shape(127, 129, 131), None, "float32"),
        ("tc_wmma", Shape(64, 64, 64), None, "bfloat16"),
        ("transpose_tiled", Shape(100, 70, 1), 32, "float32"),
        ("vecadd", Shape(1, 1000, 1), None, "float32"),
    ],
)
def test_every_problem_guards_its_output_and_redraws_in_place(fake_cp, kernel, shape, edge, dtype) -> None:
    prepared, _point = _prepared(fake_cp, kernel, shape, edge, dtype)
    inputs = [np.asarray(x).copy() for x in prepared.buffers[:1]]
    prepared.poison()
    assert prepared.guards and prepared.guards[0].damage(np) is None
    assert "are NaN" in prepared.explain()
    prepared.redraw()
    assert not np.array_equal(np.asarray(prepared.buffers[0]), inputs[0])


# Every timed launch is checked through a float64 sketch of the product
# (problems/base.py: Sketch) after the inputs are renewed in place; these are
# the cases per problem: a correct C passes, the answer for the inputs before
# the renewal fails, a C with one element left unwritten fails, a float32 C
# computed in half precision fails.
SKETCHED = [
    ("tiled_any_size", Shape(48, 40, 56), 16, "float32"),
    ("gemm_alpha_beta", Shape(48, 40, 56), 16, "float32"),
    ("half_naive", Shape(48, 40, 56), 16, "bfloat16"),
    ("naive_i32", Shape(48, 48, 48), 16, "int32"),
    ("sgemm_multistage", Shape(127, 129, 131), None, "float32"),
    ("tc_wmma", Shape(64, 64, 64), None, "bfloat16"),
    ("tc_int8_mma", Shape(64, 64, 64), None, "int8"),
    ("tc_fp8_mma", Shape(64, 64, 128), None, "e4m3"),
]


def _correct(prepared) -> None:
    """C for the inputs as they are now, from the full reference."""
    prepared.reference()
    ref = np.asarray(_ref_of(prepared))
    guard = prepared.guards[0]
    out = guard.inner
    if out.dtype == np.uint16:  # a bfloat16 C
        out[...] = base.bf16_bits(np, ref.astype(np.float32))
    else:
        out[...] = ref.astype(out.dtype)


def _ref_of(prepared):
    return next(b for b in prepared.buffers if b.dtype in (np.float64, np.int64) and b.ndim == 2)


@pytest.mark.parametrize(("kernel", "shape", "edge", "dtype"), SKETCHED)
def test_a_renewed_set_checks_every_timed_launch_through_the_sketch(fake_cp, kernel, shape, edge, dtype) -> None:
    prepared, point = _prepared(fake_cp, kernel, shape, edge, dtype)
    tolerance = prepared.tolerance if prepared.tolerance is not None else TOLERANCE[dtype]
    inputs = np.asarray(prepared.buffers[0]).copy()
    prepared.renew()
    assert not np.array_equal(np.asarray(prepared.buffers[0]), inputs)
    prepared.poison()
    assert not prepared.sample_error() <= tolerance  # the poison (NaN, or the integer poison) fails
    _correct(prepared)
    assert prepared.sample_error() <= tolerance
    stale = np.asarray(prepared.guards[0].inner).copy()
    prepared.renew()
    prepared.poison()
    prepared.guards[0].inner[...] = stale  # the answer to the inputs before the renewal
    assert not prepared.sample_error() <= tolerance
    _correct(prepared)
    out = prepared.guards[0].inner
    flat = out.reshape(-1)
    if out.dtype.kind in "iu" and out.dtype != np.uint16:
        flat[flat.size // 2] += 1
    else:  # the largest element negated (a bfloat16 C through its bits)
        value = base.values(np, flat, "bfloat16" if out.dtype == np.uint16 else "float32").astype(np.float32)
        i = int(np.argmax(np.abs(value)))
        flat[i] = base.bf16_bits(np, -value[i : i + 1])[0] if out.dtype == np.uint16 else -value[i]
    assert not prepared.sample_error() <= tolerance  # one element wrong
    if dtype == "float32" and "beta" not in prepared.named and point.spec.problem.name == "matmul":
        a, b = (base.rounded(np, np.asarray(x), "float16") for x in prepared.buffers[:2])
        out[...] = a @ b
        assert not prepared.sample_error() <= tolerance  # half-precision arithmetic


@pytest.mark.parametrize(("kernel", "shape", "edge", "dtype"), SKETCHED[:7])
def test_a_stack_of_sets_is_renewed_and_checked_together(fake_cp, kernel, shape, edge, dtype) -> None:
    """measure/stack.py: the sets of a batch of short launches renewed, poisoned
    and checked in a few operations over all of them, with the same verdicts
    as set by set."""
    from gemmlab.measure.stack import Stacked

    sets = [_prepared(fake_cp, kernel, shape, edge, dtype)[0] for _ in range(4)]
    tolerance = sets[0].tolerance if sets[0].tolerance is not None else TOLERANCE[dtype]
    before = [np.asarray(p.buffers[0]).copy() for p in sets]
    stacked = Stacked(fake_cp, sets, np.random.default_rng(5))
    stacked.renew(poison=True)
    assert all(not np.array_equal(np.asarray(p.buffers[0]), old) for p, old in zip(sets, before, strict=True))
    assert len({np.asarray(p.buffers[0]).tobytes() for p in sets}) == 4  # every set its own inputs
    assert not any(e <= tolerance for e in stacked.errors())  # poisoned (or C0, for alpha/beta: not the answer)
    for p in sets:
        _correct(p)
    assert all(e <= tolerance for e in stacked.errors()) and stacked.damaged() == [False] * 4
    out = sets[2].guards[0].inner
    out.reshape(-1)[0] = out.reshape(-1)[5]  # one element of set 3 wrong
    guard = sets[1].guards[0]
    guard.whole.view(np.uint8)[-1] = 0  # a write into set 2's band after C
    errors = stacked.errors()
    assert [e <= tolerance for e in errors] == [True, True, False, True]
    assert stacked.damaged() == [False, True, False, False]
