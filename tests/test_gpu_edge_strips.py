"""sgemm_edge_strips and sgemm_padded_b on the GPU: the strips of 1 to 32 rows
below the tiles and columns to their right (one, the other, both; K shorter
than, equal to and longer than a chunk of 256) give the right C, in place
too; with beta = 0, C is not read (NaN there stays out of the result).
sgemm_padded_b's copy of B and its tickets: launch after launch on one
workspace, every result right and the counters moving on by a launch's worth."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gemmlab.core import gpu
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.sgemm.rung16_edge_strips import tiled_extent
from gemmlab.kernels.sgemm.rung17_padded_b import PAD_BLOCKS
from gemmlab.problems.base import relative_error

pytestmark = pytest.mark.gpu

KERNELS = ["sgemm_edge_strips", "sgemm_padded_b"]
SHAPES = [
    Shape(129, 257, 40),  # 1 row, 1 column, K under one chunk
    Shape(160, 288, 600),  # 32 and 32: the widest strips, K over two chunks
    Shape(131, 256, 256),  # rows only (3), K one whole chunk
    Shape(128, 259, 257),  # columns only (3), K one past a chunk
    Shape(4097, 4097, 64),  # the odd size, short K
    Shape(300, 4101, 70),  # 44 rows over: moved tiles; 5 columns: a strip
    Shape(33, 4097, 50),  # fewer rows than a tile, a column strip beside them
]
CASES = [(kid, s) for kid in KERNELS for s in SHAPES]


@pytest.mark.parametrize(("kernel_id", "shape"), CASES, ids=[f"{k}-{s}" for k, s in CASES])
def test_strips_verify(kernel_id: str, shape: Shape) -> None:
    from gemmlab.measure.run import run

    result = run(kernel_id, shape, reps=1, warmup=1, baseline=False, spec=catalogue.variant(kernel_id, {}))
    assert result.error < 1e-5
    m_tiled, n_tiled = tiled_extent(shape.m, 128), tiled_extent(shape.n, 256)
    assert result.grid[1] > -(-m_tiled // 128) or (m_tiled, n_tiled) == (shape.m, shape.n)


@pytest.mark.parametrize("kernel_id", KERNELS)
@pytest.mark.parametrize("shape", [Shape(129, 257, 40), Shape(160, 288, 600)], ids=str)
def test_strips_in_place(kernel_id: str, shape: Shape) -> None:
    """c_in == c_out: every output is read once, by the block that writes it."""
    cp, prepared, launch = _bound(kernel_id, shape, seed=5)
    _a, _b, c_in, _c_out, ref, _lib = prepared.buffers
    launch((*prepared.args[:2], c_in.data.ptr, c_in.data.ptr, *prepared.args[4:]))
    assert relative_error(cp, c_in, ref) < 1e-5


@pytest.mark.parametrize("kernel_id", KERNELS)
@pytest.mark.parametrize("shape", [Shape(129, 257, 40), Shape(4097, 4097, 64)], ids=str)
def test_beta_zero_does_not_read_c(kernel_id: str, shape: Shape) -> None:
    cp, prepared, launch = _bound(kernel_id, shape, seed=6)
    a, b, c_in, c_out, _ref, _lib = prepared.buffers
    c_in.fill(cp.nan)
    alpha = np.float32(2.0)
    launch((*prepared.args[:7], alpha, np.float32(0.0)))
    ref = float(alpha) * (a.astype(cp.float64) @ b.astype(cp.float64))
    assert not bool(cp.isnan(c_out).any())
    assert relative_error(cp, c_out, ref) < 1e-5


@pytest.mark.parametrize("shape", [Shape(129, 257, 40), Shape(1000, 1003, 300)], ids=str)
def test_padded_b_launch_after_launch(shape: Shape) -> None:
    """Five launches on one workspace: each pads B again (the copy is zeroed
    in between, so a launch that skipped its copy would read zeros), each gives
    the right C, and the counters grow by one launch's blocks and pad blocks."""
    cp, prepared, launch = _bound("sgemm_padded_b", shape, seed=8)
    _a, _b, _c_in, c_out, ref, _lib = prepared.buffers
    gx, gy, _ = launch.grid
    pad_blocks = -(-PAD_BLOCKS // gx) * gx
    for i in range(1, 6):
        c_out.fill(cp.nan)
        launch.workspace[16:].fill(0)
        launch(prepared.args)
        assert relative_error(cp, c_out, ref) < 1e-5, i
        tickets, done = (int(v) for v in launch.workspace[:16].view(cp.uint64))
        assert (tickets, done) == (i * gx * gy, i * pad_blocks)


class _Launch:
    """The runner's binding of a kernel (nvrtc.bind: geometry, stream, and the
    workspace it allocates), launched with other arguments and waited for."""

    def __init__(self, cp, launcher, grid) -> None:
        self.cp, self.launcher, self.grid, self.workspace = cp, launcher, grid, launcher.workspace

    def __call__(self, args) -> None:
        tail = () if self.workspace is None else (self.workspace.data.ptr,)
        dataclasses.replace(self.launcher, args=(*args, *tail))()
        self.cp.cuda.get_current_stream().synchronize()


def _bound(kernel_id: str, shape: Shape, seed: int, config: dict | None = None):
    """CuPy, the problem prepared from ``seed``, and a launcher of the kernel (in
    ``config``, or its default) as the runner binds it."""
    from gemmlab.backends.nvrtc import bind, compile_kernel

    cp, info = gpu.cupy(), gpu.describe(0)
    point = catalogue.point(kernel_id, shape, spec=catalogue.variant(kernel_id, config or {}))
    compiled = compile_kernel(point.spec, 0, "float32", info.arch)
    prepared, launcher, grid = bind(cp, point, compiled, info, 0, cp.cuda.get_current_stream(), seed)
    return cp, prepared, _Launch(cp, launcher, grid)
