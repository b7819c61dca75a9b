"""The dispatcher without a GPU: the shape suite, the candidates a shape
gets, the picks table and its migration, the choice of a pick for a shape,
matmul's refusals, the commands' wiring, the heatmap, and the timing of both
sides of a short problem."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import database_at
from dispatch_fakes import fake_result
from gemmlab.cli.app import app
from gemmlab.core.errors import ConstraintError, GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.core.timing import Timing
from gemmlab.kernels import catalogue
from gemmlab.kernels.ladder import SHAPE_CLASSES
from gemmlab.store.records import Config, Pick
from gemmlab.store.store import SCHEMA_VERSION, Store, result_row
from gemmlab.studies import dispatch
from gemmlab.studies import dispatch_tuning as tuning
from gemmlab.studies.candidates import Device
from gemmlab.studies.suite import SUITE_PATH, dtype_name, load_suite

# -- the suite ------------------------------------------------------------------


def test_the_full_suite_has_every_shape_the_issue_names() -> None:
    full = load_suite("full")
    shapes = {s.shape for s in full.shapes}
    for n in (128, 1000, 1024, 1536, 3000, 5120, 16384, 4095, 4097):
        assert Shape.square(n) in shapes
    for m in (1, 8, 16, 64, 128):
        assert Shape(m, 4096, 4096) in shapes
        assert Shape(4096, m, 4096) in shapes
    assert Shape(1024, 1024, 16384) in shapes and Shape(8192, 8192, 256) in shapes
    assert set(full.dtypes) == {"float32", "bfloat16", "bfloat16-out"}
    assert full.reps(Shape.square(16384)) < full.reps(Shape.square(1024))


def test_the_quick_suite_is_a_small_subset_without_the_largest_squares() -> None:
    quick, full = load_suite("quick"), load_suite("full")
    assert {s.shape for s in quick.shapes} < {s.shape for s in full.shapes}
    assert 5 <= len(quick.shapes) <= 16
    assert Shape.square(16384) not in {s.shape for s in quick.shapes}
    assert SUITE_PATH.is_file()


def test_the_suite_ships_inside_the_package_so_dispatch_tune_works_from_a_plain_install() -> None:
    """Issue 50: `gemmlab dispatch tune` failed after `pip install .`, because the
    suite lived in the checkout's benchmarks/. It is package data now: inside the
    package folder and named by pyproject.toml's package-data."""
    import gemmlab
    from gemmlab.studies.suite import tomllib

    package = Path(gemmlab.__file__).resolve().parent
    assert SUITE_PATH.is_file() and SUITE_PATH.is_relative_to(package)
    pyproject = tomllib.loads((package.parents[1] / "pyproject.toml").read_text())
    shipped = pyproject["tool"]["setuptools"]["package-data"]["gemmlab"]
    assert str(SUITE_PATH.relative_to(package)) in shipped


def test_a_suite_file_with_a_stray_quick_shape_or_a_bad_shape_is_refused(tmp_path: Path) -> None:
    stray = tmp_path / "stray.toml"
    stray.write_text('[[group]]\nname = "g"\nsquares = [64]\nquick = [[32, 32, 32]]\n')
    with pytest.raises(GemmlabError, match="does not list"):
        load_suite("quick", stray)
    bad = tmp_path / "bad.toml"
    bad.write_text('[[group]]\nname = "g"\nshapes = [[0, 4, 4]]\n')
    with pytest.raises(GemmlabError, match=r"\[M, N, K\]"):
        load_suite("full", bad)
    with pytest.raises(GemmlabError, match="does not exist"):
        load_suite("full", tmp_path / "missing.toml")
    with pytest.raises(GemmlabError, match="no 'medium' suite"):
        load_suite("medium")


def test_dtype_names() -> None:
    assert [dtype_name(d) for d in ("fp32", "BF16", "bf16-out", "float32", "fp8", "fp8-bf16")] == [
        "float32", "bfloat16", "bfloat16-out", "float32", "e4m3", "e4m3-bf16"
    ]  # fmt: skip
    with pytest.raises(GemmlabError, match="no element type 'fp16'"):
        dtype_name("fp16")


# -- candidates -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "cls"),
    [
        (Shape(1, 4096, 4096), "skinny-m"),
        (Shape(4096, 8, 4096), "skinny-n"),
        (Shape(1024, 1024, 16384), "k-heavy"),
        (Shape.square(1024), "few-tiles"),
        (Shape.square(4096), "large"),
        (Shape(8192, 8192, 256), "large"),
    ],
)
def test_shape_classes(shape: Shape, cls: str) -> None:
    assert dispatch.shape_class(shape, sms=132) == cls
    assert cls in SHAPE_CLASSES  # the names the rungs serve


