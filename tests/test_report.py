"""The report: tables, plots and index.html from stored rows (no GPU, no database needed)."""

from __future__ import annotations

import csv
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from gemmlab.backends import on_host
from gemmlab.core.errors import CompileError, GemmlabError, UnknownName
from gemmlab.report import drawing, model, plots, tables, write_report
from gemmlab.report.model import Section
from gemmlab.report.tables import MetricTable
from gemmlab.studies.experiments.base import PlotSpec

FIXTURE = Path(__file__).parent / "fixtures" / "report_rows.json"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# The plots each experiment's section must have (file names under its directory).
EXPECTED_PLOTS = {
    "poznan-group1": {
        "single_block_vs_size.png",
        "naive_vs_size.png",
        "tiled_vs_size.png",
        "compare_largest.png",
        "published_vs_ours.png",
    },
    "poznan-group2": {
        "tiled_vs_size.png",
        "tiled_prefetch_reg_vs_size.png",
        "tiled_prefetch_smem_vs_size.png",
        "tiled_2x2_vs_size.png",
        "compare_largest.png",
        "published_vs_ours.png",
    },
    "int32-lab": {
        "naive_i32_time_vs_edge.png",
        "tiled_i32_time_vs_edge.png",
        "speedup_tiled_i32_over_naive_i32.png",
        "compare_largest.png",
        "published_vs_ours.png",
    },
    "brno-transpose": {"bandwidth_bars.png", "compare_largest.png", "published_vs_ours.png"},
    "arequipa-any-size": {"tiled_any_size_vs_size.png", "compare_largest.png"},
    "kursk-cpu-gpu": {
        # Its 17 lines, a kernel's together, in three figures of at most eight.
        "cpu_vs_gpu-1.png",
        "cpu_vs_gpu-2.png",
        "cpu_vs_gpu-3.png",
        "tiled-pinned-host-memory_time_vs_edge.png",
        "tiled-pageable-host-memory_time_vs_edge.png",
        "blocked_x4-pinned-host-memory_time_vs_edge.png",
        "blocked_x4-pageable-host-memory_time_vs_edge.png",
        "compare_largest.png",
        "published_vs_ours.png",
    },
}


def load_rows() -> list[dict]:
    return json.loads(FIXTURE.read_text())


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return load_rows()


