"""Plots a reader can trust: one kind of value axis for ours and the published
figures, legends inside the figure, dense plots split, an SVG beside every PNG;
and published figures beside ours in the tables. No GPU needed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gemmlab.report import drawing, model, plots, tables
from gemmlab.report.drawing import Plot
from gemmlab.report.model import Section

FIXTURE = Path(__file__).parent / "fixtures" / "report_rows.json"
SIZE = (4000, 4000, 1)


@pytest.fixture(scope="module")
def sections() -> dict[str, Section]:
    return {s.experiment: s for s in model.build_sections(json.loads(FIXTURE.read_text()))}


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The figures the plot functions save, by PNG name, kept for inspection."""
    kept: dict[str, Any] = {}
    save = plots.save_figure

    def keep(fig: Any, out: Path, stem: str, caption: str) -> Plot:
        kept[f"{stem}.png"] = fig
        return save(fig, out, stem, caption)

    monkeypatch.setattr(plots, "save_figure", keep)
    return kept


def legend_entries(fig: Any) -> list[str]:
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    return [text.get_text() for legend in legends for text in legend.get_texts()]


# --------------------------------------------------------------------------
# One kind of value axis


def test_the_value_axis_turns_log_past_one_and_a_half_decades() -> None:
    assert drawing.value_scale([2.0, 20.0, 60.0]) == "linear"  # 1.48 decades
    assert drawing.value_scale([2.0, 70.0]) == "log"  # 1.54 decades
    assert drawing.value_scale([0.0, None, 5.0, 6.0]) == "linear"  # zeros and gaps have no place on a log axis
    assert drawing.value_scale([]) == "linear"


def test_ours_and_the_papers_panels_share_a_log_axis(
    sections: dict[str, Section], figures: dict[str, Any], tmp_path: Path
) -> None:
    kursk = sections["kursk-cpu-gpu"]
    plots.plot_time_vs_edge(kursk, tmp_path, kernels=("tiled",))
    fig = figures["tiled-pageable-host-memory_time_vs_edge.png"]
    ours, published = fig.axes[0], fig.axes[1]
    assert ours.get_title().startswith("ours") and published.get_title().startswith("published")
    # The GTX 770's times alone span about one decade (52 to 647 ms) and would be drawn
    # linear; ours span three, so the figure's one decision is log, for both panels.
    pub_values = [v for line in published.get_lines() for v in line.get_ydata()]
    assert drawing.value_scale(pub_values) == "linear"
    assert ours.get_yscale() == published.get_yscale() == "log"
    assert all("log scale" in ax.get_ylabel() for ax in (ours, published))