# The dispatcher's lists as they were written out by hand before each rung
# carried its own facts (Rung.serves, default_for, every_config): read off the
# rungs now, they must come back the same.
FP32_CANDIDATES = {
    "skinny-m": ("sgemm_gemv_split", "sgemm_skinny", "sgemm_small_tile", "sgemm_split_k", "sgemm_multistage"),
    "skinny-n": ("sgemm_skinny_n", "sgemm_small_tile", "sgemm_split_k", "sgemm_multistage"),
    "k-heavy": ("sgemm_cluster_split_k", "sgemm_split_k", "sgemm_stream_k", "sgemm_small_tile", "sgemm_multistage",
                "sgemm_skinny_n"),
    "few-tiles": ("sgemm_small_tile", "sgemm_cluster_split_k", "sgemm_split_k", "sgemm_multistage",
                  "sgemm_stream_k", "sgemm_padded_b", "sgemm_skinny_n"),
    "large": ("sgemm_padded_b", "sgemm_edge_strips", "sgemm_stream_k", "sgemm_multistage", "sgemm_small_tile"),
}  # fmt: skip
TENSOR_CANDIDATES = {
    "skinny-m": ("tc_gemv", "tc_split_k", "tc_mma_pipeline", "tc_wgmma", "tc_tma_store", "tc_any_k"),
    "skinny-n": ("tc_gemv", "tc_split_k", "tc_mma_pipeline", "tc_wgmma", "tc_tma_store", "tc_any_k"),
    "k-heavy": ("tc_split_k", "tc_persistent", "tc_wgmma", "tc_tma_store", "tc_any_k"),
    "few-tiles": ("tc_small", "tc_split_k", "tc_split_tail", "tc_wgmma", "tc_persistent", "tc_tma_store", "tc_any_k"),
    "large": ("tc_tma_store", "tc_split_tail", "tc_cluster", "tc_persistent", "tc_mma_pipeline", "tc_any_k"),
}


def test_the_candidates_defaults_and_every_config_rungs_are_read_off_the_rungs() -> None:
    assert dispatch.CANDIDATES["float32"] == FP32_CANDIDATES
    assert dispatch.CANDIDATES["bfloat16"] == TENSOR_CANDIDATES

    def takes_bf16_out(kernel: str) -> bool:  # the rungs without that type were passed over in any case
        return "bfloat16-out" in catalogue.ladder(kernel).rung(kernel).dtypes

    out = {cls: tuple(filter(takes_bf16_out, kernels)) for cls, kernels in TENSOR_CANDIDATES.items()}
    assert dispatch.CANDIDATES["bfloat16-out"] == out
    assert dispatch.DEFAULTS == {
        "float32": ("sgemm_padded_b", "sgemm_edge_strips", "sgemm_swizzle_l2"),
        "bfloat16": ("tc_tma_store", "tc_cluster", "tc_any_k", "tc_mma_pipeline", "tc_wmma"),
        "bfloat16-out": ("tc_tma_store", "tc_any_k"),
        "e4m3": ("tc_fp8_tma_store", "tc_fp8_wgmma", "tc_fp8_mma"),
        "e4m3-bf16": ("tc_fp8_tma_store",),
    }
    assert dispatch.CANDIDATES["e4m3"]["large"] == ("tc_fp8_tma_store",)
    assert dispatch.CANDIDATES["e4m3"]["k-heavy"] == ("tc_fp8_tma_store", "tc_fp8_wgmma")
    assert dispatch.EVERY_CONFIG == {
        "sgemm_gemv_split": ("skinny-m",), "sgemm_skinny": ("skinny-m",), "sgemm_skinny_n": ("skinny-n",),
        "sgemm_cluster_split_k": ("few-tiles", "k-heavy"), "tc_small": ("few-tiles",), "tc_split_k": ("k-heavy",),
    }  # fmt: skip


def test_candidates_are_few_accept_the_shape_and_put_the_default_first() -> None:
    shape = Shape.square(4097)
    found, _notes = dispatch.candidates(shape, "float32", arch="sm_90a")
    assert 1 <= len(found) <= dispatch.MAX_PER_SHAPE
    for c in found:
        assert not c.spec.violations(shape, 0, "float32")
    first = found[0]
    assert first.config == catalogue.ladder(first.kernel).rung(first.kernel).config()
    assert len({c.label for c in found}) == len(found)


def test_a_rung_not_yet_in_the_catalogue_is_skipped_with_a_note() -> None:
    found, notes = dispatch.candidates(Shape.square(1024), "float32", rungs=("sgemm_not_written", "sgemm_multistage"))
    assert any("sgemm_not_written" in n and "not in the catalogue" in n for n in notes)
    assert found and {c.kernel for c in found} == {"sgemm_multistage"}


def test_bf16_with_a_bf16_c_tries_only_rungs_with_that_type() -> None:
    found, _ = dispatch.candidates(Shape.square(2048), "bfloat16-out", arch="sm_90a")
    assert found
    assert all("bfloat16-out" in c.spec.dtypes for c in found)