@pytest.fixture(scope="module")
def sections(rows: list[dict]) -> dict[str, Section]:
    return {s.experiment: s for s in model.build_sections(rows)}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One full report of the fixture rows, shared by the tests that read files."""
    out = tmp_path_factory.mktemp("report") / "out"
    index = write_report(load_rows(), out, occupancy=False)
    assert index == out / "index.html"
    return out


def table(section: Section, label: str, metric: str) -> MetricTable:
    return next(t for t in tables.metric_tables(section) if t.label == label and t.metric.key == metric)


def find_row(rows: list[dict], experiment: str, kernel: str, n: int, edge: int, **extra: object) -> dict:
    return next(
        r
        for r in rows
        if (r["experiment"], r["kernel"], r["n"], r["block_edge"]) == (experiment, kernel, n, edge)
        and all(r.get(k) == v for k, v in extra.items())
    )


# --------------------------------------------------------------------------
# Sections and tables (pure)


def test_sections_in_the_spec_order(sections: dict[str, Section]) -> None:
    assert list(sections) == [
        "poznan-group1",
        "poznan-group2",
        "int32-lab",
        "brno-transpose",
        "arequipa-any-size",
        "kursk-cpu-gpu",
    ]
    assert all(s.gpu_name == "NVIDIA H100 80GB HBM3" and s.cc == "9.0" for s in sections.values())


def test_table_rows_are_sizes_and_columns_block_edges(rows: list[dict], sections: dict[str, Section]) -> None:
    t = table(sections["poznan-group1"], "tiled", "time")
    assert [n for _, n, _ in t.sizes] == [176, 352, 528]
    assert t.edges == [8, 16, 22]
    ours = find_row(rows, "poznan-group1", "tiled", 352, 16)["median_ms"]
    assert t.ours[((352, 352, 352), 16)] == ours
    # The GT 240's time for v3 at 176 with 8x8 blocks, as printed.
    assert t.published[((176, 176, 176), 8)] == 0.316
    assert t.published_devices == ["NVIDIA GeForce GT 240"]
    grid = t.grid(lambda marks: "", lambda pub: f" ({pub})")
    assert len(grid) == 3 and all(len(line) == 3 for line in grid)
    assert grid[0][0] == f"{tables.fmt(t.ours[((176, 176, 176), 8)])} (0.316)"


def test_the_second_poznan_group_has_its_own_sizes_and_edges(sections: dict[str, Section]) -> None:
    t = table(sections["poznan-group2"], "tiled", "gflops")
    assert [n for _, n, _ in t.sizes] == [128, 256, 384, 512, 640]
    assert t.edges == [8, 16]
    assert t.published[((640, 640, 640), 16)] == pytest.approx(74.0, rel=0.05)


def test_csv_has_a_column_per_edge_and_one_per_published_edge(sections: dict[str, Section]) -> None:
    t = table(sections["int32-lab"], "naive_i32", "time")
    lines = list(csv.reader(io.StringIO(t.to_csv())))
    edges = [f"block_edge={e}" for e in (1, 2, 4, 8, 16, 32)]
    assert lines[0] == ["size", *edges, *(f"{e} published" for e in edges)]
    assert [line[0] for line in lines[1:]] == ["256", "512", "1024", "4096"]
    assert float(lines[1][7]) == 0.56473  # the lab report's 256 / TPB 1: 564.73 us
    assert all(len(line) == 13 for line in lines)


def test_markdown_table_shape(sections: dict[str, Section]) -> None:
    text = table(sections["int32-lab"], "tiled_i32", "time").to_markdown()
    body = [line for line in text.splitlines() if line.startswith("| ")]
    assert body[0] == "| size \\ block edge | 1 | 2 | 4 | 8 | 16 | 32 |"
    assert [line.split(" | ")[0] for line in body[1:]] == ["| 256", "| 512", "| 1024", "| 4096"]
    assert "unspecified (course server GPU" in text


def test_profiler_tables_only_where_measured(sections: dict[str, Section]) -> None:
    keys = lambda label: {t.metric.key for t in tables.metric_tables(sections["poznan-group1"]) if t.label == label}
    # single_block was not profiled (null gips / cgma_measured); the document's figures still show.
    assert {"time", "gflops", "gips", "cgma_measured", "cgma_analytic"} <= keys("naive")
    single = table(sections["poznan-group1"], "single_block", "gips")
    assert not single.ours and single.published
    assert "bandwidth" not in keys("naive")


def test_kursk_published_sits_beside_end_to_end(sections: dict[str, Section]) -> None:
    kursk = sections["kursk-cpu-gpu"]
    e2e = table(kursk, "tiled, pinned host memory", "e2e_time")
    assert e2e.published[((256, 256, 256), 1)] == pytest.approx(99.0)  # Table 5: 0.099 s
    assert not table(kursk, "tiled", "time").published
    # The CPU copies nothing: its plain time sits beside the paper's.
    cpu = table(kursk, "cpu_naive", "time")
    assert cpu.published[((256, 256, 256), None)] == pytest.approx(45.0)
    assert ((2048, 2048, 2048), None) in cpu.published and ((2048, 2048, 2048), None) not in cpu.ours
    # Kernel figures once per kernel, end-to-end ones per host memory.
    labels = {t.label for t in tables.metric_tables(kursk)}
    assert {"tiled", "tiled, pinned host memory", "tiled, pageable host memory"} <= labels


def test_brno_matches_the_documents_size_and_keeps_the_unmapped_kernel(sections: dict[str, Section]) -> None:
    brno = sections["brno-transpose"]
    copy = table(brno, "copy", "bandwidth")
    assert [model.size_label(s) for s in copy.sizes] == ["4000x4000", "16384x16384"]
    # The lecture states no block for its copy: its figure sits beside our best edge, marked.
    assert copy.edges == [16, 32]
    best = max((16, 32), key=lambda e: copy.ours[((4000, 4000, 1), e)])
    assert copy.published == {((4000, 4000, 1), best): 112.4}
    assert copy.unstated == {((4000, 4000, 1), best)}
    strided = table(brno, "transpose_strided_both (no gemmlab kernel)", "bandwidth")
    assert strided.published == {((4000, 4000, 1), None): 2.7} and not strided.ours
    assert {t.metric.key for t in tables.metric_tables(brno)}.isdisjoint({"gflops"})


def test_warnings_become_marks_and_footnotes(sections: dict[str, Section]) -> None:
    section = sections["int32-lab"]
    t = table(section, "tiled_i32", "time")
    text = t.to_markdown()
    assert "⚠" in text
    assert "wide spread: max/min = 1.71 over 20 repetitions" in section.notes.texts
    number = section.notes.texts.index("wide spread: max/min = 1.71 over 20 repetitions") + 1
    assert t.marks[((4096, 4096, 4096), 1)] == [number]


def test_one_section_per_gpu() -> None:
    rows = [r for r in load_rows() if r["experiment"] == "arequipa-any-size"]
    other = [{**r, "gpu_name": "NVIDIA H200", "cc": "9.0"} for r in rows[:3]]
    sections = model.build_sections(rows + other)
    assert [s.slug for s in sections] == [
        "arequipa-any-size--nvidia-h100-80gb-hbm3",
        "arequipa-any-size--nvidia-h200",
    ]


def test_later_rows_of_a_point_replace_earlier_ones() -> None:
    rows = [r for r in load_rows() if r["experiment"] == "arequipa-any-size"]
    again = {**rows[0], "median_ms": 123.0}
    section = model.build_sections([*rows, again])[0]
    t = table(section, "tiled_any_size", "time")
    assert t.ours[((rows[0]["n"],) * 3, rows[0]["block_edge"])] == 123.0


def test_experiment_filter_and_errors() -> None:
    rows = load_rows()
    assert [s.experiment for s in model.build_sections(rows, ["kursk-cpu-gpu", "int32-lab"])] == [
        "int32-lab",
        "kursk-cpu-gpu",
    ]
    with pytest.raises(GemmlabError, match="no results"):
        model.build_sections([])


def test_an_unknown_experiment_is_called_unknown_with_the_known_names() -> None:
    rows = load_rows()
    with pytest.raises(UnknownName) as info:
        model.build_sections(rows, ["int32-lab", "nosuch"])
    assert info.value.cause == "Unknown experiment 'nosuch'."
    assert "reproduce" not in str(info.value)
    assert "Known: poznan-group1, poznan-group2, int32-lab" in info.value.fix and "stress" in info.value.fix
    with pytest.raises(UnknownName, match=r"Did you mean kursk-cpu-gpu\?"):
        model.build_sections(rows, ["kursk-cpu-gpus"])


def test_a_known_experiment_not_measured_suggests_the_command_that_measures_it() -> None:
    rows = [r for r in load_rows() if r["experiment"] != "int32-lab"]
    with pytest.raises(GemmlabError) as info:
        model.build_sections(rows, ["int32-lab"])
    assert not isinstance(info.value, UnknownName)
    assert info.value.cause == "No results of int32-lab are stored."
    assert "Run `gemmlab reproduce int32-lab` to measure it." in info.value.fix
    with pytest.raises(GemmlabError, match="Run `gemmlab stress` to measure it"):
        model.check_requested(["stress"], ["int32-lab"])
    with pytest.raises(GemmlabError, match="Run `gemmlab distributed` to measure it"):
        model.check_requested(["distributed"], ["int32-lab"])


# --------------------------------------------------------------------------
# Occupancy section


def test_occupancy_tables_per_kernel_for_our_gpu_and_the_documents(
    sections: dict[str, Section], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gemmlab.measure import kernel_occupancy
    from gemmlab.measure.occupancy import theoretical_occupancy

    calls = []

    def fake(kernel_id: str, arch: str, block_edges: list[int] | None = None, **kwargs: object) -> list:
        calls.append((kernel_id, arch, block_edges, kwargs.get("cc")))
        cc = str(kwargs.get("cc"))
        return [(f"{e}x{e}", theoretical_occupancy(cc, e * e, 32, 2 * e * e * 4)) for e in block_edges or [16]]

    monkeypatch.setattr(kernel_occupancy, "kernel_occupancy", fake)
    blocks = tables.occupancy_blocks(sections["poznan-group1"])
    assert ("tiled", "sm_90", [8, 16, 22], "9.0") in calls
    # The GT 240 (1.2) is older than NVRTC's oldest target: an sm_75 compile, 1.2's rules.
    assert ("tiled", "sm_75", [8, 16, 22], "1.2") in calls
    tiled = next(b for b in blocks if b.title.startswith("tiled on NVIDIA H100"))
    assert tiled.columns == ["8x8", "16x16", "22x22", "device limit"]
    assert tiled.rows[0][0] == "Active blocks per SM"
    assert any("sm_75" in b.note for b in blocks)


def test_a_document_block_our_registers_cannot_fit_is_worked_with_the_bound_its_run_proves(
    sections: dict[str, Section], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A modern compile gives single_block 64 registers per thread: no 22 x 22
    # block (484 threads) fits the GT 240's register file, yet the report ran one.
    from gemmlab.measure import kernel_occupancy
    from gemmlab.measure.occupancy import theoretical_occupancy

    def fake(kernel_id: str, arch: str, block_edges: list[int] | None = None, **kwargs: object) -> list:
        cc = str(kwargs.get("cc"))
        return [(f"{e}x{e}", theoretical_occupancy(cc, e * e, 64, 0)) for e in block_edges or [16]]

    monkeypatch.setattr(kernel_occupancy, "kernel_occupancy", fake)
    blocks = tables.occupancy_blocks(sections["poznan-group1"])
    document = next(b for b in blocks if b.title.startswith("single_block on the document's GPU"))
    assert "GT 240" in document.title
    assert document.columns == ["8x8", "16x16", "22x22 †", "device limit"]
    cells = dict(document.rows)
    assert cells["Active blocks per SM"][2] == "1"  # not the 0 of our compile's 64 registers
    assert cells["Registers per thread"][2] == "32"
    assert cells["Registers per thread"][:2] == ["64", "64"]  # the columns that fit keep our compile's count
    assert "22x22: ours 64, at most 32" in document.note and "reference data" in document.note
    ours = next(b for b in blocks if b.title.startswith("single_block on NVIDIA H100"))
    assert "†" not in " ".join(ours.columns) and "sm_90 compile" in ours.note


def test_occupancy_failure_is_a_note(sections: dict[str, Section], monkeypatch: pytest.MonkeyPatch) -> None:
    from gemmlab.measure import kernel_occupancy

    def broken(*args: object, **kwargs: object) -> list:
        raise CompileError("NVRTC is missing.", "Install nvidia-cuda-nvrtc.")

    monkeypatch.setattr(kernel_occupancy, "kernel_occupancy", broken)
    blocks = tables.occupancy_blocks(sections["kursk-cpu-gpu"])
    assert blocks and all(not b.rows and "NVRTC is missing" in b.note for b in blocks)
    # CPU baselines have no occupancy.
    assert not any(b.title.startswith("cpu_") for b in blocks)


# --------------------------------------------------------------------------
# Files


def test_every_plot_is_a_png(written: Path) -> None:
    for experiment, names in EXPECTED_PLOTS.items():
        found = {p.name for p in (written / experiment).glob("*.png")}
        assert found == names, experiment
        for name in names:
            data = (written / experiment / name).read_bytes()
            assert data.startswith(PNG_SIGNATURE), name
            assert len(data) > 1024, name


CEILINGS = {"peak_gflops_measured": 51_000.0, "bandwidth_gbs_measured": 4_200.0}


def profiled_rows(experiment: str, ceilings: dict | None = CEILINGS) -> list[dict]:
    """The fixture's rows of ``experiment``; those with profiler figures (gips, cgma)
    also get ncu's DRAM bytes (three matrices' worth), and every row the run's ceilings."""
    out = []
    for r in load_rows():
        if r["experiment"] != experiment:
            continue
        row = {**r, **(ceilings or {})}
        if row.get("gips") is not None and not on_host(row["kernel"]):
            row["dram_bytes"] = 3.0 * 4 * row["n"] ** 2
        out.append(row)
    return out


