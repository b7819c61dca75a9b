"""The results database: round trips, migration, and files it must refuse untouched."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from gemmlab.backends.nvrtc import Resources
from gemmlab.core.errors import StoreError
from gemmlab.core.shapes import Shape
from gemmlab.measure.run import RunResult
from gemmlab.measure.timing import Timing
from gemmlab.results.store import (
    CEILING_FIELDS,
    MIGRATIONS,
    PEAK_FIELDS,
    PROFILE_FIELDS,
    RUN_FIELDS_IN_ROWS,
    SCHEMA_VERSION,
    Store,
    point_key,
    result_row,
)

RUN = {"gpu_name": "Test GPU", "cc": "9.0", "driver_version": "13.0", "command_line": "pytest"}


def run_result(kernel: str = "tiled", size: int = 256, edge: int = 16, gflops: float = 1234.5) -> RunResult:
    return RunResult(
        kernel=kernel, m=size, n=size, k=size, block_edge=edge, dtype="float32", grid=(size // edge,) * 2 + (1,),
        block=(edge, edge, 1), dynamic_smem=0, resources=Resources(32, 2048, 0, 0, 0, 1), arch="sm_90",
        timing=Timing(0.5, 0.4, 0.7, 20), gflops=gflops, gbytes_per_s=12.0, error=1e-7, tolerance=1e-5,
        baseline_name="cuBLAS", baseline_timing=Timing(0.1, 0.1, 0.1, 20), baseline_gflops=5000.0,
        ratio_to_baseline=0.2, warnings=["wide spread"],
    )  # fmt: skip


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_point_key_is_plain_text() -> None:
    assert point_key("tiled", 256, 256, 128, 16, "float32") == "tiled|256|256|128|16|float32|"
    assert point_key("naive", 1, 2, 3, 0, "int32", "pinned") == "naive|1|2|3|0|int32|pinned"


def test_round_trip_of_a_run_result(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    with Store.open(db) as store:
        run_id = store.start_run(RUN)
        store.add_result(run_id, "poznan-group1", run_result())
        assert store.has_point("poznan-group1", point_key("tiled", 256, 256, 256, 16, "float32"))
        assert not store.has_point(None, point_key("tiled", 256, 256, 256, 16, "float32"))
    with Store.open(db) as store:
        (row,) = store.rows("poznan-group1")
        assert store.schema_version == SCHEMA_VERSION
    assert row["kernel"] == "tiled" and (row["m"], row["n"], row["k"], row["block_edge"]) == (256, 256, 256, 16)
    assert (row["median_ms"], row["min_ms"], row["max_ms"], row["reps"]) == (0.5, 0.4, 0.7, 20)
    assert row["gflops"] == 1234.5 and row["baseline_median_ms"] == 0.1 and row["ratio_to_baseline"] == 0.2
    assert (row["registers"], row["smem_bytes"]) == (32, 2048)
    assert row["warnings"] == ["wide spread"]
    assert (row["gpu_name"], row["cc"]) == ("Test GPU", "9.0") and row["date"]
    assert row["variant"] == "" and row["experiment"] == "poznan-group1"
    assert all(key in row for key in RUN_FIELDS_IN_ROWS + PROFILE_FIELDS + ("profile_json", "id", "created"))


def test_a_point_is_stored_once_per_experiment(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        run_id = store.start_run(RUN)
        for gflops in (1.0, 2.0):
            store.add_result(run_id, None, run_result(gflops=gflops))
            store.add_result(run_id, "a", run_result(gflops=gflops))
        store.add_result(run_id, "b", run_result())
        rows = store.rows()
    assert len(rows) == 3
    assert {r["experiment"]: r["gflops"] for r in rows if r["experiment"] != "b"} == {None: 2.0, "a": 2.0}


def test_flat_dicts_and_end_to_end_rows(tmp_path: Path) -> None:
    row = {"kernel": "tiled", "m": 512, "n": 512, "k": 512, "block_edge": 32, "dtype": "float32",
           "variant": "pinned", "timing": Timing(1.0, 1.0, 1.0, 3), "gflops": 268.4, "h2d_ms": 0.3, "d2h_ms": 0.2,
           "e2e_gflops": 178.9, "host_memory": "pinned", "not_a_column": 1}  # fmt: skip
    with Store.open(tmp_path / "r.sqlite") as store:
        store.add_result(store.start_run({}), "kursk-cpu-gpu", row)
        (got,) = store.rows()
        assert store.has_point("kursk-cpu-gpu", "tiled|512|512|512|32|float32|pinned")
    assert (got["h2d_ms"], got["d2h_ms"], got["e2e_gflops"], got["host_memory"]) == (0.3, 0.2, 178.9, "pinned")
    assert got["warnings"] == [] and "not_a_column" not in got


def test_result_row_needs_the_point() -> None:
    with pytest.raises(ValueError, match="kernel"):
        result_row({"m": 1, "n": 1, "k": 1, "dtype": "float32"})


def test_update_profile(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        result_id = store.add_result(store.start_run(RUN), "x", run_result())
        store.update_profile(result_id, {"gips": 12.5, "cgma_measured": 8.0, "limiting_factors": ["registers"]})
        (row,) = store.rows("x")
        with pytest.raises(StoreError, match="no result with id"):
            store.update_profile(result_id + 100, {"gips": 1.0})
    assert row["gips"] == 12.5 and row["cgma_measured"] == 8.0 and row["achieved_occupancy"] is None
    assert row["profile_json"]["limiting_factors"] == ["registers"]


def test_unknown_run_field_is_a_programming_error(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store, pytest.raises(ValueError, match="gpu"):
        store.start_run({"gpu": "typo"})


def test_wal_mode_and_integrity(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    with Store.open(db) as store:
        store.add_result(store.start_run(RUN), None, run_result())
        assert store.integrity_check() == "ok"
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def make_v1_file(path: Path) -> None:
    """A database exactly as the v1 schema wrote it, with one run and one result."""
    conn = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO runs (id, started, gpu_name, cc) VALUES (1, '2024-01-01T00:00:00+00:00', 'Old', '8.0')")
    conn.execute(
        "INSERT INTO results (run_id, experiment, point_key, kernel, m, n, k, block_edge, dtype, variant, median_ms,"
        " gflops, warnings, created) VALUES (1, 'e', 'naive|64|64|64|8|float32|', 'naive', 64, 64, 64, 8, 'float32',"
        " '', 0.01, 52.4, '[]', '2024-01-01T00:00:00+00:00')"
    )
    conn.commit()
    conn.close()


def test_migration_from_v1(tmp_path: Path) -> None:
    db = tmp_path / "v1.sqlite"
    make_v1_file(db)
    with Store.open(db, readonly=True) as store:
        (old,) = store.rows("e")  # an old file reads without migrating: missing columns are None
        assert store.schema_version == 1 and old["gips"] is None
    with Store.open(db) as store:
        assert store.schema_version == SCHEMA_VERSION
        (row,) = store.rows("e")
        assert (row["kernel"], row["gflops"], row["gpu_name"], row["gips"]) == ("naive", 52.4, "Old", None)
        store.update_profile(row["id"], {"gips": 3.0, "achieved_occupancy": 80.0})
        store.add_result(store.start_run(RUN), "e", run_result())
        assert len(store.rows("e")) == 2
        assert store.integrity_check() == "ok"
    conn = sqlite3.connect(db)
    columns = {r[1] for r in conn.execute("PRAGMA table_info(results)")}
    conn.close()
    assert set(PROFILE_FIELDS) | {"profile_json"} <= columns


def make_v2_file(path: Path) -> None:
    """A database exactly as the v2 schema wrote it: one run, one profiled result."""
    make_v1_file(path)
    conn = sqlite3.connect(path)
    for statement in MIGRATIONS[1]:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 2")
    conn.execute("UPDATE results SET gips = ?, dram_bytes = ?, profile_json = ?", (4.5, 49152.0, '{"gips": 4.5}'))
    conn.commit()
    conn.close()


def test_migration_from_v2_adds_the_ceilings_to_runs(tmp_path: Path) -> None:
    db = tmp_path / "v2.sqlite"
    make_v2_file(db)
    with Store.open(db, readonly=True) as store:
        (old,) = store.rows("e")  # the runs table lacks the ceilings: they read as None
        assert store.schema_version == 2
    assert old["gips"] == 4.5 and old["dram_bytes"] == 49152.0 and old["profile_json"] == {"gips": 4.5}
    assert all(old[key] is None for key in CEILING_FIELDS) and old["gpu_name"] == "Old" and old["date"]
    with Store.open(db) as store:
        assert store.schema_version == SCHEMA_VERSION == 4
        (row,) = store.rows("e")
        assert row["gips"] == 4.5 and all(row[key] is None for key in CEILING_FIELDS)
        ceilings = {"peak_gflops_measured": 51_000.0, "bandwidth_gbs_measured": 4_100.0}
        store.add_result(store.start_run({**RUN, **ceilings}), "e", run_result())
        new = next(r for r in store.rows("e") if r["kernel"] == "tiled")
        assert {key: new[key] for key in CEILING_FIELDS} == ceilings
        assert store.runs()[-1]["peak_gflops_measured"] == 51_000.0
        assert store.integrity_check() == "ok"
    conn = sqlite3.connect(db)
    columns = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    conn.close()
    assert set(CEILING_FIELDS) <= columns


def make_v3_file(path: Path) -> None:
    """A database exactly as the v3 schema wrote it: one run with its ceilings, one result."""
    make_v2_file(path)
    conn = sqlite3.connect(path)
    for statement in MIGRATIONS[2]:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 3")
    conn.execute("UPDATE runs SET peak_gflops_measured = 51000.0, bandwidth_gbs_measured = 4100.0")
    conn.commit()
    conn.close()


def test_migration_from_v3_adds_the_peaks_table(tmp_path: Path) -> None:
    db = tmp_path / "v3.sqlite"
    make_v3_file(db)
    with Store.open(db, readonly=True) as store:
        assert store.schema_version == 3
        assert store.peaks() == [] and store.latest_peak("Old", "bfloat16") is None  # no table: nothing stored
    with Store.open(db) as store:
        assert store.schema_version == SCHEMA_VERSION == 4
        (row,) = store.rows("e")
        assert row["gflops"] == 52.4 and row["peak_gflops_measured"] == 51_000.0
        run_id = store.start_run(RUN)
        store.add_peaks(run_id, [{"family": "wgmma", "instruction": "wgmma.m64n256k16", "dtype": "bfloat16",
                                  "gflops": 800_000.0, "sm_clock_after_mhz": 1455.0}])  # fmt: skip
        (peak,) = store.peaks()
        assert store.integrity_check() == "ok"
    assert peak["family"] == "wgmma" and peak["gflops"] == 800_000.0
    assert (peak["gpu_name"], peak["run_id"]) == ("Test GPU", run_id)
    conn = sqlite3.connect(db)
    columns = {r[1] for r in conn.execute("PRAGMA table_info(peaks)")}
    conn.close()
    assert set(PEAK_FIELDS) <= columns


def test_fill_ceilings_only_where_missing_and_on_the_same_gpu(tmp_path: Path) -> None:
    measured = {"peak_gflops_measured": 51_000.0, "bandwidth_gbs_measured": 4_100.0}
    with Store.open(tmp_path / "r.sqlite") as store:
        same = store.start_run(RUN)
        other = store.start_run({**RUN, "gpu_name": "Other GPU"})
        own = store.start_run({**RUN, "peak_gflops_measured": 1.0, "bandwidth_gbs_measured": 2.0})
        store.fill_ceilings([same, other, own], "Test GPU", measured)
        store.fill_ceilings([same], "Test GPU", {"peak_gflops_measured": 9.0})  # half a pair is not stored
        runs = {r["id"]: r for r in store.runs()}
    assert (runs[same]["peak_gflops_measured"], runs[same]["bandwidth_gbs_measured"]) == (51_000.0, 4_100.0)
    assert runs[other]["peak_gflops_measured"] is None
    assert (runs[own]["peak_gflops_measured"], runs[own]["bandwidth_gbs_measured"]) == (1.0, 2.0)


def test_point_rows(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        run_id = store.start_run(RUN)
        store.add_result(run_id, None, run_result(size=128))
        store.add_result(run_id, None, run_result(size=256))
        store.add_result(run_id, "x", run_result(size=128))
        key = point_key("tiled", 128, 128, 128, 16, "float32")
        (adhoc,) = store.point_rows(None, [key])
        (named,) = store.point_rows("x", [key, point_key("tiled", 256, 256, 256, 16, "float32")])
    assert adhoc["experiment"] is None and named["experiment"] == "x" and adhoc["id"] != named["id"]
    assert adhoc["gpu_name"] == "Test GPU" and adhoc["profile_json"] is None


def test_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    db = tmp_path / "new.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE future (x)")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    before = digest(db)
    with pytest.raises(StoreError, match="newer gemmlab") as info:
        Store.open(db)
    assert info.value.fix and "\n" not in str(info.value)
    assert digest(db) == before


def test_corrupt_file_is_refused_untouched(tmp_path: Path) -> None:
    db = tmp_path / "junk.sqlite"
    db.write_bytes(b"this is not an SQLite file at all\n" * 200)
    before = digest(db)
    with pytest.raises(StoreError, match="not a usable results database") as info:
        Store.open(db)
    assert "file is not a database" in info.value.cause and info.value.fix
    assert digest(db) == before


def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "other.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE customers (name TEXT)")
    conn.commit()
    conn.close()
    before = digest(db)
    with pytest.raises(StoreError, match="not one of gemmlab's"):
        Store.open(db)
    assert digest(db) == before


def test_locked_database_times_out_with_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    with Store.open(db) as store:
        store.add_result(store.start_run(RUN), None, run_result())
    before = digest(db)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError, match="locked by another process") as info:
            with Store.open(db, timeout=0.2) as store:
                assert store.rows()  # readers are not blocked in WAL mode
                store.start_run(RUN)
        assert "0.2 s" in info.value.cause and info.value.fix
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert digest(db) == before


def test_read_only_file_is_refused_untouched(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    with Store.open(db) as store:
        store.add_result(store.start_run(RUN), None, run_result())
    before = digest(db)
    db.chmod(0o444)
    try:
        with pytest.raises(StoreError, match="read-only") as info:
            Store.open(db)
        assert "chmod" in info.value.fix
        with Store.open(db, readonly=True) as store:  # reading it is fine
            assert len(store.rows()) == 1
    finally:
        db.chmod(0o644)
    assert digest(db) == before


def test_unwritable_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with pytest.raises(StoreError, match="Cannot write in the folder"):
            Store.open(folder / "r.sqlite")
        assert not (folder / "r.sqlite").exists()
    finally:
        folder.chmod(0o755)


def test_missing_folder_is_created(tmp_path: Path) -> None:
    with Store.open(tmp_path / "a" / "b" / "r.sqlite") as store:
        assert store.rows() == []
    assert (tmp_path / "a" / "b" / "r.sqlite").is_file()


def test_readonly_open_of_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no results database"):
        Store.open(tmp_path / "missing.sqlite", readonly=True)


def test_a_folder_is_not_a_database(tmp_path: Path) -> None:
    os.mkdir(tmp_path / "dir.sqlite")
    with pytest.raises(StoreError, match="not a file"):
        Store.open(tmp_path / "dir.sqlite")


def test_store_shape_helper_roundtrip() -> None:
    row = result_row(run_result(size=128, edge=8))
    assert Shape(row["m"], row["n"], row["k"]) == Shape.square(128)
    assert row["flush_l2"] == 0 and row["baseline_median_ms"] == 0.1
