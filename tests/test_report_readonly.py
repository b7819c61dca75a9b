"""A report only reads its database: the file stays byte for byte and time for
time as it was, and no -wal, -shm or journal file is left beside it (a
database in a checkout must not leave files in it). No GPU needed."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gemmlab.cli.app import app
from gemmlab.core.errors import StoreError
from gemmlab.report import write_report
from gemmlab.store import store as store_module
from gemmlab.store.store import Store

FIXTURE = Path(__file__).parent / "fixtures" / "report_rows.json"
RUN = {"gpu_name": "NVIDIA H100 80GB HBM3", "cc": "9.0"}


def rows() -> list[dict]:
    return [r for r in json.loads(FIXTURE.read_text()) if r["experiment"] == "arequipa-any-size"]


def make_db(folder: Path) -> Path:
    """A database as gemmlab writes one (WAL mode), with a run of rows."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "results.sqlite"
    with Store.open(db) as store:
        store.add_results(store.start_run(RUN), "arequipa-any-size", rows())
    return db


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of ``folder``: its bytes and modification time."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def journal_mode(db: Path) -> str:
    """From the file's header: bytes 18 and 19 are 2 in WAL mode, 1 otherwise."""
    return {b"\x02\x02": "wal", b"\x01\x01": "rollback"}[db.read_bytes()[18:20]]


def test_a_report_leaves_its_wal_database_and_folder_as_they_were(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    db = make_db(checkout)
    assert journal_mode(db) == "wal" and sorted(p.name for p in checkout.iterdir()) == ["results.sqlite"]
    before = snapshot(checkout)
    index = write_report(db, tmp_path / "report", occupancy=False)
    assert "tiled_any_size" in index.read_text()
    assert snapshot(checkout) == before


def test_the_report_command_leaves_no_file_beside_the_database(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    db = make_db(checkout)
    before = snapshot(checkout)
    result = CliRunner().invoke(app, ["report", "--db", str(db), "--out", str(tmp_path / "out"), "--no-occupancy"])
    assert result.exit_code == 0, result.output
    assert snapshot(checkout) == before


def test_a_rollback_journal_database_is_read_as_well(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    db = make_db(checkout)
    with sqlite3.connect(db) as conn:  # as the databases of older gemmlabs are
        conn.execute("PRAGMA journal_mode = DELETE")
    assert journal_mode(db) == "rollback"
    before = snapshot(checkout)
    write_report(db, tmp_path / "report", occupancy=False)
    assert snapshot(checkout) == before


def test_a_database_another_process_is_writing_is_read_whole_and_its_files_left_to_it(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    db = make_db(checkout)
    writer = Store.open(db)
    try:
        extra = [{**rows()[0], "experiment": "mine", "median_ms": 42.0}]
        writer.add_results(writer.start_run(RUN), "mine", extra)  # committed, still in the -wal
        assert sorted(p.name for p in checkout.iterdir()) == ["results.sqlite", "results.sqlite-shm",
                                                             "results.sqlite-wal"]  # fmt: skip
        names = sorted(p.name for p in checkout.iterdir())
        index = write_report(db, tmp_path / "report", occupancy=False)
        assert "<section id='mine'>" in index.read_text()  # the commit in the -wal was read
        assert sorted(p.name for p in checkout.iterdir()) == names
    finally:
        writer.close()
    assert sorted(p.name for p in checkout.iterdir()) == ["results.sqlite"]


def test_a_database_written_during_the_read_is_read_again(tmp_path: Path) -> None:
    db = make_db(tmp_path)
    seen: list[int] = []

    def read(store: Store) -> int:
        count = len(store.runs())
        if not seen:
            # Another gemmlab stores a run meanwhile and closes, which writes the file itself.
            with Store.open(db) as other:
                other.start_run(RUN)
        seen.append(count)
        return count

    assert Store.read_untouched(db, read) == 2
    assert seen == [1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]


def test_a_database_that_never_stops_changing_is_refused(tmp_path: Path) -> None:
    db = make_db(tmp_path)

    def read(store: Store) -> None:
        with Store.open(db) as other:
            other.start_run(RUN)

    with pytest.raises(StoreError) as info:
        Store.read_untouched(db, read)
    assert f"kept changing while it was read ({store_module.UNTOUCHED_READS} tries)" in info.value.cause
    assert "Wait for the gemmlab command that writes it to finish" in info.value.fix


def test_a_database_in_a_folder_marked_read_only_is_reported(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes through directory permissions")
    checkout = tmp_path / "checkout"
    db = make_db(checkout)
    before = snapshot(checkout)
    checkout.chmod(0o555)
    try:
        write_report(db, tmp_path / "report", occupancy=False)
    finally:
        checkout.chmod(0o755)
    assert snapshot(checkout) == before


@contextlib.contextmanager
def write_protected(path: Path) -> Iterator[None]:
    """``path`` made unwritable for this process: its mode bits, or for root,
    whom those do not stop, the file system's immutable attribute (skipped
    where chattr cannot set it)."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        yield
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("root writes through permission bits, and chattr +i is not available here")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", str(path)], check=True)


def test_a_database_file_marked_read_only_gets_no_wal_beside_it(tmp_path: Path) -> None:
    # A connection that asks to write a write-protected WAL file is opened
    # read-only by SQLite, creates -wal and -shm to read it and cannot remove them.
    checkout = tmp_path / "checkout"
    db = make_db(checkout)
    before = snapshot(checkout)
    with write_protected(db):
        index = write_report(db, tmp_path / "report", occupancy=False)
        assert sorted(p.name for p in checkout.iterdir()) == ["results.sqlite"]
    assert "tiled_any_size" in index.read_text()
    assert snapshot(checkout) == before


def test_the_report_asks_sqlite_for_reading_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = make_db(tmp_path / "checkout")
    uris: list[str] = []
    connect = sqlite3.connect

    def recording(database: str, *args: object, **kwargs: object) -> sqlite3.Connection:
        uris.append(database)
        return connect(database, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store_module.sqlite3, "connect", recording)
    write_report(db, tmp_path / "report", occupancy=False)
    assert uris and all("mode=ro" in uri for uri in uris)


def test_a_missing_database_is_still_named(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="There is no results database"):
        Store.read_untouched(tmp_path / "none.sqlite", lambda store: None)