@pytest.mark.parametrize("dtype", ["bfloat16", "bfloat16-out"])
def test_an_odd_k_is_left_to_tc_any_k_and_the_notes_say_why_the_others_pass(dtype: str) -> None:
    found, notes = dispatch.candidates(Shape.square(4097), dtype, arch="sm_90a")
    assert found and {c.kernel for c in found} == {"tc_any_k"}
    assert any("no configuration takes" in n for n in notes)
    assert dispatch.default_choice(Shape.square(4097), dtype, "sm_90a").kernel == "tc_any_k"


def test_skinny_and_k_heavy_bf16_shapes_try_the_new_rungs_first() -> None:
    skinny, _ = dispatch.candidates(Shape(16, 4096, 4096), "bfloat16-out", arch="sm_90a")
    assert skinny[0].kernel == "tc_gemv"
    heavy, _ = dispatch.candidates(Shape(1024, 1024, 16384), "bfloat16", arch="sm_90a")
    assert heavy[0].kernel == "tc_split_k"


def test_a_hopper_rung_is_not_a_candidate_on_an_a100() -> None:
    found, _ = dispatch.candidates(Shape.square(4096), "bfloat16", arch="sm_80")
    assert found and all(not c.spec.archs for c in found)


def _candidate(kernel: str, **changes: int) -> dispatch.Candidate:
    config = catalogue.ladder(kernel).rung(kernel).config(changes)
    return dispatch.Candidate(kernel, config, catalogue.variant(kernel, config))


def test_tiny_problems_rank_configurations_by_their_blocks() -> None:
    """At 128 cubed no FP32 tile fills a twentieth of the GPU; the fill score
    there only says how few blocks an SM holds. The configurations rank by the
    blocks they launch instead, so sgemm_small_tile's 32 x 32 tiles (16
    blocks; 5.0 us, 94% of cuBLAS on an H100, where the 64 x 64 pick took 6.7)
    come before its 64 x 64 ones (4 blocks), and get timed."""
    tiny = Shape.square(128)
    small, wide = _candidate("sgemm_small_tile", BM=32, BN=32, WM=16), _candidate("sgemm_small_tile", BK=32)
    assert dispatch.fill_score(small, tiny, 132) < 0.05 and dispatch.fill_score(wide, tiny, 132) < 0.05
    assert dispatch.fill_rank(small, tiny, 132) == (0, pytest.approx(16 / 132))
    assert dispatch.fill_rank(small, tiny, 132) > dispatch.fill_rank(wide, tiny, 132)
    found, _ = dispatch.candidates(tiny, "float32", sms=132)
    assert small.config in [c.config for c in found if c.kernel == "sgemm_small_tile"]
    # Past a twentieth the score is kept to 0.05, as before: 1024's 64 x 64 tiles fill 256 of 528 slots.
    assert dispatch.fill_rank(_candidate("sgemm_small_tile"), Shape.square(1024), 132)[0] == 1


def test_resident_blocks_follow_threads_shared_memory_and_registers() -> None:
    # 8 warps of 64 + 16 registers of operands + 40: 120 a thread, two blocks (its MIN_BLOCKS too).
    assert dispatch.resident_blocks(_candidate("sgemm_multistage")) == 2
    assert dispatch.resident_blocks(_candidate("sgemm_padded_b")) == 1  # the 128 x 256 tile: one per SM
    # sgemm_skinny_n's default: 128 threads of about 16 + 36 + 40 = 92 registers: 5 blocks (65536 / 11776).
    assert dispatch.resident_blocks(_candidate("sgemm_skinny_n")) == 5
    # One warp of 32 x 32 with 4 stages: threads and registers allow more than the 32 blocks an SM takes.
    one_warp = _candidate("sgemm_small_tile", BM=32, BN=32, STAGES=4)
    assert dispatch.resident_blocks(one_warp) <= dispatch.SM.max_blocks_per_sm


