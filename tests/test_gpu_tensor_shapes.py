"""The tensor ladder's candidate rungs for issue 21 on the GPU, in both
output types (float32 and bfloat16 C), on the shapes they exist for and the
awkward ones: odd K (rows 2 bytes off a 16-byte boundary), K shorter than a
slice, ragged M and N; tc_split_k's fix-up launch after launch on one
workspace (the same bits each time, the counters back at zero); tc_gemv at
every M from 1 to 16 and with N as the small side.

Run: PYTHONPATH=src python -m pytest -q -p no:cacheprovider tests/test_gpu_tensor_shapes.py
"""

from __future__ import annotations

import dataclasses

import pytest

from gemmlab.core import gpu
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue

pytestmark = pytest.mark.gpu

DTYPES = ("bfloat16", "bfloat16-out")
SHAPES = {
    "tc_any_k": [
        Shape(1, 1, 1),
        Shape(37, 53, 7),  # K under one 16-byte piece
        Shape(129, 257, 65),  # one past a slice; rows at every offset 0 .. 7
        Shape(300, 130, 1025),  # odd K over several slices
        Shape(200, 333, 136),  # K a multiple of 8: offset 0 everywhere; odd N for a bfloat16 C
        Shape(1000, 1003, 1001),
        Shape.square(4097),  # the suite's odd size
    ],
    "tc_split_k": [
        Shape(1, 8, 8),  # one k-tile: slices 1 to 3 of 4 are empty
        Shape(129, 257, 200),  # 4 k-tiles in 4 slices, ragged tiles
        Shape(300, 130, 1000),  # 16 k-tiles; K not a multiple of 64
        Shape(128, 4096, 4096),  # the suite's few-tile shape
        Shape(1024, 1024, 16384),  # the suite's K-heavy shape
    ],
    # Cluster tiles of 256 x 256 on an H100's 66 clusters (an H200's too), MAX_SLICES = 4:
    "tc_split_tail": [
        Shape(1, 8, 8),  # one cluster tile, its second block row past M: nothing split
        Shape(3000, 3000, 200),  # 144 cluster tiles: two full waves, 12 tiles in 4 pieces of one k-tile
        Shape(2100, 1904, 1000),  # 72: a wave, then 6 tiles in 4 pieces; the last block row past M
        Shape(1536, 1536, 1536),  # 36, all in the tail: 66 shares of 13 or 14 k-tiles, most over two tiles
        Shape(1100, 1536, 1000),  # 30 in the tail, shares over two tiles, a block row past M
    ],
    "tc_gemv": [
        Shape(1, 1, 8),
        Shape(1, 4096, 4096),  # decoding's product
        Shape(16, 4096, 4096),
        Shape(5, 1001, 1000),  # ragged rows of B; K not a multiple of 32
        Shape(4095, 3, 520),  # N the small side: A streamed, C stored transposed back
        Shape(16, 16, 4096),  # both small
    ],
}
CASES = [(kid, d, s) for kid, shapes in SHAPES.items() for s in shapes for d in DTYPES]


def _on_hopper(kernel_id: str) -> None:
    spec = catalogue.variant(kernel_id, {})
    if spec.archs and gpu.describe(0).arch not in [a.rstrip("af") for a in spec.archs]:
        pytest.skip(f"{kernel_id} needs {', '.join(spec.archs)}")


@pytest.mark.parametrize(("kernel_id", "dtype", "shape"), CASES, ids=[f"{k}-{d}-{s}" for k, d, s in CASES])
def test_rung_verifies(kernel_id: str, dtype: str, shape: Shape) -> None:
    from gemmlab.measure.run import run

    _on_hopper(kernel_id)
    spec = catalogue.variant(kernel_id, {})
    result = run(kernel_id, shape, dtype=dtype, reps=2, warmup=1, baseline=False, spec=spec)
    assert 0 <= result.error <= result.tolerance


# Every searched configuration once, at a ragged shape each takes.
RAGGED = {
    "tc_any_k": Shape(200, 300, 333),
    "tc_split_k": Shape(200, 300, 1000),
    "tc_gemv": Shape(7, 300, 1000),
    # 72 cluster tiles of 256 x 256, 135 of 256 x 128: both leave a part wave (on an H100's 66 clusters)
    "tc_split_tail": Shape(2100, 1904, 1000),
}
CONFIGS = [(kid, c, s) for kid, s in RAGGED.items() for c in catalogue.configs(kid)]


@pytest.mark.parametrize(("kernel_id", "config", "shape"), CONFIGS, ids=[f"{k}-{c}" for k, c, _ in CONFIGS])
def test_every_configuration_verifies(kernel_id: str, config: dict, shape: Shape) -> None:
    from gemmlab.measure.run import run

    _on_hopper(kernel_id)
    for dtype in DTYPES:
        result = run(kernel_id, shape, dtype=dtype, reps=1, warmup=1, baseline=False,
                     spec=catalogue.variant(kernel_id, config))  # fmt: skip
        assert 0 <= result.error <= result.tolerance, dtype


