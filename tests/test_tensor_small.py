"""tc_small and the third round of tc_gemv (issue 21) without a GPU: the
configurations tc_small refuses, in words; its grid, clusters, boxes and
shared memory; its SASS (wgmma not serialised, TMA loads, the cluster barrier
of split configurations); tc_gemv's software pipeline as ptxas left it; and
the dispatcher trying every tc_small configuration first on few-tile BF16
shapes. Every configuration's compile without spills is test_tensor_shapes.py's."""

from __future__ import annotations

import pytest

from gemmlab.backends.nvrtc import compile_kernel
from gemmlab.core.errors import ConstraintError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.measure.sass import find_tool, sass_opcodes, total
from gemmlab.studies import dispatch

needs_cuobjdump = pytest.mark.skipif(find_tool("cuobjdump") is None, reason="cuobjdump is not installed")


def test_small_tiles_clusters_and_boxes() -> None:
    split = catalogue.variant("tc_small", {"BN": 64, "SPLITS": 2})
    # 512: 8 tile rows of 64, each as 2 slices (one cluster) along x; 8 tile columns along y.
    assert split.grid(Shape.square(512), 0) == (16, 8, 1)
    assert split.cluster == (2, 1, 1)
    assert split.block(Shape.square(512), 0) == (160, 1, 1)  # one consumer warpgroup and the producer warp
    # 4 stages of 64 + 64 rows of 128 bytes, then a full and an empty barrier per stage.
    assert split.dynamic_smem_bytes(Shape.square(512), 0, "bfloat16") == 4 * 128 * 128 + 2 * 4 * 8
    # Not a multicast: A's and B's boxes are the whole tile's rows.
    assert split.problem.prepare.keywords["boxes"] == (64, 64)
    whole = catalogue.variant("tc_small", {"BM": 128})
    assert whole.cluster is None and whole.grid(Shape(1000, 300, 64), 0) == (8, 3, 1)
    assert whole.block(Shape.square(64), 0) == (288, 1, 1)
    assert whole.workspace_bytes is None and whole.archs == ("sm_90a",)


def test_small_pairs_share_b_in_clusters() -> None:
    """PAIR = 2: two row tiles to a cluster (times SPLITS), each block loading half of B's rows."""
    pair = catalogue.variant("tc_small", {"BN": 128, "SPLITS": 2, "STAGES": 8, "PAIR": 2})
    # 4096 x 128: 64 row tiles of 64 in 32 pairs, each tile as 2 slices: 128 blocks in clusters of 4.
    assert pair.grid(Shape(4096, 128, 4096), 0) == (128, 1, 1)
    assert pair.cluster == (4, 1, 1)
    assert pair.problem.prepare.keywords["boxes"] == (64, 64)  # B's box: half of its 128 rows
    # Three row tiles make two pairs: the last block row lies past M and still loads its half of B.
    whole = catalogue.variant("tc_small", {"BM": 128, "PAIR": 2})
    assert whole.grid(Shape(300, 200, 520), 0) == (4, 2, 1) and whole.cluster == (2, 1, 1)


def test_small_column_pairs_share_a_in_clusters() -> None:
    """PAIR_COLS = 2: two column tiles to a cluster along x, each block loading half of A's rows."""
    pair = catalogue.variant("tc_small", {"BM": 128, "BN": 64, "STAGES": 8, "PAIR_COLS": 2})
    # 1000 x 1000: 16 column tiles of 64 in 8 pairs along x, 8 row tiles of 128 along y.
    assert pair.grid(Shape(1000, 1000, 1000), 0) == (16, 8, 1)
    assert pair.cluster == (2, 1, 1)
    assert pair.problem.prepare.keywords["boxes"] == (64, 64)  # A's box: half of its 128 rows
    # Three column tiles make two pairs: the last block column lies past N.
    odd = catalogue.variant("tc_small", {"BN": 128, "STAGES": 8, "PAIR_COLS": 2})
    assert odd.grid(Shape(70, 300, 72), 0) == (4, 2, 1) and odd.problem.prepare.keywords["boxes"] == (32, 128)