def test_a_figure_of_little_span_stays_linear_and_says_nothing_of_log(
    sections: dict[str, Section], figures: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Our end-to-end times at N = 256 (about 0.1 ms) beside stand-in published ones of
    # the same order: one narrow span, so both panels stay linear.
    rows = [r for r in sections["kursk-cpu-gpu"].rows if r["kernel"] == "tiled" and r["n"] == 256]
    narrow = model.build_sections([r for r in rows if r["block_edge"] >= 8 and r["host_memory"] == "pinned"])[0]
    n256 = (256, 256, 256)
    stand_in = {(n256, 8): 0.2, (n256, 16): 0.25, (n256, 32): 0.3}
    monkeypatch.setattr(plots, "_published_pick", lambda *_: (model.E2E_TIME, stand_in, "a GPU"))
    plots.plot_time_vs_edge(narrow, tmp_path, kernels=("tiled",))
    (fig,) = figures.values()
    values = [v for ax in fig.axes for line in ax.get_lines() for v in line.get_ydata()]
    assert len(fig.axes) == 2 and drawing.value_scale(values) == "linear"
    assert {ax.get_yscale() for ax in fig.axes} == {"linear"}
    assert not any("log scale" in ax.get_ylabel() for ax in fig.axes)


# --------------------------------------------------------------------------
# Dense plots split, legends inside


def test_lines_pack_into_figures_of_at_most_eight_a_kernel_kept_whole() -> None:
    line = lambda: drawing.Line([((256, 256, 256), 1.0)], {})
    groups = [[line() for _ in range(n)] for n in (2, 1, 1, 3, 2, 3, 3, 2)]  # 17 lines
    parts = drawing.in_parts(groups)
    assert len(parts) == 3
    assert all(len(part) <= drawing.MAX_SERIES for part in parts)
    assert sum(len(part) for part in parts) == 17
    # No kernel's lines are torn across two figures.
    where = {id(x): i for i, part in enumerate(parts) for x in part}
    assert all(len({where[id(x)] for x in group}) == 1 for group in groups)


def test_the_cpu_against_gpu_plot_is_split_into_three_files(
    sections: dict[str, Section], figures: dict[str, Any], tmp_path: Path
) -> None:
    kursk = sections["kursk-cpu-gpu"]
    lines = sum(len(group) for group in plots._cpu_gpu_lines(kursk))
    assert lines == 17
    drawn = plots.plot_cpu_gpu(kursk, tmp_path)
    assert [p.file for p in drawn] == ["cpu_vs_gpu-1.png", "cpu_vs_gpu-2.png", "cpu_vs_gpu-3.png"]
    assert all((tmp_path / p.file).is_file() for p in drawn)
    entries = [legend_entries(figures[p.file]) for p in drawn]
    assert all(0 < len(names) <= drawing.MAX_SERIES for names in entries)
    assert sum(len(names) for names in entries) == 17
    # The parts share their axes, so that a line in one compares with a line in another.
    limits = {figures[p.file].axes[0].get_ylim() for p in drawn}
    assert len(limits) == 1


def _inside(fig: Any) -> list[str]:
    """The legends of ``fig`` that reach past its edges, by their first entry."""
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    frame = fig.bbox
    outside = []
    for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]:
        box = legend.get_window_extent(renderer)
        if box.x0 < frame.x0 - 1 or box.y0 < frame.y0 - 1 or box.x1 > frame.x1 + 1 or box.y1 > frame.y1 + 1:
            outside.append(legend.get_texts()[0].get_text())
    return outside


def test_a_tall_legend_grows_its_figure_until_it_fits(tmp_path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4, 3), layout="constrained")
    ax = fig.subplots()
    for i in range(20):
        ax.plot([1, 2], [i, i + 1], label=f"a long series label, number {i}")
    fig.legend(loc="outside right upper")
    assert _inside(fig)  # as drawn, the legend runs off the figure
    drawing.save_figure(fig, tmp_path, "tall", "a tall legend")
    assert _inside(fig) == []
    assert fig.get_size_inches()[1] > 3


def test_every_legend_of_the_kursk_and_brno_plots_lies_inside_its_figure(
    sections: dict[str, Section], figures: dict[str, Any], tmp_path: Path
) -> None:
    for name in ("kursk-cpu-gpu", "brno-transpose"):
        section = sections[name]
        for spec in section.layout.plots:
            plots.draw(spec, section, tmp_path)
    assert {"cpu_vs_gpu-1.png", "published_vs_ours.png", "bandwidth_bars.png"} <= set(figures)
    assert {name: _inside(fig) for name, fig in figures.items() if _inside(fig)} == {}


# --------------------------------------------------------------------------
# SVG beside PNG


def test_every_png_has_an_svg_twin(sections: dict[str, Section], tmp_path: Path) -> None:
    section = sections["brno-transpose"]
    rows = [{**r, "peak_gflops_measured": 51_000.0, "bandwidth_gbs_measured": 4_200.0} for r in section.rows]
    for r in rows:
        r["dram_bytes"] = 3.0 * 4 * r["n"] ** 2
        r["metric"] = "gflops"  # a roofline needs arithmetic; these stand in for a GEMM's rows
        r["gflops"] = r.get("gflops") or 100.0
    drawn = [p for spec in section.layout.plots for p in plots.draw(spec, section, tmp_path)]
    drawn += plots.plot_roofline(model.build_sections(rows)[0], tmp_path)
    assert "roofline.png" in {p.file for p in drawn}
    pngs = sorted(tmp_path.glob("*.png"))
    assert sorted(p.name for p in pngs) == sorted(p.file for p in drawn)
    for png in pngs:
        svg = png.with_suffix(".svg")
        assert svg.is_file(), png.name
        assert svg.read_text(encoding="utf-8").lstrip().startswith("<?xml") and "<svg" in svg.read_text()


