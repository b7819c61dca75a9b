"""sgemm_edge_strips on the GPU: the strips of 1 to 32 rows below the tiles and
columns to their right (one, the other, both; K shorter than, equal to and
longer than a chunk of 256) give the right C, in place too; with beta = 0, C
is not read (NaN there stays out of the result)."""

from __future__ import annotations

import numpy as np
import pytest

from gemmlab import catalogue, gpu, sgemm
from gemmlab.catalogue import Shape
from gemmlab.problems import relative_error

pytestmark = pytest.mark.gpu

KERNEL = "sgemm_edge_strips"
SHAPES = [
    Shape(129, 257, 40),  # 1 row, 1 column, K under one chunk
    Shape(160, 288, 600),  # 32 and 32: the widest strips, K over two chunks
    Shape(131, 256, 256),  # rows only (3), K one whole chunk
    Shape(128, 259, 257),  # columns only (3), K one past a chunk
    Shape(4097, 4097, 64),  # the odd size, short K
    Shape(300, 4100, 70),  # 44 rows over: moved tiles; 4 columns: a strip
    Shape(33, 4097, 50),  # fewer rows than a tile, a column strip beside them
]


def _spec() -> catalogue.KernelSpec:
    return catalogue.get(KERNEL) if KERNEL in catalogue.kernel_ids() else sgemm.variant(KERNEL, {})


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_strips_verify(shape: Shape) -> None:
    from gemmlab.run import run

    result = run(KERNEL, shape, reps=1, warmup=1, baseline=False, spec=_spec())
    assert result.error < 1e-5
    m_tiled, n_tiled = sgemm.tiled_extent(shape.m, 128), sgemm.tiled_extent(shape.n, 256)
    assert result.grid[1] > -(-m_tiled // 128) or (m_tiled, n_tiled) == (shape.m, shape.n)


@pytest.mark.parametrize("shape", [Shape(129, 257, 40), Shape(160, 288, 600)], ids=str)
def test_strips_in_place(shape: Shape) -> None:
    """c_in == c_out: every output is read once, by the block that writes it."""
    from gemmlab.run import launch_config

    cp, kernel, point = _compiled(shape)
    prepared = sgemm.prepare_sgemm(cp, point, cp.random.default_rng(5))
    _a, _b, c_in, _c_out, ref, _lib = prepared.buffers
    args = (*prepared.args[:2], c_in.data.ptr, c_in.data.ptr, *prepared.args[4:])
    _launch(cp, kernel, launch_config(point, point.grid), args)
    assert relative_error(cp, c_in, ref) < 1e-5


@pytest.mark.parametrize("shape", [Shape(129, 257, 40), Shape(4097, 4097, 64)], ids=str)
def test_beta_zero_does_not_read_c(shape: Shape) -> None:
    from gemmlab.run import launch_config

    cp, kernel, point = _compiled(shape)
    prepared = sgemm.prepare_sgemm(cp, point, cp.random.default_rng(6))
    a, b, c_in, c_out, _ref, _lib = prepared.buffers
    c_in.fill(cp.nan)
    alpha = np.float32(2.0)
    args = (*prepared.args[:7], alpha, np.float32(0.0))
    _launch(cp, kernel, launch_config(point, point.grid), args)
    ref = float(alpha) * (a.astype(cp.float64) @ b.astype(cp.float64))
    assert not bool(cp.isnan(c_out).any())
    assert relative_error(cp, c_out, ref) < 1e-5


def _compiled(shape: Shape):
    """CuPy, the kernel loaded for the GPU here, and its launch point at ``shape``."""
    from gemmlab.compile import compile_kernel
    from gemmlab.run import load_kernel

    point = catalogue.point(KERNEL, shape, spec=_spec())
    kernel = load_kernel(point, compile_kernel(point.spec, 0, "float32", gpu.describe(0).arch))
    return gpu.cupy(), kernel, point


def _launch(cp, kernel, config, args) -> None:
    from cuda.core import Stream, launch

    stream = Stream.from_handle(cp.cuda.get_current_stream().ptr)
    launch(stream, config, kernel, *args)
    cp.cuda.get_current_stream().synchronize()
