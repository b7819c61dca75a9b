"""The catalogue is consistent and refuses what a kernel cannot take, by name."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from gemmlab.core.errors import ConstraintError, UnknownName
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.ladder import Config, Ladder, Rung
from gemmlab.kernels.spec import KernelSpec

SPEC_MATMUL_IDS = {
    "single_block", "naive", "naive_uncoalesced", "tiled", "tiled_prefetch_reg", "tiled_prefetch_smem",
    "tiled_2x2", "tiled_any_size", "col_buffered", "row_buffered", "blocked_x4", "naive_i32", "tiled_i32",
}  # fmt: skip


def test_every_spec_matmul_kernel_is_there() -> None:
    assert SPEC_MATMUL_IDS <= set(catalogue.kernel_ids())


def test_ids_unique_and_sources_exist() -> None:
    ids = catalogue.kernel_ids()
    assert len(ids) == len(set(ids))
    for spec in catalogue.CATALOGUE:
        text = spec.source_text()
        assert f"{spec.function}(" in text, spec.id
        assert text.lstrip().startswith("//"), f"{spec.source} should open with a comment saying what it teaches"


@pytest.mark.parametrize(
    ("kernel_id", "edges"),
    [("single_block", (8, 16, 22)), ("tiled", (8, 16, 22)), ("tiled_2x2", (8, 16)), ("naive_i32", (1, 2, 4, 8, 16, 32)),
     ("tiled_i32", (1, 2, 4, 8, 16, 32)), ("blocked_x4", (4, 8, 16, 32)), ("tiled_any_size", (8, 16, 32))],
)  # fmt: skip
def test_documented_block_edges(kernel_id: str, edges: tuple[int, ...]) -> None:
    assert set(edges) <= set(catalogue.get(kernel_id).block_edges)


@pytest.mark.parametrize("spec", catalogue.CATALOGUE, ids=lambda s: s.id)
def test_grid_covers_output_exactly_on_accepted_shapes(spec: KernelSpec) -> None:
    """Threads x outputs per thread must cover C (any-size kernels may overhang)."""
    if spec.problem.name != "matmul":
        pytest.skip("matmul kernels only")
    for edge in spec.block_edges or (0,):
        shape = Shape(4 * max(edge, 8) * 2, 2 * max(edge, 8) * 2, 8 * max(edge, 1))
        if spec.violations(shape, edge, spec.dtypes[0]):
            continue
        gx, gy, gz = spec.grid(shape, edge)
        bx, by, bz = spec.block(shape, edge)
        threads = gx * gy * gz * bx * by * bz
        if spec.id == "single_block":
            assert (gx, gy) == (1, 1)
            continue
        per_thread = {"tiled_2x2": 4, "blocked_x4": 4}.get(spec.id, 1)
        assert threads * per_thread >= shape.m * shape.n, spec.id
        if spec.id != "tiled_any_size":
            assert threads * per_thread == shape.m * shape.n, spec.id


def test_unknown_kernel_suggests_close_names() -> None:
    with pytest.raises(UnknownName, match="Did you mean tiled"):
        catalogue.get("tild")


def test_size_not_multiple_names_constraint_and_alternative() -> None:
    with pytest.raises(ConstraintError) as info:
        catalogue.point("tiled", Shape.square(1000), 16)
    text = str(info.value)
    assert "M = 1000 is not a multiple of the block edge (16)" in text
    assert "tiled_any_size" in text


def test_any_size_kernel_takes_odd_shapes() -> None:
    p = catalogue.point("tiled_any_size", Shape(1023, 1, 1025), 32)
    assert p.grid == (1, math.ceil(1023 / 32), 1)


@pytest.mark.parametrize("bad", [0, -5])
def test_non_positive_sizes_refused(bad: int) -> None:
    with pytest.raises(ConstraintError, match="positive"):
        catalogue.point("naive", Shape(bad, 64, 64), 16)


def test_block_edge_over_device_limit() -> None:
    with pytest.raises(ConstraintError, match=r"outside 1\.\.32"):
        catalogue.point("naive", Shape.square(66), 33)


def test_wrong_dtype_named() -> None:
    with pytest.raises(ConstraintError, match="no int32 version"):
        catalogue.point("tiled", Shape.square(64), 16, "int32")
    with pytest.raises(UnknownName, match="Unknown dtype"):
        catalogue.point("tiled", Shape.square(64), 16, "float17")


def test_buffered_kernels_limit_threads() -> None:
    with pytest.raises(ConstraintError, match="1024 threads"):
        catalogue.point("row_buffered", Shape(64, 2048, 64))
    assert catalogue.point("col_buffered", Shape(1024, 3000, 64)).block == (1024, 1, 1)


def test_grid_y_limit() -> None:
    with pytest.raises(ConstraintError, match="65535"):
        catalogue.point("naive_i32", Shape(70000, 4, 4), 1)


def test_index_range_limit() -> None:
    with pytest.raises(ConstraintError, match="32-bit indexing"):
        catalogue.point("tiled_any_size", Shape(50000, 50000, 16), 16)


def test_models() -> None:
    p = catalogue.point("tiled", Shape(64, 32, 16), 16)
    assert p.flops == 2 * 64 * 32 * 16
    assert p.min_bytes == (64 * 16 + 16 * 32 + 64 * 32) * 4
    assert catalogue.get("tiled").cgma(p.shape, 16) == 16
    assert catalogue.get("naive").cgma(p.shape, 16) == 1
    assert catalogue.get("tiled_2x2").cgma(p.shape, 8) == 16


@pytest.mark.parametrize("ladder", catalogue.LADDERS, ids=lambda lad: lad.name)
def test_ladders_name_their_configurations(ladder) -> None:
    """Every rung's default and search are named configurations: a search entry
    naming a parameter the rung lacks would raise, and the configurations keep
    the template's order whatever order they were written in."""
    assert ladder.kernels == tuple(catalogue.get(r.id) for r in ladder.rungs)
    for r in ladder.rungs:
        assert all(isinstance(v, int) for v in r.default.values())
        for change in r.search:
            assert list(r.config(change)) == list(r.params)
        found = catalogue.configs(r.id)
        assert found[0] == catalogue.get(r.id).config == r.config()
        assert all(catalogue.variant(r.id, c).config == c for c in found)