def test_roofline_points_and_ceilings() -> None:
    (section,) = model.build_sections(profiled_rows("poznan-group1"))
    assert model.roofline_ceilings(section) == (51_000.0, 4_200.0)
    points = model.roofline_points(section)
    profiled = [r for r in section.rows if r.get("dram_bytes")]
    assert len(points) == len(profiled) == 18 and {p["label"] for p in points} == {"naive", "tiled"}
    naive = next(p for p in points if (p["label"], p["n"], p["block_edge"]) == ("naive", 352, 16))
    row = find_row(section.rows, "poznan-group1", "naive", 352, 16)
    assert naive["arithmetic_intensity"] == pytest.approx(2 * 352**3 / (12 * 352**2))  # 2·M·N·K / DRAM bytes
    assert naive["gflops"] == row["gflops"]
    # The latest run's ceilings win where runs differ.
    older = [{**r, "date": "2000-01-01", "peak_gflops_measured": 1.0} for r in section.rows[:2]]
    (mixed,) = model.build_sections(older + profiled_rows("poznan-group1"))
    assert model.roofline_ceilings(mixed) == (51_000.0, 4_200.0)


def test_roofline_points_leave_out_cpu_memory_and_duplicate_host_memory_rows() -> None:
    kursk = [{**r, "dram_bytes": 1e6, **CEILINGS} for r in load_rows() if r["experiment"] == "kursk-cpu-gpu"]
    (section,) = model.build_sections(kursk)
    points = model.roofline_points(section)
    gpu_points = {(r["kernel"], r["n"], r["block_edge"]) for r in kursk if not on_host(r["kernel"])}
    assert len(points) == len(gpu_points)  # pinned and pageable rows share one point
    assert not any(p["label"].startswith("cpu_") for p in points)
    brno = [{**r, "dram_bytes": 1e6, **CEILINGS} for r in load_rows() if r["experiment"] == "brno-transpose"]
    assert model.roofline_points(model.build_sections(brno)[0]) == []  # GB/s kernels do no arithmetic


