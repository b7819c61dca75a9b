"""Rungs 18 to 23 (issue 21) on the GPU, on the shapes they exist for and the
awkward ones: M, N or K of 1, odd sizes, K shorter than the slices (empty
slices), K not a multiple of the slice count, the K-heavy 1024 x 1024 x 16384,
M of 1 to 16 for sgemm_skinny and N of 1 to 16 for sgemm_skinny_n, in every
configuration. sgemm_split_k's
fix-up: launch after launch on one workspace, the same bits each time and the
counters back at zero. tests/test_gpu_sgemm.py runs the ladder's own checks
(every configuration at two shapes, in-place C) over these rungs too.

Run: PYTHONPATH=src python -m pytest -q -p no:cacheprovider tests/test_gpu_sgemm_shapes.py
"""

from __future__ import annotations

import numpy as np
import pytest

from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.problems.base import relative_error
from test_gpu_edge_strips import _bound

pytestmark = pytest.mark.gpu

SHAPES = {
    "sgemm_small_tile": [
        Shape(1, 1, 1),
        Shape(1, 4097, 33),  # one row, N % 4 != 0 (4-byte copies of B)
        Shape(33, 1, 70),  # one column
        Shape(511, 513, 1),  # K = 1: one partial k-tile
        Shape(65, 63, 17),  # one past and one short of the 64 x 64 tile
        Shape(1023, 1025, 64),
        Shape.square(1024),
    ],
    "sgemm_split_k": [
        Shape(1, 1, 1),  # one k-tile: slices 1 to 3 of 4 are empty
        Shape(100, 130, 17),  # 2 k-tiles of 16 in 4 slices: 2 empty
        Shape(127, 129, 131),  # 9 k-tiles: slices of 2, 2, 2, 3
        Shape(33, 65, 1000),  # K a multiple of neither the slices' k-tiles nor BK
        Shape(5, 4097, 300),  # few rows, N % 4 != 0
        Shape(1024, 1024, 16384),  # the K-heavy shape
    ],
    "sgemm_skinny": [
        Shape(1, 1, 1),
        Shape(1, 4096, 4096),  # decoding's matrix-vector product
        Shape(16, 4096, 4096),  # all 16 rows
        Shape(7, 4099, 1000),  # N % 4 != 0 (4-byte loads of B), a last strip of 3 columns
        Shape(16, 33, 1),  # K = 1: a chunk of one k-row
        Shape(3, 5, 10007),  # a long K of many chunks, the last one short
    ],
    "sgemm_skinny_n": [
        Shape(1, 1, 1),
        Shape(4096, 1, 4096),  # a matrix-vector product
        Shape(4096, 16, 4096),  # all 16 columns
        Shape(4099, 7, 1000),  # odd M (a last block of 3 rows), K a multiple of 4 but not of the chunk
        Shape(33, 16, 1),  # K = 1: A read 4 bytes at a time, one k-row
        Shape(5, 3, 10007),  # K % 4 != 0 (4-byte loads of A), a long K of many chunks, the last one short
        Shape(17, 13, 4094),  # rows of A 8-byte but not 16-byte aligned past the first
    ],
    "sgemm_cluster_split_k": [
        Shape(1, 1, 1),  # one k-tile: 7 of 8 slices empty, the tile far larger than C
        Shape(100, 130, 17),  # 2 k-tiles in 8 slices, C smaller than one tile
        Shape(127, 257, 131),  # 9 k-tiles: slices of 1 and 2; N % 4 != 0 (4-byte copies of B)
        Shape(300, 520, 1000),  # tiles crossing M and N move inside them; K not a multiple of BK
        Shape(128, 4096, 4096),  # the shape with few tiles: 16 clusters of 8
        Shape(1024, 1024, 16384),  # the K-heavy shape
    ],
    "sgemm_gemv_split": [
        Shape(1, 1, 1),  # one quad, 15 of 16 slices empty
        Shape(1, 4096, 4096),  # decoding's matrix-vector product
        Shape(1, 4099, 1000),  # N % 4 != 0 (4-byte loads of B), a last strip of 3 columns
        Shape(1, 300, 4095),  # K % 4 != 0: A read 4 bytes at a time, a last quad of 3 k-rows
        Shape(1, 129, 10007),  # a long K, slices of 156 or 157 quads
    ],
}
CASES = [(kid, s) for kid, shapes in SHAPES.items() for s in shapes]
# Every configuration of sgemm_skinny at M = ROWS and at M = 1, N % 4 != 0 and a K over one chunk.
SKINNY_CONFIGS = [
    (c, Shape(m, 1029, 777)) for c in catalogue.configs("sgemm_skinny") for m in sorted({1, c["ROWS"]})
]  # fmt: skip
# Every configuration of sgemm_skinny_n at N = COLS and N = 1, odd M, and K over one chunk and % 4 != 0.
SKINNY_N_CONFIGS = [
    (c, Shape(1029, n, k)) for c in catalogue.configs("sgemm_skinny_n") for n in sorted({1, c["COLS"]})
    for k in (777, 1024)
]  # fmt: skip
# Every configuration of sgemm_gemv_split at M = ROWS and M = 1, N % 4 != 0 and K % 4 != 0.
GEMV_CONFIGS = [
    (c, Shape(m, 1029, 777)) for c in catalogue.configs("sgemm_gemv_split") for m in sorted({1, c["ROWS"]})
]  # fmt: skip
# sgemm_split_k's fix-up on one workspace, launch after launch: the default, the deepest split
# with mostly empty slices, and the 128 x 128 tile.
REPEATS = [
    ({}, Shape(127, 129, 131)),
    ({"SPLITS": 16}, Shape(300, 200, 40)),  # 3 k-tiles in 16 slices
    ({"BM": 128, "BN": 128, "WN": 64, "SPLITS": 8}, Shape(260, 390, 1000)),
]