def test_the_studies_filter_every_rung_in_the_catalogues_order() -> None:
    listed = [r.id for r in catalogue.rungs(candidates=False)]
    assert listed == [s.id for ladder in catalogue.LADDERS for s in ladder.kernels]
    everything = [r.id for r in catalogue.rungs()]
    assert set(everything) == set(listed) | set(catalogue.candidate_ids()) and len(everything) == len(set(everything))


def test_a_ladder_refuses_rungs_that_share_a_place_or_serve_an_unknown_class() -> None:
    rung = catalogue.ladder("sgemm_multistage").rung("sgemm_multistage")
    other = catalogue.ladder("sgemm_padded_b").rung("sgemm_padded_b")

    def ladder(*rungs: Rung) -> Ladder:
        return Ladder("test ladder", rungs, lambda r, c: [], lambda r, c: catalogue.get(r.id))

    ladder(replace(rung, serves={"large": 1}), replace(other, serves={"large": 2}))
    with pytest.raises(AssertionError, match="places in serves large"):
        ladder(replace(rung, serves={"large": 1}), replace(other, serves={"large": 1}))
    with pytest.raises(AssertionError, match="places in default_for float32"):
        ladder(replace(rung, serves={}, default_for={"float32": 2}))
    with pytest.raises(AssertionError, match="unknown shape classes"):
        ladder(replace(rung, serves={"tall": 1}))
    with pytest.raises(AssertionError, match="every_config outside"):
        ladder(replace(rung, serves={"large": 1}, every_config=("few-tiles",)))


def test_a_configuration_is_laid_over_the_default_by_name() -> None:
    rung = catalogue.ladder("sgemm_multistage").rung("sgemm_multistage")
    c = rung.config(Config(STAGES=4, BK=8))  # written out of template order
    assert list(c) == ["BM", "BN", "BK", "WM", "WN", "STAGES", "MIN_BLOCKS"]
    assert c == {**rung.default, "BK": 8, "STAGES": 4}
    with pytest.raises(UnknownName, match="no parameter TILE"):
        rung.config({"TILE": 32})
    with pytest.raises(UnknownName, match="tunable kernel"):
        catalogue.configs("tiled")


def test_candidate_rungs_are_taken_by_id_and_listed() -> None:
    # The dispatcher's rungs for skinny, K-heavy, small and odd shapes: `gemmlab
    # run sgemm_skinny 1 4096 4096` must find them as it finds the ladders' rungs.
    from typer.testing import CliRunner

    from gemmlab.cli import app

    candidates = catalogue.candidate_ids()
    assert {"sgemm_skinny", "sgemm_split_k", "tc_gemv", "tc_split_k"} <= set(candidates)
    assert not set(candidates) & {s.id for s in catalogue.CATALOGUE}
    for kernel_id in candidates:
        spec = catalogue.get(kernel_id)
        assert spec.id == kernel_id and spec.config == catalogue.variant(kernel_id, {}).config
    listed = CliRunner().invoke(app, ["kernels", "--json"])
    ids = [row["id"] for row in json.loads(listed.output)]
    assert set(candidates) <= set(ids) and len(ids) == len(set(ids))