def test_fill_score_counts_waves_of_resident_blocks_and_wasted_rows() -> None:
    multistage = _candidate("sgemm_multistage")  # 128 x 128 tiles, 2 per SM
    assert dispatch.fill_score(multistage, Shape.square(1024), 32) == 1.0  # 64 tiles in 64 slots
    assert dispatch.fill_score(multistage, Shape.square(1024), 100) == pytest.approx(64 / 200)
    # 4096 tiles of 8192 x 8192 take 16 waves of 264 slots, the last one part full.
    assert dispatch.fill_score(multistage, Shape.square(8192), 132) == pytest.approx(4096 / (16 * 264))
    assert dispatch.fill_score(_candidate("sgemm_stream_k"), Shape.square(1024), 100) == 1.0
    # A 16-row skinny block at M = 1 computes 15 rows of nothing.
    wide, narrow = _candidate("sgemm_skinny"), _candidate("sgemm_skinny", ROWS=1, COL_VECS=2, WARPS=4, K_STEPS=12)
    shape = Shape(1, 4096, 4096)
    assert dispatch.fill_score(wide, shape, 132) == pytest.approx(1 / 16 * 128 / 132)
    assert dispatch.fill_score(narrow, shape, 132) > 10 * dispatch.fill_score(wide, shape, 132)
    # Split-K's slices are blocks: 64 tiles of 128 x 128 in 2 slices fill 128 of 132 SMs.
    split = _candidate("sgemm_split_k", BM=128, BN=128, WN=64, SPLITS=2)
    assert dispatch.fill_score(split, Shape(1024, 1024, 16384), 132) == pytest.approx(
        128 / (132 * dispatch.resident_blocks(split))
    )
    # A persistent rung walks whole tiles in waves of its resident blocks: at
    # 3000, 288 tiles of 128 x 256 fill 73% of three waves of 132, 384 of
    # 128 x 192 97%; tc_split_tail shares the last wave out.
    wide_tiles, narrow_tiles = _candidate("tc_tma_store"), _candidate("tc_tma_store", BN=192)
    square = Shape.square(3000)
    used = 3000 * 3000 / (3072 * 3072)
    assert dispatch.fill_score(wide_tiles, square, 132) == pytest.approx(used * 288 / 396)
    assert dispatch.fill_score(narrow_tiles, square, 132) == pytest.approx(used * 384 / 396)
    assert dispatch.fill_score(_candidate("tc_split_tail"), square, 132) == pytest.approx(used)
    # So the 192-wide tiles are tc_tma_store's second candidate there, after its default.
    found, _ = dispatch.candidates(square, "bfloat16", sms=132)
    ours = [c.config for c in found if c.kernel == "tc_tma_store"]
    assert ours[0]["BN"] == 256 and ours[1]["BN"] == 192


@pytest.mark.parametrize(
    ("shape", "kernels"),
    [(Shape(1, 4096, 4096), ("sgemm_gemv_split", "sgemm_skinny")), (Shape(4096, 16, 4096), ("sgemm_skinny_n",)),
     (Shape(1024, 1024, 16384), ("sgemm_cluster_split_k",)),
     (Shape.square(1024), ("sgemm_cluster_split_k",))],
)  # fmt: skip
def test_the_rungs_made_for_a_class_try_every_configuration_first(shape: Shape, kernels: tuple[str, ...]) -> None:
    found, _ = dispatch.candidates(shape, "float32", arch="sm_90a")
    first = 0
    for kernel in kernels:  # each rung's configurations that take the shape, all of them, in the class's order
        configs = catalogue.configs(kernel)
        taking = [c for c in configs if not catalogue.variant(kernel, c).violations(shape, 0, "float32")]
        assert len(taking) >= 2
        assert [c.kernel for c in found[first : first + len(taking)]] == [kernel] * len(taking)
        assert sorted(map(str, taking)) == sorted(str(c.config) for c in found if c.kernel == kernel)
        first += len(taking)
    assert len(found) > first  # the other rungs of the class follow


def test_at_m_of_1_the_gemv_rung_comes_first_then_every_skinny_configuration() -> None:
    found, _ = dispatch.candidates(Shape(1, 4096, 4096), "float32", arch="sm_90a")
    gemv, skinny = len(catalogue.configs("sgemm_gemv_split")), len(catalogue.configs("sgemm_skinny"))
    assert [c.kernel for c in found[: gemv + skinny]] == ["sgemm_gemv_split"] * gemv + ["sgemm_skinny"] * skinny
    assert found[0].config == catalogue.ladder("sgemm_gemv_split").rung("sgemm_gemv_split").config()
    # At M = 5 no gemv configuration takes the shape (4 rows at most): sgemm_skinny leads.
    found, notes = dispatch.candidates(Shape(5, 4096, 4096), "float32", arch="sm_90a")
    assert found[0].kernel == "sgemm_skinny" and any("sgemm_gemv_split: no configuration" in n for n in notes)


def test_a_skinny_shape_ranks_the_configuration_that_fits_it_right_after_the_default() -> None:
    found, _ = dispatch.candidates(Shape(1, 4096, 4096), "float32", arch="sm_90a", rungs=("sgemm_skinny",))
    default, best = found[0], found[1]
    assert default.config == catalogue.ladder("sgemm_skinny").rung("sgemm_skinny").config()
    assert best.config["ROWS"] == 1 and best.config["COL_VECS"] == 2  # 512 one-row blocks
    found, _ = dispatch.candidates(Shape(4096, 2, 4096), "float32", arch="sm_90a")
    assert found[1].kernel == "sgemm_skinny_n" and found[1].config["COLS"] == 2


