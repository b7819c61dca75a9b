"""Compiles stored with each run (results schema v8), and a report that reads
them: written again later from the same database, it shows the same tables,
whatever NVRTC is installed then (no GPU needed)."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from conftest import database_at
from gemmlab.core.errors import CompileError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.report import model, tables, write_report
from gemmlab.store.store import COMPILE_FIELDS, SCHEMA_VERSION, Store, config_text
from gemmlab.studies.points import SweepPoint
from gemmlab.studies.sweep import local_nvrtc_version, sweep

FIXTURE = Path(__file__).parent / "fixtures" / "report_rows.json"
EXPERIMENT = "poznan-group1"  # its layout names the GT 240 (1.2): tables for our GPU and the document's
RUN = {"gpu_name": "NVIDIA H100 80GB HBM3", "cc": "9.0", "command_line": "pytest", "nvrtc_version": "13.0"}
# Register counts no compile of these kernels gives, so a table that shows them read the store.
STORED_REGISTERS = {"sm_90": 37, "sm_75": 29}


def fixture_rows() -> list[dict]:
    return [r for r in json.loads(FIXTURE.read_text()) if r["experiment"] == EXPERIMENT]


def stored_compiles(rows: list[dict]) -> list[dict]:
    """One compile per kernel, block edge and arch of ``rows``, as a measurement on an H100 stores them."""
    found = dict.fromkeys((r["kernel"], r["block_edge"], r["dtype"]) for r in rows)
    return [
        {"kernel": kernel, "block_edge": edge, "dtype": dtype, "config": config_text(catalogue.get(kernel).config),
         "arch": arch, "nvrtc_version": "13.0", "registers": registers, "smem_bytes": 8 * edge * edge,
         "stack_bytes": 0, "spill_store_bytes": 0, "spill_load_bytes": 0, "barriers": 1}
        for kernel, edge, dtype in found
        for arch, registers in STORED_REGISTERS.items()
    ]  # fmt: skip


def database(path: Path, *, with_compiles: bool = True) -> Path:
    with Store.open(path) as store:
        run_id = store.start_run(RUN)
        rows = fixture_rows()
        store.add_results(run_id, EXPERIMENT, rows)
        if with_compiles:
            store.add_compiles(run_id, stored_compiles(rows))
    return path


def forbid_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    from gemmlab.measure import kernel_occupancy

    def refuse(*args: object, **kwargs: object) -> None:
        raise CompileError("compiling is forbidden in this test", "read the stored compiles")

    monkeypatch.setattr(kernel_occupancy, "compile_kernel", refuse)


def report_files(index: Path) -> dict[str, str]:
    """Every table file of a report, and its page without the line that names when it was written."""
    root = index.parent
    files = {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.suffix in (".csv", ".md")}
    files["index.html"] = re.sub(r"Written [^<]*? by gemmlab", "Written by gemmlab", index.read_text())
    return files


# -- the store ----------------------------------------------------------------


def make_v7_file(path: Path) -> None:
    """A database exactly as schema v7 wrote it: one run, one result, no compiles table."""
    conn = database_at(path, 7)
    conn.execute("INSERT INTO runs (id, started, gpu_name, cc) VALUES (1, '2025-01-01T00:00:00+00:00', 'Old', '9.0')")
    conn.execute(
        "INSERT INTO results (run_id, experiment, point_key, kernel, m, n, k, block_edge, dtype, registers, "
        "smem_bytes, arch, gflops, warnings, created) VALUES (1, 'e', 'tiled|64|64|64|16|float32||nvrtc|', 'tiled', "
        "64, 64, 64, 16, 'float32', 38, 2048, 'sm_90', 52.4, '[]', '2025-01-01T00:00:00+00:00')"
    )
    conn.commit()
    conn.close()


def test_a_v7_database_gains_the_compiles_table_and_keeps_its_rows(tmp_path: Path) -> None:
    db = tmp_path / "v7.sqlite"
    make_v7_file(db)
    with Store.open(db, readonly=True) as store:  # read as it is: no compiles yet
        assert store.schema_version == 7 and store.compiles() == []
    with Store.open(db) as store:
        assert store.schema_version == SCHEMA_VERSION >= 8 and store.integrity_check() == "ok"
        (row,) = store.rows("e")
        assert (row["kernel"], row["registers"], row["gflops"], row["gpu_name"]) == ("tiled", 38, 52.4, "Old")
        assert store.compiles() == []
        compile_ = {**stored_compiles([row])[0], "config": {"b": 1, "a": 2}}
        store.add_compiles(1, [compile_, compile_])  # one compile given twice is stored once
        (stored,) = store.compiles()
        assert stored["run_id"] == 1 and stored["config"] == '{"a": 2, "b": 1}'
        assert {key: stored[key] for key in ("arch", "nvrtc_version", "registers", "smem_bytes")} == {
            "arch": "sm_90", "nvrtc_version": "13.0", "registers": 37, "smem_bytes": 2048}  # fmt: skip


def test_a_compile_with_missing_or_unknown_fields_is_refused(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        run_id = store.start_run(RUN)
        good = stored_compiles(fixture_rows())[0]
        assert set(good) == set(COMPILE_FIELDS)
        with pytest.raises(ValueError, match="a compile has the keys"):
            store.add_compiles(run_id, [good, {k: v for k, v in good.items() if k != "registers"}])
        with pytest.raises(ValueError, match="a compile has the keys"):
            store.add_compiles(run_id, [{**good, "threads": 64}])
        assert store.compiles() == []  # nothing of a refused call was stored


# -- measuring stores the compiles ---------------------------------------------


def fake_result(kernel: str, shape: Shape, block_edge: int, dtype: str, **options: object) -> object:
    """A GPU point's result as the runner gives it (resources nested, as RunResult has them);
    an end-to-end point gives two rows of one compile."""
    row = {"kernel": kernel, "m": shape.m, "n": shape.n, "k": shape.k, "block_edge": block_edge, "dtype": dtype,
           "median_ms": 1.0, "gflops": 2.0, "arch": "sm_90", "backend": "nvrtc",
           "resources": {"registers": 40 + block_edge, "smem_bytes": 4 * block_edge, "stack_bytes": 8,
                         "spill_store_bytes": 4, "spill_load_bytes": 12, "barriers": 1}}  # fmt: skip
    if options.get("variant") == "e2e":
        return [{**row, "variant": "pinned"}, {**row, "variant": "pageable"}]
    return row


def test_a_sweep_stores_each_distinct_compile_with_its_run(tmp_path: Path) -> None:
    points = [SweepPoint("tiled", Shape.square(64), edge) for edge in (8, 16)]
    points.append(SweepPoint("tiled", Shape.square(128), 16, variant="e2e"))  # the same compile as 64^3's
    points.append(SweepPoint("cpu_naive", Shape.square(64)))  # a CPU baseline: no compile
    with Store.open(tmp_path / "r.sqlite") as store:
        runner = lambda kernel, *args, **options: (
            {"kernel": kernel, "m": 64, "n": 64, "k": 64, "dtype": "float32", "median_ms": 1.0}
            if kernel == "cpu_naive" else fake_result(kernel, *args, **options)
        )  # fmt: skip
        summary = sweep(points, store, "e", runner=runner, progress=False, run_info=RUN)
        compiles = store.compiles()
    assert summary.run_id is not None and len(summary.done) == 4
    assert sorted((c["kernel"], c["block_edge"]) for c in compiles) == [("tiled", 8), ("tiled", 16)]
    eight = next(c for c in compiles if c["block_edge"] == 8)
    assert eight["run_id"] == summary.run_id and eight["nvrtc_version"] == local_nvrtc_version()
    assert (eight["registers"], eight["smem_bytes"], eight["stack_bytes"]) == (48, 32, 8)
    assert (eight["spill_store_bytes"], eight["spill_load_bytes"], eight["arch"]) == (4, 12, "sm_90")


def test_a_sweep_that_stores_nothing_names_no_run(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        summary = sweep([], store, "e", runner=fake_result, progress=False, run_info=RUN)
        assert summary.run_id is None and store.runs() == []


def test_reproduce_stores_the_compiles_of_the_documents_gpu(tmp_path: Path) -> None:
    """poznan-group1's GT 240 (1.2) is older than NVRTC's oldest target: its
    table's compile (sm_75) is made while measuring, and stored with the run."""
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC (nvidia-cuda-nvrtc) is not installed")
    from gemmlab.studies.reproduce import reproduce

    with Store.open(tmp_path / "r.sqlite") as store:
        (outcome,) = reproduce([EXPERIMENT], store, sizes=[176], runner=fake_result, progress=False, run_info=RUN)
        compiles = store.compiles()
    run_id = outcome.summary.run_id
    measured = {(c["kernel"], c["block_edge"]) for c in compiles if c["arch"] == "sm_90"}
    document = {(c["kernel"], c["block_edge"]): c for c in compiles if c["arch"] == "sm_75"}
    assert measured and set(document) == measured
    assert all(c["run_id"] == run_id and c["nvrtc_version"] == local_nvrtc_version() for c in compiles)
    # A real compile: registers from ptxas, and tiled's two tiles of shared memory.
    tiled = document[("tiled", 16)]
    assert tiled["registers"] > 0 and tiled["smem_bytes"] == 2 * 16 * 16 * 4


