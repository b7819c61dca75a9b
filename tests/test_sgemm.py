"""The FP32 ladder without a GPU: every rung and every configuration compiles
without spills, the launch geometry covers C for any shape, and the search
space (configs / variant) refuses what a kernel cannot take, by name."""

from __future__ import annotations

import math
import re
from concurrent.futures import ThreadPoolExecutor
from importlib import resources

import pytest

from gemmlab.backends.nvrtc import compile_kernel
from gemmlab.core.errors import ConstraintError, DeviceLimitError, UnknownName
from gemmlab.core.shapes import MAX_INDEX, Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.sgemm import family as sgemm_family
from gemmlab.kernels.sgemm import spec as sgemm
from gemmlab.kernels.sgemm.rung14_stream_k import STREAM_K_MIN_RUN
from gemmlab.kernels.sgemm.rung16_edge_strips import EDGE_KC, EDGE_MAX, tiled_extent
from gemmlab.kernels.sgemm.rung17_padded_b import PAD_BLOCKS
from gemmlab.problems import sgemm as sgemm_problem
from gemmlab.problems.base import guard_bytes

LADDER = [
    "sgemm_coalesced", "sgemm_smem", "sgemm_1d_blocktile", "sgemm_2d_blocktile", "sgemm_vectorized",
    "sgemm_swizzled", "sgemm_warptile", "sgemm_double_buffer", "sgemm_multistage", "sgemm_swizzle_l2",
    "sgemm_large_tile", "sgemm_lean_loop", "sgemm_spread_copies", "sgemm_stream_k",
    "sgemm_column_order", "sgemm_edge_strips", "sgemm_padded_b",
]  # fmt: skip
# The rungs built for one block per SM: up to 128 accumulators, dynamic shared memory.
LARGE = ("sgemm_large_tile", "sgemm_lean_loop", "sgemm_spread_copies", "sgemm_stream_k", "sgemm_column_order",
         "sgemm_edge_strips", "sgemm_padded_b")  # fmt: skip
# Rungs not yet in the stored benchmark, so not yet in the catalogue (sgemm.CANDIDATE_RUNGS).
CANDIDATES: list[str] = [
    "sgemm_small_tile",
    "sgemm_split_k",
    "sgemm_skinny",
    "sgemm_skinny_n",
    "sgemm_gemv_split",
    "sgemm_cluster_split_k",
]
# Rungs for M of 1 to 16 only: the grid test takes the odd shapes' N and K with M cut to their rows.
SKINNY = ("sgemm_skinny", "sgemm_gemv_split")
# And for N of 1 to 16 only: N cut to their columns.
SKINNY_N = ("sgemm_skinny_n",)
ARCHS = ("sm_90", "sm_80")
ODD_SHAPES = [Shape(1, 1, 1), Shape(17, 33, 65), Shape(127, 129, 131), Shape(1000, 1000, 1000), Shape(4097, 4095, 3),
              Shape(8192, 8192, 1024), Shape(4096, 1024, 8192)]  # fmt: skip
EVERY_CONFIG = [(kid, c) for kid in LADDER + CANDIDATES for c in catalogue.configs(kid)]


def test_ladder_is_in_the_catalogue_in_order() -> None:
    ids = catalogue.kernel_ids()
    assert [i for i in ids if i.startswith("sgemm_")] == LADDER
    for kid in LADDER:
        spec = catalogue.get(kid)
        assert spec.problem is sgemm_problem.SGEMM
        assert spec.dtypes == ("float32",)
        assert not spec.takes_block_edge and not spec.templated_on_edge
        text = spec.source_text()
        assert text.startswith(f"// {kid}:"), "each file opens with the idea it adds"
        assert f"{spec.function}(" in text


