"""The memory-bound lab without a GPU: builds, launch geometry, byte models, tables."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gemmlab.backends.nvrtc import compile_kernel
from gemmlab.core.errors import ConstraintError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.memory.spec import MEMORY_KERNELS, TiledSpec, thread_rows
from gemmlab.measure.bandwidth import bandwidth_table
from gemmlab.measure.sanitize import small_shapes
from gemmlab.problems.base import guard_bytes

IDS = [
    "vecadd", "copy", "transpose_naive", "copy_tiled", "transpose_tiled", "transpose_tiled_padded",
    "transpose_tiled_diagonal",
    "copy_vec4", "vecadd_vec4", "transpose_tiled_vec4",
]  # fmt: skip
BUILDS = [
    (spec.id, edge, dtype) for spec in MEMORY_KERNELS for edge in spec.block_edges or (0,) for dtype in spec.dtypes
]
# Shapes whose sides are no multiple of any tile, thin ones and one past a tile.
ODD_SHAPES = [Shape(1, 1, 1), Shape(1, 77, 1), Shape(33, 1, 1), Shape(1023, 1025, 1), Shape(4000, 4000, 1)]
# Elements one thread moves along (x, y) of its block, by kernel: the tiled
# kernels walk TILE / ROWS rows, the *_vec4 copies and additions move 4 in a row.
PER_THREAD = {"copy_vec4": (4, 1), "vecadd_vec4": (4, 1)}


def test_the_lab_is_in_the_catalogue() -> None:
    assert [s.id for s in MEMORY_KERNELS] == IDS
    assert set(IDS) <= set(catalogue.kernel_ids())
    for spec in MEMORY_KERNELS:
        assert catalogue.get(spec.id) is spec
        assert spec.problem.metric == "gbs"
        assert spec.dtypes == ("float32", "float64")
        assert spec.any_size_alternative == spec.id
        assert spec.flops(Shape(4000, 4000, 1)) == 0


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
@pytest.mark.parametrize(("kernel_id", "edge", "dtype"), BUILDS, ids=[f"{k}-b{e}-{d}" for k, e, d in BUILDS])
def test_builds_without_spills(kernel_id: str, edge: int, dtype: str, arch: str) -> None:
    spec = catalogue.get(kernel_id)
    res = compile_kernel(spec, edge, dtype, arch).resources
    assert res.spill_bytes == 0
    assert res.stack_bytes == 0
    assert res.registers > 0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("tile", [16, 32])
def test_padding_adds_one_column_of_shared_memory(tile: int, dtype: str) -> None:
    item = 4 if dtype == "float32" else 8
    plain = compile_kernel(catalogue.get("transpose_tiled"), tile, dtype, "sm_90a").resources
    padded = compile_kernel(catalogue.get("transpose_tiled_padded"), tile, dtype, "sm_90a").resources
    assert plain.smem_bytes == tile * tile * item
    assert padded.smem_bytes == tile * (tile + 1) * item


def test_rows_per_thread_is_a_template_argument() -> None:
    spec = catalogue.get("transpose_tiled_padded")
    assert isinstance(spec, TiledSpec)
    assert spec.name_expression("float32", 32) == "transpose_tiled_padded<float, 32, 8>"
    assert spec.name_expression("float64", 16) == "transpose_tiled_padded<double, 16, 4>"
    assert spec.block(Shape(4000, 4000, 1), 32) == (32, thread_rows(32), 1) == (32, 8, 1)
    assert catalogue.get("copy").name_expression("float32", 32) == "copy<float>"
    assert catalogue.get("vecadd").name_expression("float64", 0) == "vecadd<double>"


def test_lecture_launch_shapes() -> None:
    big = Shape(4000, 4000, 1)
    point = catalogue.point("transpose_tiled_padded", big, 32)
    assert (point.grid, point.block) == ((125, 125, 1), (32, 8, 1))
    point = catalogue.point("transpose_naive", big, 16)
    assert (point.grid, point.block) == ((250, 250, 1), (16, 16, 1))
    point = catalogue.point("vecadd", Shape(1, 1000003, 1))
    assert point.block_edge == 0
    assert (point.grid, point.block) == ((3907, 1, 1), (256, 1, 1))  # ceil(1000003 / 256)
    point = catalogue.point("vecadd_vec4", Shape(1, 1000003, 1))
    assert point.grid == (977, 1, 1)  # ceil(1000003 / 1024)


def test_byte_models() -> None:
    big = Shape(4000, 4000, 1)
    # 16e6 floats read and 16e6 written, 4 bytes each.
    assert catalogue.point("transpose_tiled_padded", big, 32, "float32").min_bytes == 128_000_000
    assert catalogue.point("copy", big, 32, "float64").min_bytes == 256_000_000
    assert catalogue.point("copy_vec4", big, None, "float32").min_bytes == 128_000_000
    # a and b read, c written: 3 x 1000003 x 4.
    assert catalogue.point("vecadd", Shape(1, 1000003, 1), None, "float32").min_bytes == 12_000_036
    assert catalogue.point("vecadd_vec4", Shape(1, 1000003, 1), None, "float64").min_bytes == 24_000_072


def test_device_bytes_cover_the_buffers() -> None:
    p = catalogue.point("transpose_tiled", Shape(4000, 4000, 1), 32, "float32")
    # input, output, library output (3 x 64 MB) and the float64 draw and mask.
    assert p.spec.problem.device_bytes(p) == 16_000_000 * (3 * 4 + 8 + 1) + guard_bytes(4000 * 4)  # and the bands
    v = catalogue.point("vecadd", Shape(1, 1000, 1), None, "float64")
    assert v.spec.problem.device_bytes(v) == 1000 * (5 * 8 + 8 + 1) + guard_bytes(1000 * 8)


@pytest.mark.parametrize("shape", ODD_SHAPES, ids=str)
@pytest.mark.parametrize("kernel_id", IDS)
def test_grid_covers_every_element(kernel_id: str, shape: Shape) -> None:
    spec = catalogue.get(kernel_id)
    for edge in spec.block_edges or (0,):
        (gx, gy, gz), (bx, by, bz) = spec.grid(shape, edge), spec.block(shape, edge)
        assert gz == bz == 1
        per_x, per_y = PER_THREAD.get(kernel_id, (1, 1))
        if isinstance(spec, TiledSpec):
            per_y = edge // spec.thread_rows(edge)
        cols, rows = gx * bx * per_x, gy * by * per_y
        if spec.takes_block_edge:  # a 2-D grid over the m x n matrix, at most one partial tile each way
            assert cols >= shape.n > cols - edge
            assert rows >= shape.m > rows - edge
        else:  # a 1-D grid over m * n elements, at most one partial block
            assert gy == 1
            assert cols >= shape.m * shape.n > cols - bx * per_x


def test_tiled_kernels_need_an_edge_divisible_by_four() -> None:
    with pytest.raises(ConstraintError, match="multiple of 4"):
        catalogue.point("transpose_tiled", Shape(64, 64, 1), 6)
    catalogue.point("transpose_tiled", Shape(64, 64, 1), 8)


def test_grid_rows_limit_is_named() -> None:
    with pytest.raises(ConstraintError, match="65535"):
        catalogue.point("copy", Shape(65536 * 16 + 1, 1, 1), 16)
    # The 1-D kernels put everything in grid x.
    catalogue.point("copy_vec4", Shape(65536 * 16 + 1, 1, 1))


def test_every_shape_is_accepted() -> None:
    for spec in MEMORY_KERNELS:
        for edge in spec.block_edges or (0,):
            for shape in ODD_SHAPES:
                assert not spec.violations(shape, edge, "float64"), (spec.id, edge, shape)


def test_sanitizer_shapes_fit_the_lab() -> None:
    for spec in MEMORY_KERNELS:
        for edge in spec.block_edges or (0,):
            shapes = small_shapes(spec, edge)
            assert any(s.is_square for s in shapes)
            assert any(s.m * s.n % 4 for s in shapes)  # a tail for the 16-byte kernels
            assert any(s.n % 32 and s.m % 32 for s in shapes)  # partial tiles both ways


def _result(kernel: str, gbs: float) -> SimpleNamespace:
    return SimpleNamespace(kernel=kernel, m=4000, n=4000, block_edge=32, dtype="float32", gbytes_per_s=gbs)


def test_bandwidth_table_fractions() -> None:
    rows = bandwidth_table([_result("copy", 3000.0), _result("transpose_naive", 750.0)], 3000.0, 4000.0)
    assert [r["kernel"] for r in rows] == ["copy", "transpose_naive"]
    assert rows[0]["fraction_of_ceiling"] == 1.0
    assert rows[0]["fraction_of_datasheet"] == 0.75
    assert rows[1]["fraction_of_ceiling"] == 0.25
    assert rows[1]["fraction_of_datasheet"] == 0.1875
    assert rows[1]["shape"] == "4000x4000"
    assert rows[1]["gbytes_per_s"] == 750.0


def test_bandwidth_table_without_datasheet_or_ceiling() -> None:
    (row,) = bandwidth_table([_result("copy", 112.4)], 140.0, None)
    assert row["fraction_of_datasheet"] is None
    assert row["fraction_of_ceiling"] == pytest.approx(112.4 / 140.0)
    assert bandwidth_table([], 1.0, 1.0) == []
    with pytest.raises(ValueError, match="ceiling"):
        bandwidth_table([_result("copy", 1.0)], 0.0, 1.0)
