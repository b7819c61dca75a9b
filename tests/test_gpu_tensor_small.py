"""tc_small and tc_gemv's software pipeline (issue 21, third round) on the
GPU, in both output types (float32 and bfloat16 C): every tc_small
configuration once at a ragged shape; the awkward cases (slices with no
k-tile, a cluster of 8, the suite's few-tile shapes, odd N); the clusters'
slice-ordered sums the same bits launch after launch; tc_gemv where its
pipeline's first and last batches are cut by K.

Run: PYTHONPATH=src python -m pytest -q -p no:cacheprovider tests/test_gpu_tensor_small.py
"""

from __future__ import annotations

import pytest

from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from test_gpu_tensor_shapes import _bound, _on_hopper

pytestmark = pytest.mark.gpu

DTYPES = ("bfloat16", "bfloat16-out")


def _verifies(kernel_id: str, config: dict, shape: Shape, dtype: str) -> None:
    from gemmlab.measure.run import run

    result = run(kernel_id, shape, dtype=dtype, reps=1, warmup=1, baseline=False,
                 spec=catalogue.variant(kernel_id, config))  # fmt: skip
    assert 0 <= result.error <= result.tolerance, (config, shape, dtype)


@pytest.mark.parametrize("config", catalogue.configs("tc_small"), ids=str)
def test_every_small_configuration_verifies(config: dict) -> None:
    _on_hopper("tc_small")
    for dtype in DTYPES:
        _verifies("tc_small", config, Shape(200, 300, 1000), dtype)  # ragged tiles; K not a multiple of 64


AWKWARD = [
    ({"BN": 64, "SPLITS": 4}, Shape(1, 8, 8)),  # one k-tile: slices 0 to 2 of 4 are empty
    ({"BN": 64, "SPLITS": 8}, Shape(129, 257, 200)),  # 4 k-tiles in a cluster of 8
    ({"BN": 64, "SPLITS": 2}, Shape.square(512)),  # the suite's small square
    ({"BM": 128, "BN": 64, "SPLITS": 4}, Shape(128, 4096, 4096)),  # the suite's few-tile shape
    ({}, Shape(1000, 1003, 1000)),  # odd N: C's rows not whole 8 bytes
    # Pairs of row tiles sharing B by multicast (PAIR = 2):
    ({"BN": 128, "SPLITS": 2, "STAGES": 8, "PAIR": 2}, Shape(4096, 128, 4096)),  # the suite's shape, 32 pairs
    ({"BN": 64, "SPLITS": 2, "PAIR": 2}, Shape(64, 300, 1000)),  # one row tile: its partner lies past M
    ({"BM": 128, "BN": 64, "STAGES": 8, "PAIR": 2}, Shape(300, 200, 520)),  # three row tiles: two pairs
    ({"BM": 128, "PAIR": 2}, Shape(1, 8, 8)),  # one k-tile, one row
    ({"BN": 64, "SPLITS": 4, "PAIR": 2}, Shape(129, 257, 200)),  # clusters of 8: 2 rows x 4 slices
    # Pairs of column tiles sharing A by multicast (PAIR_COLS = 2):
    ({"BM": 128, "BN": 64, "STAGES": 8, "PAIR_COLS": 2}, Shape(1000, 1000, 1000)),  # the suite's misaligned square
    ({"BM": 128, "PAIR_COLS": 2}, Shape(300, 200, 520)),  # two column tiles: one pair, the second crossing N
    ({"BN": 128, "STAGES": 8, "PAIR_COLS": 2}, Shape(70, 129, 72)),  # three column tiles: the last pair's second past N
    ({"BM": 128, "BN": 64, "PAIR_COLS": 2}, Shape(8, 1, 8)),  # one k-tile, one column
]
CASES = [(c, s, d) for c, s in AWKWARD for d in DTYPES]


@pytest.mark.parametrize(("config", "shape", "dtype"), CASES, ids=[f"{c}-{s}-{d}" for c, s, d in CASES])
def test_small_awkward_shapes(config: dict, shape: Shape, dtype: str) -> None:
    _on_hopper("tc_small")
    _verifies("tc_small", config, shape, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("config", "shape"), [({"BN": 64, "SPLITS": 4}, Shape(300, 200, 1000)),
                                               ({"BM": 128, "SPLITS": 2}, Shape(260, 390, 520)),
                                               ({"BN": 64, "SPLITS": 2, "PAIR": 2}, Shape(300, 200, 1000))],
                         ids=str)  # fmt: skip
def test_small_split_sums_are_the_same_bits_every_launch(config: dict, shape: Shape, dtype: str) -> None:
    """Whichever block of a cluster finishes first, each adds its share of
    the partials in slice order: C must not change from launch to launch."""
    _on_hopper("tc_small")
    _cp, prepared, launch = _bound("tc_small", shape, dtype, seed=5, config=config)
    c = prepared.buffers[2]
    first = None
    for i in range(5):
        prepared.poison()
        launch(prepared.args)
        assert prepared.error() < 1e-2, i
        if first is None:
            first = c.copy()
        else:
            assert bool((c == first).all()), f"launch {i} gave other bits"


GEMV = [
    Shape(16, 1001, 4104),  # K's last batch part full (4104 = 16 blocks of 32 x 8 warps x 2 + 8)
    Shape(3, 5000, 8),  # one 32-deep block: the prefetched batch is all past K
    Shape(4095, 13, 2056),  # N the small side: A streamed, C stored transposed back
]
GEMV_CASES = [(s, d) for s in GEMV for d in DTYPES]


@pytest.mark.parametrize(("shape", "dtype"), GEMV_CASES, ids=[f"{s}-{d}" for s, d in GEMV_CASES])
def test_gemv_pipeline_edges(shape: Shape, dtype: str) -> None:
    _on_hopper("tc_gemv")
    _verifies("tc_gemv", {}, shape, dtype)
