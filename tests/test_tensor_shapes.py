"""The tensor ladder's candidate rungs for issue 21 (tc_any_k, tc_split_k,
tc_gemv; tc_small's own tests are in test_tensor_small.py) without a GPU:
every configuration compiles for its architectures with no spills, the
shapes each refuses are named in words, and the grids and workspace sizes
are what the kernels index."""

from __future__ import annotations

import pytest

from gemmlab.backends.nvrtc import compile_kernel
from gemmlab.core.errors import ConstraintError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.tensor import spec as tensor

IDS = [r.id for r in tensor.CANDIDATE_RUNGS]


def test_candidates_wait_outside_the_catalogue() -> None:
    assert IDS == ["tc_any_k", "tc_split_k", "tc_gemv", "tc_small", "tc_split_tail"]
    for kid in IDS:
        assert kid not in catalogue.kernel_ids()
        assert catalogue.variant(kid, {}).id == kid


@pytest.mark.parametrize("kernel_id", IDS)
def test_every_configuration_compiles_without_spills(kernel_id: str) -> None:
    configs = catalogue.configs(kernel_id)
    assert len(configs) >= 4, "a search space to tune over"
    for config in configs:
        spec = catalogue.variant(kernel_id, config)
        for arch in list(spec.archs) or ["sm_80", "sm_90"]:
            for dtype in spec.dtypes:
                res = compile_kernel(spec, 0, dtype, arch).resources
                assert res.spill_bytes == 0 and res.stack_bytes == 0, (kernel_id, config, arch, dtype)
                assert res.registers > 0


def test_bfloat16_c_goes_through_a_pointer_at_any_n_or_by_tma_in_whole_pieces() -> None:
    """Every candidate takes a bfloat16 C. tc_split_tail stores C by TMA, as
    tc_tma_store does, so its rows must be whole 16-byte pieces; the others
    store through a pointer at any N."""
    for kid in IDS:
        spec = catalogue.variant(kid, {})
        assert "bfloat16-out" in spec.dtypes
        assert spec.n_bytes_multiple == (16 if kid == "tc_split_tail" else 0), kid
    split_tail = catalogue.variant("tc_split_tail", {})
    assert not split_tail.violations(Shape(3000, 3000, 3000), 0, "bfloat16-out")
    assert split_tail.violations(Shape(3000, 2999, 3000), 0, "bfloat16-out")


def test_any_k_takes_odd_sizes_the_other_rungs_refuse() -> None:
    odd = Shape.square(4097)
    spec = catalogue.variant("tc_any_k", {})
    for dtype in ("bfloat16", "bfloat16-out"):
        assert not spec.violations(odd, 0, dtype)
    assert catalogue.get("tc_tma_store").violations(odd, 0, "bfloat16-out")
    assert spec.archs == ("sm_90a",)


def test_any_k_shared_memory_is_two_tiles_and_the_raw_ring() -> None:
    spec = catalogue.variant("tc_any_k", {"STAGES": 4})
    rows = 128 + 128
    assert spec.dynamic_smem_bytes(Shape.square(64), 0, "bfloat16") == 2 * rows * 128 + 4 * rows * 144
    with pytest.raises(ConstraintError, match="dynamic shared memory"):
        catalogue.variant("tc_any_k", {"BN": 256, "STAGES": 4})
    with pytest.raises(ConstraintError, match="STAGES must be at least 2"):
        catalogue.variant("tc_any_k", {"STAGES": 1})


def test_split_k_grid_and_workspace() -> None:
    spec = catalogue.variant("tc_split_k", {"SPLITS": 3})
    shape = Shape(1000, 300, 16384)
    assert spec.grid(shape, 0) == (3, 8, 3)  # ceil(300 / 128), ceil(1000 / 128), the slices
    tiles = 3 * 8
    # Counters padded to 16 bytes, then three 128 x 128 float32 partials per tile.
    assert spec.workspace_bytes(shape, 72) == 96 + tiles * 3 * 128 * 128 * 4
    assert spec.k_bytes_multiple == 16 and spec.problem.name == "tensor"
    with pytest.raises(ConstraintError, match="SPLITS must be at least 2"):
        catalogue.variant("tc_split_k", {"SPLITS": 1})
    with pytest.raises(ConstraintError, match="BN must be 128 or 256"):
        catalogue.variant("tc_split_k", {"BN": 64})
    tall = Shape(128 * 65536, 128, 64)
    assert any("65535" in v for v in spec.violations(tall, 0, "bfloat16"))