def test_small_refusals_name_the_rule() -> None:
    for changes, words in [
        ({"BN": 256}, "BN must be 64 or 128"),
        ({"BM": 192}, "BM must be 64 or 128"),
        ({"SPLITS": 3}, "SPLITS must be 1, 2, 4 or 8"),
        ({"STAGES": 1, "SPLITS": 2}, "partial tile must fit the ring"),
        ({"PAIR": 3}, "PAIR must be 1 or 2"),
        ({"BN": 64, "SPLITS": 8, "PAIR": 2}, "PAIR x SPLITS must be at most 8"),
        ({"PAIR_COLS": 3}, "PAIR_COLS must be 1 or 2"),
        ({"PAIR_COLS": 2, "PAIR": 2}, "PAIR_COLS = 2 takes PAIR = 1 and SPLITS = 1"),
        ({"PAIR_COLS": 2, "SPLITS": 2}, "PAIR_COLS = 2 takes PAIR = 1 and SPLITS = 1"),
    ]:
        with pytest.raises(ConstraintError, match=words):
            catalogue.variant("tc_small", changes)
    spec = catalogue.variant("tc_small", {})
    assert spec.violations(Shape(512, 512, 511), 0, "bfloat16")  # rows of 1022 bytes: no tensor map
    wide = Shape(64, 65536 * 128 + 1, 64)
    assert any("65535" in v for v in spec.violations(wide, 0, "bfloat16"))


@needs_cuobjdump
@pytest.mark.parametrize(
    "config",
    [{}, {"BN": 64, "SPLITS": 4}, {"BM": 128, "SPLITS": 2}, {"BM": 128, "PAIR": 2}, {"BM": 128, "PAIR_COLS": 2}],
)
@pytest.mark.parametrize("dtype", ["bfloat16", "bfloat16-out"])
def test_small_sass_runs_wgmma_from_tma_and_clusters_only_when_split(config: dict, dtype: str) -> None:
    spec = catalogue.variant("tc_small", config)
    compiled = compile_kernel(spec, 0, dtype, "sm_90a")
    assert "serialized" not in compiled.log  # ptxas's C7518: every wgmma waited for, one by one
    ops = sass_opcodes(compiled.cubin)
    assert total(ops, "HGMMA") > 0 and total(ops, "UTMALDG") > 0
    clustered = spec.config["SPLITS"] * spec.config["PAIR"] * spec.config["PAIR_COLS"] > 1
    assert (total(ops, "UCGABAR_WAIT") > 0) == clustered


@needs_cuobjdump
@pytest.mark.parametrize("config", [c for c in catalogue.configs("tc_gemv") if c["PREFETCH"]], ids=str)
def test_gemv_has_a_whole_batch_in_flight_before_its_first_mma(config: dict) -> None:
    """ptxas puts each mma right behind its own loads (4 LDG, HMMA, 4 LDG,
    ...); with PREFETCH = 1, the next batch loaded before the current one's
    mma, the first batch's UNROLL x (2 + MAX_M / 8) loads all precede the first HMMA."""
    compiled = compile_kernel(catalogue.variant("tc_gemv", config), 0, "bfloat16", "sm_90")
    ops_before = 0
    for line in _sass_lines(compiled.cubin):
        if " HMMA" in line:
            break
        ops_before += " LDG" in line
    assert ops_before >= config["UNROLL"] * (2 + config["MAX_M"] // 8)


def _sass_lines(cubin: bytes) -> list[str]:
    import os
    import subprocess
    import tempfile

    cuobjdump, nvdisasm = find_tool("cuobjdump"), find_tool("nvdisasm")
    env = dict(os.environ)
    if nvdisasm:
        env["PATH"] = os.path.dirname(nvdisasm) + os.pathsep + env.get("PATH", "")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([cuobjdump, "--dump-sass", f.name], capture_output=True, text=True, env=env, check=True)
    return out.stdout.splitlines()


@pytest.mark.parametrize("shape", [Shape.square(512), Shape.square(1024), Shape(128, 4096, 4096)], ids=str)
@pytest.mark.parametrize("dtype", ["bfloat16", "bfloat16-out"])
def test_few_tile_bf16_shapes_try_every_small_configuration_first(shape: Shape, dtype: str) -> None:
    assert dispatch.shape_class(shape) == "few-tiles"
    found, _ = dispatch.candidates(shape, dtype, arch="sm_90a")
    small = [c for c in found if c.kernel == "tc_small"]
    assert len(small) == len(catalogue.configs("tc_small"))
    assert found[: len(small)] == small
    assert {"tc_split_k", "tc_tma_store"} <= {c.kernel for c in found}  # the others still follow