def test_other_rungs_are_interleaved_and_cut_to_per_rung() -> None:
    rungs = ("sgemm_multistage", "sgemm_small_tile", "sgemm_padded_b")
    found, _ = dispatch.candidates(Shape.square(4096), "float32", arch="sm_90a", per_rung=2, rungs=rungs)
    assert [c.kernel for c in found] == [*rungs, *rungs]
    assert dispatch.interleaved([[1, 2, 3], [4], [5, 6]]) == [1, 4, 5, 2, 6, 3]


# -- the table and choosing ------------------------------------------------------


def _pick(m: int, n: int, k: int, kernel: str = "sgemm_multistage", dtype: str = "float32", **changes) -> Pick:
    config = catalogue.ladder(kernel).rung(kernel).config(changes)
    return Pick(gpu_name="GPU X", cc="9.0", dtype=dtype, m=m, n=n, k=k, kernel=kernel, config=Config.of(config),
                median_ms=0.5, cublas_ms=0.6, verified=True, timing_method="CUDA graph of 50 launches",
                cublas_timing_method="50 back-to-back launches")  # fmt: skip


def test_picks_round_trip_and_replace(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        store.set_pick(_pick(1024, 1024, 1024))
        store.set_pick(dataclasses.replace(_pick(1024, 1024, 1024), median_ms=0.4))
        store.set_pick(_pick(16, 4096, 4096))
        picks = store.picks("GPU X", "float32")
    assert [(p.m, p.median_ms) for p in picks] == [(16, 0.5), (1024, 0.4)]
    assert picks[0].verified is True and picks[0].cublas_timing_method == "50 back-to-back launches"
    assert picks[0].config.values == catalogue.ladder("sgemm_multistage").rung("sgemm_multistage").config()
    # What was stored comes back as it went in, with the store's id and time.
    assert dataclasses.replace(picks[0], id=None, created=None) == _pick(16, 4096, 4096)


def test_the_migration_adds_the_table_and_the_timing_methods_to_an_older_file(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    conn = database_at(path, 10)  # a file as v10 wrote it, before the dispatch table
    conn.commit()
    conn.close()
    with Store.open(path, readonly=True) as store:
        assert store.picks() == []  # read as it is: no table yet
    with Store.open(path) as store:
        assert store.schema_version == SCHEMA_VERSION
        store.set_pick(_pick(8, 8, 8))
        assert len(store.picks()) == 1
        run = store.start_run({})
        timing = Timing.of([0.01, 0.01], back_to_back=50)
        store.add_result(run, "x", {"kernel": "k", "m": 1, "n": 1, "k": 1, "dtype": "float32",
                                    "timing": Timing.of([0.01], graph_launches=50),
                                    "baseline_timing": timing})  # fmt: skip
        row = store.rows("x")[0]
    assert row["timing_method"] == "CUDA graph of 50 launches"
    assert row["baseline_timing_method"] == "50 back-to-back launches"


def test_result_row_states_plain_event_timing() -> None:
    row = result_row({"kernel": "k", "m": 1, "n": 1, "k": 1, "dtype": "float32", "timing": Timing.of([1.0])})
    assert row["timing_method"] == "events around each launch"
    assert "baseline_timing_method" not in row


def test_choose_exact_then_the_model() -> None:
    picks = [_pick(1024, 1024, 1024), _pick(4096, 4096, 4096, "sgemm_padded_b"), _pick(1, 1, 1, dtype="bfloat16")]
    exact = dispatch.choose(picks, Shape.square(1024), "float32", "sm_90a")
    assert (exact.kernel, exact.reason) == ("sgemm_multistage", dispatch.TUNED)
    unseen = dispatch.choose(picks, Shape.square(3000), "float32", "sm_90a")
    assert unseen.reason == dispatch.MODEL and unseen.ranked > 10 and unseen.predicted_us > 0
    assert "cost model" in unseen.why() and unseen.basis in unseen.why()
    # bfloat16's pick is not a float32 one: it neither answers nor corrects a float32 shape.
    alone = dispatch.choose(picks[2:], Shape.square(512), "float32", "sm_90a")
    assert alone.reason == dispatch.MODEL and alone.basis == "no measurement on this GPU: the model alone"


def test_a_pick_that_refuses_the_shape_is_never_run() -> None:
    # tc_tma_store's C tensor map needs N x 4 bytes in whole 16-byte pieces: N = 3 breaks it.
    picks = [_pick(64, 64, 64, "tc_tma_store", "bfloat16"), _pick(8192, 8192, 8192, "tc_wgmma", "bfloat16")]
    chosen = dispatch.choose(picks, Shape(64, 3, 64), "bfloat16", "sm_90a")
    assert chosen.reason == dispatch.MODEL
    assert dispatch.accepts(chosen.spec, Shape(64, 3, 64), "bfloat16", "sm_90a") is None


def test_unverified_picks_are_never_chosen() -> None:
    chosen = dispatch.choose([dataclasses.replace(_pick(512, 512, 512), verified=False)], Shape.square(512), "float32")
    assert chosen.reason == dispatch.MODEL


def test_no_kernel_takes_the_shape() -> None:
    # A bfloat16 C: tc_tma_store and tc_any_k, both sm_90a rungs, the only defaults.
    with pytest.raises(ConstraintError, match="No kernel of gemmlab takes"):
        dispatch.default_choice(Shape(5, 5, 5), "bfloat16-out", "sm_80")


# -- the tuner with a fake runner ------------------------------------------------

GPU_X = Device("GPU X", "9.0", "sm_90a", 132)


def test_the_tuner_stores_the_fastest_verified_candidate(tmp_path: Path) -> None:
    from gemmlab.core.errors import VerificationError

    suite = load_suite("full", _one_shape_suite(tmp_path))
    tried: list[str] = []

    def runner(spec, shape, **options):
        tried.append(spec.id)
        assert options["baseline"] and options["dtype"] == "float32"
        if spec.id == "sgemm_stream_k":
            raise VerificationError("wrong", "fix")
        return fake_result(spec, shape, 0.3 if spec.id == "sgemm_padded_b" else 0.6)

    with Store.open(tmp_path / "r.sqlite") as store:
        summary = tuning.tune_suite(suite, store, dtypes=["float32"], runner=runner, device=GPU_X)
        picks = store.picks("GPU X")
        again = tuning.tune_suite(suite, store, dtypes=["float32"], runner=runner, device=GPU_X)
        rows = store.rows(dispatch.EXPERIMENT)
    assert "sgemm_padded_b" in tried and "sgemm_stream_k" in tried
    assert [p.kernel for p in picks] == ["sgemm_padded_b"]
    assert dispatch.percent_of_cublas(picks[0]) == pytest.approx(100 * 0.5 / 0.3)
    assert summary.rejected and "REJECTED" in "\n".join(summary.lines())
    assert again.already == ["4096 float32"] and not again.picked
    assert {r["kernel"] for r in rows} == set(tried) - {"sgemm_stream_k"}


def _one_shape_suite(tmp_path: Path) -> Path:
    path = tmp_path / "one.toml"
    path.write_text('dtypes = ["float32"]\n[[group]]\nname = "g"\nsquares = [4096]\nreps = 10\n')
    return path


# -- matmul's refusals --------------------------------------------------------------


def test_matmul_checks() -> None:
    from gemmlab.api.matmul import check_operands

    f32 = lambda *shape: np.zeros(shape, np.float32)
    bf = lambda *shape: np.zeros(shape, np.uint16)
    assert check_operands(f32(4, 8), f32(8, 3)) == ("float32", Shape(4, 3, 8), False)
    assert check_operands(bf(4, 8), bf(3, 8).T) == ("bfloat16", Shape(4, 3, 8), True)
    assert check_operands(bf(4, 8), bf(8, 3), out_dtype="bfloat16")[0] == "bfloat16-out"
    cases = [
        ((f32(4, 8), bf(8, 3)), {}, "float32 matrices, or bfloat16"),
        ((f32(4, 8).astype(np.float64), f32(8, 3).astype(np.float64)), {}, "float32 matrices"),
        ((f32(4, 8), f32(7, 3)), {}, "a's columns must equal b's rows"),
        ((f32(2, 4, 8), f32(8, 3)), {}, "2-D"),
        ((f32(8, 4).T, f32(8, 3)), {}, "a is not C-contiguous"),
        ((f32(4, 8), f32(3, 8).T), {}, "b is not contiguous"),
        ((bf(4, 8), bf(8, 6)[:, ::2]), {}, "nor the transpose view"),
        ((f32(4, 8), f32(8, 3)), {"beta": 0.5}, "no c was given"),
        ((f32(4, 8), f32(8, 3), f32(3, 4)), {"beta": 1.0}, "must be a 4 x 3 float32"),
        ((f32(4, 8), f32(8, 3)), {"out_dtype": "bfloat16"}, "float32 inputs give a float32 C"),
        ((bf(4, 8), bf(8, 3), f32(4, 3)), {"out_dtype": "bfloat16"}, "takes no input c"),
        ((bf(4, 8), bf(8, 3)), {"out_dtype": "float16"}, "float32 or bfloat16 C"),
    ]
    for args, options, message in cases:
        with pytest.raises(GemmlabError, match=message) as caught:
            check_operands(*args, **options)
        assert caught.value.fix


def test_matmul_refuses_numpy_arrays_or_names_the_missing_gpu() -> None:
    import gemmlab
    from gemmlab.core.errors import NoGPUError

    with pytest.raises((NoGPUError, GemmlabError)) as caught:
        gemmlab.matmul(np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32))
    assert caught.value.fix and ("CuPy arrays" in str(caught.value) or isinstance(caught.value, NoGPUError))


def test_bound_matmul_is_exported_and_refuses_numpy_arrays_or_names_the_missing_gpu() -> None:
    import gemmlab
    from gemmlab.api.matmul import Matmul
    from gemmlab.core.errors import NoGPUError

    assert gemmlab.Matmul is Matmul
    with pytest.raises(AttributeError, match="Matmu"):
        gemmlab.Matmu  # noqa: B018 (a misspelt name still fails as it should)
    with pytest.raises((NoGPUError, GemmlabError)) as caught:
        gemmlab.Matmul(np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32))
    assert caught.value.fix and ("CuPy arrays" in str(caught.value) or isinstance(caught.value, NoGPUError))


