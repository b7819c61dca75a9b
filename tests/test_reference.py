"""The published figures of the source documents, loaded from the package's CSVs."""

from __future__ import annotations

import pytest

from gemmlab.backends.cpu import CPU_KERNELS
from gemmlab.core.errors import UnknownName
from gemmlab.kernels import catalogue
from gemmlab.studies import reference

# Row counts as documented in shared/reference/README.md.
EXPECTED_ROWS = {
    "poznan2014_gt240.csv": 268,
    "int32lab_gemm.csv": 48,
    "brno2014_transpose_gtx280.csv": 6,
    "kursk2014_cpu_gpu.csv": 101,
}


@pytest.mark.parametrize(("name", "count"), EXPECTED_ROWS.items())
def test_row_counts_match_the_readme(name: str, count: int) -> None:
    assert len(reference.load(name)) == count


def test_rows_are_typed() -> None:
    first = reference.load("poznan2014_gt240.csv")[0]
    assert (first.kernel, first.n, first.block, first.metric, first.value) == ("v1", 176, 8, "time_ms", 49.86)
    assert first.unit == "ms"
    assert first.device == "NVIDIA GeForce GT 240"
    copy = next(r for r in reference.load("brno2014_transpose_gtx280.csv") if r.kernel == "copy")
    assert copy.block is None
    assert copy.value == 112.4


def test_every_kernel_in_the_csvs_is_mapped_to_a_catalogue_id_or_labelled() -> None:
    known = set(catalogue.kernel_ids()) | set(CPU_KERNELS)
    for rows in reference.load_all().values():
        for r in rows:
            assert r.kernel in reference.DOC_KERNEL_IDS
            if r.kernel_id is None:
                assert r.label == f"{r.kernel} (no gemmlab kernel)"
            else:
                assert r.kernel_id in known, r.kernel_id


def test_the_documents_names() -> None:
    ids = reference.DOC_KERNEL_IDS
    assert [ids[k] for k in ("v1", "v2", "v3", "v4a", "v4b", "v5")] == [
        "single_block",
        "naive",
        "tiled",
        "tiled_prefetch_reg",
        "tiled_prefetch_smem",
        "tiled_2x2",
    ]
    assert ids["shared_i32"] == "tiled_i32"
    assert ids["gpu_naive"] == "naive_uncoalesced"
    assert ids["gpu_blocked"] == "tiled"
    assert ids["gpu_blocked_unroll4"] == "blocked_x4"
    assert ids["transpose_strided_both"] is None


def test_published_poznan_groups_split_the_tiled_kernel() -> None:
    group1 = reference.published("poznan-group1", "tiled", "time_ms")
    group2 = reference.published("poznan-group2", "tiled", "time_ms")
    assert {n for n, _ in group1} == {176, 352, 528}
    assert {n for n, _ in group2} == {128, 256, 384, 512, 640}
    assert group1[(176, 8)] == (0.316, "NVIDIA GeForce GT 240")
    assert (176, 22) in group1
    assert not any(block == 22 for _, block in group2)


def test_published_converts_seconds_and_prefers_the_later_machine() -> None:
    naive = reference.published("kursk-cpu-gpu", "naive_uncoalesced", "time_ms")
    # Table 1 (GTS 450) printed 0.140 s at 256; Tables 2-6 (GTX 770) 0.055 s.
    assert naive[(256, None)] == pytest.approx((55.0, "NVIDIA GeForce GTX 770"))
    gts = reference.published("kursk-cpu-gpu", "naive_uncoalesced", "time_ms", device="NVIDIA GeForce GTS 450")
    assert gts[(256, None)][0] == pytest.approx(140.0)
    cpu = reference.published("kursk-cpu-gpu", "cpu_naive", "gflops")
    assert cpu[(2048, None)] == (0.17, "Intel Core i7 4770")


def test_published_by_document_name_and_by_id() -> None:
    strided = reference.published("brno-transpose", "transpose_strided_both", "gbs")
    assert strided == {(4000, None): (2.7, "NVIDIA GeForce GTX 280")}
    assert reference.published("int32-lab", "tiled_i32", "time_ms") == reference.published(
        "int32-lab", "shared_i32", "time_ms"
    )


def test_experiments_without_published_figures() -> None:
    assert reference.published("arequipa-any-size", "tiled_any_size", "time_ms") == {}
    assert reference.published("my-own-sweep", "tiled", "gflops") == {}
    assert reference.devices("arequipa-any-size") == []


def test_unknown_names_are_errors() -> None:
    with pytest.raises(UnknownName):
        reference.published("int32-lab", "naive_i32", "seconds")
    with pytest.raises(UnknownName):
        reference.load("nope.csv")