@pytest.mark.parametrize(("kernel_id", "shape"), CASES, ids=[f"{k}-{s}" for k, s in CASES])
def test_rung_verifies(kernel_id: str, shape: Shape) -> None:
    from gemmlab.measure.run import run

    result = run(kernel_id, shape, reps=2, warmup=1, baseline=False, spec=catalogue.variant(kernel_id, {}))
    # Over K = 4096 float32 sums drift further from float64; the runner's tolerance still holds.
    assert result.error < (1e-5 if shape.k <= 4096 else result.tolerance)


@pytest.mark.parametrize(
    ("config", "shape"), SKINNY_CONFIGS, ids=[f"{tuple(c.values())}-{s}" for c, s in SKINNY_CONFIGS]
)
def test_every_skinny_config_verifies(config: dict, shape: Shape) -> None:
    from gemmlab.measure.run import run

    result = run("sgemm_skinny", shape, reps=1, warmup=1, baseline=False,
                 spec=catalogue.variant("sgemm_skinny", config))  # fmt: skip
    assert result.error < 1e-5


@pytest.mark.parametrize("m", range(1, 17))
def test_skinny_every_row_count(m: int) -> None:
    """The default (16 rows) for every M it takes: rows past M are zeros in
    shared memory and are not stored."""
    cp, prepared, launch = _bound("sgemm_skinny", Shape(m, 515, 300), seed=m)
    _a, _b, _c_in, c_out, ref, _lib = prepared.buffers
    c_out.fill(cp.nan)
    launch(prepared.args)
    assert relative_error(cp, c_out, ref) < 1e-5


@pytest.mark.parametrize(
    ("config", "shape"), SKINNY_N_CONFIGS, ids=[f"{tuple(c.values())}-{s}" for c, s in SKINNY_N_CONFIGS]
)
def test_every_skinny_n_config_verifies(config: dict, shape: Shape) -> None:
    from gemmlab.measure.run import run

    result = run("sgemm_skinny_n", shape, reps=1, warmup=1, baseline=False,
                 spec=catalogue.variant("sgemm_skinny_n", config))  # fmt: skip
    assert result.error < 1e-5


@pytest.mark.parametrize("n", range(1, 17))
def test_skinny_n_every_column_count(n: int) -> None:
    """The default (16 columns) for every N it takes, at odd M: columns past N
    are zeros in shared memory and are not stored."""
    cp, prepared, launch = _bound("sgemm_skinny_n", Shape(301, n, 515), seed=n)
    _a, _b, _c_in, c_out, ref, _lib = prepared.buffers
    c_out.fill(cp.nan)
    launch(prepared.args)
    assert relative_error(cp, c_out, ref) < 1e-5


@pytest.mark.parametrize(("config", "shape"), GEMV_CONFIGS, ids=[f"{tuple(c.values())}-{s}" for c, s in GEMV_CONFIGS])
def test_every_gemv_split_config_verifies(config: dict, shape: Shape) -> None:
    from gemmlab.measure.run import run

    result = run("sgemm_gemv_split", shape, reps=1, warmup=1, baseline=False,
                 spec=catalogue.variant("sgemm_gemv_split", config))  # fmt: skip
    assert result.error < 1e-5


@pytest.mark.parametrize("m", range(1, 5))
def test_gemv_split_every_row_count(m: int) -> None:
    """4 rows for every M it takes: rows past M are zeros and are not stored."""
    cp, prepared, launch = _bound("sgemm_gemv_split", Shape(m, 515, 300), seed=m, config={"ROWS": 4, "QUADS": 2})
    _a, _b, _c_in, c_out, ref, _lib = prepared.buffers
    c_out.fill(cp.nan)
    launch(prepared.args)
    assert relative_error(cp, c_out, ref) < 1e-5


