"""The results database's schema: every table as each version of gemmlab left
it, and the one list of migrations (:data:`MIGRATIONS`) that brings an older
file forward. The version lives in ``PRAGMA user_version``;
:data:`SCHEMA_VERSION`, the number of migrations, is the one this gemmlab
writes.

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
:func:`~gemmlab.store.rows.point_key`), so two configurations of one point are two rows.
``backend`` names what ran it (``nvrtc``: a CUDA kernel compiled by gemmlab;
``cpu``: the CPU baselines; :mod:`gemmlab.backends`), ``config`` its named
template parameters as JSON with sorted keys (:class:`~gemmlab.store.records.Config`; ``""`` for
a kernel without any). Rows measured before schema v5 have both empty
(:func:`~gemmlab.store.rows.predates_config`); they stand for their point as the sweeps of then
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
there is none), filled only by `gemmlab grade --profile`; v14 the grader's
``signature`` of each verdict (below). They leave the store as
:class:`~gemmlab.store.records.Grade` records.

``dispatch`` (v11): the dispatcher's pick per (GPU, element type, shape),
filled by `gemmlab dispatch tune` (:mod:`gemmlab.studies.dispatch`) and read
by ``gemmlab.matmul``: the kernel and configuration, its median time and
cuBLAS's (timed in alternation), whether it verified, and how each side was
timed (:meth:`Store.set_pick`, :meth:`Store.picks`; each a
:class:`~gemmlab.store.records.Pick`). From v11, results also
record how each side was timed (``timing_method``, ``baseline_timing_method``:
:attr:`gemmlab.core.timing.Timing.method`).

``compiles`` (v8): one row per compile a run used, unique per (run, kernel,
block edge, dtype, configuration, arch): the NVRTC version and what ptxas
reported (registers per thread, static shared memory, stack, spills,
barriers). The report's occupancy tables read them, so a report written later
shows the compile that was measured (:meth:`Store.add_compiles`,
:meth:`Store.compiles`, :func:`~gemmlab.store.rows.compile_row`).

From v13 every result also says how its figures were taken
(:data:`~gemmlab.store.rows.MEASURE_FIELDS`, :mod:`gemmlab.measure.series`):
the 95% interval of its ratio to the library, how the work in each window was
known, the kernels the timed calls ran (JSON), the input sets, the L2 policy,
the least time a launch can take, joules per launch on each side, and the
samples taken while the clocks were held back.

``meta`` (v14): keys and values about the file itself; ``grades_signed_from``
is the first grades row that must carry the grader's signature (an HMAC,
:func:`gemmlab.studies.grade.signature`): rows before it predate signatures.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from gemmlab.store.records import config_text

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


def tuner_layout(conn: sqlite3.Connection) -> int:
    """How many entries of TUNER_HISTORY a file's tables have had. The tuner
    recorded no version of its own, so it is read from the tables: no ``tuned``
    (0; v1 created it last), ``tuned`` without ``dtype`` (1), with it (2)."""
    columns = {r[1] for r in conn.execute("PRAGMA table_info(tuned)")}
    if not columns:
        return 0
    return 2 if "dtype" in columns else 1


def _adopt_tuner_tables(conn: sqlite3.Connection) -> None:
    """Create the tuner's tables, or bring a file's own forward to the last layout."""
    for steps in TUNER_HISTORY[tuner_layout(conn) :]:
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
    # v2: what Nsight Compute measured (see gemmlab.measure.ncu), plus the analytic CGMA.
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
