"""The results database: round trips, migration, and files it must refuse untouched."""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import stat
from pathlib import Path

import pytest

from gemmlab.backends import CPU, NVRTC
from gemmlab.backends.nvrtc import Resources
from gemmlab.core.errors import StoreError
from gemmlab.core.shapes import Shape
from gemmlab.core.timing import Timing
from gemmlab.measure.run import RunResult
from gemmlab.store import schema
from gemmlab.store.records import Config, config_text
from gemmlab.store.rows import (
    CEILING_FIELDS,
    PEAK_FIELDS,
    PROFILE_FIELDS,
    RUN_FIELDS_IN_ROWS,
    point_key,
    predates_config,
    result_row,
)
from gemmlab.store.schema import MIGRATIONS, SCHEMA_VERSION, TUNER_HISTORY
from gemmlab.store.store import Store

ROOT = Path(__file__).resolve().parent.parent
RUN = {"gpu_name": "Test GPU", "cc": "9.0", "driver_version": "13.0", "command_line": "pytest"}


def run_result(
    kernel: str = "tiled", size: int = 256, edge: int = 16, gflops: float = 1234.5, config: dict | None = None
) -> RunResult:
    return RunResult(
        kernel=kernel, m=size, n=size, k=size, block_edge=edge, dtype="float32", grid=(size // edge,) * 2 + (1,),
        block=(edge, edge, 1), dynamic_smem=0, resources=Resources(32, 2048, 0, 0, 0, 1), arch="sm_90",
        timing=Timing(0.5, 0.4, 0.7, 20), gflops=gflops, gbytes_per_s=12.0, error=1e-7, tolerance=1e-5,
        baseline_name="cuBLAS", baseline_timing=Timing(0.1, 0.1, 0.1, 20), baseline_gflops=5000.0,
        ratio_to_baseline=0.2, warnings=["wide spread"], config=config,
    )  # fmt: skip


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tiled(size: int) -> str:
    """The key run_result(size=size) is stored under."""
    return point_key("tiled", size, size, size, 16, "float32", backend=NVRTC, config=None)


def test_point_key_is_plain_text() -> None:
    assert tiled(256) == "tiled|256|256|256|16|float32||nvrtc|"
    assert point_key("cpu_blas", 1, 2, 3, 0, "int32", "pinned", backend=CPU, config=None) == \
        "cpu_blas|1|2|3|0|int32|pinned|cpu|"  # fmt: skip
    warptile = point_key("sgemm_warptile", 64, 64, 64, 0, "float32", backend=NVRTC, config={"BN": 128, "BM": 64})
    assert warptile == 'sgemm_warptile|64|64|64|0|float32||nvrtc|{"BM": 64, "BN": 128}'


def test_config_text_is_one_text_per_configuration() -> None:
    assert config_text({"BN": 128, "BM": 64}) == config_text({"BM": 64, "BN": 128}) == '{"BM": 64, "BN": 128}'
    assert config_text('{"BN":128,"BM":64}') == '{"BM": 64, "BN": 128}'  # stored text comes back in one form
    assert config_text(None) == config_text({}) == config_text("") == ""


def test_a_config_is_a_value_with_one_text() -> None:
    given = Config.of({"BN": 128, "BM": 64})
    assert given == Config('{"BN":128,  "BM":64}') == Config.of(given) and hash(given) == hash(Config.of(given.text))
    assert str(given) == given.text == '{"BM": 64, "BN": 128}' and list(given.values) == ["BM", "BN"]
    assert not Config() and Config.of(None) == Config.of({}) == Config("") and Config().values == {}
    with pytest.raises(ValueError):
        Config("BM=64")  # not JSON: refused where it is made, not where it is read


def test_the_docs_state_the_schema_version_of_the_code() -> None:
    """Issue 51: the docstrings and docs/architecture.md described the store at
    older versions than the code's. The newest version each names is the code's."""
    passage = (ROOT / "docs" / "architecture.md").read_text().split("## The store")[1].split("\n## ")[0]
    for text in (passage, schema.__doc__ or ""):
        named = [int(v) for v in re.findall(r"\bv(\d+)\b", text)]
        assert max(named) == SCHEMA_VERSION, text
    assert f"`SCHEMA_VERSION` ({SCHEMA_VERSION})" in passage


def test_round_trip_of_a_run_result(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    with Store.open(db) as store:
        run_id = store.start_run(RUN)
        store.add_result(run_id, "poznan-group1", run_result())
        assert store.has_point("poznan-group1", tiled(256))
        assert not store.has_point(None, tiled(256))
        assert not store.has_point("poznan-group1", point_key("tiled", 256, 256, 256, 16, "float32", backend=CPU,
                                                             config=None))  # fmt: skip
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
    assert (row["backend"], row["config"], row["point_key"]) == ("nvrtc", "", tiled(256))
    assert not predates_config(row)
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


def test_two_configurations_of_one_point_are_two_rows(tmp_path: Path) -> None:
    small, large = {"BM": 64, "BN": 64}, {"BN": 128, "BM": 128}
    key = lambda config: point_key("sgemm_warptile", 256, 256, 256, 16, "float32", backend=NVRTC, config=config)
    with Store.open(tmp_path / "r.sqlite") as store:
        run_id = store.start_run(RUN)
        store.add_result(run_id, "t", run_result("sgemm_warptile", config=small, gflops=1.0))
        assert store.has_point("t", key(small)) and not store.has_point("t", key(large))
        store.add_result(run_id, "t", run_result("sgemm_warptile", config=large, gflops=2.0))
        store.add_result(run_id, "t", run_result("sgemm_warptile", config=dict(reversed(large.items())), gflops=3.0))
        rows = store.rows("t")
        (found,) = store.point_rows("t", [key(large)])
    assert [(r["config"], r["gflops"]) for r in rows] == [(config_text(small), 1.0), (config_text(large), 3.0)]
    assert found["point_key"] == key(large) and found["gflops"] == 3.0


def test_flat_dicts_and_end_to_end_rows(tmp_path: Path) -> None:
    row = {"kernel": "tiled", "m": 512, "n": 512, "k": 512, "block_edge": 32, "dtype": "float32",
           "variant": "pinned", "timing": Timing(1.0, 1.0, 1.0, 3), "gflops": 268.4, "h2d_ms": 0.3, "d2h_ms": 0.2,
           "e2e_gflops": 178.9, "host_memory": "pinned", "not_a_column": 1}  # fmt: skip
    with Store.open(tmp_path / "r.sqlite") as store:
        store.add_result(store.start_run({}), "kursk-cpu-gpu", row)
        (got,) = store.rows()
        assert store.has_point("kursk-cpu-gpu", "tiled|512|512|512|32|float32|pinned||")  # no backend given
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
        assert store.schema_version == SCHEMA_VERSION == 14
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
        assert store.schema_version == SCHEMA_VERSION == 14
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
        (adhoc,) = store.point_rows(None, [tiled(128)])
        (named,) = store.point_rows("x", [tiled(128), tiled(256)])
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


# -- v5: backend and configuration in every key; the tuner's tables in the schema -----

# A configuration as the tuner wrote it before v5: template order, not sorted.
TUNER_CONFIG = '{"BM": 128, "BN": 64, "BK": 16}'


def make_v4_file(path: Path, tuner_layout: int) -> None:
    """A database as gemmlab wrote it before v5: results schema v4 with one
    result, and the tuner's tables of ``tuner_layout`` (0: none; 1: before
    dtypes; 2: with them), each with one candidate and one choice."""
    make_v3_file(path)
    conn = sqlite3.connect(path)
    for statement in MIGRATIONS[3]:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 4")
    for steps in TUNER_HISTORY[:tuner_layout]:
        for statement in steps:
            conn.execute(statement)
    if tuner_layout:
        dtype = {"columns": ", dtype", "value": ", 'float16'"} if tuner_layout == 2 else {"columns": "", "value": ""}
        conn.execute(
            f"INSERT INTO tuned_candidates (gpu_name, cc, kernel{dtype['columns']}, size_class, m, n, k, config, "
            f"status, gflops, date) VALUES ('Old', '8.0', 'sgemm_warptile'{dtype['value']}, 'small', 64, 64, 64, ?, "
            "'ok', 9.0, 'then')",
            (TUNER_CONFIG,),
        )
        conn.execute(
            f"INSERT INTO tuned (gpu_name, cc, kernel{dtype['columns']}, size_class, config, gflops, shapes, date) "
            f"VALUES ('Old', '8.0', 'sgemm_warptile'{dtype['value']}, 'small', ?, 9.0, '[[64, 64, 64]]', 'then')",
            (TUNER_CONFIG,),
        )
    conn.commit()
    conn.close()


@pytest.mark.parametrize("tuner_layout", [0, 1, 2])
def test_migration_from_v4_keeps_rows_and_marks_them_unrecorded(tmp_path: Path, tuner_layout: int) -> None:
    db = tmp_path / "v4.sqlite"
    make_v4_file(db, tuner_layout)
    dtype = "float16" if tuner_layout == 2 else "float32"  # choices from before dtypes are float32
    with Store.open(db, readonly=True) as store:  # read as it is: nothing was recorded, nothing is changed
        (old,) = store.rows("e")
        assert store.schema_version == 4 and (old["backend"], old["config"]) == ("", "") and predates_config(old)
        found = store.tuned_config("Old", "sgemm_warptile", dtype, "small")
        assert found == (TUNER_CONFIG if tuner_layout else None)
    with Store.open(db) as store:
        assert store.schema_version == SCHEMA_VERSION == 14 and store.integrity_check() == "ok"
        (row,) = store.rows("e")
        assert (row["backend"], row["config"], row["point_key"]) == ("", "", "naive|64|64|64|8|float32|||")
        assert predates_config(row) and row["gflops"] == 52.4 and row["gips"] == 4.5
        # The old row answers for its point in the configuration a sweep asks for...
        new_key = point_key("naive", 64, 64, 64, 8, "float32", backend=NVRTC, config=None)
        assert store.has_point("e", new_key) and [r["id"] for r in store.point_rows("e", [new_key])] == [row["id"]]
        assert not store.has_point("e", tiled(64))
        # ...and the tuner's tables are the last layout, its configurations in the one stored form.
        tried = store.candidates("Old", "sgemm_warptile")
        assert [(r["dtype"], r["config"], r["gflops"]) for r in tried] == (
            [(dtype, config_text(TUNER_CONFIG), 9.0)] if tuner_layout else []
        )
        found = store.tuned_config("Old", "sgemm_warptile", dtype, "small")
        assert found == (config_text(TUNER_CONFIG) if tuner_layout else None)
        # A new measurement of the point replaces the old row.
        store.add_result(store.start_run(RUN), "e", run_result("naive", size=64, edge=8))
        (replaced,) = store.rows("e")
        assert replaced["point_key"] == new_key and not predates_config(replaced)
    conn = sqlite3.connect(db)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    tuned_columns = {r[1] for r in conn.execute("PRAGMA table_info(tuned)")}
    conn.close()
    assert {"tuned", "tuned_candidates"} <= names and not any(name.endswith("_v2") for name in names)
    assert "dtype" in tuned_columns


def test_a_migration_that_fails_half_way_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "v4.sqlite"
    make_v4_file(db, 1)
    v1, v2 = TUNER_HISTORY
    monkeypatch.setattr(schema, "TUNER_HISTORY", (v1, (*v2, "INSERT INTO no_such_table VALUES (1)")))
    with pytest.raises(StoreError, match="no_such_table"):
        Store.open(db)
    with Store.open(db, readonly=True) as store:
        assert store.schema_version == 4 and store.rows("e")[0]["point_key"] == "naive|64|64|64|8|float32|"
    conn = sqlite3.connect(db)
    assert "dtype" not in {r[1] for r in conn.execute("PRAGMA table_info(tuned_candidates)")}
    conn.close()


def test_tuner_rows_go_through_the_store(tmp_path: Path) -> None:
    candidate = {
        "gpu_name": "G",
        "cc": "9.0",
        "kernel": "k",
        "dtype": "float32",
        "size_class": "small",
        "m": 64,
        "n": 64,
        "k": 64,
        "config": {"BN": 64, "BM": 128},
        "status": "ok",
        "gflops": 1.0,
        "date": "now",
    }
    with Store.open(tmp_path / "t.sqlite") as store:
        store.add_candidate(candidate)
        store.add_candidate({**candidate, "gflops": 2.0})  # the same candidate again replaces it
        store.add_candidate({**candidate, "dtype": "tf32", "status": "skipped", "reason": "no"})
        assert [r["gflops"] for r in store.candidates("G", "k", "float32", "ok")] == [2.0]
        assert len(store.candidates("G", "k")) == 2 and store.candidates("G", "k", status="rejected") == []
        with pytest.raises(ValueError, match="unknown tuned_candidates fields: typo"):
            store.add_candidate({**candidate, "typo": 1})
        choice = {"gpu_name": "G", "cc": "9.0", "kernel": "k", "dtype": "float32", "size_class": "small",
                  "config": candidate["config"], "gflops": 2.0, "shapes": "[]", "date": "now"}  # fmt: skip
        store.set_tuned(choice)
        store.set_tuned({**choice, "config": {"BM": 64, "BN": 64}})
        assert store.tuned_config("G", "k", "float32", "small") == '{"BM": 64, "BN": 64}'
        assert store.tuned_config("G", "k", "tf32", "small") is None
    with (
        Store.open(tmp_path / "t.sqlite", readonly=True) as store,
        pytest.raises(StoreError, match="cannot be written"),
    ):
        store.set_tuned(choice)


def test_failures_are_stored_apart_and_cleared_by_a_later_result(tmp_path):
    failure = {"kernel": "mine/matmul", "m": 64, "n": 64, "k": 64, "block_edge": 16, "dtype": "float32",
               "backend": "nvrtc", "source": "mine/matmul.toml", "kind": "fault",
               "reason": "illegal memory access"}  # fmt: skip
    with Store.open(tmp_path / "r.sqlite") as store:
        run = store.start_run({})
        store.add_failure(run, None, failure)
        store.add_failure(run, None, {**failure, "kind": "hang", "reason": "over 10 s"})  # replaces the first
        (only,) = store.failures(None)
        assert only["kind"] == "hang" and only["source"] == "mine/matmul.toml"
        assert store.rows() == []  # a failure is not a result
        point = ("kernel", "m", "n", "k", "block_edge", "dtype", "backend", "source")
        store.add_result(run, None, {**{k: failure[k] for k in point}, "median_ms": 1.0})
        assert store.failures(None) == []
        assert store.rows()[0]["source"] == "mine/matmul.toml"
        with pytest.raises(ValueError, match="kind"):
            store.add_failure(run, None, {**failure, "kind": "odd"})