def test_split_k_refuses_k_of_odd_row_bytes_in_words() -> None:
    broken = catalogue.variant("tc_split_k", {}).violations(Shape(1024, 1024, 16383), 0, "bfloat16")
    assert broken and "16-byte" in " ".join(broken)


def test_gemv_grid_follows_the_streamed_operand() -> None:
    spec = catalogue.variant("tc_gemv", {})
    assert spec.grid(Shape(1, 4096, 4096), 0) == (256, 1, 1)  # B's rows, 16 per block
    assert spec.grid(Shape(4095, 16, 4096), 0) == (256, 1, 1)  # A's rows: N is the small side
    assert spec.grid(Shape(16, 17, 64), 0) == (2, 1, 1)  # both small: B is streamed
    assert spec.block(Shape(1, 1, 8), 0) == (256, 1, 1)


def test_gemv_refuses_two_big_sides_and_odd_k_in_words() -> None:
    spec = catalogue.variant("tc_gemv", {"MAX_M": 8})
    broken = spec.violations(Shape(9, 4096, 4096), 0, "bfloat16")
    assert broken == [
        "M = 9 and N = 4096 are both over 8: tc_gemv streams one operand past at most 8 rows of the other"
    ]
    assert not spec.violations(Shape(4096, 8, 4096), 0, "bfloat16-out")
    assert spec.violations(Shape(1, 4096, 4097), 0, "bfloat16")
    with pytest.raises(ConstraintError, match="MAX_M must be 8 or 16"):
        catalogue.variant("tc_gemv", {"MAX_M": 4})


def test_split_k_cluster_of_two_shares_b_along_m() -> None:
    """CLUSTER = 2: x runs along M in whole clusters (an odd count of tile
    rows gets a padding row, counted by the workspace), the cluster is (2, 1,
    1), and B's TMA box is half the tile's columns, each block multicasting
    its half into both."""
    spec = catalogue.variant("tc_split_k", {"SPLITS": 2, "CLUSTER": 2})
    shape = Shape(1000, 300, 16384)  # 8 tile rows, 3 tile columns
    assert spec.grid(shape, 0) == (8, 3, 2) and spec.cluster == (2, 1, 1)
    odd = Shape(900, 300, 16384)  # 8 tile rows after ceil(900 / 128) = 8; 7 at 800
    assert spec.grid(Shape(800, 300, 16384), 0) == (8, 3, 2)
    assert spec.workspace_bytes(Shape(800, 300, 16384), 48) == 96 + 8 * 3 * 2 * 128 * 128 * 4
    assert spec.grid(odd, 0) == (8, 3, 2)
    prepared_boxes = spec.problem.prepare.keywords["boxes"]
    assert prepared_boxes == (128, 64)
    assert catalogue.variant("tc_split_k", {"SPLITS": 2}).problem.prepare.keywords["boxes"] == (128, 128)
    with pytest.raises(ConstraintError, match="CLUSTER must be 1 or 2"):
        catalogue.variant("tc_split_k", {"SPLITS": 2, "CLUSTER": 4})
    wide = Shape(128, 128 * 65536, 64)
    assert any("65535" in v for v in spec.violations(wide, 0, "bfloat16"))


def test_split_tail_is_persistent_in_clusters_with_two_slots_per_block() -> None:
    """tc_split_tail: clusters of two along M (MAX_SLICES blocks per tile, the
    tile rows rounded up to whole clusters) up to the GPU's resident blocks
    (the runner caps the grid), the B box halved for multicast, C a tensor
    map, and a workspace of a counter and two BM x BN float32 partials per
    launched block."""
    spec = catalogue.variant("tc_split_tail", {"MAX_SLICES": 1})
    assert spec.persistent and spec.cluster == (2, 1, 1)
    assert spec.grid(Shape.square(3000), 0) == (12 * 12 * 2, 1, 1)
    assert spec.grid(Shape(2100, 1904, 64), 0) == (9 * 8 * 2, 1, 1)
    # MAX_SLICES clusters a cluster tile: 1536's 36 may take every cluster of a GPU.
    spec = catalogue.variant("tc_split_tail", {})
    assert spec.grid(Shape.square(1536), 0) == (6 * 6 * 2 * 4, 1, 1)
    assert spec.problem.prepare.keywords["boxes"] == (128, 128)
    assert spec.problem.prepare.keywords["c_box_rows"] == 64
    assert spec.workspace_bytes(Shape.square(3000), 132) == 528 + 2 * 132 * 128 * 256 * 4
    with pytest.raises(ConstraintError, match="MAX_SLICES must be at least 1"):
        catalogue.variant("tc_split_tail", {"MAX_SLICES": 0})
