"""gemmlab.Matmul with rungs that take a workspace (split-K partials and
counters, stream-K flags, sgemm_padded_b's tickets and padded B): the
workspace is zeroed once, when bound, and each run leaves it ready for the
next, as the runner launches them. Three runs, new values each time, each
checked against a float64 product."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemmlab.core.shapes import Shape

pytestmark = pytest.mark.gpu

CASES = [
    ("sgemm_split_k", {"SPLITS": 4}, Shape(64, 64, 4096)),
    ("sgemm_stream_k", {}, Shape(300, 520, 700)),
    ("sgemm_padded_b", {}, Shape(256, 250, 512)),  # N % 4 != 0: the padded B copy
    ("sgemm_gemv_split", {}, Shape(1, 4096, 4096)),
]


@pytest.mark.parametrize(("kernel", "changes", "shape"), CASES, ids=[c[0] for c in CASES])
def test_runs_reuse_a_workspace_zeroed_once(tmp_path: Path, kernel: str, changes: dict, shape: Shape) -> None:
    import gemmlab
    from gemmlab.api.matmul import clear_cache
    from gemmlab.core import gpu
    from gemmlab.kernels import catalogue
    from gemmlab.measure.gemm import device_info
    from gemmlab.store.records import Config, Pick
    from gemmlab.store.store import Store
    from gemmlab.studies import dispatch

    cp = gpu.cupy()
    config = catalogue.ladder(kernel).rung(kernel).config(changes)
    assert catalogue.variant(kernel, config).workspace_bytes is not None
    db = tmp_path / "picks.sqlite"
    info = device_info(0)
    with Store.open(db) as store:  # a pick that makes Matmul run this rung here
        store.set_pick(Pick(gpu_name=info.name, cc=f"{info.cc[0]}.{info.cc[1]}", dtype="float32", m=shape.m,
                            n=shape.n, k=shape.k, kernel=kernel, config=Config.of(config), median_ms=1.0,
                            cublas_ms=1.0, verified=True))  # fmt: skip
    clear_cache()
    rng = cp.random.default_rng(3)
    a = cp.empty((shape.m, shape.k), dtype=cp.float32)
    b = cp.empty((shape.k, shape.n), dtype=cp.float32)
    plan = gemmlab.Matmul(a, b, db=db)
    assert (plan.choice.reason, plan.choice.kernel) == (dispatch.TUNED, kernel)
    for _ in range(3):
        a[...] = rng.uniform(-1, 1, a.shape, dtype=cp.float32)
        b[...] = rng.uniform(-1, 1, b.shape, dtype=cp.float32)
        want = a.astype(cp.float64) @ b.astype(cp.float64)
        got = plan.run()
        cp.cuda.get_current_stream().synchronize()
        assert float(cp.linalg.norm(got - want) / cp.linalg.norm(want)) < 1e-5
    clear_cache()