def test_gemv_split_launch_after_launch() -> None:
    """Six launches on one workspace: each right, the same bits each time (the
    slices are added in slice order whoever arrives last), and every strip's
    counter back at zero."""
    cp, prepared, launch = _bound("sgemm_gemv_split", Shape(2, 1000, 3001), seed=5, config={"ROWS": 2})
    _a, _b, _c_in, c_out, ref, _lib = prepared.buffers
    strips = launch.grid[0]
    first = None
    for i in range(6):
        c_out.fill(cp.nan)
        launch(prepared.args)
        assert relative_error(cp, c_out, ref) < 1e-5, i
        assert int(launch.workspace[: 4 * strips].view(cp.uint32).max()) == 0, f"counters left set after launch {i}"
        if first is None:
            first = c_out.copy()
        else:
            assert bool((c_out == first).all()), f"launch {i} gave other bits"


@pytest.mark.parametrize(("config", "shape"), REPEATS, ids=[f"{c}-{s}" for c, s in REPEATS])
def test_split_k_launch_after_launch(config: dict, shape: Shape) -> None:
    """Six launches on one workspace: each right, each the same bits as the
    first (the slices are added in slice order whoever arrives last), and
    every tile's counter back at zero after each."""
    cp, prepared, launch = _bound("sgemm_split_k", shape, seed=9, config=config)
    _a, _b, _c_in, c_out, ref, _lib = prepared.buffers
    gx, gy, _ = launch.grid
    first = None
    for i in range(6):
        c_out.fill(cp.nan)
        launch(prepared.args)
        assert relative_error(cp, c_out, ref) < 1e-5, i
        assert int(launch.workspace[: 4 * gx * gy].view(cp.uint32).max()) == 0, f"counters left set after launch {i}"
        if first is None:
            first = c_out.copy()
        else:
            assert bool((c_out == first).all()), f"launch {i} gave other bits"


@pytest.mark.parametrize(
    ("config", "shape"),
    [({}, Shape(300, 520, 1000)), ({"BN": 128, "WN": 32, "SPLITS": 4}, Shape(260, 390, 70)),
     ({"SPLITS": 2, "GROUPS": 4}, Shape(300, 520, 1000)), ({"SPLITS": 2, "GROUPS": 4}, Shape(100, 130, 40))],
    ids=["default-300x520x1000", "128x128-4-260x390x70", "2x4-300x520x1000", "2x4-100x130x40"],
)  # fmt: skip
def test_cluster_split_k_launch_after_launch(config: dict, shape: Shape) -> None:
    """Six launches: each right and each the same bits as the first (every
    output is its slices' sum in a fixed order: ranks, then groups, whichever
    block finishes first), and with GROUPS > 1 every counter back at zero."""
    cp, prepared, launch = _bound("sgemm_cluster_split_k", shape, seed=5, config=config)
    _a, _b, _c_in, c_out, ref, _lib = prepared.buffers
    gx, gy, _ = launch.grid
    counters = gx * gy // config.get("GROUPS", 1)  # tiles x SPLITS ranks (GROUPS > 1)
    first = None
    for i in range(6):
        c_out.fill(cp.nan)
        launch(prepared.args)
        assert relative_error(cp, c_out, ref) < 1e-5, i
        if launch.workspace is not None and config.get("GROUPS", 1) > 1:
            assert int(launch.workspace[: 4 * counters].view(cp.uint32).max()) == 0, f"counters left set, launch {i}"
        if first is None:
            first = c_out.copy()
        else:
            assert bool((c_out == first).all()), f"launch {i} gave other bits"


@pytest.mark.parametrize(
    ("kernel_id", "shape"),
    [("sgemm_cluster_split_k", Shape(13, 257, 70)), ("sgemm_split_k", Shape(13, 257, 70)),
     ("sgemm_skinny", Shape(13, 257, 70)), ("sgemm_skinny_n", Shape(257, 13, 70)),
     ("sgemm_gemv_split", Shape(1, 257, 70))],
)  # fmt: skip
def test_beta_zero_does_not_read_c(kernel_id: str, shape: Shape) -> None:
    """NaN in the C that beta scales stays out of the result when beta = 0."""
    cp, prepared, launch = _bound(kernel_id, shape, seed=4)
    a, b, c_in, c_out, _ref, _lib = prepared.buffers
    c_in.fill(cp.nan)
    alpha = np.float32(2.0)
    launch((*prepared.args[:7], alpha, np.float32(0.0)))
    ref = float(alpha) * (a.astype(cp.float64) @ b.astype(cp.float64))
    assert not bool(cp.isnan(c_out).any())
    assert relative_error(cp, c_out, ref) < 1e-5
