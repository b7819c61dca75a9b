"""The grader's table (``grades``, :mod:`gemmlab.studies.grade`): one
verdict per graded attempt, each leaving the store as a
:class:`~gemmlab.store.records.Grade`, and what tells a verdict the grader
wrote from one written behind its back (the first signed row, SQLite's count
of other connections' commits). Part of :class:`gemmlab.store.store.Store`."""

from __future__ import annotations

from collections.abc import Callable

from gemmlab.core.environment import now_utc
from gemmlab.store.database import Database, insert_row
from gemmlab.store.records import GRADE_FIELDS, Grade


class GradeTables(Database):
    """The verdicts of `gemmlab grade`."""

    def add_grade(self, run_id: int | None, verdict: dict, sign: Callable[[Grade], str] | None = None) -> int:
        """Store a submission's verdict (keys of :data:`GRADE_FIELDS` but
        ``attempt`` and ``signature``; ``wall_s``, ``occupancy`` and ``profile``
        may be left out) as its next attempt on the task, signed by ``sign``
        (the attempt's record -> its signature); returns the attempt's number."""
        verdict = {"wall_s": None, "occupancy": None, "profile": None, **verdict}
        if set(verdict) != set(GRADE_FIELDS) - {"attempt", "signature"}:
            raise ValueError(f"a verdict has the keys {', '.join(GRADE_FIELDS)} but attempt and signature, "
                             f"not {sorted(verdict)}")  # fmt: skip
        with self._transaction() as conn:
            (last,) = conn.execute(
                "SELECT COALESCE(MAX(attempt), 0) FROM grades WHERE task = ? AND submission = ?",
                (verdict["task"], verdict["submission"]),
            ).fetchone()
            row = {**verdict, "attempt": int(last) + 1, "run_id": run_id, "created": now_utc()}
            row["signature"] = sign(Grade(**row)) if sign else None
            insert_row(conn, "grades", row)
            return row["attempt"]

    def data_version(self) -> int:
        """SQLite's count of commits made by other connections to this file
        (PRAGMA data_version): it moves when anything but this Store writes
        the file, which `gemmlab grade`, the only writer, takes as tampering."""
        with self._guard():
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def grades_signed_from(self) -> int:
        """The first grades row id written when verdicts were signed (schema
        v14); rows before it predate signatures."""
        if "meta" not in self._tables_guarded():
            return 1 << 62  # a file read as it is, from before v14: no row is signed
        with self._guard():
            found = self._conn.execute("SELECT value FROM meta WHERE key = 'grades_signed_from'").fetchone()
        return int(found[0]) if found else 1

    def grades(self, task: str) -> list[Grade]:
        """Every attempt of every submission on ``task``, oldest first; none in
        a file from before schema v9."""
        if "grades" not in self._tables_guarded():
            return []
        with self._guard():
            cursor = self._conn.execute("SELECT * FROM grades WHERE task = ? ORDER BY id", (task,))
            names = [d[0] for d in cursor.description]
            return [Grade.from_row(dict(zip(names, values, strict=True))) for values in cursor.fetchall()]