def test_roofline_plot_with_profiler_data_and_ceilings(tmp_path: Path) -> None:
    rows = profiled_rows("poznan-group1")
    out = tmp_path / "out"
    write_report(rows, out, occupancy=False)
    png = out / "poznan-group1" / "roofline.png"
    data = png.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 1024
    assert {p.name for p in png.parent.glob("*.png")} == EXPECTED_PLOTS["poznan-group1"] | {"roofline.png"}
    parser = _Links()
    parser.feed((out / "index.html").read_text())
    assert "poznan-group1/roofline.png" in parser.links
    text = (out / "index.html").read_text()
    assert "2·M·N·K FLOPs per byte of DRAM traffic" in text and "51,000 GFLOP/s" in text
    # The profiler's tables sit beside the roofline.
    section = model.build_sections(rows)[0]
    assert {"gips", "cgma_measured", "cgma_analytic"} <= {t.metric.key for t in tables.metric_tables(section)}
    assert "GIPS (warp instructions executed per second)" in text and "CGMA, measured" in text


@pytest.mark.parametrize("what", ["no DRAM bytes", "no ceilings"])
def test_no_roofline_without_profiler_data_or_ceilings(tmp_path: Path, what: str) -> None:
    if what == "no ceilings":
        rows = profiled_rows("poznan-group1", ceilings=None)
    else:
        rows = [{**r, **CEILINGS} for r in load_rows() if r["experiment"] == "poznan-group1"]
    out = tmp_path / "out"
    write_report(rows, out, occupancy=False)
    assert not (out / "poznan-group1" / "roofline.png").exists()
    assert "roofline" not in (out / "index.html").read_text()


