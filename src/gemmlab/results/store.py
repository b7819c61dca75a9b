"""The results database: one SQLite file that sweeps write and reports read.

Layout
------
``runs``: one row per sweep or reproduce invocation: where and when the
numbers were measured (GPU, clocks, driver, CUDA and NVRTC versions, gemmlab
version and git revision, CPU, host, command line), and with ``--profile`` the
device's two roofline ceilings as measured (``peak_gflops_measured``: cuBLAS
SGEMM; ``bandwidth_gbs_measured``: a device-to-device copy; see
:func:`gemmlab.measure.roofline.measure_ceilings`).

``peaks``: one row per instruction family and element type measured by
``gemmlab peak`` (:mod:`gemmlab.measure.peak`): the rate (``gflops``), the SM clock
read right after the timed launches (``sm_clock_after_mhz``, as for
results), the nominal rate at that clock and the ratio of the two, the
timing, and the run (``run_id``) that says on which GPU, when, and with which
versions. :meth:`Store.latest_peak` gives a GPU's peak for an element type.

``results``: one row per measured point, unique per (experiment, point_key).
``point_key`` is ``kernel|m|n|k|block_edge|dtype|variant|backend|config`` (see
:func:`point_key`), so two configurations of one point are two rows.
``backend`` names what ran it (``nvrtc``: a CUDA kernel compiled by gemmlab;
``cpu``: the CPU baselines; :mod:`gemmlab.backends`), ``config`` its named
template parameters as JSON with sorted keys (:func:`config_text`; ``""`` for
a kernel without any). Rows measured before schema v5 have both empty
(:func:`predates_config`); they stand for their point as the sweeps of then
measured it, with the catalogue's default configuration (:meth:`Store.has_point`).
``variant`` says what the time covers:

- ``""``: the kernel alone (CUDA events around the launch), or for the CPU
  baselines the call on the host;
- ``"pinned"`` / ``"pageable"``: an end-to-end row (the Kursk paper's
  definition): ``median_ms`` is still the kernel's time, and ``h2d_ms``,
  ``d2h_ms``, ``e2e_gflops`` and ``host_memory`` hold the copies with that
  kind of host memory.

``tuned_candidates``: the tuner's (:mod:`gemmlab.studies.tune`) candidates, one
row per (GPU, kernel, dtype, shape, configuration) tried, with its ``status``:
``ok`` (with ``median_ms``, ``gflops``, ``error`` and, for the first candidate
of a shape, ``baseline_gflops`` of cuBLAS), ``rejected`` or ``skipped`` (with
the ``reason``). :meth:`Store.add_candidate`, :meth:`Store.candidates`.

``tuned``: the configuration the tuner chose per (GPU, kernel, dtype, size
class), with its GFLOPS, its ratio to cuBLAS, the default configuration's
GFLOPS and the shapes it was chosen on. :meth:`Store.set_tuned`,
:meth:`Store.tuned_config`. Both tuner tables name the GPU as ``runs`` does
(``gpu_name``, with ``cc``) and store configurations as ``results`` does.
Before schema v5 the tuner created them itself (:data:`TUNER_HISTORY`); v5
brings such a file's tables to their last layout.

``results.source`` (v6) names where a user's kernel came from: the path of
its declaration, as the command was given it (``""`` for the catalogue's).

``failures`` (v6): one row per point that failed, unique per (experiment,
point_key) like results: its ``kind`` (``wrong``: verification; ``fault``: an
illegal address or other error that killed the CUDA context; ``hang``: the
watchdog's time limit; ``error``: anything else) and its ``reason`` in words.
A failure never removes a stored result; a point measured again successfully
clears its failure (:meth:`Store.add_failure`, :meth:`Store.failures`,
:meth:`Store.clear_failures`).

``grades`` (v9): one verdict per attempt of a submission on a task of
`gemmlab grade`: the stage it reached, why it stopped, its geometric-mean
share of the library and its grade; a changed submission is a new attempt and
the earlier ones stay (:meth:`Store.add_grade`, :meth:`Store.grades`); v10 adds
each attempt's wall time, ``wall_s``, and its kernel's ``occupancy`` (JSON);
v12 its kernel's Nsight Compute ``profile`` (JSON: the figures kept, or why
there is none), filled only by `gemmlab grade --profile`.

``dispatch`` (v10): the dispatcher's pick per (GPU, element type, shape),
filled by `gemmlab dispatch tune` (:mod:`gemmlab.studies.dispatch`) and read
by ``gemmlab.matmul``: the kernel and configuration, its median time and
cuBLAS's (timed in alternation), whether it verified, and how each side was
timed (:meth:`Store.set_pick`, :meth:`Store.picks`). From v10, results also
record how each side was timed (``timing_method``, ``baseline_timing_method``:
:attr:`gemmlab.core.timing.Timing.method`).

``compiles`` (v8): one row per compile a run used, unique per (run, kernel,
block edge, dtype, configuration, arch): the NVRTC version and what ptxas
reported (registers per thread, static shared memory, stack, spills,
barriers). The report's occupancy tables read them, so a report written later
shows the compile that was measured (:meth:`Store.add_compiles`,
:meth:`Store.compiles`, :func:`compile_row`).

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

import contextlib
import json
import os
import socket
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from gemmlab.core.environment import now_utc
from gemmlab.core.errors import StoreError
from gemmlab.core.timing import Timing

DEFAULT_PATH = Path("gemmlab-results.sqlite")
DEFAULT_TIMEOUT_S = 30.0
# How many times Store.read_untouched reads a file that changed while it was read.
UNTOUCHED_READS = 3

T = TypeVar("T")

# A step of a migration: an SQL statement, or a function of the connection for
# what SQL alone cannot say (a choice on what the file holds, a rewrite of JSON).
Step = str | Callable[[sqlite3.Connection], None]

# The tuner's tables as gemmlab.studies.tune created and brought them forward
# itself before results schema v5, each entry as released: tuner v1 (the FP32
# ladder's, no dtype), then v2 (dtype in both keys). Schema v5 runs the ones a
# file lacks (see _adopt_tuner_tables); tests build old files with it.
TUNER_HISTORY: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE IF NOT EXISTS tuned_candidates (
            id INTEGER PRIMARY KEY,
            gpu_name TEXT NOT NULL,
            cc TEXT NOT NULL,
            kernel TEXT NOT NULL,
            size_class TEXT NOT NULL,
            m INTEGER NOT NULL,
            n INTEGER NOT NULL,
            k INTEGER NOT NULL,
            config TEXT NOT NULL,
            status TEXT NOT NULL,
            median_ms REAL,
            gflops REAL,
            baseline_gflops REAL,
            error REAL,
            reason TEXT,
            date TEXT NOT NULL,
            UNIQUE (gpu_name, kernel, m, n, k, config)
        )""",
        """CREATE TABLE IF NOT EXISTS tuned (
            gpu_name TEXT NOT NULL,
            cc TEXT NOT NULL,
            kernel TEXT NOT NULL,
            size_class TEXT NOT NULL,
            config TEXT NOT NULL,
            gflops REAL NOT NULL,
            ratio_to_cublas REAL,
            default_gflops REAL,
            shapes TEXT NOT NULL,
            date TEXT NOT NULL,
            PRIMARY KEY (gpu_name, kernel, size_class)
        )""",
    ),
    # SQLite cannot change a table's keys in place: each table is built anew
    # and its rows copied over (sqlite.org/lang_altertable.html, "making other
    # kinds of table schema changes"). The rows before were the FP32 ladder's:
    # float32, the column's default.
    (
        """CREATE TABLE tuned_candidates_v2 (
            id INTEGER PRIMARY KEY,
            gpu_name TEXT NOT NULL,
            cc TEXT NOT NULL,
            kernel TEXT NOT NULL,
            dtype TEXT NOT NULL DEFAULT 'float32',
            size_class TEXT NOT NULL,
            m INTEGER NOT NULL,
            n INTEGER NOT NULL,
            k INTEGER NOT NULL,
            config TEXT NOT NULL,
            status TEXT NOT NULL,
            median_ms REAL,
            gflops REAL,
            baseline_gflops REAL,
            error REAL,
            reason TEXT,
            date TEXT NOT NULL,
            UNIQUE (gpu_name, kernel, dtype, m, n, k, config)
        )""",
        """INSERT INTO tuned_candidates_v2 (id, gpu_name, cc, kernel, size_class, m, n, k, config, status,
            median_ms, gflops, baseline_gflops, error, reason, date)
        SELECT id, gpu_name, cc, kernel, size_class, m, n, k, config, status, median_ms, gflops, baseline_gflops,
            error, reason, date FROM tuned_candidates""",
        "DROP TABLE tuned_candidates",
        "ALTER TABLE tuned_candidates_v2 RENAME TO tuned_candidates",
        """CREATE TABLE tuned_v2 (
            gpu_name TEXT NOT NULL,
            cc TEXT NOT NULL,
            kernel TEXT NOT NULL,
            dtype TEXT NOT NULL DEFAULT 'float32',
            size_class TEXT NOT NULL,
            config TEXT NOT NULL,
            gflops REAL NOT NULL,
            ratio_to_cublas REAL,
            default_gflops REAL,
            shapes TEXT NOT NULL,
            date TEXT NOT NULL,
            PRIMARY KEY (gpu_name, kernel, dtype, size_class)
        )""",
        """INSERT INTO tuned_v2 (gpu_name, cc, kernel, size_class, config, gflops, ratio_to_cublas, default_gflops,
            shapes, date)
        SELECT gpu_name, cc, kernel, size_class, config, gflops, ratio_to_cublas, default_gflops, shapes, date
        FROM tuned""",
        "DROP TABLE tuned",
        "ALTER TABLE tuned_v2 RENAME TO tuned",
    ),
)


