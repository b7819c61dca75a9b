"""Files written where a user points --out (issue 52): folders that do not
exist yet are made, a folder or a path through a file is refused in one line
before any work, ``-`` is standard output, and a write that fails half-way
(a full disk, Ctrl-C) leaves the old file as it was. `gemmlab distributed`
checks its --out before the run, and keeps the rows of a finished run in a
file it names when the database refuses them. No GPU needed: the ladder's
launch is replaced by rows it could have returned."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gemmlab.api.distributed import keep_results
from gemmlab.backends import cpu
from gemmlab.cli.app import app
from gemmlab.core.errors import StoreError
from gemmlab.core.outputs import OutputError, check_output, write_file, write_text
from gemmlab.core.shapes import Shape
from gemmlab.store import store
from gemmlab.store.store import Store
from gemmlab.studies.distributed import launch

runner = CliRunner()
OLD = "the export of yesterday, still good\n"


def error_line(result, code: int = 2) -> str:
    """The one line on stderr of a clean error, after checking the exit code and that there is no traceback."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def leftovers(folder: Path) -> list[str]:
    """Temporary files a write left behind."""
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def full_disk_after_one_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CSV writer writes one row, then the disk is full."""

    def writerows(self: csv.DictWriter, rows: object) -> None:
        self.writerow(next(iter(rows)))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(csv.DictWriter, "writerows", writerows)


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    """Two stored points of cpu_blas (numpy only)."""
    path = tmp_path / "lab.sqlite"
    with Store.open(path) as opened:
        run = opened.start_run({})
        for size in (16, 24):
            opened.add_result(run, "mine", cpu.run_cpu("cpu_blas", Shape.square(size), reps=3, max_seconds=0.05))
    return path


def export(db: Path, out: str | Path, *more: str):
    return runner.invoke(app, ["export", "--db", str(db), "--out", str(out), *more])


# --- the writer (core/outputs.py) -------------------------------------------------


def test_missing_folders_are_made_and_the_file_gets_an_ordinary_mode(tmp_path: Path) -> None:
    target = tmp_path / "new" / "deeper" / "rows.txt"
    assert write_text(target, "a,b\n") == target
    assert target.read_text() == "a,b\n"
    assert leftovers(target.parent) == []
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # not the 0600 of a temporary file


def test_a_full_disk_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    target = tmp_path / "rows.csv"
    target.write_text(OLD)

    def fill(tmp: Path) -> None:
        tmp.write_text("half a fi")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(OutputError) as info:
        write_file(target, fill)
    assert target.read_text() == OLD and leftovers(tmp_path) == []
    assert "disk is full" in info.value.cause and "left as it was" in info.value.fix
    assert "\n" not in str(info.value)


def test_a_failed_write_removes_the_folders_it_made(tmp_path: Path) -> None:
    def fill(tmp: Path) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(OutputError, match="Nothing was written"):
        write_file(tmp_path / "a" / "b" / "rows.csv", fill)
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_write_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "rows.csv"
    target.write_text(OLD)

    def fill(tmp: Path) -> None:
        tmp.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_file(target, fill)
    assert target.read_text() == OLD and leftovers(tmp_path) == []


def test_a_link_is_followed_and_kept(tmp_path: Path) -> None:
    real, link = tmp_path / "real.csv", tmp_path / "link.csv"
    real.write_text(OLD)
    link.symlink_to(real)
    write_text(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"


def test_a_pipe_is_written_into_not_replaced(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(pipe.read_text()), daemon=True)
    reader.start()
    write_text(pipe, "through the pipe\n")
    reader.join(timeout=10)
    assert got == ["through the pipe\n"] and pipe.is_fifo()


def test_check_output_names_the_file_in_the_way(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match=r"notes\.txt is a file, not a folder"):
        check_output(tmp_path / "notes.txt" / "deeper" / "out.csv")
    with pytest.raises(OutputError, match="is a folder, and a file name is needed") as info:
        check_output(tmp_path, example="rows.json")
    assert str(tmp_path / "rows.json") in info.value.fix
    check_output(tmp_path / "missing" / "out.csv")  # to be made
    assert not (tmp_path / "missing").exists()  # checking writes nothing


# --- gemmlab export -------------------------------------------------------------------


def test_export_into_a_folder_that_does_not_exist_yet(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "nodir" / "sub" / "out.csv"
    result = export(db, out)
    assert result.exit_code == 0, result.output
    with out.open() as f:
        assert [int(r["m"]) for r in csv.DictReader(f)] == [16, 24]
    assert leftovers(out.parent) == []


def test_export_under_a_file_is_one_line_naming_it(db: Path, tmp_path: Path) -> None:
    (tmp_path / "somefile.txt").write_text(OLD)
    line = error_line(export(db, tmp_path / "somefile.txt" / "out.csv"))
    assert "somefile.txt is a file, not a folder" in line and "Give --out a path in a folder" in line
    assert (tmp_path / "somefile.txt").read_text() == OLD


def test_export_to_a_folder_asks_for_a_file_name(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    line = error_line(export(db, "."))
    assert "--out . is a folder" in line and "e.g. --out results.csv" in line
    assert error_line(export(db, ".", "--format", "parquet")).endswith("e.g. --out results.parquet.")


def test_export_to_standard_output(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = export(db, "-")
    assert result.exit_code == 0, result.output
    assert [int(r["m"]) for r in csv.DictReader(io.StringIO(result.stdout))] == [16, 24]
    assert "wrote 2 results" in result.stderr and "standard output" in result.stderr
    assert not (tmp_path / "-").exists()


def test_parquet_to_standard_output(db: Path) -> None:
    parquet = pytest.importorskip("pyarrow.parquet")
    result = export(db, "-", "--format", "parquet")
    assert result.exit_code == 0, result.output
    assert parquet.read_table(io.BytesIO(result.stdout_bytes)).column("m").to_pylist() == [16, 24]


def test_export_on_a_full_disk_keeps_the_old_file(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out.csv"
    out.write_text(OLD)
    full_disk_after_one_row(monkeypatch)
    line = error_line(export(db, out))
    assert f"Cannot write {out}: its disk is full" in line and "give --out a path on another disk" in line
    assert out.read_text() == OLD and leftovers(tmp_path) == []


def test_export_over_a_read_only_file_is_refused(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    out.write_text(OLD)
    out.chmod(0o444)
    assert "chmod u+w" in error_line(export(db, out))
    assert out.read_text() == OLD


# --- gemmlab distributed ------------------------------------------------------------


def ladder_row(**extra: object) -> dict:
    """A row as a rank answers it (studies/distributed/ladder.py), measured on CPU processes."""
    row = {
        "algorithm": "summa", "gpus": 2, "device": "cpu", "scaling": "strong", "size": 32, "m": 32, "n": 32, "k": 32,
        "grid": "1x2", "median_ms": 2.0, "min_ms": 1.9, "max_ms": 2.5, "reps": 2, "comm_ms": 0.5, "gemm_ms": 1.8,
        "overlap_efficiency": 0.6, "tflops_per_gpu": 0.01, "error": 1e-7, "tolerance": 1e-4, "verified": True,
        "local_gemm": "torch.matmul", "fallback_reason": None,
    }  # fmt: skip
    return {**row, **extra}


FOUND = {1: [ladder_row(gpus=1, grid=None)], 2: [ladder_row(), ladder_row(algorithm="allgather_gemm", grid=None)]}


@pytest.fixture()
def fake_ladder(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """torch present and the ladder's launches answered with FOUND; the list
    records the launches asked for (empty: the run never started)."""
    launched: list[int] = []

    def run_ladder(setup: object, gpus: list[int], *args: object, **kwargs: object) -> dict[int, list[dict]]:
        launched.extend(gpus)
        return {world: FOUND[world] for world in gpus}

    monkeypatch.setattr(launch, "require_torch", lambda: None)
    monkeypatch.setattr(launch, "run_ladder", run_ladder)
    return launched


def distributed(tmp_path: Path, *more: str):
    args = ["distributed", "--cpu", "--gpus", "1,2", "--sizes", "32", "--db", str(tmp_path / "r.sqlite")]
    return runner.invoke(app, [*args, "--work-dir", str(tmp_path / "logs"), *more])


@pytest.fixture()
def locked_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A results database another process holds the write lock of; waited for 0.2 s, not 30."""
    path = tmp_path / "r.sqlite"
    Store.open(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(store, "DEFAULT_TIMEOUT_S", 0.2)
    yield path
    holder.execute("ROLLBACK")
    holder.close()


def stored_rows(db: Path) -> int:
    with Store.open(db, readonly=True) as opened:
        return len(opened.rows(launch.EXPERIMENT))


@pytest.mark.parametrize("where", ["folder", "under a file"])
def test_distributed_refuses_a_bad_out_before_the_run(
    tmp_path: Path, fake_ladder: list[int], where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_torch() -> None:
        raise AssertionError("the path is checked before torch or a GPU is looked for")

    monkeypatch.setattr(launch, "require_torch", no_torch)
    (tmp_path / "notes.txt").write_text(OLD)
    out = tmp_path if where == "folder" else tmp_path / "notes.txt" / "rows.json"
    line = error_line(distributed(tmp_path, "--out", str(out)))
    assert ("is a folder" if where == "folder" else "notes.txt is a file, not a folder") in line
    assert fake_ladder == [] and not (tmp_path / "r.sqlite").exists() and not (tmp_path / "logs").exists()


def test_distributed_out_in_a_missing_folder_is_made(tmp_path: Path, fake_ladder: list[int]) -> None:
    out = tmp_path / "runs" / "today" / "rows.json"
    result = distributed(tmp_path, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert fake_ladder == [1, 2]
    document = json.loads(out.read_text())
    assert [r["algorithm"] for r in document["rows"]] == ["summa", "summa", "allgather_gemm"]
    assert stored_rows(tmp_path / "r.sqlite") == 3


def test_distributed_rows_to_standard_output(tmp_path: Path, fake_ladder: list[int]) -> None:
    result = distributed(tmp_path, "--out", "-")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["rows"]) == 3  # the table and the notes went to stderr
    assert "stored in" in result.stderr


def test_a_locked_database_keeps_the_rows_in_out(tmp_path: Path, fake_ladder: list[int], locked_db: Path) -> None:
    out = tmp_path / "rows.json"
    line = error_line(distributed(tmp_path, "--out", str(out)))
    assert "Storing the rows failed" in line and "locked by another process (waited 0.2 s)" in line
    assert f"All 3 rows are kept in {out}" in line and "run again to store them" in line
    assert len(json.loads(out.read_text())["rows"]) == 3


def test_a_locked_database_without_out_keeps_the_rows_in_the_current_folder(
    tmp_path: Path, fake_ladder: list[int], locked_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    line = error_line(distributed(tmp_path))
    (kept,) = here.glob("gemmlab-distributed-*.json")
    assert f"All 3 rows are kept in {kept.name} (JSON, as --out writes it)" in line
    document = json.loads(kept.read_text())
    assert [r["gpus"] for r in document["rows"]] == [1, 2, 2] and document["gpus"] == [1, 2]
    # A second refused run in the same second does not write over the first one's rows.
    error_line(distributed(tmp_path))
    assert len(list(here.glob("gemmlab-distributed-*.json"))) == 2


def test_a_set_aside_file_goes_to_the_ranks_answers_when_nothing_can_be_written(
    tmp_path: Path, locked_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(path: Path, text: str, flag: str = "--out") -> Path:
        raise OutputError(f"Cannot write {path}: no.", "")

    monkeypatch.setattr("gemmlab.api.distributed.write_text", refuse)
    with pytest.raises(StoreError) as info:
        keep_results(FOUND, {"rows": [1, 2, 3]}, locked_db, tmp_path / "rows.json", tmp_path / "logs")
    assert f"kept in the ranks' answers ({tmp_path / 'logs'}/<P>gpu/rank0.json)" in info.value.fix


def test_an_out_on_a_full_disk_says_the_rows_are_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, db = tmp_path / "rows.json", tmp_path / "r.sqlite"
    out.write_text(OLD)

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OutputError) as info:
        keep_results(FOUND, {"rows": []}, db, out, tmp_path / "logs")
    assert "its disk is full" in info.value.cause and f"The rows are stored in {db} all the same" in info.value.fix
    assert out.read_text() == OLD and leftovers(tmp_path) == []
    assert stored_rows(db) == 3