def test_tables_are_written_as_csv_and_markdown(written: Path) -> None:
    tiled = written / "poznan-group1" / "tiled__time.csv"
    lines = tiled.read_text().splitlines()
    assert lines[0].startswith("size,block_edge=8,block_edge=16,block_edge=22,")
    assert len(lines) == 4
    markdown = (written / "kursk-cpu-gpu" / "tables.md").read_text()
    assert "## tiled, pinned host memory" in markdown
    assert "Intel Core i7 4770" in markdown
    assert (written / "int32-lab" / "warnings.csv").is_file()


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        self.links += [values[a] or "" for a in ("src", "href") if a in values]
        if values.get("id"):
            self.ids.add(values["id"] or "")
        self.scripts += tag == "script"


def test_index_links_resolve_offline(written: Path) -> None:
    text = (written / "index.html").read_text()
    parser = _Links()
    parser.feed(text)
    assert parser.scripts == 0
    files = [link for link in parser.links if not link.startswith("#")]
    anchors = [link[1:] for link in parser.links if link.startswith("#")]
    assert len(files) > 100
    for link in files:
        assert not re.match(r"[a-z]+://", link) and not link.startswith("/"), link
        assert (written / link).is_file(), link
    assert anchors and set(anchors) <= parser.ids
    pngs = {str(p.relative_to(written)) for p in written.glob("*/*.png")}
    assert pngs <= set(files)


def test_index_shows_summaries_tables_and_warnings(written: Path) -> None:
    text = (written / "index.html").read_text()
    assert text.count("<section") == 6
    assert "NVIDIA H100 80GB HBM3 (compute capability 9.0), measured 2025-11-20" in text
    assert "<span class='pub'>(0.316)</span>" in text
    assert "The slowest of 20 repetitions took 1.71 times as long as the fastest" in text
    assert "<sup class='warn'>" in text