def _tuner_layout(conn: sqlite3.Connection) -> int:
    """How many entries of TUNER_HISTORY a file's tables have had. The tuner
    recorded no version of its own, so it is read from the tables: no ``tuned``
    (0; v1 created it last), ``tuned`` without ``dtype`` (1), with it (2)."""
    columns = {r[1] for r in conn.execute("PRAGMA table_info(tuned)")}
    if not columns:
        return 0
    return 2 if "dtype" in columns else 1


def _adopt_tuner_tables(conn: sqlite3.Connection) -> None:
    """Create the tuner's tables, or bring a file's own forward to the last layout."""
    for steps in TUNER_HISTORY[_tuner_layout(conn) :]:
        for statement in steps:
            conn.execute(statement)


def _canonical_tuner_configs(conn: sqlite3.Connection) -> None:
    """The tuner wrote configurations in template order; results and tuner now
    share one form (config_text), so that one configuration has one text."""
    for table in ("tuned_candidates", "tuned"):
        for rowid, config in conn.execute(f"SELECT rowid, config FROM {table}").fetchall():
            conn.execute(f"UPDATE {table} SET config = ? WHERE rowid = ?", (config_text(config), rowid))


# Each entry takes the schema from version i to i + 1. Entries are never edited
# once released: a file written by an older gemmlab is brought forward by
# running the entries it has not seen, in order, in one transaction.
MIGRATIONS: tuple[tuple[Step, ...], ...] = (
    # v1: runs and results.
    (
        """CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            started TEXT NOT NULL,
            gemmlab_version TEXT,
            git_revision TEXT,
            gpu_name TEXT,
            cc TEXT,
            sm_clock_mhz REAL,
            memory_clock_mhz REAL,
            driver_version TEXT,
            runtime_version TEXT,
            nvrtc_version TEXT,
            cpu TEXT,
            host_name TEXT,
            python TEXT,
            command_line TEXT
        )""",
        """CREATE TABLE results (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            experiment TEXT,
            point_key TEXT NOT NULL,
            kernel TEXT NOT NULL,
            m INTEGER NOT NULL,
            n INTEGER NOT NULL,
            k INTEGER NOT NULL,
            block_edge INTEGER NOT NULL,
            dtype TEXT NOT NULL,
            variant TEXT NOT NULL DEFAULT '',
            median_ms REAL,
            min_ms REAL,
            max_ms REAL,
            reps INTEGER,
            graph_launches INTEGER,
            gflops REAL,
            gbytes_per_s REAL,
            error REAL,
            tolerance REAL,
            metric TEXT,
            baseline_name TEXT,
            baseline_median_ms REAL,
            baseline_gflops REAL,
            baseline_gbytes_per_s REAL,
            ratio_to_baseline REAL,
            registers INTEGER,
            smem_bytes INTEGER,
            arch TEXT,
            flush_l2 INTEGER,
            sm_clock_after_mhz REAL,
            h2d_ms REAL,
            d2h_ms REAL,
            e2e_gflops REAL,
            host_memory TEXT,
            warnings TEXT,
            created TEXT NOT NULL
        )""",
        # NULL experiments (ad-hoc sweeps) must collide with each other too,
        # which a plain UNIQUE(experiment, point_key) would not do.
        "CREATE UNIQUE INDEX results_point ON results (COALESCE(experiment, ''), point_key)",
        "CREATE INDEX results_run ON results (run_id)",
    ),
    # v2: what Nsight Compute measured (see gemmlab.measure.profile), plus the analytic CGMA.
    (
        "ALTER TABLE results ADD COLUMN gips REAL",
        "ALTER TABLE results ADD COLUMN inst_executed REAL",
        "ALTER TABLE results ADD COLUMN flops_measured REAL",
        "ALTER TABLE results ADD COLUMN global_requests REAL",
        "ALTER TABLE results ADD COLUMN cgma_measured REAL",
        "ALTER TABLE results ADD COLUMN cgma_analytic REAL",
        "ALTER TABLE results ADD COLUMN achieved_occupancy REAL",
        "ALTER TABLE results ADD COLUMN dram_bytes REAL",
        "ALTER TABLE results ADD COLUMN profile_json TEXT",
    ),
    # v3: the roofline's ceilings, measured once per run with --profile.
    (
        "ALTER TABLE runs ADD COLUMN peak_gflops_measured REAL",
        "ALTER TABLE runs ADD COLUMN bandwidth_gbs_measured REAL",
    ),
    # v4: measured peak rates per instruction family and element type (gemmlab peak).
    (
        """CREATE TABLE peaks (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            family TEXT NOT NULL,
            instruction TEXT NOT NULL,
            dtype TEXT NOT NULL,
            gflops REAL NOT NULL,
            nominal_gflops REAL,
            ratio_to_nominal REAL,
            sm_clock_after_mhz REAL,
            median_ms REAL,
            min_ms REAL,
            max_ms REAL,
            reps INTEGER,
            flops INTEGER,
            iterations INTEGER,
            grid INTEGER,
            block INTEGER,
            registers INTEGER,
            arch TEXT,
            warnings TEXT,
            created TEXT NOT NULL
        )""",
        "CREATE INDEX peaks_run ON peaks (run_id)",
    ),
    # v5: every result records the backend that ran it and its configuration,
    # both in its point key; rows from before keep both empty (predates_config).
    # The tuner's tables join this list (before, gemmlab.studies.tune kept them).
    (
        "ALTER TABLE results ADD COLUMN backend TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE results ADD COLUMN config TEXT NOT NULL DEFAULT ''",
        "UPDATE results SET point_key = point_key || '||'",
        _adopt_tuner_tables,
        _canonical_tuner_configs,
    ),
    # v6: where a user's kernel came from (its declaration), and the points
    # that failed (a wrong answer, a fault, a hang) with their reasons.
    (
        "ALTER TABLE results ADD COLUMN source TEXT NOT NULL DEFAULT ''",
        """CREATE TABLE failures (
            id INTEGER PRIMARY KEY,
            run_id INTEGER REFERENCES runs(id),
            experiment TEXT,
            point_key TEXT NOT NULL,
            kernel TEXT NOT NULL,
            m INTEGER NOT NULL,
            n INTEGER NOT NULL,
            k INTEGER NOT NULL,
            block_edge INTEGER NOT NULL,
            dtype TEXT NOT NULL,
            variant TEXT NOT NULL DEFAULT '',
            backend TEXT NOT NULL DEFAULT '',
            config TEXT NOT NULL DEFAULT '',
            source TEXT NOT NULL DEFAULT '',
            kind TEXT NOT NULL,
            reason TEXT NOT NULL,
            created TEXT NOT NULL
        )""",
        "CREATE UNIQUE INDEX failures_point ON failures (COALESCE(experiment, ''), point_key)",
    ),
    # v7: gemmlab stress. Every wrong result (or fault, hang) of a stress run
    # with the seed, process and draw that replay it (the failures table keeps
    # one row per point, and a stress run may meet one point many times), and
    # each kernel's tally per run.
    (
        """CREATE TABLE stress_failures (
            id INTEGER PRIMARY KEY,
            run_id INTEGER REFERENCES runs(id),
            kernel TEXT NOT NULL,
            m INTEGER NOT NULL,
            n INTEGER NOT NULL,
            k INTEGER NOT NULL,
            block_edge INTEGER NOT NULL,
            dtype TEXT NOT NULL,
            seed INTEGER NOT NULL,
            process INTEGER NOT NULL,
            draw INTEGER NOT NULL,
            max_dim INTEGER NOT NULL,
            kind TEXT NOT NULL,
            reason TEXT NOT NULL,
            created TEXT NOT NULL
        )""",
        """CREATE TABLE stress_summaries (
            id INTEGER PRIMARY KEY,
            run_id INTEGER REFERENCES runs(id),
            kernel TEXT NOT NULL,
            launches INTEGER NOT NULL,
            wrong INTEGER NOT NULL,
            faults INTEGER NOT NULL,
            hangs INTEGER NOT NULL,
            errors INTEGER NOT NULL,
            shapes INTEGER NOT NULL,
            processes INTEGER NOT NULL,
            seeds TEXT NOT NULL,
            load INTEGER NOT NULL,
            seconds REAL NOT NULL,
            created TEXT NOT NULL
        )""",
    ),
    # v8: what ptxas reported for each compile a run used (its results' kernels
    # on the run's GPU, and for a document older than NVRTC's oldest target the
    # compile its GPU's occupancy table uses), so that a report read later shows
    # the compile that was measured, not one made by whatever NVRTC is installed.
    (
        """CREATE TABLE compiles (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            kernel TEXT NOT NULL,
            block_edge INTEGER NOT NULL,
            dtype TEXT NOT NULL,
            config TEXT NOT NULL DEFAULT '',
            arch TEXT NOT NULL,
            nvrtc_version TEXT,
            registers INTEGER NOT NULL,
            smem_bytes INTEGER NOT NULL,
            stack_bytes INTEGER,
            spill_store_bytes INTEGER,
            spill_load_bytes INTEGER,
            barriers INTEGER,
            created TEXT NOT NULL,
            UNIQUE (run_id, kernel, block_edge, dtype, config, arch)
        )""",
    ),
    # v9: gemmlab grade. One verdict per graded attempt of a submission on a
    # task; a resubmission (its files changed) is a new attempt, and earlier
    # attempts stay as its history.
    (
        """CREATE TABLE grades (
            id INTEGER PRIMARY KEY,
            run_id INTEGER REFERENCES runs(id),
            task TEXT NOT NULL,
            submission TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            source_hash TEXT NOT NULL,
            path TEXT NOT NULL DEFAULT '',
            stage TEXT NOT NULL,
            reason TEXT,
            share_geomean REAL,
            grade TEXT NOT NULL,
            created TEXT NOT NULL,
            UNIQUE (task, submission, attempt)
        )""",
    ),
    # v10: the wall time each graded attempt took, from its first stage to its
    # verdict, and its kernel's theoretical occupancy on the grading GPU (JSON).
    ("ALTER TABLE grades ADD COLUMN wall_s REAL", "ALTER TABLE grades ADD COLUMN occupancy TEXT"),
    # v11: the dispatcher (gemmlab.studies.dispatch). How each side of a result
    # was timed (Timing.method: events around each launch, a CUDA graph, or
    # launches back to back), and the tuned pick per GPU, element type and shape.
    (
        "ALTER TABLE results ADD COLUMN timing_method TEXT",
        "ALTER TABLE results ADD COLUMN baseline_timing_method TEXT",
        """CREATE TABLE dispatch (
            id INTEGER PRIMARY KEY,
            run_id INTEGER REFERENCES runs(id),
            gpu_name TEXT NOT NULL,
            cc TEXT NOT NULL,
            dtype TEXT NOT NULL,
            m INTEGER NOT NULL,
            n INTEGER NOT NULL,
            k INTEGER NOT NULL,
            kernel TEXT NOT NULL,
            config TEXT NOT NULL DEFAULT '',
            median_ms REAL NOT NULL,
            cublas_ms REAL,
            verified INTEGER NOT NULL,
            timing_method TEXT,
            cublas_timing_method TEXT,
            created TEXT NOT NULL,
            UNIQUE (gpu_name, dtype, m, n, k)
        )""",
    ),
    # v12: the Nsight Compute profile of a graded attempt's timed kernel at one
    # shape (JSON), or why it has none; NULL where grading did not profile.
    ("ALTER TABLE grades ADD COLUMN profile TEXT",),
    # v13: every timed launch answers for itself (gemmlab.measure.series). With
    # each result: the 95% interval of its ratio to the library, how the work in
    # each window was known (CUPTI or the events alone), the kernels the timed
    # calls ran (JSON), the input sets drawn from, the L2 policy, the least time
    # a launch can take, joules per launch on each side, and the samples taken
    # while the clocks were held back.
    (
        "ALTER TABLE results ADD COLUMN ratio_low REAL",
        "ALTER TABLE results ADD COLUMN ratio_high REAL",
        "ALTER TABLE results ADD COLUMN activity TEXT",
        "ALTER TABLE results ADD COLUMN kernels_seen TEXT",
        "ALTER TABLE results ADD COLUMN input_sets INTEGER",
        "ALTER TABLE results ADD COLUMN l2_policy TEXT",
        "ALTER TABLE results ADD COLUMN floor_ms REAL",
        "ALTER TABLE results ADD COLUMN energy_j REAL",
        "ALTER TABLE results ADD COLUMN baseline_energy_j REAL",
        "ALTER TABLE results ADD COLUMN slowed_samples INTEGER",
    ),
    # v14: the board comes from the grader (issue 49). Each verdict carries the
    # grader's signature (an HMAC of its fields under a key the grader keeps:
    # gemmlab.studies.grade.grader_key); a row without a valid one was not
    # written by the grader. Rows from before this step cannot carry one: the
    # first id that must is kept in `meta`.
    (
        "ALTER TABLE grades ADD COLUMN signature TEXT",
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "INSERT INTO meta (key, value) SELECT 'grades_signed_from', COALESCE(MAX(id), 0) + 1 FROM grades",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)
# The first schema whose results record their backend and configuration.
CONFIG_RECORDED_FROM = 5
# The first schema that stores each run's compiles.
COMPILES_FROM = 8

# A pick of the dispatcher (see Store.set_pick; id and created are computed):
# the fastest verified kernel and configuration for one shape on one GPU, its
# time and cuBLAS's, timed in alternation, each with how it was timed.
PICK_FIELDS = (
    "run_id", "gpu_name", "cc", "dtype", "m", "n", "k", "kernel", "config", "median_ms", "cublas_ms", "verified",
    "timing_method", "cublas_timing_method",
)  # fmt: skip
# A verdict of `gemmlab grade` as the grades table stores it (run id and time apart).
GRADE_FIELDS = (
    "task", "submission", "attempt", "source_hash", "path", "stage", "reason", "share_geomean", "grade", "wall_s",
    "occupancy", "profile", "signature",
)  # fmt: skip
CEILING_FIELDS = ("peak_gflops_measured", "bandwidth_gbs_measured")
RUN_FIELDS = (
    "started", "gemmlab_version", "git_revision", "gpu_name", "cc", "sm_clock_mhz", "memory_clock_mhz",
    "driver_version", "runtime_version", "nvrtc_version", "cpu", "host_name", "python", "command_line",
    *CEILING_FIELDS,
)  # fmt: skip
PROFILE_FIELDS = (
    "gips", "inst_executed", "flops_measured", "global_requests", "cgma_measured", "cgma_analytic",
    "achieved_occupancy", "dram_bytes",
)  # fmt: skip
# What rows() adds to each result from its run (``started`` is renamed ``date``).
RUN_FIELDS_IN_ROWS = ("gpu_name", "cc", "date", *(f for f in RUN_FIELDS if f not in ("gpu_name", "cc", "started")))
# Peak fields a caller gives (gemmlab.measure.peak.Peak.row(); id, run_id and created are computed).
PEAK_FIELDS = (
    "family", "instruction", "dtype", "gflops", "nominal_gflops", "ratio_to_nominal", "sm_clock_after_mhz",
    "median_ms", "min_ms", "max_ms", "reps", "flops", "iterations", "grid", "block", "registers", "arch", "warnings",
)  # fmt: skip
# How a result was measured (schema v13; gemmlab.measure.series).
MEASURE_FIELDS = (
    "ratio_low", "ratio_high", "activity", "kernels_seen", "input_sets", "l2_policy", "floor_ms", "energy_j",
    "baseline_energy_j", "slowed_samples",
)  # fmt: skip
# Result fields a caller may give (the rest are computed: id, run_id, experiment, point_key, created).
RESULT_FIELDS = (
    "kernel", "m", "n", "k", "block_edge", "dtype", "variant", "backend", "config", "median_ms", "min_ms", "max_ms",
    "reps", "graph_launches", "gflops", "gbytes_per_s", "error", "tolerance", "metric", "baseline_name",
    "baseline_median_ms", "baseline_gflops", "baseline_gbytes_per_s", "ratio_to_baseline", "registers", "smem_bytes",
    "arch", "flush_l2", "sm_clock_after_mhz", "h2d_ms", "d2h_ms", "e2e_gflops", "host_memory", "warnings",
    "source", "timing_method", "baseline_timing_method", *PROFILE_FIELDS, *MEASURE_FIELDS,
)  # fmt: skip
# A failed point's fields (see Store.add_failure): what it was and why it failed.
# ``kind`` is one word: "wrong" (verification), "fault" (the kernel crashed the
# context), "hang" (the watchdog stopped it), "error" (anything else).
FAILURE_FIELDS = (
    "kernel", "m", "n", "k", "block_edge", "dtype", "variant", "backend", "config", "source", "kind", "reason",
)  # fmt: skip
FAILURE_KINDS = ("wrong", "fault", "hang", "error")
# gemmlab stress (gemmlab.studies.stress): a failed draw, with what replays it,
# and a kernel's tally over one stress run (``seeds`` a JSON list, one per
# process; ``load`` the GEMMs the load process finished meanwhile, 0 without one).
STRESS_FAILURE_FIELDS = (
    "kernel", "m", "n", "k", "block_edge", "dtype", "seed", "process", "draw", "max_dim", "kind", "reason",
)  # fmt: skip
STRESS_SUMMARY_FIELDS = (
    "kernel", "launches", "wrong", "faults", "hangs", "errors", "shapes", "processes", "seeds", "load", "seconds",
)  # fmt: skip
# One compile (see Store.add_compiles): which instantiation, for which
# architecture, by which NVRTC, and what ptxas reported (``smem_bytes``: static
# shared memory per block; registers per thread).
COMPILE_FIELDS = (
    "kernel", "block_edge", "dtype", "config", "arch", "nvrtc_version", "registers", "smem_bytes", "stack_bytes",
    "spill_store_bytes", "spill_load_bytes", "barriers",
)  # fmt: skip
# The ptxas figures of a compile, as backends.nvrtc.Resources names them.
COMPILE_RESOURCES = ("registers", "smem_bytes", "stack_bytes", "spill_store_bytes", "spill_load_bytes", "barriers")
# The tuner's rows: a candidate tried (tuned_candidates; id is computed) and a
# configuration chosen (tuned).
CANDIDATE_FIELDS = (
    "gpu_name", "cc", "kernel", "dtype", "size_class", "m", "n", "k", "config", "status", "median_ms", "gflops",
    "baseline_gflops", "error", "reason", "date",
)  # fmt: skip
TUNED_FIELDS = (
    "gpu_name", "cc", "kernel", "dtype", "size_class", "config", "gflops", "ratio_to_cublas", "default_gflops",
    "shapes", "date",
)  # fmt: skip


def config_text(config: dict | str | None) -> str:
    """The stored form of a configuration (named template parameters): JSON
    with sorted keys, so that one configuration has one text whatever order
    it was given in; ``""`` for a kernel without one. Stored text is read back
    and written again in this form."""
    if not config:
        return ""
    return json.dumps(json.loads(config) if isinstance(config, str) else config, sort_keys=True)


def point_key(
    kernel: str, m: int, n: int, k: int, block_edge: int, dtype: str, variant: str = "", *, backend: str,
    config: dict | str | None,
) -> str:  # fmt: skip
    """The identity of a measured point inside an experiment: what ran
    (kernel, backend, configuration) on what (shape, block edge, dtype) and
    what the time covers (variant)."""
    return f"{kernel}|{m}|{n}|{k}|{block_edge}|{dtype}|{variant}|{backend}|{config_text(config)}"


def _unrecorded_key(key: str) -> str:
    """The key a row from before schema v5 has for the same point: backend and configuration empty."""
    return "|".join(key.split("|")[:7]) + "||"


def predates_config(row: dict) -> bool:
    """Whether a stored row was measured before results recorded a backend and
    a configuration (schema v5): both are empty. A row that does not come
    from the store (no ``backend`` key at all) is not counted."""
    return row.get("backend") == ""


def result_row(result: Any) -> dict:
    """A RunResult, its ``to_dict()``, or a flat dict of row fields, as a flat row.

    Nested ``timing``, ``baseline_timing`` and ``resources`` (as RunResult has
    them) are flattened to ``median_ms``..., ``baseline_median_ms``,
    ``registers`` and ``smem_bytes``; keys the table has no column for are
    dropped.
    """
    data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    row: dict[str, Any] = {}
    if timing := data.get("timing"):
        timing = _as_dict(timing)
        row.update({key: timing.get(key) for key in ("median_ms", "min_ms", "max_ms", "reps", "graph_launches")})
        row["timing_method"] = _method(timing)
    if base := data.get("baseline_timing"):
        row["baseline_median_ms"] = _as_dict(base)["median_ms"]
        row["baseline_timing_method"] = _method(_as_dict(base))
    if resources := data.get("resources"):
        resources = _as_dict(resources)
        row.update(registers=resources.get("registers"), smem_bytes=resources.get("smem_bytes"))
    for key in RESULT_FIELDS:
        if key in data and key not in row:
            row[key] = data[key]
    missing = [key for key in ("kernel", "m", "n", "k", "dtype") if row.get(key) is None]
    if missing:
        raise ValueError(f"a result needs {', '.join(missing)}")
    row["block_edge"] = int(row.get("block_edge") or 0)
    row["variant"] = row.get("variant") or ""
    row["backend"] = row.get("backend") or ""
    row["config"] = config_text(row.get("config"))
    row["source"] = row.get("source") or ""
    row["warnings"] = list(row.get("warnings") or [])
    if interval := data.get("ratio_interval"):
        row["ratio_low"], row["ratio_high"] = interval
    if isinstance(row.get("kernels_seen"), list | tuple):
        row["kernels_seen"] = json.dumps(list(row["kernels_seen"]))
    if row.get("flush_l2") is not None:
        row["flush_l2"] = int(bool(row["flush_l2"]))
    return row


def compile_row(result: Any, nvrtc_version: str | None) -> dict | None:
    """The compile behind a result (a RunResult, its ``to_dict()`` or a dict
    with ``resources`` and ``arch``) as a row of :data:`COMPILE_FIELDS`; None
    for a result that ran no compile of gemmlab's (a CPU baseline)."""
    data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    resources, arch = data.get("resources"), data.get("arch")
    if not resources or not arch:
        return None
    resources = _as_dict(resources)
    row = {key: data[key] for key in ("kernel", "dtype")}
    row.update(block_edge=int(data.get("block_edge") or 0), config=config_text(data.get("config")), arch=arch)
    row.update({key: resources.get(key) for key in COMPILE_RESOURCES}, nvrtc_version=nvrtc_version)
    return row


def _method(timing: dict) -> str:
    """How a timing (as a dict) was taken, in Timing.method's words."""
    kept = {key: timing[key] for key in ("median_ms", "min_ms", "max_ms", "reps") if key in timing}
    repeats = {key: int(timing.get(key) or 0) for key in ("graph_launches", "back_to_back")}
    return Timing(**kept, **repeats).method  # type: ignore[arg-type]


def _as_dict(value: Any) -> dict:
    return value if isinstance(value, dict) else vars(value)


def latest_peak_of(peaks: list[dict]) -> dict | None:
    """Of stored peak rows (oldest first, one GPU and element type), the newest
    of each instruction family, then the fastest of those: the GPU's peak."""
    newest = {row["family"]: row for row in peaks}
    return max(newest.values(), key=lambda row: row["gflops"], default=None)


class Store:
    """An open results database. Use as a context manager, or call :meth:`close`."""

    def __init__(self, path: Path, conn: sqlite3.Connection, timeout: float) -> None:
        self.path = path
        self._conn = conn
        self._timeout = timeout

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
            _check_exists(path)
            # Opened for writing but refusing every write (query_only, see _prepare):
            # a mode=ro connection leaves behind the -wal and -shm files that reading
            # a WAL file creates, while the last read-write connection removes them.
            uri = f"{path.resolve().as_uri()}?mode=rw"
        else:
            _check_writable(path)
            uri = path.resolve().as_uri()
        return cls._connect(path, uri, timeout, readonly)

    @classmethod
    def _connect(cls, path: Path, uri: str, timeout: float, readonly: bool) -> Store:
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise _store_error(exc, path, timeout) from None
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
            _check_exists(path)
            before = _stamp(path)
            immutable = _wal_header(path) and not _wal_of(path).exists()
            uri = f"{path.resolve().as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")
            with cls._connect(path, uri, timeout, readonly=True) as store:
                found = read(store)
            if not immutable or (_stamp(path) == before and not _wal_of(path).exists()):
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
        columns = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        with self._transaction() as conn:
            cursor = conn.execute(f"INSERT INTO runs ({columns}) VALUES ({marks})", tuple(values.values()))
            return int(cursor.lastrowid)  # type: ignore[arg-type]

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
                    (experiment, key, _unrecorded_key(key)),
                )
                # The point is measured now: an earlier failure of it no longer stands.
                conn.execute(
                    "DELETE FROM failures WHERE COALESCE(experiment, '') = COALESCE(?, '') AND point_key = ?",
                    (experiment, key),
                )
                names = ", ".join(values)
                marks = ", ".join("?" for _ in values)
                cursor = conn.execute(f"INSERT INTO results ({names}) VALUES ({marks})", tuple(values.values()))
                ids.append(int(cursor.lastrowid))  # type: ignore[arg-type]
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
            conn.execute(
                "DELETE FROM failures WHERE COALESCE(experiment, '') = COALESCE(?, '') AND point_key = ?",
                (experiment, key),
            )
            names = ", ".join(row)
            marks = ", ".join("?" for _ in row)
            cursor = conn.execute(f"INSERT INTO failures ({names}) VALUES ({marks})", tuple(row.values()))
            return int(cursor.lastrowid)  # type: ignore[arg-type]

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
                names = ", ".join(("run_id", *fields, "created"))
                marks = ", ".join("?" for _ in range(len(fields) + 2))
                for row in rows:
                    values = (run_id, *(row[f] for f in fields), created)
                    conn.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", values)

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
            query, params = f"SELECT * FROM {table}", ()
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
                values = {**row, "run_id": run_id, "created": now_utc()}
                names = ", ".join(values)
                marks = ", ".join("?" for _ in values)
                cursor = conn.execute(f"INSERT INTO peaks ({names}) VALUES ({marks})", tuple(values.values()))
                ids.append(int(cursor.lastrowid))  # type: ignore[arg-type]
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

    def add_candidate(self, candidate: dict) -> None:
        """Store one configuration the tuner tried (the keys of
        :data:`CANDIDATE_FIELDS`), replacing an earlier row of the same GPU,
        kernel, dtype, shape and configuration."""
        self._replace("tuned_candidates", CANDIDATE_FIELDS, {**candidate, "config": config_text(candidate["config"])})

    def set_tuned(self, choice: dict) -> None:
        """Store the configuration chosen for one GPU, kernel, dtype and size
        class (the keys of :data:`TUNED_FIELDS`), replacing the earlier choice."""
        self._replace("tuned", TUNED_FIELDS, {**choice, "config": config_text(choice["config"])})

    def _replace(self, table: str, fields: tuple[str, ...], row: dict) -> None:
        unknown = set(row) - set(fields)
        if unknown:
            raise ValueError(f"unknown {table} fields: {', '.join(sorted(unknown))}")
        names = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self._transaction() as conn:
            conn.execute(f"INSERT OR REPLACE INTO {table} ({names}) VALUES ({marks})", tuple(row.values()))

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
        wanted = list(dict.fromkeys([*keys, *(_unrecorded_key(key) for key in keys)]))
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

    def candidates(self, gpu_name: str, kernel: str, dtype: str | None = None, status: str | None = None) -> list[dict]:
        """The configurations the tuner tried for ``kernel`` on ``gpu_name``
        (of one dtype and one status, or all), in the order they were stored.
        A read-only file the tuner never wrote has none; one from before
        dtypes (tuner tables of v1) holds float32 rows."""
        with self._guard():
            layout = _tuner_layout(self._conn)
            if layout == 0:
                return []
            table = "tuned_candidates" if layout >= 2 else "(SELECT *, 'float32' AS dtype FROM tuned_candidates)"
            given = [(c, v) for c, v in (("gpu_name", gpu_name), ("kernel", kernel), ("dtype", dtype),
                                         ("status", status)) if v is not None]  # fmt: skip
            where = " AND ".join(f"{column} = ?" for column, _ in given)
            cursor = self._conn.execute(f"SELECT * FROM {table} WHERE {where} ORDER BY id", tuple(v for _, v in given))
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]

    def tuned_config(self, gpu_name: str, kernel: str, dtype: str, size_class: str) -> str | None:
        """The configuration (stored JSON) the tuner chose for these, or None.
        Reads a read-only file of any tuner layout without changing it: a file
        the tuner never wrote has none, and choices from before dtypes are float32."""
        with self._guard():
            layout = _tuner_layout(self._conn)
            if layout == 0:
                return None
            stored_dtype = "dtype" if layout >= 2 else "'float32'"
            found = self._conn.execute(
                f"SELECT config FROM tuned WHERE gpu_name = ? AND kernel = ? AND {stored_dtype} = ? AND size_class = ?",
                (gpu_name, kernel, dtype, size_class),
            ).fetchone()
        return None if found is None else str(found[0])

    def failures(self, experiment: str | None = None, *, all_experiments: bool = False) -> list[dict]:
        """The failed points of ``experiment`` (None: those stored without one;
        ``all_experiments``: every one), oldest first. An older file that has no
        failures table (read-only, before schema v6) has none."""
        if "failures" not in self._tables_guarded():
            return []
        with self._guard():
            query, params = "SELECT * FROM failures", ()
            if not all_experiments:
                query, params = query + " WHERE COALESCE(experiment, '') = COALESCE(?, '')", (experiment,)
            cursor = self._conn.execute(query + " ORDER BY id", params)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]

    def set_pick(self, pick: dict) -> None:
        """Store the dispatcher's pick for one (GPU, element type, shape) (keys
        of :data:`PICK_FIELDS`), replacing the earlier one."""
        if set(pick) != set(PICK_FIELDS):
            raise ValueError(f"a pick has the keys {', '.join(PICK_FIELDS)}, not {', '.join(sorted(pick))}")
        row = {**pick, "config": config_text(pick["config"]), "verified": int(bool(pick["verified"])),
               "created": now_utc()}  # fmt: skip
        self._replace("dispatch", (*PICK_FIELDS, "created"), row)

    def picks(self, gpu_name: str | None = None, dtype: str | None = None) -> list[dict]:
        """The dispatcher's stored picks (of one GPU, one element type, or all),
        ``verified`` as a bool; none in a file from before schema v11."""
        if "dispatch" not in self._tables_guarded():
            return []
        given = [(c, v) for c, v in (("gpu_name = ?", gpu_name), ("dtype = ?", dtype)) if v is not None]
        query = "SELECT * FROM dispatch" + (" WHERE " + " AND ".join(c for c, _ in given) if given else "")
        with self._guard():
            cursor = self._conn.execute(query + " ORDER BY dtype, m, n, k", tuple(v for _, v in given))
            names = [d[0] for d in cursor.description]
            found = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
        for row in found:
            row["verified"] = bool(row["verified"])
        return found

    def add_grade(self, run_id: int | None, verdict: dict, sign: Callable[[dict], str] | None = None) -> int:
        """Store a submission's verdict (keys of :data:`GRADE_FIELDS` but
        ``attempt`` and ``signature``; ``wall_s``, ``occupancy`` and ``profile``
        may be left out) as its next attempt on the task, signed by ``sign``
        (the row with its attempt -> its signature); returns the attempt's number."""
        verdict = {"wall_s": None, "occupancy": None, "profile": None, **verdict}
        if set(verdict) != set(GRADE_FIELDS) - {"attempt", "signature"}:
            raise ValueError(f"a verdict has the keys {', '.join(GRADE_FIELDS)} but attempt and signature, "
                             f"not {sorted(verdict)}")  # fmt: skip
        with self._transaction() as conn:
            (last,) = conn.execute(
                "SELECT COALESCE(MAX(attempt), 0) FROM grades WHERE task = ? AND submission = ?",
                (verdict["task"], verdict["submission"]),
            ).fetchone()
            row = {**verdict, "attempt": int(last) + 1}
            row = {**row, "signature": sign(row) if sign else None, "run_id": run_id, "created": now_utc()}
            names, marks = ", ".join(row), ", ".join("?" for _ in row)
            conn.execute(f"INSERT INTO grades ({names}) VALUES ({marks})", tuple(row.values()))
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

    def grades(self, task: str) -> list[dict]:
        """Every attempt of every submission on ``task``, oldest first; none in
        a file from before schema v9."""
        if "grades" not in self._tables_guarded():
            return []
        with self._guard():
            cursor = self._conn.execute("SELECT * FROM grades WHERE task = ? ORDER BY id", (task,))
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]

    def runs(self) -> list[dict]:
        with self._guard():
            cursor = self._conn.execute("SELECT * FROM runs ORDER BY id")
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]

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

    def _columns(self) -> set[str]:
        with self._guard():
            return {r[1] for r in self._conn.execute("PRAGMA table_info(results)")}

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise _store_error(exc, self.path, self._timeout) from None

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


def _check_exists(path: Path) -> None:
    if not path.is_file():
        raise StoreError(f"There is no results database at {path}.", "Run `gemmlab reproduce` or give --db.")


def _wal_of(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def _wal_header(path: Path) -> bool:
    """Whether the file's header says WAL mode (bytes 18 and 19, the read and
    write format versions, are 2 in WAL mode and 1 otherwise)."""
    with path.open("rb") as f:
        return f.read(20)[18:20] == b"\x02\x02"


def _stamp(path: Path) -> tuple[int, int, int]:
    """What changes when anything writes the file: its inode, size and modification time."""
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


def _check_writable(path: Path) -> None:
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


def _store_error(exc: sqlite3.Error, path: Path, timeout: float) -> StoreError:
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
