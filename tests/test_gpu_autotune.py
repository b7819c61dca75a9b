"""Autotuning on first call on the GPU (issue 50): gemmlab.matmul with
autotune=True on a shape nobody tuned times the model's best candidates,
stores the fastest verified one, gives the right product, and a second call
runs the stored pick without timing anything."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu


def test_a_first_call_autotunes_and_the_second_reads_the_pick(tmp_path: Path) -> None:
    import gemmlab
    from gemmlab.api import matmul
    from gemmlab.core import gpu
    from gemmlab.core.shapes import Shape
    from gemmlab.store.store import Store
    from gemmlab.studies import autotune, dispatch

    cp = gpu.cupy()
    shape = Shape(300, 40, 1000)  # in no suite and no shipped table
    rng = cp.random.default_rng(50)
    a = rng.uniform(-1, 1, (shape.m, shape.k)).astype(cp.float32)
    b = rng.uniform(-1, 1, (shape.k, shape.n)).astype(cp.float32)
    db = tmp_path / "picks.sqlite"
    matmul.clear_cache()
    c = gemmlab.matmul(a, b, db=db, autotune=True)
    want = a.astype(cp.float64) @ b.astype(cp.float64)
    assert float(cp.linalg.norm(c - want) / cp.linalg.norm(want)) < 1e-5
    with Store.open(db, readonly=True) as store:
        picks = store.picks()
        rows = store.rows(dispatch.EXPERIMENT)
    assert [(p.shape, p.dtype) for p in picks] == [(shape, "float32")] and picks[0].verified
    assert 1 <= len(rows) <= autotune.TOP
    matmul.clear_cache()
    choice, _ = matmul.dispatch(shape, "float32", db, autotune=True)
    assert choice.reason == dispatch.TUNED
    with Store.open(db, readonly=True) as store:
        assert len(store.rows(dispatch.EXPERIMENT)) == len(rows)  # nothing timed again
    matmul.clear_cache()