# --------------------------------------------------------------------------
# Published figures beside ours in the tables


def test_a_figure_without_a_block_edge_moves_beside_our_best_edge() -> None:
    size = (512, 512, 512)
    ours = {(size, 16): 3.0, (size, 32): 4.0}
    placed, moved = tables.place_published({(size, None): 5.0}, ours, higher_is_better=True)
    assert placed == {(size, 32): 5.0} and moved == {(size, 32)}
    placed, moved = tables.place_published({(size, None): 5.0}, ours, higher_is_better=False)
    assert placed == {(size, 16): 5.0} and moved == {(size, 16)}
    # Where we ran it without an edge too, or have nothing at that size, it stays put.
    with_none = {**ours, (size, None): 2.0}
    assert tables.place_published({(size, None): 5.0}, with_none, True) == ({(size, None): 5.0}, set())
    assert tables.place_published({((64, 64, 64), None): 5.0}, ours, True) == ({((64, 64, 64), None): 5.0}, set())
    # A figure the document keyed by our best edge already keeps that cell.
    both = {(size, None): 5.0, (size, 32): 6.0}
    assert tables.place_published(both, ours, True) == (both, set())


def test_the_lectures_copy_sits_beside_ours_not_in_a_column_of_its_own(sections: dict[str, Section]) -> None:
    brno = tables.metric_tables(sections["brno-transpose"])
    copy = next(t for t in brno if t.label == "copy" and t.metric.key == "bandwidth")
    best = max((16, 32), key=lambda e: copy.ours[(SIZE, e)])
    markdown = copy.to_markdown()
    assert "— (112.4" not in markdown
    assert f"{tables.fmt(copy.ours[(SIZE, best)])} (112.4†)" in markdown
    assert "states no block edge" in markdown
    assert "(112.4†)" in copy.to_html("copy.csv")


def test_a_point_we_did_not_run_keeps_its_dash_and_says_why(sections: dict[str, Section]) -> None:
    cpu = next(
        t for t in tables.metric_tables(sections["kursk-cpu-gpu"]) if t.label == "cpu_naive" and t.metric.key == "time"
    )
    row = next(line for line in cpu.to_markdown().splitlines() if line.startswith("| 2048 |"))
    assert row.startswith("| 2048 | — (")
    assert "N = 2048" in cpu.note and "stops at 1024" in cpu.note
    # Points both measured carry no such note.
    tiled = next(t for t in tables.metric_tables(sections["kursk-cpu-gpu"]) if t.label == "tiled, pinned host memory")
    assert tiled.published and tiled.note == ""


# --------------------------------------------------------------------------
# Line styles as the title says


def test_the_cpu_against_gpu_lines_are_styled_as_the_title_says(
    sections: dict[str, Section], figures: dict[str, Any], tmp_path: Path
) -> None:
    kursk = sections["kursk-cpu-gpu"]
    drawn = plots.plot_cpu_gpu(kursk, tmp_path)
    seen = set()
    for p in drawn:
        fig = figures[p.file]
        assert "ours (solid)" in fig._suptitle.get_text() and "published (dashed)" in fig._suptitle.get_text()
        for line in fig.axes[0].get_lines():
            label = line.get_label()
            want = "--" if label.startswith("published") else "-"
            assert line.get_linestyle() == want, label
            seen.add(want)
    # Both host memories of a kernel are ours: solid, told apart by their markers.
    pinned = [x for p in drawn for x in figures[p.file].axes[0].get_lines() if "pinned" in x.get_label()]
    pageable = [x for p in drawn for x in figures[p.file].axes[0].get_lines() if "pageable" in x.get_label()]
    assert pinned and pageable and {x.get_linestyle() for x in pinned + pageable} == {"-"}
    assert {x.get_marker() for x in pinned} != {x.get_marker() for x in pageable}
    assert seen == {"-", "--"}


def test_integer_plots_label_operations(sections: dict[str, Section], figures: dict[str, Any], tmp_path: Path) -> None:
    drawn = plots.plot_compare_largest(sections["int32-lab"], tmp_path)
    ax = figures["compare_largest.png"].axes[0]
    assert "GOP/s" in ax.get_ylabel() and "FLOP" not in ax.get_ylabel()
    assert drawn[0].caption.startswith("GOPS of every kernel")
