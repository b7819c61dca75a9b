"""The results database: one SQLite file that sweeps write and reports read.

:class:`Store` is the one class that opens, migrates, writes and reads it.
Around it, one module per question:

- :mod:`gemmlab.store.schema`: the tables as each version left them, and
  :data:`MIGRATIONS`, the one schema history (v1 to :data:`SCHEMA_VERSION`);
- :mod:`gemmlab.store.records`: what leaves the store typed: a
  configuration's one stored text (``Config``), the dispatcher's picks
  (``Pick``) and the grader's verdicts (``Grade``);
- :mod:`gemmlab.store.rows`: the rows callers give as dicts (each table's
  fields, :func:`point_key`, :func:`result_row`); results are read back as
  dicts too;
- :mod:`gemmlab.store.database`: the connection every write and read goes
  through, and the checks a file passes before SQLite touches it;
- :mod:`gemmlab.store.tuning` and :mod:`gemmlab.store.grades`: the
  tuners' and the grader's tables, part of :class:`Store`.

Robustness
----------
The schema version lives in ``PRAGMA user_version`` and grows only through
:data:`MIGRATIONS`. The file runs in WAL mode, every write is one
``BEGIN IMMEDIATE`` transaction (so a process killed mid-sweep loses at most
the point in flight), and another writer is waited for up to ``timeout``
seconds. A file this gemmlab cannot use (newer schema, not a database, locked,
read-only) raises :class:`~gemmlab.core.errors.StoreError` before anything is
written to it.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gemmlab.core.environment import now_utc
from gemmlab.core.errors import StoreError
from gemmlab.store.database import check_exists, check_writable, insert_row, stamp, store_error, wal_header, wal_of
from gemmlab.store.grades import GradeTables
from gemmlab.store.records import config_text
from gemmlab.store.rows import (
    CEILING_FIELDS,
    COMPILE_FIELDS,
    FAILURE_FIELDS,
    FAILURE_KINDS,
    MEASURE_FIELDS,
    PEAK_FIELDS,
    PROFILE_FIELDS,
    RUN_FIELDS,
    RUN_FIELDS_IN_ROWS,
    STRESS_FAILURE_FIELDS,
    STRESS_SUMMARY_FIELDS,
    latest_peak_of,
    point_key,
    result_row,
    unrecorded_key,
)
from gemmlab.store.schema import MIGRATIONS, SCHEMA_VERSION
from gemmlab.store.tuning import TuningTables

DEFAULT_PATH = Path("gemmlab-results.sqlite")
DEFAULT_TIMEOUT_S = 30.0
# How many times Store.read_untouched reads a file that changed while it was read.
UNTOUCHED_READS = 3

T = TypeVar("T")


class Store(TuningTables, GradeTables):
    """An open results database. Use as a context manager, or call :meth:`close`."""

    # -- opening -------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path = DEFAULT_PATH, *, timeout: float | None = None, readonly: bool = False) -> Store:
        """Open (and on first use create) the database at ``path``, migrating it
        to :data:`SCHEMA_VERSION`. ``readonly`` opens an existing file for
        reading only (no migration: columns it lacks read as None). ``timeout``
        defaults to :data:`DEFAULT_TIMEOUT_S`, read at each call."""
        path = Path(path)
        timeout = DEFAULT_TIMEOUT_S if timeout is None else timeout
        if readonly:
            check_exists(path)
            # Opened for writing but refusing every write (query_only, see _prepare):
            # a mode=ro connection leaves behind the -wal and -shm files that reading
            # a WAL file creates, while the last read-write connection removes them.
            uri = f"{path.resolve().as_uri()}?mode=rw"
        else:
            check_writable(path)
            uri = path.resolve().as_uri()
        return cls._connect(path, uri, timeout, readonly)

    @classmethod
    def _connect(cls, path: Path, uri: str, timeout: float, readonly: bool) -> Store:
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise store_error(exc, path, timeout) from None
        store = cls(path, conn, timeout)
        try:
            store._prepare(readonly)
        except BaseException:
            conn.close()
            raise
        return store

    @classmethod
    def read_untouched(cls, path: str | Path, read: Callable[[Store], T], *, timeout: float | None = None) -> T:
        """``read(store)`` on the database at ``path`` opened read-only, leaving
        the file as it was and nothing new beside it (a report of a database in
        a checkout must not leave ``-wal`` and ``-shm`` files in it).

        A file in rollback-journal mode, or in WAL mode with a ``-wal`` beside
        it (another connection has it open, or one was killed), is opened with
        ``mode=ro``, which takes part in locking and writes nothing new; a
        ``-wal`` left without its ``-shm`` gets one, which SQLite needs to read it.
        A WAL file without a ``-wal`` holds every commit itself, but reading it
        through ``mode=ro`` creates ``-wal`` and ``-shm``, and a read-only
        connection cannot remove them. It is opened ``immutable=1`` instead,
        which creates nothing and takes no locks; so that a writer starting
        meanwhile cannot hand ``read`` a half-written file, the read counts only
        if the file is unchanged and still has no ``-wal`` afterwards, and is
        done again otherwise (then through ``mode=ro``, the ``-wal`` being there).
        """
        path = Path(path)
        timeout = DEFAULT_TIMEOUT_S if timeout is None else timeout
        for _ in range(UNTOUCHED_READS):
            check_exists(path)
            before = stamp(path)
            immutable = wal_header(path) and not wal_of(path).exists()
            uri = f"{path.resolve().as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")
            with cls._connect(path, uri, timeout, readonly=True) as store:
                found = read(store)
            if not immutable or (stamp(path) == before and not wal_of(path).exists()):
                return found
        raise StoreError(
            f"The results database {path} kept changing while it was read ({UNTOUCHED_READS} tries).",
            "Wait for the gemmlab command that writes it to finish, then try again.",
        )

    def _prepare(self, readonly: bool) -> None:
        with self._guard():
            self._conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            if readonly:
                self._conn.execute("PRAGMA query_only = ON")
            # The first read of the file: a file that is not a database fails here,
            # before anything has been written to it.
            version = self.schema_version
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} was written by a newer gemmlab (results schema v{version}; this one reads up "
                    f"to v{SCHEMA_VERSION}).",
                    "Upgrade gemmlab, or give --db another file; this one is left as it is.",
                )
            # Tables with no version may also be another gemmlab creating this
            # file right now (it writes its tables and the version in one
            # commit): read the version again before calling the file foreign.
            if version == 0 and self._tables() and self.schema_version == 0:
                raise StoreError(
                    f"{self.path} is an SQLite database, but not one of gemmlab's (it has tables of its own).",
                    "Give --db another path; gemmlab does not write into other programs' databases.",
                )
            if readonly:
                return
            self._switch_to_wal()
            self._conn.execute("PRAGMA foreign_keys = ON")
            if version < SCHEMA_VERSION:
                self._migrate()

    def _switch_to_wal(self) -> None:
        """Put the file in WAL mode. When two processes do this to a new file at
        once, SQLite can answer "locked" at once instead of waiting for
        busy_timeout (the switch needs the file to itself), so retry until the
        timeout; anything else is raised as it is."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                if self._conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _migrate(self) -> None:
        with self._transaction() as conn:
            # Read again inside the lock: a concurrent process may have migrated first.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            for steps in MIGRATIONS[version:]:
                for statement in steps:
                    if callable(statement):
                        statement(conn)
                    else:
                        conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -------------------------------------------------------------

    def start_run(self, record: dict) -> int:
        """Record where and when the next results are measured; returns the run id.

        ``record`` takes the keys of :data:`RUN_FIELDS` (all optional;
        ``started`` defaults to now). Unknown keys are a programming error.
        """
        unknown = set(record) - set(RUN_FIELDS)
        if unknown:
            raise ValueError(f"unknown run fields: {', '.join(sorted(unknown))}")
        values = {"started": now_utc(), "host_name": socket.gethostname(), **record}
        with self._transaction() as conn:
            return insert_row(conn, "runs", values)

    def add_result(self, run_id: int, experiment: str | None, result: Any) -> int:
        """Store one result (a RunResult or a dict, see :func:`result_row`),
        replacing any earlier result of the same point in the same experiment
        (a row from before schema v5 counts as the same point, see
        :meth:`has_point`). Returns the new row's id."""
        return self.add_results(run_id, experiment, [result])[0]

    def add_results(self, run_id: int, experiment: str | None, results: list[Any]) -> list[int]:
        """Several results in one transaction: all of them are stored, or none."""
        rows = [result_row(r) for r in results]
        columns = self._columns()
        ids = []
        with self._transaction() as conn:
            for row in rows:
                key = point_key(row["kernel"], row["m"], row["n"], row["k"], row["block_edge"], row["dtype"],
                                row["variant"], backend=row["backend"], config=row["config"])  # fmt: skip
                values = {key_: value for key_, value in row.items() if key_ in columns}
                values["warnings"] = json.dumps(values.get("warnings") or [])
                values.update(run_id=run_id, experiment=experiment, point_key=key, created=now_utc())
                conn.execute(
                    "DELETE FROM results WHERE COALESCE(experiment, '') = COALESCE(?, '') AND point_key IN (?, ?)",
                    (experiment, key, unrecorded_key(key)),
                )
                _forget_failure(conn, experiment, key)  # the point is measured now: an earlier failure no longer stands
                ids.append(insert_row(conn, "results", values))
        return ids

    def add_failure(self, run_id: int | None, experiment: str | None, failure: dict) -> int:
        """Record that a point failed (keys of :data:`FAILURE_FIELDS`), replacing
        an earlier failure of the same point. Its measured result, if one was
        stored before, is kept: a failure never deletes a figure. Returns the row's id."""
        unknown = set(failure) - set(FAILURE_FIELDS)
        if unknown:
            raise ValueError(f"unknown failure fields: {', '.join(sorted(unknown))}")
        if failure.get("kind") not in FAILURE_KINDS:
            raise ValueError(f"a failure's kind is one of {', '.join(FAILURE_KINDS)}, not {failure.get('kind')!r}")
        row = {"block_edge": 0, "variant": "", "backend": "", "source": "", **failure}
        row["block_edge"] = int(row["block_edge"] or 0)
        row["config"] = config_text(row.get("config"))
        key = point_key(row["kernel"], row["m"], row["n"], row["k"], row["block_edge"], row["dtype"],
                        row["variant"], backend=row["backend"], config=row["config"])  # fmt: skip
        row.update(run_id=run_id, experiment=experiment, point_key=key, created=now_utc())
        with self._transaction() as conn:
            _forget_failure(conn, experiment, key)
            return insert_row(conn, "failures", row)

    def clear_failures(self, experiment: str | None, keys: list[str]) -> None:
        """Forget the failures of these points (they have now been measured)."""
        if not keys or "failures" not in self._tables_guarded():
            return
        marks = ", ".join("?" for _ in keys)
        with self._transaction() as conn:
            conn.execute(
                f"DELETE FROM failures WHERE COALESCE(experiment, '') = COALESCE(?, '') AND point_key IN ({marks})",
                (experiment, *keys),
            )

    def add_compiles(self, run_id: int, compiles: list[dict]) -> None:
        """What ptxas reported for the compiles a run used (rows of
        :data:`COMPILE_FIELDS`, see :func:`compile_row`), in one transaction;
        a compile the run stored already is replaced."""
        for row in compiles:
            if set(row) != set(COMPILE_FIELDS):
                raise ValueError(f"a compile has the keys {', '.join(COMPILE_FIELDS)}, not {', '.join(sorted(row))}")
        created = now_utc()
        names = ", ".join(("run_id", *COMPILE_FIELDS, "created"))
        marks = ", ".join("?" for _ in range(len(COMPILE_FIELDS) + 2))
        with self._transaction() as conn:
            for row in compiles:
                values = (run_id, *(config_text(row[f]) if f == "config" else row[f] for f in COMPILE_FIELDS), created)
                conn.execute(f"INSERT OR REPLACE INTO compiles ({names}) VALUES ({marks})", values)

    def compiles(self) -> list[dict]:
        """Every stored compile, oldest first; none in a file older than
        schema v8 (its report compiles again, and says so)."""
        if "compiles" not in self._tables_guarded():
            return []
        with self._guard():
            cursor = self._conn.execute("SELECT * FROM compiles ORDER BY id")
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]

    def add_stress(self, run_id: int, summaries: list[dict], failures: list[dict]) -> None:
        """One stress run's tallies (keys of :data:`STRESS_SUMMARY_FIELDS`) and
        failed draws (:data:`STRESS_FAILURE_FIELDS`) in one transaction. Unlike
        :meth:`add_failure`, a point that failed twice is stored twice."""
        tables = (("stress_summaries", STRESS_SUMMARY_FIELDS, summaries),
                  ("stress_failures", STRESS_FAILURE_FIELDS, failures))  # fmt: skip
        for _, fields, rows in tables:
            for row in rows:
                if set(row) != set(fields):
                    raise ValueError(f"a stress row has the keys {', '.join(fields)}, not {', '.join(sorted(row))}")
                if "kind" in row and row["kind"] not in FAILURE_KINDS:
                    raise ValueError(f"a failure's kind is one of {', '.join(FAILURE_KINDS)}, not {row['kind']!r}")
        created = now_utc()
        with self._transaction() as conn:
            for table, fields, rows in tables:
                for row in rows:
                    insert_row(conn, table, {"run_id": run_id, **{f: row[f] for f in fields}, "created": created})

    def stress_summaries(self, run_id: int | None = None) -> list[dict]:
        """Stored stress tallies (of one run, or all), oldest first; none in a
        read-only file older than schema v7."""
        return self._stress_rows("stress_summaries", run_id)

    def stress_failures(self, run_id: int | None = None) -> list[dict]:
        """Stored failed stress draws (of one run, or all), oldest first."""
        return self._stress_rows("stress_failures", run_id)

    def _stress_rows(self, table: str, run_id: int | None) -> list[dict]:
        if table not in self._tables_guarded():
            return []
        with self._guard():
            query = f"SELECT * FROM {table}"
            params: tuple[object, ...] = ()
            if run_id is not None:
                query, params = query + " WHERE run_id = ?", (run_id,)
            cursor = self._conn.execute(query + " ORDER BY id", params)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]

    def add_peaks(self, run_id: int, peaks: list[dict]) -> list[int]:
        """Measured peak rates (rows with the keys of :data:`PEAK_FIELDS`, as
        :meth:`gemmlab.measure.peak.Peak.row` gives them) in one transaction: all of
        them are stored, or none. Returns the new rows' ids."""
        rows = []
        for peak in peaks:
            unknown = set(peak) - set(PEAK_FIELDS)
            if unknown:
                raise ValueError(f"unknown peak fields: {', '.join(sorted(unknown))}")
            rows.append({**peak, "warnings": json.dumps(peak.get("warnings") or [])})
        ids = []
        with self._transaction() as conn:
            for row in rows:
                ids.append(insert_row(conn, "peaks", {**row, "run_id": run_id, "created": now_utc()}))
        return ids

    def update_profile(self, result_id: int, metrics: dict) -> None:
        """Attach the profiler's figures to a stored result.

        Keys named in :data:`PROFILE_FIELDS` fill their columns; the whole
        dict is kept as JSON in ``profile_json``.
        """
        values = {key: metrics[key] for key in PROFILE_FIELDS if metrics.get(key) is not None}
        values["profile_json"] = json.dumps(metrics, default=str)
        assignments = ", ".join(f"{key} = ?" for key in values)
        with self._transaction() as conn:
            cursor = conn.execute(f"UPDATE results SET {assignments} WHERE id = ?", (*values.values(), result_id))
            if cursor.rowcount == 0:
                raise StoreError(f"{self.path} has no result with id {result_id}.", "List the ids with Store.rows().")

    def fill_ceilings(self, run_ids: list[int], gpu_name: str | None, ceilings: dict) -> None:
        """Give runs that have no ceilings yet the ones measured now on the same GPU.

        A run measured without --profile has none; when a later run profiles
        its points (they were stored already, so no new run holds them), its
        ceilings are what places those points under the roofline. Runs of
        another GPU and runs that have their own are left as they are.
        """
        if not run_ids or not gpu_name or any(ceilings.get(key) is None for key in CEILING_FIELDS):
            return
        assignments = ", ".join(f"{key} = ?" for key in CEILING_FIELDS)
        unset = " AND ".join(f"{key} IS NULL" for key in CEILING_FIELDS)
        marks = ", ".join("?" for _ in run_ids)
        with self._transaction() as conn:
            conn.execute(
                f"UPDATE runs SET {assignments} WHERE id IN ({marks}) AND gpu_name = ? AND {unset}",
                (*(ceilings[key] for key in CEILING_FIELDS), *run_ids, gpu_name),
            )

    # -- reading -------------------------------------------------------------

    def has_point(self, experiment: str | None, key: str) -> bool:
        """Whether the point of ``key`` (see :func:`point_key`) is stored in
        ``experiment``. A row from before schema v5 answers for its point
        whatever backend and configuration ``key`` names: until then results
        held only sweeps of the catalogue's entries, each with its default
        configuration, so it is what a sweep would measure again."""
        return bool(self.point_rows(experiment, [key]))

    def rows(self, experiment: str | None = None) -> list[dict]:
        """Stored results (of one experiment, or all), each with its run's
        ``gpu_name``, ``cc``, ``date`` and the rest of :data:`RUN_FIELDS_IN_ROWS`.

        ``warnings`` comes back as a list and ``profile_json`` as a dict (or
        None); every column of the current schema is present (None when a
        read-only older file lacks it).
        """
        if experiment is None:
            return self._select("", ())
        return self._select("WHERE results.experiment = ?", (experiment,))

    def point_rows(self, experiment: str | None, keys: list[str]) -> list[dict]:
        """The stored rows of these point keys in ``experiment`` (None: the rows
        stored without one), as :meth:`rows` returns them; rows from before
        schema v5 of the same points too (see :meth:`has_point`)."""
        wanted = list(dict.fromkeys([*keys, *(unrecorded_key(key) for key in keys)]))
        marks = ", ".join("?" for _ in wanted)
        where = f"WHERE COALESCE(results.experiment, '') = COALESCE(?, '') AND results.point_key IN ({marks})"
        return self._select(where, (experiment, *wanted))

    def _run_columns(self) -> str:
        """The run's columns of :data:`RUN_FIELDS_IN_ROWS` to select beside a
        row (``started`` as ``date``). A read-only older file may lack run
        columns that later versions added; those are left out."""
        present = {r[1] for r in self._conn.execute("PRAGMA table_info(runs)")}
        run_columns = [f for f in RUN_FIELDS_IN_ROWS if ("started" if f == "date" else f) in present]
        return ", ".join(f"runs.{'started AS date' if f == 'date' else f}" for f in run_columns)

    def _select(self, where: str, params: tuple) -> list[dict]:
        with self._guard():
            selected = self._run_columns()
            query = f"SELECT results.*, {selected} FROM results JOIN runs ON runs.id = results.run_id {where}"
            query += " ORDER BY results.experiment, results.kernel, results.dtype, results.variant,"
            # Stored order last: of two rows of one point (two configurations), the later comes later.
            query += " results.block_edge, results.m, results.n, results.k, results.id"
            cursor = self._conn.execute(query, params)
            names = [d[0] for d in cursor.description]
            found = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
        for row in found:
            for key in (*PROFILE_FIELDS, *MEASURE_FIELDS, "profile_json", *RUN_FIELDS_IN_ROWS):
                row.setdefault(key, None)
            row["kernels_seen"] = json.loads(row["kernels_seen"]) if row["kernels_seen"] else []
            # A read-only file older than v5 has neither column: nothing was recorded.
            row.setdefault("backend", "")
            row.setdefault("config", "")
            row.setdefault("source", "")
            row["warnings"] = json.loads(row["warnings"]) if row.get("warnings") else []
            row["profile_json"] = json.loads(row["profile_json"]) if row["profile_json"] else None
        return found

    def peaks(self, gpu_name: str | None = None, dtype: str | None = None) -> list[dict]:
        """Stored peak rates (of one GPU, one element type, or all), oldest
        first, each with its run's ``gpu_name``, ``cc``, ``date`` and the rest
        of :data:`RUN_FIELDS_IN_ROWS`; ``warnings`` as a list. A read-only file
        older than the ``peaks`` table has none."""
        with self._guard():
            if "peaks" not in self._tables():
                return []
            given = [(c, v) for c, v in (("runs.gpu_name = ?", gpu_name), ("peaks.dtype = ?", dtype)) if v is not None]
            query = f"SELECT peaks.*, {self._run_columns()} FROM peaks JOIN runs ON runs.id = peaks.run_id"
            if given:
                query += " WHERE " + " AND ".join(clause for clause, _ in given)
            cursor = self._conn.execute(query + " ORDER BY peaks.id", tuple(value for _, value in given))
            names = [d[0] for d in cursor.description]
            found = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
        for row in found:
            for key in RUN_FIELDS_IN_ROWS:
                row.setdefault(key, None)
            row["warnings"] = json.loads(row["warnings"]) if row.get("warnings") else []
        return found

    def latest_peak(self, gpu_name: str, dtype: str) -> dict | None:
        """The measured peak of ``dtype`` on ``gpu_name``: the newest row of
        each instruction family that measured it, then the fastest of those
        (on Hopper, wgmma's rather than mma.sync's); None if none is stored."""
        return latest_peak_of(self.peaks(gpu_name, dtype))

    def failures(self, experiment: str | None = None, *, all_experiments: bool = False) -> list[dict]:
        """The failed points of ``experiment`` (None: those stored without one;
        ``all_experiments``: every one), oldest first. An older file that has no
        failures table (read-only, before schema v6) has none."""
        if "failures" not in self._tables_guarded():
            return []
        with self._guard():
            query = "SELECT * FROM failures"
            params: tuple[object, ...] = ()
            if not all_experiments:
                query, params = query + " WHERE COALESCE(experiment, '') = COALESCE(?, '')", (experiment,)
            cursor = self._conn.execute(query + " ORDER BY id", params)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]

    def runs(self) -> list[dict]:
        with self._guard():
            cursor = self._conn.execute("SELECT * FROM runs ORDER BY id")
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]

    def _columns(self) -> set[str]:
        with self._guard():
            return {r[1] for r in self._conn.execute("PRAGMA table_info(results)")}


def _forget_failure(conn: sqlite3.Connection, experiment: str | None, key: str) -> None:
    """Delete the stored failure of one point (inside the caller's transaction)."""
    conn.execute("DELETE FROM failures WHERE COALESCE(experiment, '') = COALESCE(?, '') AND point_key = ?",
                 (experiment, key))  # fmt: skip