# -- the report reads them --------------------------------------------------------


def test_a_report_written_again_without_any_compiler_is_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = database(tmp_path / "r.sqlite")
    first = report_files(write_report(db, tmp_path / "then"))
    forbid_compiling(monkeypatch)
    again = report_files(write_report(db, tmp_path / "now"))
    assert first == again
    with Store.open(db, readonly=True) as store:
        (section,) = model.build_sections(store.rows())
        blocks = tables.occupancy_blocks(section, store.compiles())
    assert len(blocks) == 6  # three kernels, each on our GPU and the document's
    for block in blocks:
        arch = "sm_75" if "document's GPU" in block.title else "sm_90"
        registers = dict(block.rows)["Registers per thread"]
        assert registers[:2] == [str(STORED_REGISTERS[arch])] * 2, block.title
        assert f"{arch} compile as measured (NVRTC 13.0, stored with run 1)" in block.note
        assert block.title in first["index.html"] or block.title.replace("'", "&#x27;") in first["index.html"]


def test_the_compile_of_the_rows_run_is_preferred_to_a_later_one(tmp_path: Path) -> None:
    db = database(tmp_path / "r.sqlite")
    with Store.open(db) as store:
        later = store.start_run({**RUN, "nvrtc_version": "13.5"})
        rows = store.rows()
        store.add_compiles(later, [{**c, "registers": 38, "nvrtc_version": "13.5"} for c in stored_compiles(rows)])
        (section,) = model.build_sections(store.rows())
        compiles = store.compiles()
    blocks = tables.occupancy_blocks(section, compiles)
    assert len(compiles) == 2 * len(stored_compiles(rows))
    assert all("NVRTC 13.0, stored with run 1" in b.note for b in blocks)
    assert all(dict(b.rows)["Registers per thread"][0] in ("37", "29") for b in blocks)
    # Rows given without their runs (no run_id) take the newest stored compile.
    (runless,) = model.build_sections([{**r, "run_id": None} for r in rows])
    assert all("NVRTC 13.5, stored with run 2" in b.note for b in tables.occupancy_blocks(runless, compiles))


