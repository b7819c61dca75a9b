"""The dispatcher on the GPU: a tiny tuning (three small shapes, two rungs
per element type, one configuration each) stores a verified pick per shape
with both sides' timing methods, and gemmlab.matmul gives right answers on
tuned, nearby and untuned shapes of each element type, compiling each kernel
once; gemmlab.Matmul, bound once, multiplies what its arrays hold at each run;
and the distributed ladder's local GEMM on torch tensors keeps a plan per
pair of buffers."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemmlab.core.shapes import Shape

pytestmark = pytest.mark.gpu

SHAPES = (Shape.square(256), Shape(16, 512, 512), Shape(512, 384, 1024))
RUNGS = ("sgemm_multistage", "sgemm_padded_b", "tc_mma_pipeline", "tc_wgmma")
SHORT = ("CUDA graph of 50 launches", "50 back-to-back launches")


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from gemmlab.store.store import Store
    from gemmlab.studies import dispatch_tuning as tuning
    from gemmlab.studies.suite import load_suite

    folder = tmp_path_factory.mktemp("dispatch")
    suite_file = folder / "tiny.toml"
    shapes = ", ".join(f"[{s.m}, {s.n}, {s.k}]" for s in SHAPES)
    suite_file.write_text(
        f'dtypes = ["float32", "bfloat16"]\n[[group]]\nname = "tiny"\nshapes = [{shapes}]\nreps = 10\n'
    )
    db = folder / "picks.sqlite"
    with Store.open(db) as store:
        summary = tuning.tune_suite(load_suite("full", suite_file), store, per_rung=1, rungs=RUNGS)
    assert not summary.rejected and not summary.failed and not summary.unfilled, summary.lines()
    return db


def test_the_tuner_stores_a_verified_pick_per_shape_and_dtype(tuned: Path) -> None:
    from gemmlab.store.store import Store
    from gemmlab.studies.candidates import current_device

    with Store.open(tuned, readonly=True) as store:
        picks = store.picks(current_device()[0])
    assert {(p.dtype, p.shape) for p in picks} == {(dtype, s) for dtype in ("float32", "bfloat16") for s in SHAPES}
    for p in picks:
        assert p.verified and p.kernel in RUNGS and p.median_ms > 0 and p.cublas_ms and p.cublas_ms > 0
        assert p.timing_method and p.cublas_timing_method
    small = [p for p in picks if p.shape == Shape.square(256)]
    # A 256 cube takes a few microseconds: both sides are timed from many launches.
    assert all(p.timing_method in SHORT and p.cublas_timing_method in SHORT for p in small), small


def _relative_error(cp, got, want) -> float:
    return float(cp.linalg.norm(got.astype(cp.float64) - want) / cp.linalg.norm(want))


@pytest.mark.parametrize(
    ("shape", "reason"),
    [(Shape.square(256), "tuned"), (Shape(512, 384, 1000), "model"), (Shape(100, 70, 33), "model")],
)
def test_matmul_float32(tuned: Path, shape: Shape, reason: str | None) -> None:
    import gemmlab
    from gemmlab.api.matmul import dispatch
    from gemmlab.core import gpu
    from gemmlab.measure import gemm

    cp = gpu.cupy()
    rng = cp.random.default_rng(7)
    a = rng.uniform(-1, 1, (shape.m, shape.k)).astype(cp.float32)
    b = rng.uniform(-1, 1, (shape.k, shape.n)).astype(cp.float32)
    c = rng.uniform(-1, 1, (shape.m, shape.n)).astype(cp.float32)
    choice, _ = dispatch(shape, "float32", tuned)
    if reason is not None:
        assert choice.reason == reason, choice
    plain = gemmlab.matmul(a, b, db=tuned)
    loaded = len(gemm._LOADED)
    scaled = gemmlab.matmul(a, b, c, alpha=1.5, beta=-0.75, db=tuned)
    assert len(gemm._LOADED) == loaded  # the second call compiled and loaded nothing
    a64, b64 = a.astype(cp.float64), b.astype(cp.float64)
    assert _relative_error(cp, plain, a64 @ b64) < 1e-5
    assert _relative_error(cp, scaled, 1.5 * (a64 @ b64) - 0.75 * c.astype(cp.float64)) < 1e-5


@pytest.mark.parametrize("shape", [Shape.square(256), Shape(192, 320, 128)])
def test_matmul_bfloat16(tuned: Path, shape: Shape) -> None:
    import gemmlab
    from gemmlab.core import gpu
    from gemmlab.problems.base import bf16_bits, bf16_value

    cp = gpu.cupy()
    rng = cp.random.default_rng(11)
    a = bf16_bits(cp, rng.uniform(-1, 1, (shape.m, shape.k)).astype(cp.float32))
    bt = bf16_bits(cp, rng.uniform(-1, 1, (shape.n, shape.k)).astype(cp.float32))  # B stored N x K
    want = bf16_value(cp, a).astype(cp.float64) @ bf16_value(cp, bt).astype(cp.float64).T
    no_copy = gemmlab.matmul(a, bt.T, db=tuned)
    copied = gemmlab.matmul(a, cp.ascontiguousarray(bt.T), db=tuned)
    assert no_copy.dtype == cp.float32 and no_copy.shape == (shape.m, shape.n)
    assert _relative_error(cp, no_copy, want) < 1e-4
    assert _relative_error(cp, copied, want) < 1e-4
    c = rng.uniform(-1, 1, (shape.m, shape.n)).astype(cp.float32)
    scaled = gemmlab.matmul(a, bt.T, c, alpha=2.0, beta=0.5, db=tuned)
    assert _relative_error(cp, scaled, 2.0 * want + 0.5 * c.astype(cp.float64)) < 1e-4


def test_matmul_bfloat16_c_on_hopper(tuned: Path) -> None:
    import gemmlab
    from gemmlab.core import gpu
    from gemmlab.problems.base import bf16_bits, bf16_value

    if gpu.describe(0).cc < (9, 0):
        pytest.skip("a bfloat16 C is stored by tc_tma_store, a Hopper rung")
    cp = gpu.cupy()
    rng = cp.random.default_rng(3)
    a = bf16_bits(cp, rng.uniform(-1, 1, (256, 512)).astype(cp.float32))
    bt = bf16_bits(cp, rng.uniform(-1, 1, (384, 512)).astype(cp.float32))
    out = gemmlab.matmul(a, bt.T, out_dtype="bfloat16", db=tuned)  # untuned here: the default rung
    want = bf16_value(cp, a).astype(cp.float64) @ bf16_value(cp, bt).astype(cp.float64).T
    assert out.dtype == cp.uint16 and _relative_error(cp, bf16_value(cp, out), want) < 4e-3


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "bfloat16-out"])
def test_bound_matmul_multiplies_what_its_arrays_hold_at_each_run(tuned: Path, dtype: str) -> None:
    import gemmlab
    from gemmlab.core import gpu
    from gemmlab.measure import gemm
    from gemmlab.problems.base import bf16_bits, bf16_value

    if dtype == "bfloat16-out" and gpu.describe(0).cc < (9, 0):
        pytest.skip("a bfloat16 C is stored by tc_tma_store, a Hopper rung")
    cp = gpu.cupy()
    rng = cp.random.default_rng(5)
    m, n, k = 256, 384, 512
    f32 = dtype == "float32"

    def draw(rows: int, cols: int):
        x = rng.uniform(-1, 1, (rows, cols)).astype(cp.float32)
        return x if f32 else bf16_bits(cp, x)

    def value(x):
        return (x if f32 or x.dtype == cp.float32 else bf16_value(cp, x)).astype(cp.float64)

    a = draw(m, k)
    b = draw(k, n) if f32 else draw(n, k)  # bfloat16: B stored N x K, given as its transpose view
    product = gemmlab.Matmul(a, b if f32 else b.T, out_dtype="bfloat16" if dtype == "bfloat16-out" else None,
                             db=tuned)  # fmt: skip
    tolerance = 1e-5 if f32 else 4e-3 if dtype == "bfloat16-out" else 1e-4
    for _ in range(2):  # new values in the same arrays: the second run multiplies those
        a[...] = draw(m, k)
        b[...] = draw(*b.shape)
        want = value(a) @ (value(b) if f32 else value(b).T)
        loaded = len(gemm._LOADED)
        out = product.run()
        assert len(gemm._LOADED) == loaded and out is product.out
        assert _relative_error(cp, value(out), want) < tolerance


def test_bound_matmul_refusals() -> None:
    import gemmlab
    from gemmlab.core import gpu
    from gemmlab.core.errors import GemmlabError

    cp = gpu.cupy()
    a = cp.zeros((64, 128), cp.uint16)
    bt = cp.zeros((96, 128), cp.uint16)
    with pytest.raises(GemmlabError, match="transpose view") as caught:
        gemmlab.Matmul(a, cp.ascontiguousarray(bt.T))  # a copy would not see later changes to B
    assert caught.value.fix
    with pytest.raises(GemmlabError, match="out must be a C-contiguous 64 x 96 float32 array; it is 64 x 64"):
        gemmlab.Matmul(a, bt.T, out=cp.zeros((64, 64), cp.float32))
    with pytest.raises(GemmlabError, match="not C-contiguous"):
        gemmlab.Matmul(a, bt.T, out=cp.zeros((96, 64), cp.float32).T)
    with pytest.raises(GemmlabError, match="uint16"):
        gemmlab.Matmul(a, bt.T, out=cp.zeros((64, 96), cp.float32), out_dtype="bfloat16")


def test_the_distributed_ladders_local_gemm_keeps_a_plan_per_pair_of_buffers() -> None:
    torch = pytest.importorskip("torch")
    from gemmlab.api.distributed import GemmlabGemm

    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    g = torch.Generator(device="cuda").manual_seed(1)
    pairs = [(torch.randn(256, 512, device="cuda", generator=g).bfloat16(),
              torch.randn(128 * (i + 1), 512, device="cuda", generator=g).bfloat16()) for i in range(3)]  # fmt: skip
    local = GemmlabGemm(keep=2)
    for a, bt in pairs:
        c = local(a, bt)
        want = a.double() @ bt.double().T
        assert c.dtype == torch.float32 and c.shape == (256, bt.shape[0])
        assert ((c.double() - want).norm() / want.norm()).item() < 1e-4
    assert len(local.plans) == 2  # the oldest pair's plan was let go
    a, bt = pairs[2]
    first = local(a, bt)
    a.copy_(torch.randn(a.shape, device="cuda", generator=g).bfloat16())
    again = local(a, bt)  # the same plan and C, now holding the new product
    assert again is first and len(local.plans) == 2
    want = a.double() @ bt.double().T
    assert ((again.double() - want).norm() / want.norm()).item() < 1e-4
    with pytest.raises(ValueError, match="C-contiguous"):
        local(a.T, bt)
