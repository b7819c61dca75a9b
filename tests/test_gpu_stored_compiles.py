"""On a GPU: `gemmlab reproduce` stores the compiles it measured, and
`gemmlab report` on that database, with compiling forbidden, writes the same
tables and occupancy as the report written at measurement time."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gemmlab.core.errors import CompileError
from gemmlab.store.store import Store

pytestmark = pytest.mark.gpu


def report_files(root: Path) -> dict[str, str]:
    files = {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.suffix in (".csv", ".md")}
    files["index.html"] = re.sub(r"Written [^<]*? by gemmlab", "Written by gemmlab", (root / "index.html").read_text())
    return files


def test_report_from_the_database_is_the_one_written_at_measurement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gemmlab.cli.app import app
    from gemmlab.measure import kernel_occupancy

    db, then, now = tmp_path / "r.sqlite", tmp_path / "then", tmp_path / "now"
    measured = CliRunner().invoke(app, ["reproduce", "poznan-group1", "--sizes", "176", "--db", str(db),
                                        "--out", str(then)])  # fmt: skip
    assert measured.exit_code == 0, measured.output
    with Store.open(db, readonly=True) as store:
        rows, compiles, (run,) = store.rows(), store.compiles(), store.runs()
    # Each measured row's compile is stored, as the row recorded it, with the run's NVRTC.
    for row in rows:
        (stored,) = [c for c in compiles if (c["kernel"], c["block_edge"], c["arch"]) ==
                     (row["kernel"], row["block_edge"], row["arch"])]  # fmt: skip
        assert (stored["registers"], stored["smem_bytes"]) == (row["registers"], row["smem_bytes"])
        assert stored["run_id"] == run["id"] and stored["nvrtc_version"] == run["nvrtc_version"]
    # And the GT 240's table's sm_75 compile of each kernel and block edge.
    assert {(c["kernel"], c["block_edge"]) for c in compiles if c["arch"] == "sm_75"} == {
        (r["kernel"], r["block_edge"]) for r in rows
    }

    def refuse(*args: object, **kwargs: object) -> None:
        raise CompileError("compiling is forbidden in this test", "read the stored compiles")

    monkeypatch.setattr(kernel_occupancy, "compile_kernel", refuse)
    again = CliRunner().invoke(app, ["report", "--db", str(db), "--out", str(now)])
    assert again.exit_code == 0, again.output
    assert report_files(then) == report_files(now)
    assert "as measured (NVRTC" in (now / "index.html").read_text()