# -- the command line ---------------------------------------------------------------


runner = CliRunner()


def test_dispatch_show_prints_the_picks(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    with Store.open(db) as store:
        store.set_pick(_pick(16, 4096, 4096))
    out = runner.invoke(app, ["dispatch", "show", "--db", str(db)], env={"COLUMNS": "250"})
    assert out.exit_code == 0, out.output
    assert "sgemm_multistage" in out.output and "120.0%" in out.output and "16x4096x4096" in out.output


def test_dispatch_show_with_no_database_lists_the_shipped_picks_per_gpu(tmp_path: Path) -> None:
    out = runner.invoke(app, ["dispatch", "show", "--db", str(tmp_path / "none.sqlite")], env={"COLUMNS": "250"})
    assert out.exit_code == 0, out.output
    assert "no picks stored" in out.output and "the tables gemmlab ships follow" in out.output
    assert "NVIDIA H200, shipped (measured 2026-11-28)" in out.output and "NVIDIA H100 80GB HBM3, shipped" in out.output
    assert not (tmp_path / "none.sqlite").exists()  # showing creates no database
    one = runner.invoke(app, ["dispatch", "show", "--shipped", "--gpu", "NVIDIA H200"], env={"COLUMNS": "250"})
    assert one.exit_code == 0 and "NVIDIA H200, shipped" in one.output and "H100" not in one.output
    assert "tc_tma_store" in one.output and "cuBLAS" in one.output
    none = runner.invoke(app, ["dispatch", "show", "--shipped", "--gpu", "GPU Z"])
    assert none.exit_code == 0 and "gemmlab ships no table for GPU Z" in none.output


def test_dispatch_tune_refuses_an_unknown_suite_and_dtype() -> None:
    out = runner.invoke(app, ["dispatch", "tune", "--suite", "huge"])
    assert out.exit_code != 0 and "no 'huge' suite" in out.output
    out = runner.invoke(app, ["dispatch", "tune", "--dtype", "fp16"])
    assert out.exit_code != 0 and "no element type 'fp16'" in out.output


def test_run_best_takes_m_n_k_positionally_and_refuses_two_sizes() -> None:
    from gemmlab.cli.run import shape_of

    assert shape_of([16, 4096, 4096], None, None, None, None) == Shape(16, 4096, 4096)
    assert shape_of([512], None, None, None, None) == Shape.square(512)
    assert shape_of(None, None, 4, 5, 6) == Shape(4, 5, 6)
    out = runner.invoke(app, ["run", "best", "16", "4096"])
    assert out.exit_code != 0 and "one size (a square) or three" in out.output
    out = runner.invoke(app, ["run", "best", "16", "4096", "4096", "--m", "3"])
    assert out.exit_code != 0 and "not both" in out.output


# -- the heatmap ----------------------------------------------------------------------


def test_share_grids_and_heatmap(tmp_path: Path) -> None:
    from gemmlab.report import heatmap, write_report

    rows = [
        {"experiment": "dispatch", "kernel": "sgemm_padded_b", "m": 1024, "n": 1024, "k": 1024, "dtype": "float32",
         "gpu_name": "GPU X", "ratio_to_baseline": 0.5},
        {"experiment": "dispatch", "kernel": "sgemm_padded_b", "m": 1024, "n": 1024, "k": 1024, "dtype": "float32",
         "gpu_name": "GPU X", "ratio_to_baseline": 0.8},
        {"experiment": "dispatch", "kernel": "sgemm_multistage", "m": 16, "n": 4096, "k": 4096, "dtype": "float32",
         "gpu_name": "GPU X", "ratio_to_baseline": 0.9},
        {"experiment": "other", "kernel": "sgemm_smem", "m": 16, "n": 4096, "k": 4096, "dtype": "float32",
         "gpu_name": "GPU X", "ratio_to_baseline": 0.1},
    ]  # fmt: skip
    picks = [_pick(1024, 1024, 1024)]
    (grid,) = heatmap.share_grids(rows, picks)
    assert grid.series == (heatmap.DISPATCHER, "sgemm_multistage", "sgemm_padded_b")
    assert grid.shapes == ((16, 4096, 4096), (1024, 1024, 1024))
    assert grid.percent[0] == (None, pytest.approx(120.0))
    assert grid.percent[2] == (None, pytest.approx(80.0))  # the rung's best configuration
    plot = heatmap.plot_share_heatmap(grid, tmp_path)
    assert (tmp_path / plot.file).stat().st_size > 1000

    full_rows = [{**r, "block_edge": 0, "variant": "", "median_ms": 1.0, "gflops": 1.0, "metric": "gflops",
                  "cc": "9.0", "warnings": []} for r in rows]  # fmt: skip
    index = write_report(full_rows, tmp_path / "report", occupancy=False, picks=picks)
    page = index.read_text()
    assert "The dispatcher against cuBLAS" in page and "dispatch/share_float32_GPU_X.png" in page
    assert (index.parent / "dispatch" / "share_float32_GPU_X.png").is_file()


# -- timing both sides of a short problem --------------------------------------------


def test_a_shape_starts_no_candidate_after_its_seconds(tmp_path: Path) -> None:
    suite = load_suite("full", _one_shape_suite(tmp_path))
    tried: list[str] = []

    def runner(spec, shape, **options):
        tried.append(spec.id)
        return fake_result(spec, shape, 0.5)

    with Store.open(tmp_path / "r.sqlite") as store:
        summary = tuning.tune_suite(suite, store, dtypes=["float32"], runner=runner, shape_seconds=0.0,
                                      device=GPU_X)  # fmt: skip
        picks = store.picks("GPU X")
    assert len(tried) == 1 and len(picks) == 1  # the first candidate always runs
    assert any("candidates not timed" in n and "0 s spent" in n for n in summary.notes)


def test_compiling_comes_first_and_is_not_counted_in_a_shapes_seconds(tmp_path: Path) -> None:
    """The 2026-11-24b run lost a third of some shapes' candidates to cold
    compiles inside the per-shape budget: the compiler now runs first, on all
    of them, and the seconds count timing only."""
    import time

    suite = load_suite("full", _one_shape_suite(tmp_path))
    events: list[str] = []

    def compiler(found, shape, dtype, arch):
        events.append(f"compile {len(found)} {dtype} {arch}")
        time.sleep(0.3)

    def runner(spec, shape, **options):
        events.append(spec.id)
        return fake_result(spec, shape, 0.5)

    with Store.open(tmp_path / "r.sqlite") as store:
        summary = tuning.tune_suite(suite, store, dtypes=["float32"], runner=runner, shape_seconds=0.25,
                                      compiler=compiler, device=GPU_X)  # fmt: skip
    found, _ = dispatch.candidates(Shape.square(4096), "float32", arch="sm_90a")
    assert events[0] == f"compile {len(found)} float32 sm_90a"
    assert len(events) == 1 + len(found)  # every candidate timed: the 0.3 s of compiling did not count
    assert not any("not timed" in n for n in summary.notes)


def test_compile_candidates_compiles_each_at_the_runners_key_and_leaves_failures_to_it(monkeypatch) -> None:
    from gemmlab.backends import nvrtc
    from gemmlab.core.errors import CompileError

    calls: list[tuple] = []

    def fake_compile(spec, block_edge, dtype, arch):
        calls.append((spec.id, tuple(spec.config.values()), block_edge, dtype, arch))
        if len(calls) == 2:
            raise CompileError("ptxas said no", "fix it")

    monkeypatch.setattr(nvrtc, "compile_kernel", fake_compile)
    found, _ = dispatch.candidates(Shape(1, 4096, 4096), "float32", arch="sm_90a")
    tuning.compile_candidates(found[:5], Shape(1, 4096, 4096), "float32", "sm_90a")
    assert sorted(calls) == sorted((c.kernel, tuple(c.config.values()), 0, "float32", "sm_90a") for c in found[:5])


def test_an_odd_size_pick_does_not_carry_over_to_an_aligned_shape() -> None:
    """The nearest-tuned-shape rule gave 8192 cubed in bfloat16 4097's pick
    (tc_any_k, the odd-size rung) on an H100: 26% of cuBLAS. The model ranks
    the candidates for 8192 itself; 4097's measurement corrects tc_any_k near
    4097 only, so an odd 4095 may still take it."""
    picks = [
        dataclasses.replace(_pick(4097, 4097, 4097, "tc_any_k", "bfloat16"), median_ms=0.865),
        dataclasses.replace(_pick(4096, 4096, 4096, "tc_tma_store", "bfloat16"), median_ms=0.187),
        dataclasses.replace(_pick(128, 4096, 4096, "tc_small", "bfloat16"), median_ms=0.0106),
    ]
    big = dispatch.choose(picks, Shape.square(8192), "bfloat16", "sm_90a")
    assert big.reason == dispatch.MODEL and big.kernel != "tc_any_k"
    odd = dispatch.choose(picks, Shape.square(4095), "bfloat16", "sm_90a")
    assert dispatch.accepts(odd.spec, Shape.square(4095), "bfloat16", "sm_90a") is None