def test_an_old_database_gets_tables_compiled_now_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gemmlab.measure import kernel_occupancy
    from gemmlab.measure.occupancy import theoretical_occupancy

    def compiled_now(kernel: str, arch: str, block_edges: list[int] | None = None, **kwargs: object) -> list:
        return [(f"{e}x{e}", theoretical_occupancy(str(kwargs["cc"]), e * e, 38, 0)) for e in block_edges or [16]]

    monkeypatch.setattr(kernel_occupancy, "kernel_occupancy", compiled_now)
    monkeypatch.setattr(tables, "_local_nvrtc", lambda: "13.5")
    db = database(tmp_path / "r.sqlite", with_compiles=False)
    with sqlite3.connect(db) as conn:  # as gemmlab before v8 left it
        conn.executescript("DROP TABLE compiles; PRAGMA user_version = 7;")
    index = write_report(db, tmp_path / "out")
    with Store.open(db, readonly=True) as store:
        assert store.schema_version == 7  # the report reads; it does not migrate
        (section,) = model.build_sections(store.rows())
        blocks = tables.occupancy_blocks(section, store.compiles())
    assert len(blocks) == 6 and all(dict(b.rows)["Registers per thread"][0] == "38" for b in blocks)
    for block in blocks:
        assert "compile made now by NVRTC 13.5, not necessarily the one measured" in block.note
        assert "before results schema v8" in block.note
    assert "made now by NVRTC 13.5" in index.read_text()


def test_without_a_stored_compile_or_a_compiler_the_table_is_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forbid_compiling(monkeypatch)
    db = database(tmp_path / "r.sqlite", with_compiles=False)
    with Store.open(db, readonly=True) as store:
        (section,) = model.build_sections(store.rows())
        blocks = tables.occupancy_blocks(section, store.compiles())
    assert blocks and all(not b.rows and "compiling is forbidden" in b.note for b in blocks)


def test_the_documents_bound_works_with_stored_registers(tmp_path: Path) -> None:
    """A stored sm_75 compile with 64 registers per thread cannot fit a 22 x 22
    block on the GT 240, which the document ran: the bound its run proves stands in."""
    db = database(tmp_path / "r.sqlite", with_compiles=False)
    with Store.open(db) as store:
        compiles = [{**c, "registers": 64} for c in stored_compiles(store.rows())]
        store.add_compiles(1, compiles)
        (section,) = model.build_sections(store.rows())
        blocks = tables.occupancy_blocks(section, store.compiles())
    document = next(b for b in blocks if b.title.startswith("single_block on the document's GPU"))
    assert document.columns == ["8x8", "16x16", "22x22 †", "device limit"]
    cells = dict(document.rows)
    assert cells["Registers per thread"] == ["64", "64", "32", cells["Registers per thread"][3]]
    assert "22x22: ours 64, at most 32" in document.note and "as measured" in document.note