def test_each_warning_is_printed_once_in_words(written: Path) -> None:
    text = (written / "index.html").read_text()
    assert "recorded as" not in text
    # The stored text stays in warnings.csv, not beside its explanation on the page.
    assert "wide spread: max/min = 1.71 over 20 repetitions" not in text
    assert text.count("The slowest of 20 repetitions took 1.71 times") == 1
    assert "wide spread: max/min = 1.71 over 20 repetitions" in (written / "int32-lab" / "warnings.csv").read_text()


def test_timestamps_are_printed_for_people(written: Path) -> None:
    assert model.readable_time("2026-11-29T06:41:07+00:00") == "2026-11-29 06:41 UTC"
    assert model.readable_time("2026-11-29T08:41:07+02:00") == "2026-11-29 06:41 UTC"
    assert model.readable_time("2026-11-29T06:41:07") == "2026-11-29 06:41 UTC"
    assert model.readable_time("yesterday") == "yesterday"
    assert model.time_span(["2026-11-29T06:41:07+00:00", "2026-11-30T07:00:00+00:00", None]) == (
        "2026-11-29 06:41 UTC to 2026-11-30 07:00 UTC"
    )
    assert model.time_span([]) == "date not recorded"
    text = (written / "index.html").read_text()
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", text)
    assert re.search(r"measured \d{4}-\d\d-\d\d \d\d:\d\d UTC", text)