def test_template_arguments_follow_the_dtype() -> None:
    spec = catalogue.get("sgemm_multistage")
    assert spec.name_expression("float32", 0) == "sgemm_multistage<float, 128, 128, 16, 32, 64, 3, 2>"
    # The documents' kernels are unchanged by the extra field.
    assert catalogue.get("tiled").name_expression("float32", 16) == "tiled<float, 16>"
    assert catalogue.get("col_buffered").name_expression("float32", 0) == "col_buffered<float>"


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kernel_id", LADDER)
def test_default_compiles_without_spills(kernel_id: str, arch: str) -> None:
    spec = catalogue.get(kernel_id)
    res = compile_kernel(spec, 0, "float32", arch).resources
    assert res.spill_bytes == 0 and res.stack_bytes == 0, res
    c = spec.config
    r = sgemm.LADDER.rung(kernel_id)
    # The static shared memory the model predicts is what ptxas allocated (none
    # for the rungs whose tiles live in the launch's dynamic shared memory).
    if r.dynamic_smem and spec.workspace_bytes is not None:
        assert res.smem_bytes <= 256  # a block's note of its next piece of work, or of its ticket
    else:
        assert res.smem_bytes == (0 if r.dynamic_smem else r.smem_bytes(c))
    threads = r.threads(c)
    assert res.registers <= min(255, 65536 // (threads * c.get("MIN_BLOCKS", 1)))


@pytest.mark.slow
def test_every_config_compiles_without_spills() -> None:
    """All of configs() for both architectures (compiled two at a time), each
    where it runs: sgemm_cluster_split_k needs sm_90 (tests/test_sgemm_shapes.py
    checks that sm_80 is refused with the reason)."""

    def build(job: tuple[str, dict, str]) -> tuple[str, dict, str, object]:
        kid, c, arch = job
        return kid, c, arch, compile_kernel(catalogue.variant(kid, c), 0, "float32", arch).resources

    def runs_on(kid: str, c: dict, arch: str) -> bool:
        try:
            return catalogue.variant(kid, c).compile_arch(arch) == arch
        except DeviceLimitError:
            return False

    jobs = [(kid, c, arch) for kid, c in EVERY_CONFIG for arch in ARCHS if runs_on(kid, c, arch)]
    assert {arch for _kid, _c, arch in jobs} == set(ARCHS)
    with ThreadPoolExecutor(2) as pool:
        built = list(pool.map(build, jobs))
    bad = [(kid, c, arch, res) for kid, c, arch, res in built if res.spill_bytes or res.stack_bytes]
    assert not bad
    for kid, c, _arch, res in built:
        threads = sgemm.LADDER.rung(kid).threads(c)
        assert res.registers * threads <= 65536, (kid, c)
        assert res.smem_bytes <= sgemm_family.MAX_STATIC_SMEM


def _edge_strips_cover(shape: Shape, grid: tuple[int, int], rows: int, cols: int) -> bool:
    """16_edge_strips.cu's dispatch, written out again: blocks (x, y) below the
    tile rows are tiles; the rest are edge blocks e = (y - tile rows) gx + x,
    first the strip below the tiles (32 columns each, all N), then the one to
    their right (32 rows each, above the lower strip). True when every output of
    C is computed by exactly one block (counted on a sample of rows and columns
    when C is large)."""
    m, n, width = shape.m, shape.n, EDGE_MAX
    m_t, n_t = tiled_extent(m, rows), tiled_extent(n, cols)
    gx, gy = grid
    tile_rows = math.ceil(m_t / rows)
    rows_below = math.ceil(n / width) if m_t < m else 0
    pieces = []  # (row range, column range) per block
    for y in range(gy):
        for x in range(gx):
            if y < tile_rows:
                r0, c0 = y * rows, x * cols
                pieces.append(((r0, min(r0 + rows, m)), (c0, min(c0 + cols, n))))
                continue
            e = (y - tile_rows) * gx + x
            if e < rows_below:
                pieces.append(((m_t, m), (e * width, min(e * width + width, n))))
            elif n_t < n and (e - rows_below) * width < m_t:
                r0 = (e - rows_below) * width
                pieces.append(((r0, min(r0 + width, m_t)), (n_t, n)))
    sample_rows = sorted({*range(min(m, 64)), *range(max(0, m - 64), m), m // 2})
    sample_cols = sorted({*range(min(n, 64)), *range(max(0, n - 300), n), n // 2})
    for i in sample_rows:
        for j in sample_cols:
            owners = sum(1 for (r0, r1), (c0, c1) in pieces if r0 <= i < r1 and c0 <= j < c1)
            if owners != 1:
                return False
    return True


@pytest.mark.parametrize(
    ("kernel_id", "config"), EVERY_CONFIG, ids=[f"{k}-{tuple(c.values())}" for k, c in EVERY_CONFIG]
)
def test_grid_covers_c_for_any_shape(kernel_id: str, config: dict) -> None:
    spec = catalogue.variant(kernel_id, config)
    rows, cols = sgemm.block_tile(spec)
    threads = sgemm.threads_per_block(spec)
    for shape in ODD_SHAPES:
        if kernel_id in SKINNY:
            shape = Shape(min(shape.m, rows), shape.n, shape.k)
        if kernel_id in SKINNY_N:
            shape = Shape(shape.m, min(shape.n, cols), shape.k)
        assert not spec.violations(shape, 0, "float32"), (kernel_id, shape)
        gx, gy, gz = spec.grid(shape, 0)
        bx, by, bz = spec.block(shape, 0)
        assert bx * by * bz == threads
        if kernel_id == "sgemm_gemv_split":
            # A block per strip of columns (x) and slice of K (y), all M rows.
            assert (gy, gz) == (config["SPLITS"], 1) and (gx - 1) * cols < shape.n <= gx * cols
            continue
        if kernel_id == "sgemm_cluster_split_k":
            # GROUPS clusters of SPLITS blocks along x per tile (the slices of its K), a row per tile row.
            assert spec.cluster == (config["SPLITS"], 1, 1) and gz == 1
            slices = config["SPLITS"] * config["GROUPS"]
            assert (gx, gy) == (math.ceil(shape.n / cols) * slices, math.ceil(shape.m / rows))
            assert threads * sgemm.outputs_per_thread(spec) == rows * cols
            continue
        # sgemm_split_k: one layer of the grid per slice of K.
        assert gz == config.get("SPLITS", 1)
        if kernel_id in SKINNY:
            # A block per strip of columns, all M rows; every thread 4 columns of every row.
            assert gy == 1 and (gx - 1) * cols < shape.n <= gx * cols
            assert cols == 4 * config["COL_VECS"] and sgemm.outputs_per_thread(spec) == 4 * rows
            continue
        if kernel_id in SKINNY_N:
            # A block per BR rows, all N columns; every thread all columns of THREAD_ROWS rows, with
            # ROW_LANES lanes on each row.
            assert gy == 1 and (gx - 1) * rows < shape.m <= gx * rows
            assert threads * config["THREAD_ROWS"] == rows * config["ROW_LANES"]
            assert cols == config["COLS"] and sgemm.outputs_per_thread(spec) == config["THREAD_ROWS"] * cols
            continue
        tiles_m, tiles_n = math.ceil(shape.m / rows), math.ceil(shape.n / cols)
        if spec.persistent:
            # A work unit per STREAM_K_MIN_RUN k-tiles of each tile; the runner launches as many
            # blocks as fit, which walk over them.
            runs = math.ceil(math.ceil(shape.k / config["BK"]) / STREAM_K_MIN_RUN)
            assert (gx, gy) == (tiles_m * tiles_n * runs, 1)
            assert threads * sgemm.outputs_per_thread(spec) == rows * cols
            continue
        if kernel_id in ("sgemm_edge_strips", "sgemm_padded_b"):
            # sgemm_padded_b: the rows of blocks that copy B come first (N % 4 != 0).
            pad_rows = math.ceil(PAD_BLOCKS / gx) if kernel_id == "sgemm_padded_b" and shape.n % 4 else 0
            assert _edge_strips_cover(shape, (gx, gy - pad_rows), rows, cols), shape
            continue
        group = config.get("GROUP_M", 1)
        # Block (x, y) computes tile row y * group + x % group, tile column x // group.
        assert (gx, gy) == (tiles_n * group, math.ceil(tiles_m / group))
        covered = {(y * group + x % group, x // group) for x in range(min(gx, 3 * group)) for y in range(gy)}
        assert {(i, j) for i in range(tiles_m) for j in range(min(tiles_n, 3))} <= covered
        # Every thread's outputs, over the whole grid, cover C (overhanging at the edges).
        assert threads * sgemm.outputs_per_thread(spec) == rows * cols


def test_configs_start_with_the_default_and_respect_limits() -> None:
    for kid in LADDER + CANDIDATES:
        found = catalogue.configs(kid)
        assert found[0] == sgemm.LADDER.rung(kid).config()
        assert len({tuple(c.items()) for c in found}) == len(found)
        r = sgemm.LADDER.rung(kid)
        for c in found:
            assert not sgemm.LADDER.violations(r, c)
            assert 32 <= r.threads(c) <= 1024 and r.threads(c) % 32 == 0
            assert r.smem_bytes(c) <= (sgemm_family.MAX_DYNAMIC_SMEM if r.dynamic_smem else 48 * 1024)
            assert r.outputs(c) <= r.max_accumulators
            if kid not in (*LARGE, "sgemm_cluster_split_k"):  # the large tile's loop, split
                assert not r.dynamic_smem and r.max_accumulators == sgemm_family.MAX_ACCUMULATORS


def test_candidates_run_outside_the_catalogue() -> None:
    """A rung the stored benchmark has not measured yet is not in the catalogue
    (tests/test_worklog.py holds the catalogue to that benchmark), but
    configs(), variant() and catalogue.point(..., spec=) take it."""
    ids = catalogue.kernel_ids()
    for kid in CANDIDATES:
        assert kid not in ids and kid not in {s.id for s in sgemm.SGEMM_KERNELS}
        spec = catalogue.variant(kid, {})
        assert spec.problem is sgemm_problem.SGEMM and not spec.takes_block_edge
        text = spec.source_text()
        assert text.startswith(f"// {kid}:") and f"{spec.function}(" in text
        rows = sgemm.block_tile(spec)[0] if kid in SKINNY else 0
        shape = (
            Shape(rows, 129, 131) if kid in SKINNY else Shape(127, 13, 131) if kid in SKINNY_N else Shape(127, 129, 131)
        )
        assert catalogue.point(kid, shape, spec=spec).spec is spec
    assert [r.id for r in sgemm.CANDIDATE_RUNGS] == CANDIDATES
    assert not set(CANDIDATES) & set(LADDER)


@pytest.mark.parametrize("kid", LARGE)
def test_large_tile_geometry_and_dynamic_shared_memory(kid: str) -> None:
    spec = catalogue.variant(kid, {})
    spread = kid not in ("sgemm_large_tile", "sgemm_lean_loop")
    stages = 4 if spread else 3  # a tile arrives a step later when the copies are spread
    # Rungs 16 and 17 take their launch facts after the configuration (see the test below).
    facts = "".join(f", {v}" for v in spec.template_fixed)
    assert spec.name_expression("float32", 0) == f"{kid}<float, 128, 256, 16, 64, 64, {stages}, 1{facts}>"
    p = catalogue.point(kid, Shape(1000, 1000, 1000), spec=spec)
    # Stream-K counts work units: each of the 32 tiles in runs of STREAM_K_MIN_RUN
    # k-tiles (63 k-tiles of 16: 8 runs), so a few tiles still reach every SM.
    runs = -(-63 // STREAM_K_MIN_RUN)
    assert p.block == (256, 1, 1) and p.grid == ((32 * runs, 1, 1) if spec.persistent else (4, 8, 1))
    assert p.dynamic_smem == stages * 16 * (128 + 256) * 4  # 72 or 96 KB: needs the opt-in
    assert sgemm.outputs_per_thread(spec) == 128
    found = catalogue.configs(kid)
    assert 2 <= len(found) <= 6
    # sgemm_stream_k leaves out the 256 x 128 tile, for which ptxas spills.
    tiles = {(128, 256)} if kid == "sgemm_stream_k" else {(128, 256), (256, 128)}
    assert {(c["BM"], c["BN"]) for c in found} == tiles
    assert all(sgemm.threads_per_block(catalogue.variant(kid, c)) == 256 for c in found)
    # Some configurations fit 48 KB (no opt-in), others need it.
    sizes = {sgemm.LADDER.rung(kid).smem_bytes(c) for c in found}
    assert min(sizes) <= 48 * 1024 < max(sizes)
    with pytest.raises(ConstraintError, match="registers"):
        catalogue.variant(kid, {"MIN_BLOCKS": 2})  # 128 accumulators in 128 registers
    with pytest.raises(ConstraintError, match="dynamic shared memory"):
        catalogue.variant(kid, {"BK": 32, "STAGES": 8})  # 384 KB
    # 192 KB a block is allowed, but two of them do not fit one SM's 228 KB.
    r = sgemm.LADDER.rung(kid)
    too_many = sgemm.LADDER.violations(r, r.config({"BK": 32, "STAGES": 4, "MIN_BLOCKS": 2}))
    assert any("do not fit an SM" in v and "196608 bytes" in v for v in too_many), too_many


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kid", LARGE)
def test_large_tile_uses_the_registers_of_one_block_per_sm(kid: str, arch: str) -> None:
    """MIN_BLOCKS = 1: no spill, no stack, no static shared memory (but a
    block's note of its next piece of work or its ticket), and more than the 128
    registers that capped every rung before it."""
    spec = catalogue.variant(kid, {})
    res = compile_kernel(spec, 0, "float32", arch).resources
    assert res.spill_bytes == 0 and res.stack_bytes == 0, res
    assert res.smem_bytes == 0 or (spec.workspace_bytes is not None and 0 < res.smem_bytes <= 256), res
    assert 128 < res.registers <= 255


class _FakeDriver:
    """The four cuda.bindings.driver calls allow_dynamic_smem may make, recorded."""

    def __init__(self, driver, status) -> None:
        self.driver, self.status, self.calls = driver, status, []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        d = self.driver
        monkeypatch.setattr(d, "cuDeviceGet", lambda i: (d.CUresult.CUDA_SUCCESS, d.CUdevice(i)))
        monkeypatch.setattr(d, "cuKernelSetAttribute", lambda *a: self.calls.append(("kernel", *a)) or (self.status,))
        monkeypatch.setattr(d, "cuFuncSetAttribute", lambda *a: self.calls.append(("func", *a)) or (self.status,))


def test_dynamic_shared_memory_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over 48 KB (static + dynamic) the runner sets the kernel's
    MAX_DYNAMIC_SHARED_SIZE_BYTES before launching; at or under it, nothing."""
    from types import SimpleNamespace

    from cuda.bindings import driver

    from gemmlab.backends.nvrtc import allow_dynamic_smem
    from gemmlab.core.errors import DeviceLimitError

    attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    fake = _FakeDriver(driver, driver.CUresult.CUDA_SUCCESS)
    fake.install(monkeypatch)
    kernel = SimpleNamespace(handle=driver.CUkernel(1234))  # what cuda.core's get_kernel holds
    allow_dynamic_smem(kernel, 0, 48 * 1024, 0)
    allow_dynamic_smem(kernel, 0, 0, 0)
    assert fake.calls == []
    allow_dynamic_smem(kernel, 0, 73728, 1)
    ((how, attr, value, handle, device),) = fake.calls
    assert (how, attr, value, int(handle), int(device)) == ("kernel", attribute, 73728, 1234, 1)
    fake.calls.clear()
    allow_dynamic_smem(SimpleNamespace(handle=driver.CUfunction(99)), 1024, 48 * 1024, 0)
    ((how, handle, attr, value),) = fake.calls
    assert (how, int(handle), attr, value) == ("func", 99, attribute, 48 * 1024)

    _FakeDriver(driver, driver.CUresult.CUDA_ERROR_INVALID_VALUE).install(monkeypatch)
    with pytest.raises(DeviceLimitError, match="73728 bytes of dynamic shared memory"):
        allow_dynamic_smem(kernel, 0, 73728, 0)


def test_variant_keeps_defaults_and_changes_geometry() -> None:
    spec = catalogue.variant("sgemm_2d_blocktile", {"BM": 64, "BN": 64})
    assert spec.template_extra == (64, 64, 8, 8, 8)
    assert spec.block(Shape.square(100), 0) == (64, 1, 1)
    assert spec.grid(Shape(100, 300, 7), 0) == (5, 2, 1)
    assert spec.config == {"BM": 64, "BN": 64, "BK": 8, "TM": 8, "TN": 8}


def test_variant_refuses_what_the_kernel_cannot_take() -> None:
    with pytest.raises(ConstraintError, match="shared memory"):
        catalogue.variant("sgemm_multistage", {"BK": 16, "STAGES": 4})  # 64 KB
    with pytest.raises(ConstraintError, match="warp tiles"):
        catalogue.variant("sgemm_warptile", {"WM": 48})
    with pytest.raises(ConstraintError, match="registers"):
        catalogue.variant("sgemm_warptile", {"WM": 64, "WN": 64})  # 128 accumulators per thread
    with pytest.raises(ConstraintError, match="swizzle"):
        catalogue.variant("sgemm_swizzled", {"BK": 12})
    with pytest.raises(UnknownName, match="no parameter TILE"):
        catalogue.variant("sgemm_warptile", {"TILE": 32})
    with pytest.raises(UnknownName, match="not a kernel of the FP32 ladder"):
        sgemm.LADDER.configs("tiled")


def test_grid_y_limit_names_the_one_dimensional_rung() -> None:
    tall = Shape(65536 * 32 + 1, 1, 1)  # more rows of 32 than gridDim.y takes
    with pytest.raises(ConstraintError) as info:
        catalogue.point("sgemm_coalesced", tall)
    assert "grid y" in str(info.value) and "sgemm_swizzle_l2" in str(info.value)
    assert catalogue.point("sgemm_swizzle_l2", tall).grid == (8, math.ceil(tall.m / 128 / 8), 1)


def test_cgma_models() -> None:
    cgma = {kid: catalogue.get(kid).cgma(Shape.square(4096), 0) for kid in LADDER}
    assert cgma["sgemm_coalesced"] == 1.0
    assert cgma["sgemm_smem"] == 32.0
    assert cgma["sgemm_1d_blocktile"] == 64.0  # 64 x 64 tile, one element per access
    assert cgma["sgemm_2d_blocktile"] == 128.0
    assert cgma["sgemm_vectorized"] == 512.0  # float4 accesses
    assert cgma["sgemm_warptile"] == 512.0
    assert cgma["sgemm_double_buffer"] == pytest.approx(204.8)  # A in 4-byte copies, B in 16-byte


def test_baseline_is_named_for_what_it_computes() -> None:
    assert sgemm_problem.baseline_name() == "cuBLAS SGEMM (cublasGemmEx FP32, same alpha and beta)"


def test_device_bytes_cover_inputs_outputs_and_reference() -> None:
    p = catalogue.point("sgemm_multistage", Shape(100, 200, 300))
    elems = 100 * 300 + 300 * 200 + 3 * 100 * 200
    assert sgemm_problem.SGEMM.device_bytes(p) == elems * 12 + guard_bytes(200 * 4)  # and C's guard bands
    assert p.min_bytes == (100 * 300 + 300 * 200 + 2 * 100 * 200) * 4


# Strips of 1 .. 32 rows below the tiles and columns to their right, one or both,
# and remainders just over the strip (33: the moved tile as in rung 13).
STRIP_SHAPES = [Shape(4097, 4097, 64), Shape(4096, 4097, 64), Shape(4097, 4096, 64), Shape(160, 288, 600),
                Shape(129, 257, 40), Shape(161, 289, 8), Shape(4128, 4128, 512), Shape(300, 4100, 70),
                Shape(33, 4097, 50), Shape(100, 300, 50), Shape(1, 1, 1)]  # fmt: skip


@pytest.mark.parametrize("shape", STRIP_SHAPES, ids=str)
def test_edge_strips_cover_c_once(shape: Shape) -> None:
    spec = catalogue.variant("sgemm_edge_strips", {})
    gx, gy, gz = spec.grid(shape, 0)
    assert gz == 1 and _edge_strips_cover(shape, (gx, gy), 128, 256)


def test_edge_strips_split_only_narrow_remainders() -> None:
    assert tiled_extent(4097, 128) == 4096  # 1 row below: a strip
    assert tiled_extent(4096 + 32, 128) == 4096  # 32: still a strip
    assert tiled_extent(4096 + 33, 128) == 4096 + 33  # 33: tiles, the last moved up
    assert tiled_extent(4095, 256) == 4095  # 255 left over: tiles
    assert tiled_extent(100, 128) == 100  # smaller than a tile: the guarded tile
    spec = catalogue.variant("sgemm_edge_strips", {})
    # 4096: no strip, the same grid as rung 15; 4097: 16 x 32 tiles, then 129 blocks
    # for the row below (32 columns each) and 128 for the column (32 rows each).
    assert spec.grid(Shape.square(4096), 0) == (16, 32, 1)
    assert spec.grid(Shape.square(4097), 0) == (16, 32 + math.ceil((129 + 128) / 16), 1)


def test_edge_strips_refuse_a_grid_too_tall() -> None:
    """One column of tiles and a strip to its right 32 rows a block: M of 2.2
    million rows needs more than 65535 rows of blocks, a clear ConstraintError
    before any launch."""
    spec = catalogue.variant("sgemm_edge_strips", {})
    bad = spec.violations(Shape(2_200_000, 257, 8), 0, "float32")
    assert bad and "65535" in bad[0] and "grid y" in bad[0]
    assert not spec.violations(Shape(2_000_000, 256, 8), 0, "float32")


def test_padded_b_adds_its_copy_only_when_rows_of_b_are_unaligned() -> None:
    spec = catalogue.variant("sgemm_padded_b", {})
    edge = catalogue.variant("sgemm_edge_strips", {})
    for shape in (Shape.square(4096), Shape(4097, 4096, 4097), Shape(300, 1000, 70)):
        assert spec.grid(shape, 0) == edge.grid(shape, 0)  # N % 4 == 0: no copy, rung 16's grid
        assert spec.workspace_bytes(shape, 1) == 16  # the two counters only
    for shape in (Shape.square(4097), Shape.square(4095), Shape(129, 257, 40)):
        gx, gy, _ = spec.grid(shape, 0)
        assert gy == edge.grid(shape, 0)[1] + math.ceil(PAD_BLOCKS / gx)
        assert spec.workspace_bytes(shape, 1) == 16 + 4 * shape.k * math.ceil(shape.n / 4) * 4
    # B of 46340 x 46341 floats fits 32-bit indexing, padded to 46344 columns it does not.
    assert 46340 * 46341 <= MAX_INDEX < 46340 * 46344
    bad = spec.violations(Shape(8, 46341, 46340), 0, "float32")
    assert any("padded" in v and "2^31" in v for v in bad), bad


def test_edge_blocks_need_their_shared_memory() -> None:
    """An edge block stages 256 k-slices of up to 32 rows (padded to 36) in the
    ring's shared memory: a ring smaller than that is refused by name."""
    for kid in ("sgemm_edge_strips", "sgemm_padded_b"):
        small = {**sgemm.LADDER.rung(kid).config(), "BK": 8, "STAGES": 2}  # 2 x 8 x 384 = 6144 floats
        found = sgemm.LADDER.violations(sgemm.LADDER.rung(kid), small)
        assert any("fewer than an edge block's 9216" in v for v in found), found


def test_launch_facts_reach_the_kernels_as_template_arguments() -> None:
    """EDGE_MAX, EDGE_KC and PAD_BLOCKS are written once, in the spec: rungs 16
    and 17 get them as template arguments, after their configuration, and do
    not define them again; the configuration (what is stored) leaves them out."""
    edge, padded = catalogue.get("sgemm_edge_strips"), catalogue.get("sgemm_padded_b")
    facts = f"{EDGE_MAX}, {EDGE_KC}"
    assert edge.name_expression("float32", 0).endswith(f", 4, 1, {facts}>")
    assert padded.name_expression("float32", 0).endswith(f", 4, 1, {facts}, {PAD_BLOCKS}>")
    assert "EDGE_MAX" not in edge.config and "PAD_BLOCKS" not in padded.config
    for spec in (edge, padded):
        text = spec.source_text()
        assert "static_assert(THREADS == EDGE_KC" in text
        assert not re.search(r"constexpr int (EDGE_MAX|EDGE_KC|PAD_BLOCKS)\b", text)


def test_no_rung_includes_another_rungs_source() -> None:
    """Shared bodies live in .cuh headers; a rung's .cu holds its own kernel."""
    folder = resources.files("gemmlab").joinpath("kernels")
    for family in ("doc", "memory", "sgemm", "tensor", "peak"):
        for path in folder.joinpath(family).iterdir():
            if path.name.endswith((".cu", ".cuh")):
                assert not re.search(r'#include\s+"[^"]+\.cu"', path.read_text()), path.name


def test_a_cancelling_c_is_judged_against_its_terms_magnitude() -> None:
    """On an H100 (2026-11-24) sgemm_1d_blocktile failed at 1 x 1 x 1 on a
    redrawn input set: 1.5 a b - 0.75 c0 had cancelled to a small number, and
    float32's correct rounding of each term was 2.3e-5 of it. With the terms'
    magnitude as the floor, float32's rounding is judged against what was
    added, and an error the size of that magnitude still fails."""
    import numpy as np

    from gemmlab.problems.base import relative_error, sum_magnitude

    a, b = np.array([[0.6]], np.float32), np.array([[0.7]], np.float32)
    c0 = np.array([[float(np.float32(1.5 * 0.6 * 0.7 / 0.75)) * 1.0001]], np.float32)
    exact = 1.5 * a.astype(np.float64) @ b.astype(np.float64) - 0.75 * c0.astype(np.float64)
    got = (np.float32(1.5) * (a * b) + np.float32(-0.75) * c0).astype(np.float32)
    scale = sum_magnitude(np, a, b, 1.5, c0, -0.75)
    assert relative_error(np, got, exact) > 1e-5  # against the cancelled C alone: looks wrong
    assert relative_error(np, got, exact, scale) < 1e-6  # against the terms: float32's rounding
    assert relative_error(np, got + np.float32(scale * 1e-3), exact, scale) > 1e-5  # a real error still shows


def test_sum_magnitude_is_the_root_of_the_terms_squares() -> None:
    """sum_magnitude against its definition, term by term, and against the
    reference's own norm on a large random C, where signs do not conspire."""
    import numpy as np

    from gemmlab.problems.base import sum_magnitude

    rng = np.random.default_rng(5)
    a, b, c0 = rng.uniform(-1, 1, (3, 5)), rng.uniform(-1, 1, (5, 4)), rng.uniform(-1, 1, (3, 4))
    terms = (1.5 * a[:, :, None] * b[None, :, :]) ** 2  # (i, l, j)
    want = (terms.sum() + ((0.75 * c0) ** 2).sum()) ** 0.5
    assert sum_magnitude(np, a, b, 1.5, c0, -0.75) == pytest.approx(want, rel=1e-12)
    a, b, c0 = rng.uniform(-1, 1, (256, 512)), rng.uniform(-1, 1, (512, 256)), rng.uniform(-1, 1, (256, 256))
    ref = 1.5 * a @ b - 0.75 * c0
    assert sum_magnitude(np, a, b, 1.5, c0, -0.75) == pytest.approx(float(np.linalg.norm(ref)), rel=0.05)
