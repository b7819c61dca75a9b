"""The package a person installs: --version, shell completion, the catalogue
table at narrow widths, `gemmlab export` and gemmlab.results, and the
dependencies pyproject.toml declares."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import gemmlab
from gemmlab.backends import cpu
from gemmlab.cli import app, run_cli
from gemmlab.cli.kernels import catalogue_table
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.store.store import Store

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


# --- version and completion ---------------------------------------------------


def test_version_names_gemmlab_then_python_nvrtc_and_cupy(capsys: pytest.CaptureFixture) -> None:
    assert run_cli(["--version"]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first == f"gemmlab {gemmlab.__version__}"
    assert re.fullmatch(r"Python 3\.\d+\.\d+, NVRTC (\d+\.\d+|not found), CuPy \S+( installed)?", second), second


def test_the_version_is_written_once_for_the_package_and_once_for_the_wheel_and_they_agree() -> None:
    assert gemmlab.__version__ == PYPROJECT["version"]


def test_help_offers_shell_completion_and_the_version() -> None:
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    for option in ("--version", "--install-completion", "--show-completion"):
        assert option in out, option


def test_completion_script_completes_gemmlab(monkeypatch: pytest.MonkeyPatch) -> None:
    # Typer otherwise ignores the shell named here and asks shellingham for the
    # shell among this process's ancestors; a detached run has none (it failed
    # with "Shell  not supported"). This variable makes the option take its value.
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    result = CliRunner().invoke(app, ["--show-completion", "bash"], prog_name="gemmlab")
    assert result.exit_code == 0, result.output
    assert "_gemmlab_completion" in result.output and "complete" in result.output


# --- the catalogue table --------------------------------------------------------


@pytest.mark.parametrize("width", [80, 120])
def test_catalogue_ids_are_never_broken_across_lines(width: int) -> None:
    from gemmlab.cli.kernels import kernels  # noqa: F401  (the command builds its rows from the catalogue)

    rows = [{"id": s.id, "summary": s.summary, "source_doc": s.source_doc, "block_edges": list(s.block_edges),
             "dtypes": list(s.dtypes), "constraints": s.needs} for s in catalogue.CATALOGUE]  # fmt: skip
    console = Console(width=width, record=True, color_system=None)
    console.print(catalogue_table(rows))
    lines = console.export_text().splitlines()
    assert max(map(len, lines)) <= width
    # The first cell of every body line: a whole id where a row starts, empty on its wrapped lines.
    first_cells = [m.group(1) for line in lines if (m := re.match(r"│ (\S*) *│", line))]
    assert [cell for cell in first_cells if cell] == list(catalogue.kernel_ids())


def test_the_kernels_command_prints_every_id_whole_at_80_columns() -> None:
    result = CliRunner().invoke(app, ["kernels"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    whole = set(re.findall(r"^│ (\S+) ", result.output, flags=re.MULTILINE))
    assert set(catalogue.kernel_ids()) <= whole


# --- export and gemmlab.results ---------------------------------------------------


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    """Three stored points of cpu_blas (numpy only), two experiments."""
    path = tmp_path / "lab.sqlite"
    with Store.open(path) as store:
        run = store.start_run({})
        for experiment, size in (("kursk-cpu-gpu", 16), ("kursk-cpu-gpu", 24), ("mine", 32)):
            store.add_result(run, experiment, cpu.run_cpu("cpu_blas", Shape.square(size), reps=3, max_seconds=0.05))
    return path


def test_export_writes_one_csv_row_per_point_headline_columns_first(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "all.csv"
    assert run_cli(["export", "--db", str(db), "--out", str(out)]) == 0
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["m"]) for r in rows] == [16, 24, 32]
    assert list(rows[0])[:6] == ["kernel", "m", "n", "k", "block_edge", "dtype"]
    assert {"median_ms", "gflops", "experiment", "gpu_name", "date"} <= set(rows[0])
    assert all(r["kernel"] == "cpu_blas" and float(r["gflops"]) > 0 for r in rows)
    assert rows[0]["warnings"].startswith("[")  # a list, as JSON text


def test_export_of_one_experiment(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "mine.csv"
    assert run_cli(["export", "--db", str(db), "--out", str(out), "--experiment", "mine"]) == 0
    with out.open() as f:
        assert [int(r["m"]) for r in csv.DictReader(f)] == [32]


def test_export_of_nothing_stored_is_a_clear_error(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert run_cli(["export", "--db", str(db), "--out", str(tmp_path / "x.csv"), "--experiment", "poznan"]) == 2
    err = capsys.readouterr().err
    assert "holds no results of experiment 'poznan'" in err and "Leave out --experiment" in err
    assert not (tmp_path / "x.csv").exists()


def test_parquet_without_pyarrow_names_the_extra(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    assert run_cli(["export", "--db", str(db), "--out", str(tmp_path / "r.parquet")]) == 2
    assert "pip install 'gemmlab[parquet]'" in capsys.readouterr().err


def test_parquet_holds_what_the_csv_holds(db: Path, tmp_path: Path) -> None:
    parquet = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "r.data"
    assert run_cli(["export", "--db", str(db), "--out", str(out), "--format", "parquet"]) == 0
    table = parquet.read_table(out)
    assert table.num_rows == 3 and table.column("m").to_pylist() == [16, 24, 32]
    assert table.column_names[:2] == ["kernel", "m"]


def test_results_at_the_top_level_come_to_pandas(db: Path) -> None:
    pytest.importorskip("pandas")
    stored = gemmlab.results(db, "kursk-cpu-gpu")
    assert len(stored) == 2 and stored.columns()[:2] == ["kernel", "m"]
    frame = stored.to_pandas()
    assert list(frame["m"]) == [16, 24] and (frame["gflops"] > 0).all()


def test_importing_gemmlab_leaves_the_api_unimported_until_results_is_called() -> None:
    code = "import sys, gemmlab; assert 'gemmlab.api' not in sys.modules; gemmlab.results(); print('unreachable')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""})  # fmt: skip
    # The call reaches the API, which looks for the default database in the checkout and finds none.
    assert out.returncode == 1 and "StoreError: There is no results database" in out.stderr, out.stderr
    assert "unreachable" not in out.stdout


def test_the_store_is_its_own_package_and_results_a_plain_function() -> None:
    """Issue 51: the store's package was named results/, so gemmlab.results, a
    function, had to be the package made callable. The store is gemmlab.store now."""
    import gemmlab.store.store

    assert gemmlab.store.store.Store is Store and gemmlab.store.__name__ == "gemmlab.store"
    assert callable(gemmlab.results) and not isinstance(gemmlab.results, type(gemmlab))


# --- dependencies -------------------------------------------------------------------


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0]


def test_numba_is_in_the_cpu_and_test_extras_only() -> None:
    assert "numba" not in map(_name, PYPROJECT["dependencies"])
    extras = PYPROJECT["optional-dependencies"]
    assert "numba" in map(_name, extras["cpu"]) and "numba" in map(_name, extras["test"])
    assert "pyarrow" in map(_name, extras["parquet"])


def test_cuda_major_packages_have_upper_bounds() -> None:
    bounded = {_name(r): r for r in PYPROJECT["dependencies"]}
    for package in ("cupy-cuda13x", "cuda-core", "cuda-bindings", "nvidia-cuda-nvrtc"):
        assert "<" in bounded[package], bounded[package]
    assert "<14" in bounded["cuda-bindings"] and "<14" in bounded["nvidia-cuda-nvrtc"]


def test_classifiers_name_each_supported_python() -> None:
    oldest = int(PYPROJECT["requires-python"].removeprefix(">=3."))
    named = {int(c.rsplit(".", 1)[1]) for c in PYPROJECT["classifiers"] if re.fullmatch(r".*Python :: 3\.\d+", c)}
    assert named == set(range(oldest, 14))
    assert any(c.startswith("License :: ") for c in PYPROJECT["classifiers"])


def test_readme_installs_the_cpu_extra_for_reproduce_and_ci_runs_its_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert block == [
        "python3 -m pip install '.[cpu]' && gemmlab reproduce",
        "python3 -m pip install -e '.[test]' && python3 -m pytest -q -n auto --dist loadgroup",
    ]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m pip install -q -e '.[test]'" in ci and "\npython3 -m pytest -q -n auto --dist loadgroup\n" in ci