def test_a_previous_report_is_replaced(tmp_path: Path) -> None:
    rows = [r for r in load_rows() if r["experiment"] == "arequipa-any-size"]
    out = tmp_path / "out"
    write_report(rows, out, occupancy=False)
    (out / "stale.txt").write_text("from an older report")
    write_report(rows, out, occupancy=False)
    assert not (out / "stale.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_failure_leaves_the_previous_report_and_no_debris(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [r for r in load_rows() if r["experiment"] == "arequipa-any-size"]
    out = tmp_path / "out"
    write_report(rows, out, occupancy=False)
    before = (out / "index.html").read_text()

    def boom(section: Section, out: Path) -> list:
        raise GemmlabError("plotting failed", "")

    monkeypatch.setitem(plots.PLOTS, "vs_size", boom)  # the arequipa layout's first plot
    with pytest.raises(GemmlabError, match="plotting failed"):
        write_report(rows, out, occupancy=False)
    assert (out / "index.html").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with pytest.raises(GemmlabError):
        write_report(rows, tmp_path / "new" / "deeper", occupancy=False)
    assert not (tmp_path / "new").exists()


def test_unwritable_out_is_an_error_with_a_fix(tmp_path: Path) -> None:
    rows = [r for r in load_rows() if r["experiment"] == "arequipa-any-size"]
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(GemmlabError) as info:
        write_report(rows, blocker / "report", occupancy=False)
    assert "Cannot write the report" in info.value.cause and "--out" in info.value.fix
    with pytest.raises(GemmlabError, match="is a file"):
        write_report(rows, blocker, occupancy=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_read_only_directory_is_an_error(tmp_path: Path) -> None:
    import os

    if os.geteuid() == 0:
        pytest.skip("root writes through directory permissions")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        with pytest.raises(GemmlabError, match="Cannot write the report"):
            write_report(load_rows()[:5], locked / "report", occupancy=False)
    finally:
        locked.chmod(0o700)


def test_a_directory_of_other_files_is_never_replaced(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(GemmlabError, match="not a gemmlab report"):
        write_report(load_rows()[:5], tmp_path, occupancy=False)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_missing_database_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(GemmlabError, match="gemmlab reproduce"):
        write_report(tmp_path / "none.sqlite", tmp_path / "out")


def test_report_from_a_database_through_the_cli(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from gemmlab.cli.app import app
    from gemmlab.store.store import Store

    rows = [r for r in load_rows() if r["experiment"] in ("int32-lab", "arequipa-any-size")]
    db = tmp_path / "results.sqlite"
    with Store.open(db) as store:
        run_id = store.start_run({"gpu_name": "NVIDIA H100 80GB HBM3", "cc": "9.0"})
        for experiment in ("int32-lab", "arequipa-any-size"):
            store.add_results(run_id, experiment, [r for r in rows if r["experiment"] == experiment])
    out = tmp_path / "report"
    result = CliRunner().invoke(
        app, ["report", "--db", str(db), "--out", str(out), "--experiments", "int32-lab", "--no-occupancy"]
    )
    assert result.exit_code == 0, result.output
    assert (out / "int32-lab" / "speedup_tiled_i32_over_naive_i32.png").is_file()
    assert not (out / "arequipa-any-size").exists()
    missing = CliRunner().invoke(app, ["report", "--db", str(tmp_path / "nope.sqlite"), "--out", str(out)])
    assert missing.exit_code == 2
    assert "gemmlab reproduce" in missing.output


def test_occupancy_with_a_real_compile(sections: dict[str, Section]) -> None:
    """NVRTC needs no GPU; where it is missing the section says so instead."""
    (block,) = tables.occupancy_blocks(sections["arequipa-any-size"])
    if block.rows:
        assert block.columns == ["8x8", "16x16", "32x32", "device limit"]
        assert block.rows[-1][0] == "Limiting factor(s)"
    else:
        assert block.note.startswith("No occupancy table")


def test_size_axis_kinds() -> None:
    square = lambda *ns: [(n, n, n) for n in ns]
    assert drawing.SizeScale.of(square(176, 352, 528)).kind == "linear"
    assert drawing.SizeScale.of(square(256, 512, 1024, 4096)).kind == "log"
    close = drawing.SizeScale.of(square(1025, 1000, 1023))
    assert close.kind == "even"
    assert [close.x(s) for s in square(1000, 1023, 1025)] == [0.0, 1.0, 2.0]


def test_numbers_keep_four_significant_digits() -> None:
    assert [tables.fmt(v) for v in (49.86, 0.0005, 112.4, 45291.0, 1.0)] == ["49.86", "0.0005", "112.4", "45,291", "1"]


def test_rows_of_a_sweep_without_experiment(tmp_path: Path) -> None:
    rows = [{**r, "experiment": None} for r in load_rows() if r["experiment"] == "arequipa-any-size"]
    (section,) = model.build_sections(rows)
    assert (section.experiment, section.slug) == ("(no experiment)", "no-experiment")
    index = write_report(rows, tmp_path / "out", occupancy=False)
    assert (index.parent / "no-experiment" / "tiled_any_size_vs_size.png").is_file()


def test_a_layout_naming_a_plot_the_report_lacks_fails_loudly(rows: list[dict], tmp_path: Path) -> None:
    (section,) = model.build_sections([r for r in rows if r["experiment"] == "arequipa-any-size"])
    with pytest.raises(UnknownName, match="plot kind 'histogram'"):
        plots.draw(PlotSpec("histogram"), section, tmp_path)


def test_results_of_no_document_get_the_sweep_layout_and_no_published_figures(rows: list[dict]) -> None:
    own = [dict(r, experiment="my-own-sweep") for r in rows if r["experiment"] == "poznan-group1"]
    (section,) = model.build_sections(own)
    assert section.layout is model.SWEEP_LAYOUT and section.published is None
    assert all(not t.published for t in tables.metric_tables(section))


def test_rows_from_before_the_configuration_record_are_counted_once(tmp_path: Path) -> None:
    rows = [r for r in load_rows() if r["experiment"] in ("int32-lab", "arequipa-any-size")]
    old = [dict(r, backend="") for r in rows[:3]] + [dict(r, backend="nvrtc") for r in rows[3:]]
    assert tables.unrecorded_note(old).startswith(f"3 of the {len(rows)} results were stored before results schema v5")
    assert tables.unrecorded_note([dict(r, backend="") for r in rows]).startswith(f"All {len(rows)} results")
    assert tables.unrecorded_note(rows) == ""  # rows from elsewhere than the store say nothing of it
    text = write_report([dict(r, backend="") for r in rows], tmp_path / "out", occupancy=False).read_text()
    # Once for the page, not once per experiment.
    assert text.count("before results schema v5") == 1
    assert all("schema" not in tables.summary(s) for s in model.build_sections(old))


# --------------------------------------------------------------------------
# Devices, units and folded tables (issue 52)

XEON = "Intel(R) Xeon(R) Platinum 8480C"


def kursk_rows_with_cpu() -> list[dict]:
    return [{**r, "cpu": XEON} for r in load_rows() if r["experiment"] == "kursk-cpu-gpu"]


def test_each_table_names_the_device_its_rows_ran_on(tmp_path: Path) -> None:
    (section,) = model.build_sections(kursk_rows_with_cpu())
    cpu = table(section, "cpu_naive", "time")
    assert cpu.legend.startswith(f"ours on {XEON}") and "H100" not in cpu.legend
    gpu = table(section, "tiled", "time")
    assert gpu.legend == "ours on NVIDIA H100 80GB HBM3"
    assert section.devices() == f"NVIDIA H100 80GB HBM3 and {XEON} (CPU baselines)"
    text = write_report(kursk_rows_with_cpu(), tmp_path / "out", occupancy=False).read_text()
    caption = re.search(r"<caption>cpu_naive: Kernel time \(median\) \[ms\]<br><small>([^·]*)", text)
    assert caption is not None and caption[1].startswith(f"ours on {XEON}")
    assert f"on NVIDIA H100 80GB HBM3 and {XEON} (CPU baselines)</h2>" in text
    markdown = (tmp_path / "out" / "kursk-cpu-gpu" / "tables.md").read_text()
    assert f"**cpu_naive: Kernel time (median) [ms]** — ours on {XEON}" in markdown


def test_a_cpu_only_database_says_it_ran_on_the_cpu(tmp_path: Path) -> None:
    rows = [{**r, "gpu_name": None, "cc": None} for r in kursk_rows_with_cpu() if on_host(r["kernel"])]
    (section,) = model.build_sections(rows)
    assert section.device == XEON and section.devices(cc=True) == XEON
    text = write_report(rows, tmp_path / "out", occupancy=False).read_text()
    assert f"Measured on the CPU, {XEON}; gemmlab" in text
    assert "unknown GPU" not in text and "GPU not recorded" not in text
    assert "CUDA driver" not in text and "NVRTC" not in text
    assert f"<h2>kursk-cpu-gpu on {XEON}</h2>" in text


def test_integer_pages_say_operations_not_flops(written: Path, sections: dict[str, Section]) -> None:
    int32 = [t for t in tables.metric_tables(sections["int32-lab"]) if t.metric.key in ("gflops", "cgma_analytic")]
    assert int32 and all("FLOP" not in t.title for t in int32)
    assert "tiled_i32: GOPS [GOP/s]" in {t.title for t in int32}
    assert model.GFLOPS.named(True).unit == "GOP/s" and model.GFLOPS.named(False) is model.GFLOPS
    text = (written / "index.html").read_text()
    page = text[text.index("<section id='int32-lab'>") : text.index("<section id='brno-transpose'>")]
    assert "GOPS" in page and "FLOP" not in page
    assert "FLOP" not in (written / "int32-lab" / "tables.md").read_text()
    # Float pages keep their FLOPs.
    assert "tiled: GFLOPS [GFLOP/s]" in text


def test_tables_without_any_of_our_figures_fold_into_one_line(written: Path) -> None:
    text = (written / "index.html").read_text()
    page = text[text.index("<section id='poznan-group1'>") : text.index("<section id='poznan-group2'>")]
    # single_block was not profiled: its GIPS and CGMA tables would be dashes beside the document's figures.
    assert "<caption>single_block: GIPS" not in page and "<caption>single_block: CGMA, measured" not in page
    (line,) = re.findall(r"<p class='note'>Not measured here: [^\n]*</p>", page)
    assert "GIPS of single_block" in line and "CGMA, measured of single_block" in line
    assert "--profile" in line and "gemmlab reproduce poznan-group1 --profile" in line
    assert "poznan-group1/single_block__gips.csv" in line  # the document's figures stay a click away
    assert (written / "poznan-group1" / "single_block__gips.csv").is_file()
    # The profiled kernels keep their tables.
    assert "<caption>naive: GIPS" in page
    markdown = (written / "poznan-group1" / "tables.md").read_text()
    assert markdown.count("Not measured here: ") == 1 and "**single_block: GIPS" not in markdown
    folded = [t for t in tables.metric_tables(model.build_sections(load_rows())[0]) if t.unmeasured]
    assert {(t.label, t.metric.key) for t in folded} == {("single_block", "gips"), ("single_block", "cgma_measured")}


def test_a_kernel_only_the_document_measured_keeps_its_table(written: Path) -> None:
    text = (written / "index.html").read_text()
    assert "<caption>transpose_strided_both (no gemmlab kernel): Bandwidth" in text


def test_the_grade_history_prints_readable_times() -> None:
    from gemmlab.report import leaderboard
    from gemmlab.store.records import Grade

    attempt = Grade(task="t", submission="ann", attempt=1, source_hash="h", created="2026-11-24T00:01:00Z",
                    stage="timed", grade="pass", share_geomean=0.5)  # fmt: skip
    text = leaderboard.history_html([attempt])
    assert "<td>2026-11-24 00:01 UTC</td>" in text and "T00:01" not in text
