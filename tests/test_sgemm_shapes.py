"""Rungs 18 to 21 (issue 21) without a GPU: every configuration of sgemm_small_tile,
sgemm_split_k, sgemm_skinny and sgemm_skinny_n compiles for sm_90 without
spills; their search spaces stay small; the split of K, the workspace and the
skinny kernels' row and column limits are what the .cu files expect; refusals
name the rule and the fix."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gemmlab.backends.nvrtc import compile_kernel
from gemmlab.core.errors import ConstraintError, DeviceLimitError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.sgemm import spec as sgemm

# Rungs 18 to 23: the FP32 ladder's candidates (tests/test_sgemm.py names them one by one).
NEW_RUNGS = tuple(r.id for r in sgemm.CANDIDATE_RUNGS)
REVIEW = Path(__file__).resolve().parent.parent / "docs" / "synchronisation.md"


def test_every_configuration_compiles_for_sm90_without_spills() -> None:
    jobs = [(kid, c) for kid in NEW_RUNGS for c in catalogue.configs(kid)]

    def build(job: tuple[str, dict]) -> tuple[str, dict, object]:
        kid, c = job
        return kid, c, compile_kernel(catalogue.variant(kid, c), 0, "float32", "sm_90").resources

    first = build(jobs[0])  # imports the compiler's modules before two threads race to
    with ThreadPoolExecutor(2) as pool:
        built = [first, *pool.map(build, jobs[1:])]
    assert len(built) == sum(len(catalogue.configs(k)) for k in NEW_RUNGS)
    for kid, c, res in built:
        assert res.spill_bytes == 0 and res.stack_bytes == 0, (kid, c, res)
        r = sgemm.LADDER.rung(kid)
        # Static shared memory: what the spec's model says, which is what the runner plans occupancy with
        # (none for a rung whose shared memory is all dynamic, sized by the launch).
        assert res.smem_bytes == (0 if r.dynamic_smem else r.smem_bytes(c)), (kid, c, res)
        assert res.registers * r.threads(c) * c.get("MIN_BLOCKS", 1) <= 65536, (kid, c, res)


@pytest.mark.parametrize("kid", NEW_RUNGS)
def test_search_spaces_tune_quickly(kid: str) -> None:
    found = catalogue.configs(kid)
    r = sgemm.LADDER.rung(kid)
    # Every configuration the search names is taken: none is silently dropped by a rule.
    assert len(found) == 1 + len(r.search) and 8 <= len(found) <= 24


def test_small_tiles_give_every_sm_work_at_1024() -> None:
    """The point of rung 18: at 1024 x 1024 its tiles make at least 128 blocks
    (rung 17's 128 x 256 tile makes 32), most configurations several per SM of 132."""
    blocks = []
    for c in catalogue.configs("sgemm_small_tile"):
        gx, gy, gz = catalogue.variant("sgemm_small_tile", c).grid(Shape.square(1024), 0)
        blocks.append(gx * gy * gz)
    assert min(blocks) >= 128 and sorted(blocks)[len(blocks) // 2] >= 2 * 132
    large = catalogue.get("sgemm_padded_b").grid(Shape.square(1024), 0)
    assert large[0] * large[1] == 32


def _slices(k_tiles: int, splits: int) -> list[range]:
    """19_split_k.cu's slices: slice z takes k-tiles floor(z T / S) .. floor((z + 1) T / S) - 1."""
    return [range(z * k_tiles // splits, (z + 1) * k_tiles // splits) for z in range(splits)]


@pytest.mark.parametrize(("k_tiles", "splits"), [(1, 4), (2, 4), (9, 4), (1024, 16), (7, 3), (5, 16)])
def test_split_k_slices_cover_k_once_and_are_empty_only_when_k_is_short(k_tiles: int, splits: int) -> None:
    slices = _slices(k_tiles, splits)
    assert [t for s in slices for t in s] == list(range(k_tiles))
    lengths = [len(s) for s in slices]
    assert max(lengths) - min(lengths) <= 1
    assert (0 in lengths) == (k_tiles < splits)


def test_split_k_grid_and_workspace() -> None:
    spec = catalogue.variant("sgemm_split_k", {"SPLITS": 8})
    shape = Shape(1000, 1000, 16384)
    gx, gy, gz = spec.grid(shape, 0)
    assert (gx, gy, gz) == (16, 16, 8)  # 64 x 64 tiles, 8 slices
    tiles = gx * gy
    # 256 counters (1 KB, already a multiple of 16 bytes), then 8 partial tiles of 64 x 64 floats per tile.
    assert spec.workspace_bytes(shape, gx * gy * gz) == 4 * tiles + tiles * 8 * 64 * 64 * 4
    # 3 tiles: 12 bytes of counters padded to 16.
    small = catalogue.variant("sgemm_split_k", {})
    blocks = math.prod(small.grid(Shape(64, 150, 7), 0))
    assert blocks == 3 * 4 and small.workspace_bytes(Shape(64, 150, 7), blocks) == 16 + 12 * 64 * 64 * 4
    assert spec.name_expression("float32", 0) == "sgemm_split_k<float, 64, 64, 16, 32, 32, 3, 8>"


def test_split_k_refuses_a_single_slice_by_name() -> None:
    with pytest.raises(ConstraintError, match="SPLITS must be at least 2"):
        catalogue.variant("sgemm_split_k", {"SPLITS": 1})


def test_split_k_carries_its_synchronisation_argument() -> None:
    """As tests/test_stress.py asks of the kernels the stress run checks (this
    one joins that list when it moves into the catalogue)."""
    lines = catalogue.variant("sgemm_split_k", {}).source_text().splitlines()
    header = "\n".join(lines[: next(i for i, x in enumerate(lines) if not x.startswith("//"))])
    assert "\n// Synchronisation" in header
    for handshake in ("__threadfence", "atomicAdd", "__syncthreads_or", "zeroes it"):
        assert handshake in header, handshake
    assert "## sgemm_split_k " in REVIEW.read_text()


def test_cluster_split_k_carries_its_synchronisation_argument() -> None:
    lines = catalogue.variant("sgemm_cluster_split_k", {}).source_text().splitlines()
    header = "\n".join(lines[: next(i for i, x in enumerate(lines) if not x.startswith("//"))])
    assert "\n// Synchronisation" in header
    for handshake in ("barrier.cluster.arrive.release", "ld.shared::cluster", "__threadfence", "atomicAdd",
                      "__syncthreads_or", "zeroes it"):  # fmt: skip
        assert handshake in header, handshake
    assert "## sgemm_cluster_split_k " in REVIEW.read_text()


def test_skinny_refuses_more_rows_than_its_configuration_holds() -> None:
    spec = catalogue.variant("sgemm_skinny", {"ROWS": 8})
    assert not spec.violations(Shape(8, 4096, 4096), 0, "float32")
    with pytest.raises(ConstraintError) as info:
        catalogue.point("sgemm_skinny", Shape(9, 4096, 4096), spec=spec)
    message = str(info.value)
    assert "M = 9 is over 8" in message and "ROWS >= M" in message
    assert "sgemm_swizzle_l2" in info.value.fix  # a rung that takes any M
    # The default holds 16 rows, the most any configuration does.
    default = catalogue.variant("sgemm_skinny", {})
    assert not default.violations(Shape(16, 7, 3), 0, "float32")
    assert default.violations(Shape(17, 7, 3), 0, "float32")


def test_skinny_rules_name_what_they_refuse() -> None:
    with pytest.raises(ConstraintError, match="COL_VECS must be 2, 4, 8, 16 or 32"):
        catalogue.variant("sgemm_skinny", {"COL_VECS": 12})
    with pytest.raises(ConstraintError, match="ROWS must be from 1 to 16"):
        catalogue.variant("sgemm_skinny", {"ROWS": 32})


def test_skinny_geometry() -> None:
    spec = catalogue.variant("sgemm_skinny", {})
    assert spec.grid(Shape(16, 4096, 4096), 0) == (128, 1, 1)  # strips of 32 columns
    assert spec.grid(Shape(1, 4097, 5), 0) == (129, 1, 1)
    assert spec.block(Shape(1, 1, 1), 0) == (256, 1, 1)
    assert spec.name_expression("float32", 0) == "sgemm_skinny<float, 16, 8, 8, 8>"
    # CGMA: per chunk 8 float4s of B and 16 x 8 / 8 = 16 elements of A, for 2 x 16 x 4 x 8 FLOPs.
    assert spec.cgma(Shape(16, 4096, 4096), 0) == pytest.approx(1024 / 24)


def test_skinny_n_refuses_more_columns_than_its_configuration_holds() -> None:
    spec = catalogue.variant("sgemm_skinny_n", {"COLS": 8})
    assert not spec.violations(Shape(4096, 8, 4096), 0, "float32")
    with pytest.raises(ConstraintError) as info:
        catalogue.point("sgemm_skinny_n", Shape(4096, 9, 4096), spec=spec)
    message = str(info.value)
    assert "N = 9 is over 8" in message and "COLS >= N" in message
    assert "sgemm_swizzle_l2" in info.value.fix  # a rung that takes any N
    default = catalogue.variant("sgemm_skinny_n", {})
    assert not default.violations(Shape(3, 16, 7), 0, "float32")
    assert default.violations(Shape(3, 17, 7), 0, "float32")


def test_skinny_n_rules_name_what_they_refuse() -> None:
    with pytest.raises(ConstraintError, match="COLS must be 1, 2, 4, 8, 16 or 32"):
        catalogue.variant("sgemm_skinny_n", {"COLS": 3})
    # 32 columns: every thread copies one column of B's chunk, so 4 warps at least; 64 sums a thread at most.
    with pytest.raises(ConstraintError, match="WARPS x 8 must be a multiple of COLS"):
        catalogue.variant("sgemm_skinny_n", {"COLS": 32, "K_STEPS": 4, "WARPS": 2})
    with pytest.raises(ConstraintError, match="64 at most"):
        catalogue.variant("sgemm_skinny_n", {"COLS": 32, "K_STEPS": 2, "THREAD_ROWS": 4})
    assert catalogue.variant("sgemm_skinny_n", {"COLS": 32, "K_STEPS": 4}).config["COLS"] == 32
    with pytest.raises(ConstraintError, match="ROW_LANES must be 4, 8, 16 or 32"):
        catalogue.variant("sgemm_skinny_n", {"ROW_LANES": 2})
    # 32 lanes a row and 8 loads in flight: a 68 KB chunk of B, over the 48 KB of static shared memory.
    with pytest.raises(ConstraintError, match="static shared memory"):
        catalogue.variant("sgemm_skinny_n", {"ROW_LANES": 32})


def test_skinny_n_geometry() -> None:
    spec = catalogue.variant("sgemm_skinny_n", {})
    # 4 warps of 4 rows (8 lanes a row): 16 rows a block.
    assert spec.grid(Shape(4096, 16, 4096), 0) == (256, 1, 1)
    assert spec.grid(Shape(4097, 1, 5), 0) == (257, 1, 1)
    assert spec.block(Shape(1, 1, 1), 0) == (128, 1, 1)
    assert spec.name_expression("float32", 0) == "sgemm_skinny_n<float, 16, 8, 1, 4, 8>"
    # A chunk of B: 4 x 8 x 8 = 256 k-rows in 64 groups of 4 x 17 floats (an odd count of
    # 16-byte bank groups); two of them, the next copied while this one is used.
    rung = sgemm.LADDER.rung("sgemm_skinny_n")
    assert rung.smem_bytes(spec.config) == 2 * 64 * 68 * 4
    too_big = {"K_STEPS": 16}  # two chunks of 512 k-rows at 16 columns: 69,632 bytes
    assert any("48 KB" in why for why in rung.rules({**spec.config, **too_big}))
    assert all(not rung.rules(c) for c in catalogue.configs("sgemm_skinny_n"))
    for cols in (1, 2, 4, 8, 16):
        groups = cols | 1  # 16-byte bank groups between the groups of 4 k-rows that neighbouring lanes read
        assert len({(lane * groups) % 8 for lane in range(8)}) == 8, cols
    # CGMA: per chunk 8 float4s of A and 256 x 16 / 128 = 32 elements of B, for 8 x 8 x 16 FLOPs.
    assert spec.cgma(Shape(4096, 16, 4096), 0) == pytest.approx(8 * 8 * 16 / 40)


def test_cluster_split_k_geometry() -> None:
    spec = catalogue.variant("sgemm_cluster_split_k", {})
    # 128 x 4096 x 4096: 16 tiles of 128 x 256, each 8 blocks along x (one cluster).
    assert spec.grid(Shape(128, 4096, 4096), 0) == (128, 1, 1)
    assert spec.grid(Shape(1024, 1024, 16384), 0) == (32, 8, 1)
    assert spec.cluster == (8, 1, 1) and spec.block(Shape(1, 1, 1), 0) == (256, 1, 1)
    assert spec.name_expression("float32", 0) == "sgemm_cluster_split_k<float, 128, 256, 16, 64, 64, 4, 8, 1>"
    # One cluster per tile needs no global memory; four clusters of 2 per tile meet in it: a
    # counter per tile and rank, then a slot per tile, rank and group of the rank's 16 float4s
    # (a thread's 32 in two shares) for 256 threads.
    assert spec.workspace_bytes(Shape(128, 4096, 4096), 128) == 0
    grouped = catalogue.variant("sgemm_cluster_split_k", {"SPLITS": 2, "GROUPS": 4})
    assert grouped.grid(Shape(128, 4096, 4096), 0) == (128, 1, 1) and grouped.cluster == (2, 1, 1)
    assert grouped.workspace_bytes(Shape(128, 4096, 4096), 128) == 16 * 2 * 4 + 16 * 8 * 16 * 256 * 16
    rung = sgemm.LADDER.rung("sgemm_cluster_split_k")
    # The partial tile (128 KB) is larger than the ring of 4 stages (96 KB) and takes its place.
    assert rung.smem_bytes(spec.config) == 128 * 256 * 4
    assert rung.smem_bytes({**spec.config, "BN": 128, "WN": 32}) == 4 * 16 * 256 * 4
    for c in catalogue.configs("sgemm_cluster_split_k"):
        assert catalogue.variant("sgemm_cluster_split_k", c).cluster == (c["SPLITS"], 1, 1)
    assert any("SPLITS must be 2 to 8" in why for why in rung.rules({**spec.config, "SPLITS": 16}))
    assert any("SPLITS must be 2 to 8" in why for why in rung.rules({**spec.config, "SPLITS": 1}))
    # Any count from 2 to 8: shares of a thread's 32 (or 16) float4s that differ by at most one.
    narrow = {**spec.config, "BN": 128, "WN": 32}
    assert not rung.rules({**narrow, "SPLITS": 3}) and not rung.rules({**spec.config, "SPLITS": 7})
    assert {c["SPLITS"] for c in catalogue.configs("sgemm_cluster_split_k")} == {2, 3, 4, 6, 7, 8}
    assert any("GROUPS" in why for why in rung.rules({**spec.config, "GROUPS": 0}))


def test_cluster_split_k_needs_sm90() -> None:
    """Clusters came with compute capability 9.0: on an sm_80 GPU the rung is refused with the reason."""
    spec = catalogue.variant("sgemm_cluster_split_k", {})
    assert spec.compile_arch("sm_90") == "sm_90"
    with pytest.raises(DeviceLimitError, match=r"compute capability 9\.0"):
        spec.compile_arch("sm_80")


def test_gemv_split_refuses_more_rows_than_its_configuration_holds() -> None:
    spec = catalogue.variant("sgemm_gemv_split", {"ROWS": 2})
    assert not spec.violations(Shape(2, 4096, 4096), 0, "float32")
    with pytest.raises(ConstraintError, match="ROWS >= M"):
        catalogue.point("sgemm_gemv_split", Shape(3, 4096, 4096), spec=spec)


def test_gemv_split_rules_name_what_they_refuse() -> None:
    with pytest.raises(ConstraintError, match="COL_VECS must be 8, 16 or 32"):
        catalogue.variant("sgemm_gemv_split", {"COL_VECS": 4})
    with pytest.raises(ConstraintError, match="ROWS must be from 1 to 4"):
        catalogue.variant("sgemm_gemv_split", {"ROWS": 8})
    with pytest.raises(ConstraintError, match="SPLITS must be at least 2"):
        catalogue.variant("sgemm_gemv_split", {"SPLITS": 1})


def test_gemv_split_geometry() -> None:
    """The predicted launch at 1 x 4096 x 4096: 32 strips of 128 columns x 16
    slices = 512 blocks (3.9 per SM of 132), a workspace of 32 counters and
    512 partial strips of 128 floats; every slice whole quads, covering K once."""
    spec = catalogue.variant("sgemm_gemv_split", {})
    shape = Shape(1, 4096, 4096)
    assert spec.grid(shape, 0) == (32, 16, 1)
    assert spec.workspace_bytes(shape, 512) == 128 + 512 * 128 * 4
    assert spec.name_expression("float32", 0) == "sgemm_gemv_split<float, 1, 32, 4, 3, 16>"
    for k in (1, 3, 4095, 4096, 10007):
        quads = -(-k // 4)
        bounds = [4 * (z * quads // 16) for z in range(17)]
        rows = [r for z in range(16) for r in range(bounds[z], min(k, bounds[z + 1]))]
        assert rows == list(range(k)), k


def test_gemv_split_carries_its_synchronisation_argument() -> None:
    lines = catalogue.variant("sgemm_gemv_split", {}).source_text().splitlines()
    header = "\n".join(lines[: next(i for i, x in enumerate(lines) if not x.startswith("//"))])
    assert "\n// Synchronisation" in header
    for handshake in ("__threadfence", "atomicAdd", "__syncthreads_or", "store of zero"):
        assert handshake in header, handshake
    assert "## sgemm_gemv_split " in REVIEW.read_text()
