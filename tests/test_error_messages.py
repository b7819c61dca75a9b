"""Errors that once pointed the wrong way (issue 23): a missing driver reported
as an old one, an unknown kernel reported as a missing GPU, a target too old
for NVRTC answered with "upgrade NVRTC", a list of what works without a GPU
that left commands out, and an occupancy table that showed the reserve without
a word and the per-SM figure as the per-block limit. No GPU needed."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gemmlab.backends import nvrtc
from gemmlab.cli.app import app
from gemmlab.core import gpu
from gemmlab.core.errors import NoGPUError, UnknownName
from gemmlab.store.store import Store

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def error_line(result, code: int) -> str:
    """The one line of a clean error, after checking the exit code and that there is no traceback."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> None:
        raise gpu.no_usable_gpu(RuntimeError("cudaErrorInsufficientDriver"), None, 13000, None)

    monkeypatch.setattr(gpu, "_cupy", missing)


# --- 1. no driver, or one too old ----------------------------------------------


@pytest.fixture
def cupy_without_driver(monkeypatch: pytest.MonkeyPatch):
    """gpu._cupy run afresh, with CuPy failing as it does without a usable driver
    (its runtime is 13.0); the test says what libcuda answers by calling the result."""
    cupy = pytest.importorskip("cupy")
    failing = {"code": 35}  # cudaErrorInsufficientDriver, CuPy's answer to no driver as well as an old one

    def device_count() -> int:
        raise cupy.cuda.runtime.CUDARuntimeError(failing["code"])

    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceCount", device_count)
    monkeypatch.setattr(cupy.cuda.runtime, "runtimeGetVersion", lambda: 13000)
    monkeypatch.setattr(gpu, "_driver_release", lambda: "550.54.15")
    gpu._cupy.cache_clear()

    def driver(version: int | None, code: int = 35) -> None:
        failing["code"] = code
        monkeypatch.setattr(gpu, "installed_driver", lambda: version)

    yield driver
    gpu._cupy.cache_clear()


def test_no_driver_is_named_as_missing_not_insufficient(cupy_without_driver) -> None:
    cupy_without_driver(None)
    line = error_line(invoke("devices"), 3)
    assert "No NVIDIA driver was found on this machine" in line
    assert "insufficient" not in line.lower()
    assert "release R580 or newer, for CUDA 13" in line
    assert "Commands that work without a GPU" in line


def test_old_driver_says_which_it_is_and_which_is_needed(cupy_without_driver) -> None:
    cupy_without_driver(12040)
    line = error_line(invoke("run", "tiled", "--size", "64"), 3)
    assert "(release 550.54.15, CUDA 12.4) is older than the CUDA 13.0 runtime" in line
    assert "Update the driver (release R580 or newer, for CUDA 13)" in line


def test_driver_without_a_gpu(cupy_without_driver) -> None:
    cupy_without_driver(13000, code=100)  # cudaErrorNoDevice
    line = error_line(invoke("devices"), 3)
    assert "The NVIDIA driver found no usable GPU (cudaErrorNoDevice" in line
    assert "older" not in line and "No NVIDIA driver" not in line


def test_new_enough_driver_is_not_called_old() -> None:
    # A 13.0 driver runs a 13.2 runtime (minor-version compatibility).
    error = gpu.no_usable_gpu(RuntimeError("cudaErrorNoDevice"), 13000, 13020, None)
    assert isinstance(error, NoGPUError) and "older" not in error.cause


def test_this_machine_without_a_driver_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where libcuda really is absent (this CI), the whole path from CuPy's error to the message."""
    if gpu.installed_driver() is not None:
        pytest.skip("this machine has an NVIDIA driver")
    gpu._cupy.cache_clear()
    try:
        line = error_line(invoke("devices"), 3)
    finally:
        gpu._cupy.cache_clear()
    assert "No NVIDIA driver was found on this machine" in line


# --- 2. an unknown kernel is reported before the GPU is asked ---------------------


def test_compile_unknown_kernel_without_gpu(no_gpu) -> None:
    line = error_line(invoke("compile", "nope"), 2)
    assert "Unknown kernel 'nope'" in line
    assert "GPU" not in line and "driver" not in line
    assert "Did you mean tiled" in error_line(invoke("compile", "tild"), 2)


