"""A sweep on the local Dask pool (one worker per GPU, gemmlab.studies.scale) on a real GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemmlab.core.shapes import Shape
from gemmlab.store.store import Store

pytestmark = pytest.mark.gpu
pytest.importorskip("distributed", reason="the scale extra (distributed) is not installed")

FIELDS = ("kernel", "m", "n", "k", "block_edge", "dtype", "variant", "backend", "gpu_name")


def test_a_gpu_sweep_on_one_worker_per_gpu_stores_what_the_sequential_one_does(tmp_path: Path) -> None:
    from gemmlab.core import gpu
    from gemmlab.studies.points import plan
    from gemmlab.studies.scale import Pool
    from gemmlab.studies.sweep import sweep

    points, refused = plan(["tiled", "cpu_blas"], [Shape.square(n) for n in (128, 256)], [16], "float32", reps=5)
    assert len(points) == 4 and not refused
    stored = {}
    with Pool() as pool:
        assert pool.workers == gpu.device_count()
        assert pool.describe().startswith(f"local Dask cluster: {gpu.device_count()} worker")
        for name, on in (("here", None), ("pool", pool)):
            with Store.open(tmp_path / f"{name}.sqlite") as store:
                summary = sweep(points, store, progress=False, max_seconds=0.2, pool=on)
                assert len(summary.done) == 4 and not summary.failed, summary.failed
                rows = store.rows(None)
            assert all(r["error"] <= r["tolerance"] and r["gflops"] > 0 for r in rows)
            stored[name] = {tuple(r[f] for f in FIELDS) for r in rows}
    assert stored["pool"] == stored["here"] and len(stored["here"]) == 4
