"""An open results database and the one way through to its file: every
SQLite error becomes a :class:`~gemmlab.core.errors.StoreError` in words
(:meth:`Database._guard`), every write is one ``BEGIN IMMEDIATE`` transaction
(:meth:`Database._transaction`); and the checks a file passes before SQLite
touches it. :class:`gemmlab.store.store.Store` and the tables it gathers
(:mod:`gemmlab.store.tuning`, :mod:`gemmlab.store.grades`) build on it."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

from gemmlab.core.errors import StoreError


class Database:
    """A connection to a results database and the path it was opened at."""

    def __init__(self, path: Path, conn: sqlite3.Connection, timeout: float) -> None:
        self.path = path
        self._conn = conn
        self._timeout = timeout

    @property
    def schema_version(self) -> int:
        with self._guard():
            return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def integrity_check(self) -> str:
        with self._guard():
            return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])

    # -- plumbing ------------------------------------------------------------

    def _tables(self) -> list[str]:
        return [r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]

    def _tables_guarded(self) -> list[str]:
        with self._guard():
            return self._tables()

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise store_error(exc, self.path, self._timeout) from None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction. IMMEDIATE takes the write lock at BEGIN, so a
        busy database is waited for there (busy_timeout) instead of failing
        half-way; anything raised inside, KeyboardInterrupt too, rolls back."""
        with self._guard():
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _replace(self, table: str, fields: tuple[str, ...], row: dict) -> None:
        unknown = set(row) - set(fields)
        if unknown:
            raise ValueError(f"unknown {table} fields: {', '.join(sorted(unknown))}")
        with self._transaction() as conn:
            insert_row(conn, table, row, replace=True)


def insert_row(conn: sqlite3.Connection, table: str, row: Mapping[str, object], *, replace: bool = False) -> int:
    """Insert ``row`` (column -> value) into ``table`` inside the caller's
    transaction (``replace``: INSERT OR REPLACE); the new row's id."""
    names = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    verb = "INSERT OR REPLACE" if replace else "INSERT"
    cursor = conn.execute(f"{verb} INTO {table} ({names}) VALUES ({marks})", tuple(row.values()))
    return int(cursor.lastrowid)  # type: ignore[arg-type]


def check_exists(path: Path) -> None:
    if not path.is_file():
        raise StoreError(f"There is no results database at {path}.", "Run `gemmlab reproduce` or give --db.")


def wal_of(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def wal_header(path: Path) -> bool:
    """Whether the file's header says WAL mode (bytes 18 and 19, the read and
    write format versions, are 2 in WAL mode and 1 otherwise)."""
    with path.open("rb") as f:
        return f.read(20)[18:20] == b"\x02\x02"


def stamp(path: Path) -> tuple[int, int, int]:
    """What changes when anything writes the file: its inode, size and modification time."""
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


def check_writable(path: Path) -> None:
    """Refuse, before SQLite touches anything, a file or folder marked read-only.

    The permission bits are read as well as os.access: root may write to a
    file marked read-only, but whoever marked it meant it to stay as it is.
    WAL mode also creates ``-wal`` and ``-shm`` files beside the database, so
    its folder must be writable too.
    """
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.exists():
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"Cannot create the folder {folder} for the results database ({exc.strerror}).",
                "Give --db a path in a folder you can write.",
            ) from None
    if path.exists():
        if not path.is_file():
            raise StoreError(f"{path} is not a file.", "Give --db the path of a results database file.")
        if _marked_read_only(path):
            raise StoreError(
                f"The results database {path} is read-only.",
                f"Make it writable (chmod u+w {path}), or give --db a new path.",
            )
    if _marked_read_only(folder):
        raise StoreError(
            f"Cannot write in the folder {folder} (SQLite keeps {path.name}-wal and -shm beside the database).",
            "Give --db a path in a folder you can write, or make this one writable.",
        )


def _marked_read_only(path: Path) -> bool:
    return not os.access(path, os.W_OK) or not stat.S_IMODE(path.stat().st_mode) & 0o222


def store_error(exc: sqlite3.Error, path: Path, timeout: float) -> StoreError:
    """One sentence of cause and one of fix for what SQLite said."""
    message = str(exc)
    lowered = message.lower()
    if "locked" in lowered or "busy" in lowered:
        return StoreError(
            f"The results database {path} is locked by another process (waited {timeout:g} s).",
            "Wait for the other gemmlab command to finish, or give --db another file.",
        )
    if "not a database" in lowered or "malformed" in lowered:
        return StoreError(
            f"{path} is not a usable results database (SQLite: {message}).",
            "Give --db another path, or move this file away; gemmlab does not overwrite it.",
        )
    if "readonly" in lowered or "read-only" in lowered:
        return StoreError(
            f"The results database {path} cannot be written (SQLite: {message}).",
            "Make the file and its folder writable, or give --db a path in a folder you can write.",
        )
    if "unable to open" in lowered:
        return StoreError(
            f"SQLite cannot open {path} ({message}).", "Check that its folder exists and that you may write in it."
        )
    return StoreError(f"The results database {path} could not be used (SQLite: {message}).", "")
