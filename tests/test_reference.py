"""The published figures of the source documents, loaded from the CSVs beside their modules."""

from __future__ import annotations

import pytest

from gemmlab.backends.cpu import CPU_KERNELS
from gemmlab.core.errors import UnknownName
from gemmlab.kernels import catalogue
from gemmlab.studies import experiments, reference
from gemmlab.studies.experiments import brno, int32lab, kursk, poznan

# Row counts as documented in shared/reference/README.md.
EXPECTED_ROWS = {
    poznan.TABLE: 268,
    int32lab.TABLE: 48,
    brno.TABLE: 6,
    kursk.TABLE: 101,
}


def published(experiment: str) -> reference.Published:
    figures = experiments.get(experiment).published
    assert figures is not None
    return figures


@pytest.mark.parametrize(("table", "count"), EXPECTED_ROWS.items(), ids=lambda t: getattr(t, "csv", ""))
def test_row_counts_match_the_readme(table: reference.PublishedTable, count: int) -> None:
    assert len(table.rows()) == count


def test_every_published_table_is_counted() -> None:
    tables = {e.published.table for e in experiments.EXPERIMENTS if e.published is not None}
    assert tables == set(EXPECTED_ROWS)


def test_rows_are_typed() -> None:
    first = poznan.TABLE.rows()[0]
    assert (first.kernel, first.n, first.block, first.metric, first.value) == ("v1", 176, 8, "time_ms", 49.86)
    assert first.unit == "ms"
    assert first.device == "NVIDIA GeForce GT 240"
    copy = next(r for r in brno.TABLE.rows() if r.kernel == "copy")
    assert copy.block is None
    assert copy.value == 112.4


def test_every_kernel_in_the_csvs_is_mapped_to_a_catalogue_id_or_labelled() -> None:
    known = set(catalogue.kernel_ids()) | set(CPU_KERNELS)
    for table in EXPECTED_ROWS:
        for r in table.rows():
            assert r.kernel_id == table.kernel_ids[r.kernel]
            if r.kernel_id is None:
                assert r.label == f"{r.kernel} (no gemmlab kernel)"
            else:
                assert r.kernel_id in known, r.kernel_id


def test_the_documents_names() -> None:
    ids = poznan.TABLE.kernel_ids
    assert [ids[k] for k in ("v1", "v2", "v3", "v4a", "v4b", "v5")] == [
        "single_block",
        "naive",
        "tiled",
        "tiled_prefetch_reg",
        "tiled_prefetch_smem",
        "tiled_2x2",
    ]
    assert int32lab.TABLE.kernel_ids["shared_i32"] == "tiled_i32"
    assert kursk.TABLE.kernel_ids["gpu_naive"] == "naive_uncoalesced"
    assert kursk.TABLE.kernel_ids["gpu_blocked"] == "tiled"
    assert kursk.TABLE.kernel_ids["gpu_blocked_unroll4"] == "blocked_x4"
    assert brno.TABLE.kernel_ids["transpose_strided_both"] is None


def test_published_poznan_groups_split_the_tiled_kernel() -> None:
    group1 = published("poznan-group1").values("tiled", "time_ms")
    group2 = published("poznan-group2").values("tiled", "time_ms")
    assert {n for n, _ in group1} == {176, 352, 528}
    assert {n for n, _ in group2} == {128, 256, 384, 512, 640}
    assert group1[(176, 8)] == (0.316, "NVIDIA GeForce GT 240")
    assert (176, 22) in group1
    assert not any(block == 22 for _, block in group2)


def test_published_converts_seconds_and_prefers_the_later_machine() -> None:
    naive = published("kursk-cpu-gpu").values("naive_uncoalesced", "time_ms")
    # Table 1 (GTS 450) printed 0.140 s at 256; Tables 2-6 (GTX 770) 0.055 s.
    assert naive[(256, None)] == pytest.approx((55.0, "NVIDIA GeForce GTX 770"))
    gts = published("kursk-cpu-gpu").values("naive_uncoalesced", "time_ms", device="NVIDIA GeForce GTS 450")
    assert gts[(256, None)][0] == pytest.approx(140.0)
    cpu = published("kursk-cpu-gpu").values("cpu_naive", "gflops")
    assert cpu[(2048, None)] == (0.17, "Intel Core i7 4770")


def test_published_by_document_name_and_by_id() -> None:
    strided = published("brno-transpose").values("transpose_strided_both", "gbs")
    assert strided == {(4000, None): (2.7, "NVIDIA GeForce GTX 280")}
    int32 = published("int32-lab")
    assert int32.values("tiled_i32", "time_ms") == int32.values("shared_i32", "time_ms")


def test_an_experiment_without_published_figures_says_so() -> None:
    assert experiments.get("arequipa-any-size").published is None
    # Results stored under a name no document has (a plain sweep) have no experiment at all.
    assert experiments.find("my-own-sweep") is None


def test_every_published_metric_has_a_title_and_maps_from_a_csv_metric() -> None:
    assert {name for name, _ in reference._METRICS.values()} == reference.METRICS == set(reference.METRIC_TITLES)


def test_unknown_names_are_errors() -> None:
    with pytest.raises(UnknownName):
        published("int32-lab").values("naive_i32", "seconds")
    with pytest.raises(UnknownName):
        reference.PublishedTable("nope.csv", {}).rows()


def test_a_kernel_the_document_names_but_nobody_mapped_is_an_error() -> None:
    unmapped = reference.PublishedTable(
        poznan.TABLE.csv, {k: v for k, v in poznan.TABLE.kernel_ids.items() if k != "v5"}
    )
    with pytest.raises(UnknownName, match="kernel 'v5'"):
        unmapped.rows()
