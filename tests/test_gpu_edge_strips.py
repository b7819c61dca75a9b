"""sgemm_edge_strips and sgemm_padded_b on the GPU: the strips of 1 to 32 rows
below the tiles and columns to their right (one, the other, both; K shorter
than, equal to and longer than a chunk of 256) give the right C, in place
too; with beta = 0, C is not read (NaN there stays out of the result).
sgemm_padded_b's copy of B and its tickets: launch after launch on one
workspace, every result right and the counters moving on by a launch's worth."""

from __future__ import annotations

import numpy as np
import pytest

from gemmlab import catalogue, gpu, sgemm
from gemmlab.catalogue import Shape
from gemmlab.problems import relative_error

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


def _spec(kernel_id: str) -> catalogue.KernelSpec:
    return catalogue.get(kernel_id) if kernel_id in catalogue.kernel_ids() else sgemm.variant(kernel_id, {})


@pytest.mark.parametrize(("kernel_id", "shape"), CASES, ids=[f"{k}-{s}" for k, s in CASES])
def test_strips_verify(kernel_id: str, shape: Shape) -> None:
    from gemmlab.run import run

    result = run(kernel_id, shape, reps=1, warmup=1, baseline=False, spec=_spec(kernel_id))
    assert result.error < 1e-5
    m_tiled, n_tiled = sgemm.tiled_extent(shape.m, 128), sgemm.tiled_extent(shape.n, 256)
    assert result.grid[1] > -(-m_tiled // 128) or (m_tiled, n_tiled) == (shape.m, shape.n)


@pytest.mark.parametrize("kernel_id", KERNELS)
@pytest.mark.parametrize("shape", [Shape(129, 257, 40), Shape(160, 288, 600)], ids=str)
def test_strips_in_place(kernel_id: str, shape: Shape) -> None:
    """c_in == c_out: every output is read once, by the block that writes it."""
    cp, launch, point = _compiled(kernel_id, shape)
    prepared = sgemm.prepare_sgemm(cp, point, cp.random.default_rng(5))
    _a, _b, c_in, _c_out, ref, _lib = prepared.buffers
    launch((*prepared.args[:2], c_in.data.ptr, c_in.data.ptr, *prepared.args[4:]))
    assert relative_error(cp, c_in, ref) < 1e-5


@pytest.mark.parametrize("kernel_id", KERNELS)
@pytest.mark.parametrize("shape", [Shape(129, 257, 40), Shape(4097, 4097, 64)], ids=str)
def test_beta_zero_does_not_read_c(kernel_id: str, shape: Shape) -> None:
    cp, launch, point = _compiled(kernel_id, shape)
    prepared = sgemm.prepare_sgemm(cp, point, cp.random.default_rng(6))
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
    cp, launch, point = _compiled("sgemm_padded_b", shape)
    prepared = sgemm.prepare_sgemm(cp, point, cp.random.default_rng(8))
    _a, _b, _c_in, c_out, ref, _lib = prepared.buffers
    gx, gy, _ = point.grid
    pad_blocks = -(-sgemm.PAD_BLOCKS // gx) * gx
    for i in range(1, 6):
        c_out.fill(cp.nan)
        launch.workspace[16:].fill(0)
        launch(prepared.args)
        assert relative_error(cp, c_out, ref) < 1e-5, i
        tickets, done = (int(v) for v in launch.workspace[:16].view(cp.uint64))
        assert (tickets, done) == (i * gx * gy, i * pad_blocks)


class _Launch:
    """One kernel, its launch configuration, and (for a kernel that takes one)
    a zeroed workspace passed as its last argument."""

    def __init__(self, cp, kernel, config, workspace) -> None:
        self.cp, self.kernel, self.config, self.workspace = cp, kernel, config, workspace

    def __call__(self, args) -> None:
        from cuda.core import Stream, launch

        if self.workspace is not None:
            args = (*args, self.workspace.data.ptr)
        launch(Stream.from_handle(self.cp.cuda.get_current_stream().ptr), self.config, self.kernel, *args)
        self.cp.cuda.get_current_stream().synchronize()


def _compiled(kernel_id: str, shape: Shape):
    """CuPy, a launcher of the kernel loaded for the GPU here, and its launch point at ``shape``."""
    from gemmlab.compile import compile_kernel
    from gemmlab.run import launch_config, load_kernel

    cp = gpu.cupy()
    point = catalogue.point(kernel_id, shape, spec=_spec(kernel_id))
    kernel = load_kernel(point, compile_kernel(point.spec, 0, "float32", gpu.describe(0).arch))
    blocks = point.grid[0] * point.grid[1] * point.grid[2]
    spec = point.spec
    workspace = None if spec.workspace_bytes is None else cp.zeros(spec.workspace_bytes(shape, blocks), cp.uint8)
    return cp, _Launch(cp, kernel, launch_config(point, point.grid), workspace), point