# Tiles 192 wide (m64n192 wgmma, B multicast in halves of 96 rows, C in six
# float32 or three bfloat16 boxes a warpgroup) and 144 wide (halves of 72
# rows; C in 4.5 float32 or 2.25 bfloat16 boxes, the last box overlapping the
# one before), in every input type: N ragged against the width (3000 leaves
# 120 of 144, 1000 leaves 136) and M against a cluster's 256 rows; 3000 also
# splits a tail.
WIDE = [
    ("tc_tma_store", {"BN": 192}),
    ("tc_split_tail", {"BN": 192, "MAX_SLICES": 4}),
    ("tc_tma_store", {"BN": 144}),
    ("tc_tma_store", {"BM": 192, "BN": 192, "C_BOXES": 1}),  # three consumers: a cluster's 384 rows
    # Room for a warpgroup's whole slab of C (bfloat16 C at 192; every type at
    # 144, the overlapping box included): all boxes written, then all stored.
    ("tc_tma_store", {"BN": 192, "C_BOXES": 3}),
    ("tc_tma_store", {"BN": 144, "C_BOXES": 5}),
]


def _wide_id(kernel_id: str, config: dict) -> str:
    boxes = f"-{config['C_BOXES']}boxes" if "C_BOXES" in config else ""
    return f"{kernel_id}-{config.get('BM', 128)}x{config['BN']}{boxes}"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "tf32", "bfloat16-out"])
@pytest.mark.parametrize(("kernel_id", "config"), WIDE, ids=[_wide_id(k, c) for k, c in WIDE])
def test_wide_tiles_verify(kernel_id: str, config: dict, dtype: str) -> None:
    from gemmlab.measure.run import run

    _on_hopper(kernel_id)
    spec = catalogue.variant(kernel_id, config)
    for shape in (Shape(3000, 3000, 200), Shape(700, 1000, 136)):
        result = run(kernel_id, shape, dtype=dtype, reps=1, warmup=1, baseline=False, spec=spec)
        assert 0 <= result.error <= result.tolerance, shape


class _Launch:
    """The runner's binding of a kernel (nvrtc.bind), launched and waited for."""

    def __init__(self, cp, launcher, grid) -> None:
        self.cp, self.launcher, self.grid, self.workspace = cp, launcher, grid, launcher.workspace

    def __call__(self, args) -> None:
        tail = () if self.workspace is None else (self.workspace.data.ptr,)
        dataclasses.replace(self.launcher, args=(*args, *tail))()
        self.cp.cuda.get_current_stream().synchronize()


def _bound(kernel_id: str, shape: Shape, dtype: str, seed: int, config: dict | None = None):
    from gemmlab.backends.nvrtc import bind, compile_kernel

    cp, info = gpu.cupy(), gpu.describe(0)
    spec = catalogue.variant(kernel_id, config or {})
    point = catalogue.point(kernel_id, shape, dtype=dtype, spec=spec)
    compiled = compile_kernel(point.spec, 0, dtype, point.spec.compile_arch(info.arch))
    prepared, launcher, grid = bind(cp, point, compiled, info, 0, cp.cuda.get_current_stream(), seed)
    return cp, prepared, _Launch(cp, launcher, grid)


REPEATS = [
    ("tc_split_k", {}, Shape(129, 257, 200)),
    ("tc_split_k", {"SPLITS": 8}, Shape(300, 200, 296)),  # 5 k-tiles in 8 slices: 3 empty (K a multiple of 8)
    ("tc_split_k", {"BN": 256, "SPLITS": 2}, Shape(260, 390, 1000)),
    # Clusters of two sharing B: 3 tile rows, so a padding row past M that
    # multicasts its half of B and stores nothing; then 4 k-tiles in 8 slices.
    ("tc_split_k", {"SPLITS": 2, "CLUSTER": 2}, Shape(300, 390, 1000)),
    ("tc_split_k", {"SPLITS": 8, "CLUSTER": 2, "STAGES": 6}, Shape(129, 257, 200)),
    # A last wave split: 72 cluster tiles on an H100's 66 clusters; then
    # shares of K that end in one tile and start in the next.
    ("tc_split_tail", {}, Shape(2100, 1904, 1000)),
    ("tc_split_tail", {}, Shape(1100, 1536, 1000)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("kernel_id", "config", "shape"), REPEATS, ids=[f"{k}-{c}-{s}" for k, c, s in REPEATS])
def test_split_launch_after_launch(kernel_id: str, config: dict, shape: Shape, dtype: str) -> None:
    """Six launches on one workspace: each right, each the same bits as the
    first (slices added in slice order whoever is last), and every counter
    back at zero after each: grid x times y of them, one a tile for
    tc_split_k, one a block for tc_split_tail (whose grid is one row)."""
    _on_hopper(kernel_id)
    cp, prepared, launch = _bound(kernel_id, shape, dtype, seed=9, config=config)
    c = prepared.buffers[2]
    gx, gy, _ = launch.grid
    first = None
    for i in range(6):
        prepared.poison()
        launch(prepared.args)
        assert prepared.error() < 1e-2, i
        assert int(launch.workspace[: 4 * gx * gy].view(cp.uint32).max()) == 0, f"counters left set after launch {i}"
        if first is None:
            first = c.copy()
        else:
            assert bool((c == first).all()), f"launch {i} gave other bits"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", range(1, 17))
def test_gemv_every_row_count(m: int, dtype: str) -> None:
    """The default (MAX_M = 16) at every M it takes, and at N = M with A streamed."""
    for shape in (Shape(m, 1029, 776), Shape(1029, m, 776)):
        _cp, prepared, launch = _bound("tc_gemv", shape, dtype, seed=m)
        prepared.poison()
        launch(prepared.args)
        assert prepared.error() < 1e-2, shape
