"""sgemm_stream_k on the GPU, launched by hand on grids of every size: the
split of the tail over blocks (whole tiles, runs that start and end inside
tiles, the partial sums added by the last block to arrive) gives the right C
on any grid, the same C bit for bit on every launch, and leaves the arrival
counters at zero for the next launch."""

from __future__ import annotations

import pytest

from gemmlab.backends.nvrtc import compile_kernel
from gemmlab.core import gpu
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.problems import sgemm as sgemm_problem
from gemmlab.problems.base import relative_error

pytestmark = pytest.mark.gpu

KERNEL = "sgemm_stream_k"
# Tile counts from 1 to 40 (128 x 256 tiles), K from one partial k-tile to 69 of them,
# tiles that cross M and N (moved inside) and a matrix smaller than a tile (guarded loads).
SHAPES = [
    Shape(1000, 1000, 1000),
    Shape(300, 520, 136),
    Shape(641, 1030, 77),
    Shape(127, 129, 131),
    Shape(260, 1100, 5),
]
# 1 block: all tiles whole, one after the other; 2, 3, 7, 13: a tail shared out,
# with runs that start and end inside tiles; 64: more blocks than some shapes' tiles.
GRIDS = [1, 2, 3, 7, 13, 64]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_grid_gives_the_same_right_answer(shape: Shape) -> None:
    from cuda.core import Stream, launch

    from gemmlab.backends.nvrtc import launch_config, load_kernel

    cp = gpu.cupy()
    spec = catalogue.variant(KERNEL, {})
    point = catalogue.point(KERNEL, shape, spec=spec)
    kernel = load_kernel(point, compile_kernel(spec, 0, "float32", gpu.describe(0).arch))
    prepared = sgemm_problem.prepare_sgemm(cp, point, cp.random.default_rng(7))
    _a, _b, _c_in, c_out, ref, _lib = prepared.buffers
    stream = Stream.from_handle(cp.cuda.get_current_stream().ptr)
    for blocks in GRIDS:
        workspace = cp.zeros(spec.workspace_bytes(shape, blocks), dtype=cp.uint8)
        config = launch_config(point, (blocks, 1, 1))
        first = None
        for _ in range(3):
            c_out.fill(cp.nan)
            launch(stream, config, kernel, *prepared.args, workspace.data.ptr)
            cp.cuda.get_current_stream().synchronize()
            assert relative_error(cp, c_out, ref) < 1e-5, (shape, blocks)
            counters = workspace[: 4 * 2 * blocks].view(cp.uint32)  # 14_stream_k.cu: 2 per block first
            assert int(counters.max()) == 0, f"arrival counters left non-zero with {blocks} blocks"
            if first is None:
                first = c_out.copy()
            else:
                assert bool((c_out == first).all()), f"{blocks} blocks: the result changed between launches"


def test_run_launches_one_block_per_sm_with_a_workspace() -> None:
    """Through the runner: a persistent grid (no more blocks than the GPU holds)
    and the workspace argument, at a shape whose tiles leave a tail (4097)."""
    from gemmlab.measure.run import run

    result = run(KERNEL, Shape.square(4097), reps=2, warmup=1, baseline=False, spec=catalogue.variant(KERNEL, {}))
    info = gpu.describe(0)
    assert result.error < 1e-5
    assert result.grid[0] == info.sm_count and result.grid[1:] == (1, 1)


def test_fewer_tiles_than_sms_share_out_every_tile() -> None:
    """Issue 21, third round: a K-heavy shape of 4 tiles still gets a block
    per SM (the grid counts a work unit per 8 k-tiles of each tile), every
    tile added up from several blocks' partials, right and the same bits on
    a second launch through the runner's binding."""
    from test_gpu_edge_strips import _bound

    cp, prepared, launch = _bound(KERNEL, Shape(256, 512, 8192), seed=3)
    _a, _b, _c_in, c_out, ref, _lib = prepared.buffers
    assert launch.grid[0] == gpu.describe(0).sm_count
    first = None
    for _ in range(2):
        c_out.fill(cp.nan)
        launch(prepared.args)
        assert relative_error(cp, c_out, ref) < 1e-4
        assert int(launch.workspace[: 4 * 2 * launch.grid[0]].view(cp.uint32).max()) == 0
        if first is None:
            first = c_out.copy()
        else:
            assert bool((c_out == first).all())
