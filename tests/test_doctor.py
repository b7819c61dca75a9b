"""`gemmlab doctor`: the probes with the functions they call patched (no driver,
a driver with made-up GPUs, one too old, ncu missing, a cache that cannot be
written, NVRTC held back by torch's pin, NVRTC missing), then one real run on
this machine through the command line."""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from gemmlab.api import doctor
from gemmlab.cli import app
from gemmlab.cli.doctor import EXIT_CORE_UNUSABLE
from gemmlab.core import gpu
from gemmlab.core.errors import GemmlabError, NoGPUError

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
runner = CliRunner()


def _missing(what: str):
    def find() -> str:
        raise GemmlabError(f"{what} was not found.", "Install it.")

    return find


@pytest.fixture
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A machine with NVRTC, no driver and neither CUDA tool; the cache in a
    fresh folder of tmp_path. Tests change what they look at from here."""
    monkeypatch.setattr(gpu, "installed_driver", lambda: None)
    monkeypatch.setattr("gemmlab.measure.ncu.command.find_ncu", _missing("ncu"))
    monkeypatch.setattr("gemmlab.measure.sanitize.find_sanitizer", _missing("compute-sanitizer"))
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path


def _row(rows: list[doctor.Row], component: str) -> doctor.Row:
    (found,) = [r for r in rows if r.component == component]
    return found


def _device(index: int, name: str, cc: tuple[int, int], memory_gib: float) -> gpu.DeviceInfo:
    return gpu.DeviceInfo(
        index=index, name=name, cc=cc, sm_count=132, memory_bytes=int(memory_gib * 2**30), free_bytes=0,
        sm_clock_mhz=1980.0, memory_clock_mhz=None, memory_bus_bits=None, l2_bytes=50 * 2**20,
        max_threads_per_block=1024, max_smem_per_block=48 * 1024, max_smem_per_block_optin=227 * 1024,
        driver_version="13.0", runtime_version="13.0",
    )  # fmt: skip


# --- the probes, patched ---------------------------------------------------------------


def test_no_driver_says_what_still_works_and_never_asks_for_a_gpu(bare: Path, monkeypatch) -> None:
    def no_call(*_args):
        raise AssertionError("the GPUs were asked for with no driver")

    monkeypatch.setattr(gpu, "device_count", no_call)
    monkeypatch.setattr(gpu, "describe", no_call)
    machine = doctor.probe(bare / "r.sqlite")
    rows = doctor.rows(machine)
    driver = _row(rows, "NVIDIA driver")
    assert driver.status == doctor.MISSING and "libcuda" in driver.detail
    assert "R580" in driver.note and "compile" in driver.note and "occupancy" in driver.note
    assert "reproduce --list" in driver.note and "reproduce," not in driver.note  # only its listing needs no GPU
    assert _row(rows, "GPUs").status == doctor.MISSING and "no driver" in _row(rows, "GPUs").detail
    assert doctor.core_usable(machine) and _row(rows, "NVRTC").status == doctor.OK


def test_a_driver_with_gpus_lists_each_and_flags_one_nvrtc_cannot_target(bare: Path, monkeypatch) -> None:
    devices = [_device(0, "NVIDIA H200", (9, 0), 139.8), _device(1, "Tesla V100", (7, 0), 16.0)]
    monkeypatch.setattr(gpu, "installed_driver", lambda: 13000)
    monkeypatch.setattr(gpu, "device_count", lambda: len(devices))
    monkeypatch.setattr(gpu, "describe", lambda i: devices[i])
    monkeypatch.setattr(doctor, "supported_archs", lambda: (75, 80, 86, 89, 90, 100, 120))
    rows = doctor.rows(doctor.probe(bare / "r.sqlite"))
    assert _row(rows, "NVIDIA driver") == doctor.Row(
        "NVIDIA driver", doctor.OK, "supports CUDA 13.0", "runs the kernels on the GPUs below"
    )
    h200, v100 = _row(rows, "GPU 0"), _row(rows, "GPU 1")
    assert h200.status == doctor.OK and h200.detail == "NVIDIA H200, compute capability 9.0, 139.8 GiB"
    assert v100.status == doctor.UNSUPPORTED and "sm_70" in v100.note and "nvidia-cuda-nvrtc" in v100.note
    assert not [r for r in rows if r.component == "GPUs"]


def test_a_driver_older_than_nvrtcs_cuda_or_without_gpus_is_named(bare: Path, monkeypatch) -> None:
    monkeypatch.setattr(gpu, "installed_driver", lambda: 12040)

    def no_gpu() -> int:
        raise NoGPUError("The NVIDIA driver here (CUDA 12.4) is older than the CUDA 13.0 runtime gemmlab uses.")

    monkeypatch.setattr(gpu, "device_count", no_gpu)
    rows = doctor.rows(doctor.probe(bare / "r.sqlite"))
    driver = _row(rows, "NVIDIA driver")
    assert (driver.status, driver.detail) == (doctor.TOO_OLD, "supports CUDA 12.4") and "R580" in driver.note
    assert _row(rows, "GPUs").status == doctor.MISSING and "older than" in _row(rows, "GPUs").detail


def _fake_tool(folder: Path, banner: str) -> str:
    path = folder / "tool"
    path.write_text(f"#!/bin/sh\nprintf '{banner}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_tool_found_gives_its_version_and_one_missing_says_what_needs_it(bare: Path, monkeypatch) -> None:
    sanitizer = _fake_tool(bare, "NVIDIA (R) Compute Sanitizer\\nVersion 2025.3.1 (build 36577823)\\n")
    monkeypatch.setattr("gemmlab.measure.sanitize.find_sanitizer", lambda: sanitizer)
    rows = doctor.rows(doctor.probe(bare / "r.sqlite"))
    found, missing = _row(rows, "compute-sanitizer"), _row(rows, "ncu")
    assert found.status == doctor.OK and found.detail == f"2025.3.1 at {sanitizer}" and "gemmlab check" in found.note
    assert missing.status == doctor.MISSING and "gemmlab profile" in missing.note and "--profile" in missing.note
    assert "PATH" in missing.note


def test_a_cache_that_cannot_be_written_is_named_with_the_variable_that_moves_it(bare: Path, monkeypatch) -> None:
    cache = bare / "cache" / "cubin"
    cache.mkdir(parents=True)
    allowed = os.access
    # Read-only for this test's process; root passes a chmod, so access() itself says no.
    monkeypatch.setattr(os, "access", lambda p, mode: not (Path(p) == cache and mode & os.W_OK) and allowed(p, mode))
    row = doctor.cache_row(doctor.probe(bare / "r.sqlite").cache)
    assert (row.status, row.detail) == (doctor.NOT_WRITABLE, str(cache)) and "GEMMLAB_CACHE" in row.note


def test_cache_and_database_are_judged_without_being_created(bare: Path, monkeypatch) -> None:
    rows = doctor.rows(doctor.probe(bare / "new" / "r.sqlite"))
    cache = _row(rows, "compile cache")
    assert (cache.status, cache.detail) == (doctor.OK, f"{bare / 'cache' / 'cubin'} (made at the first compile)")
    assert _row(rows, "results database").status == doctor.OK
    assert not (bare / "cache").exists() and not (bare / "new").exists()
    # Under a file nothing can be made; an existing database has its size told.
    (bare / "plain").write_text("")
    monkeypatch.setenv("GEMMLAB_CACHE", str(bare / "plain" / "cache"))
    (bare / "r.sqlite").write_bytes(b"\0" * 2**20)
    machine = doctor.probe(bare / "r.sqlite")
    blocked_cache = doctor.cache_row(machine.cache)
    assert blocked_cache.status == doctor.NOT_WRITABLE and "cannot be made" in blocked_cache.detail
    existing = doctor.database_row(machine.database)
    assert (existing.status, existing.detail) == (doctor.OK, f"{bare / 'r.sqlite'} (1.0 MiB)")
    blocked = doctor.database_row(doctor.probe(bare / "plain" / "r.sqlite").database)
    assert blocked.status == doctor.NOT_WRITABLE and "--db" in blocked.note


def test_nvrtc_that_cannot_load_is_the_one_failure_of_the_core(bare: Path, monkeypatch) -> None:
    def broken() -> str:
        raise RuntimeError("Failed to dlopen libnvrtc.so.13")

    monkeypatch.setattr(doctor, "nvrtc_version", broken)
    machine = doctor.probe(bare / "r.sqlite")
    row = _row(doctor.rows(machine), "NVRTC")
    assert row.status == doctor.MISSING and "libnvrtc.so.13" in row.detail and "nvidia-cuda-nvrtc" in row.note
    assert not doctor.core_usable(machine)
    out = runner.invoke(app, ["doctor", "--db", str(bare / "r.sqlite")], env={"COLUMNS": "100"})
    assert out.exit_code == EXIT_CORE_UNUSABLE and "libnvrtc.so.13" in out.output


# --- NVRTC held back, and the extras, from made-up installed metadata ---------------------


def _dist(name: str, version: str, *requires: str) -> SimpleNamespace:
    return SimpleNamespace(name=name, version=version, requires=list(requires))


def _installed(monkeypatch: pytest.MonkeyPatch, *dists: SimpleNamespace) -> None:
    versions = {d.name: d.version for d in dists}

    def version(name: str) -> str:
        if name not in versions:
            raise doctor.metadata.PackageNotFoundError(name)
        return versions[name]

    fake = SimpleNamespace(
        distributions=lambda: list(dists), version=version, PackageNotFoundError=doctor.metadata.PackageNotFoundError,
        Distribution=object, distribution=lambda name: next(d for d in dists if d.name == name),
    )  # fmt: skip
    monkeypatch.setattr(doctor, "metadata", fake)


TORCH_PIN = (
    _dist("torch", "2.14.1", 'cuda-toolkit[nvrtc]==13.0.3; platform_system == "Linux"'),
    _dist("cuda-toolkit", "13.0.3", 'nvidia-cuda-nvrtc==13.0.88.*; extra == "nvrtc"'),
    _dist("gemmlab", "0.1.0", "nvidia-cuda-nvrtc<14,>=13"),
)


def test_nvrtc_held_back_by_torchs_pin_is_named_with_who_pins_it(monkeypatch) -> None:
    _installed(monkeypatch, *TORCH_PIN, _dist("nvidia-cuda-nvrtc", "13.0.88"))
    assert doctor.held_by("nvidia-cuda-nvrtc") == ("cuda-toolkit 13.0.3, which torch 2.14.1 requires",)
    machine = SimpleNamespace(
        nvrtc_version="13.0", nvrtc_archs=(75, 90), nvrtc_held_by=doctor.held_by("nvidia-cuda-nvrtc")
    )
    row = doctor.nvrtc_row(machine)  # type: ignore[arg-type]
    assert row.status == doctor.OK and row.detail == "13.0: sm_75, sm_90"
    assert "cuda-toolkit 13.0.3, which torch 2.14.1 requires" in row.note and "multigpu" in row.note


def test_nvrtc_at_a_version_no_pin_allows_is_not_called_held(monkeypatch) -> None:
    _installed(monkeypatch, *TORCH_PIN, _dist("nvidia-cuda-nvrtc", "13.5.37"))
    assert doctor.held_by("nvidia-cuda-nvrtc") == ()


def test_extras_are_read_from_the_metadata_with_what_is_missing_or_too_old(monkeypatch) -> None:
    gemmlab = _dist("gemmlab", "0.1.0", 'tomli>=1.1; python_version < "3.99"', 'numba>=0.59; extra == "cpu"',
                    'torch>=2.11; extra == "multigpu"', 'pyarrow>=12; extra == "parquet"')  # fmt: skip
    gemmlab.metadata = SimpleNamespace(get_all=lambda key: ["cpu", "multigpu", "parquet"])
    _installed(monkeypatch, gemmlab, _dist("numba", "0.60.0"), _dist("torch", "2.8.0"))
    found = {e.name: e for e in doctor.extras()}
    assert found["cpu"].unmet == () and found["parquet"].unmet == ("pyarrow missing",)
    assert found["multigpu"].unmet == ("torch 2.8.0 (needs >=2.11)",)  # tomli joins no extra
    assert doctor.extra_row(found["cpu"]).status == doctor.INSTALLED
    multigpu = doctor.extra_row(found["multigpu"])
    assert multigpu.status == doctor.NOT_INSTALLED and "gemmlab[multigpu]" in multigpu.note
    assert "gemmlab distributed" in multigpu.note


def test_every_extra_of_pyproject_says_what_it_enables() -> None:
    assert set(doctor.EXTRA_PURPOSE) == set(EXTRAS)


# --- a real run on this machine ---------------------------------------------------------


def test_doctor_on_this_machine_fits_80_columns_and_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    out = runner.invoke(app, ["doctor", "--db", str(db)], env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    for component in ("NVRTC", "NVIDIA driver", "compute-sanitizer", "ncu", "compile cache", "results database"):
        assert component in out.output, component
    assert all(len(line) <= 80 for line in out.output.splitlines())
    assert not db.exists()
    rows = json.loads(runner.invoke(app, ["doctor", "--db", str(db), "--json"]).output)
    by_component = {r["component"]: r for r in rows}
    nvrtc = by_component["NVRTC"]
    assert nvrtc["status"] == "ok" and nvrtc["detail"].startswith(doctor.nvrtc_version())
    assert all(f"extra: {name}" in by_component for name in EXTRAS)
    numba = importlib.util.find_spec("numba") is not None  # the cpu extra is numba alone
    assert by_component["extra: cpu"]["status"] == ("installed" if numba else "not installed")
    assert by_component["results database"]["status"] == "ok" and not db.exists()


@pytest.mark.gpu
def test_doctor_on_a_gpu_machine_lists_its_first_gpu() -> None:
    rows = json.loads(runner.invoke(app, ["doctor", "--json"]).output)
    first = next(r for r in rows if r["component"] == "GPU 0")
    assert first["status"] == "ok" and gpu.describe(0).name in first["detail"]
    assert next(r for r in rows if r["component"] == "NVIDIA driver")["status"] == "ok"