# --- 3. a target older or newer than NVRTC knows ---------------------------------


def test_compile_for_a_target_older_than_nvrtc_supports() -> None:
    oldest = f"sm_{nvrtc.supported_archs()[0]}"
    line = error_line(invoke("compile", "tiled", "--arch", "sm_20"), 2)
    assert f"cannot compile for sm_20: the target is older than the oldest it supports, {oldest}" in line
    assert f"`--arch {oldest}`" in line and "`gemmlab occupancy --cc 2.0 --threads T" in line
    assert "upgrade" not in line.lower()
    # All kernels, and occupancy's compile, get the same answer.
    assert "older than the oldest" in error_line(invoke("compile", "--arch", "sm_20"), 2)
    assert "older than the oldest" in error_line(invoke("occupancy", "tiled", "--arch", "sm_30"), 2)


def test_check_target_names_too_new_and_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvrtc.compile, "supported_archs", lambda: (75, 80, 90, 100))
    assert nvrtc.check_target("sm_90a") == "sm_90a"
    assert nvrtc.check_target("sm_100f") == "sm_100f"
    with pytest.raises(UnknownName, match="newer than the newest it supports, sm_100") as too_new:
        nvrtc.check_target("sm_130")
    assert "Upgrade the nvidia-cuda-nvrtc wheel" in too_new.value.fix
    with pytest.raises(UnknownName, match="it supports sm_75, sm_80, sm_90, sm_100"):
        nvrtc.check_target("sm_85")
    monkeypatch.setattr(nvrtc.compile, "supported_archs", lambda: None)  # an NVRTC that cannot say: NVRTC decides
    assert nvrtc.check_target("sm_20") == "sm_20"


# --- 4. what works without a GPU, each one run without a GPU -----------------------


def test_no_gpu_message_lists_every_command_that_works_without_one() -> None:
    for command in ("gemmlab occupancy tiled --arch", "gemmlab reproduce --list"):
        assert any(c.startswith(command) for c in gpu.WORKS_WITHOUT_GPU)
    for command in gpu.WORKS_WITHOUT_GPU:
        assert f"`{command}`" in gpu.NO_GPU_FIX


@pytest.mark.parametrize("command", gpu.WORKS_WITHOUT_GPU)
def test_listed_command_works_without_gpu(
    command: str, no_gpu, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with Store.open(tmp_path / "results.sqlite") as db:  # for `report`
        run_id = db.start_run({"gpu_name": "NVIDIA H100 80GB HBM3", "cc": "9.0"})
        db.add_result(run_id, "poznan-group1", {"kernel": "naive", "m": 64, "n": 64, "k": 64, "block_edge": 16,
                                                "dtype": "float32", "median_ms": 0.01, "gflops": 52.4})  # fmt: skip
    argv = shlex.split(command)
    assert argv[0] == "gemmlab"
    result = invoke(*argv[1:])
    assert result.exit_code == 0, f"{command}: {result.output}"


# --- 5. the occupancy table's shared memory ----------------------------------------


def test_occupancy_shows_the_reserve_and_the_per_block_limit() -> None:
    args = ("occupancy", "--cc", "9.0", "--threads", "256", "--smem", "4096")
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in result.output.splitlines() if line.count("│") == 4}  # fmt: skip
    # Asked 4096; the system adds 1 KiB per block on 9.0; the block may opt in to 227 KiB;
    # the SM holds 228 KiB.
    assert rows["Shared memory per block [B]"] == ["4096", str(227 * 1024)]
    assert rows["Reserved by the system per block [B]"] == ["1024", ""]
    assert rows["Shared memory allocated per block [B]"] == ["5120", ""]
    assert rows["Shared memory per SM [B] (carve-out)"] == [str(228 * 1024), str(228 * 1024)]
    data = json.loads(invoke(*args, "--json").stdout)
    assert (data["smem_requested"], data["smem_per_block"]) == (4096, 5120)


def test_occupancy_without_a_reserve_has_no_reserve_row() -> None:
    result = invoke("occupancy", "--cc", "7.5", "--threads", "256", "--smem", "4096")
    assert result.exit_code == 0, result.output
    assert "Reserved by the system" not in result.output
    assert "65536" in result.output  # 7.5: 64 KiB per block (opt-in) and per SM
