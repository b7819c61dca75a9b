"""The profiler without a GPU: formulas, ncu's raw CSV, its failure messages, the
command line, the CLI table and the roofline plot.

Real captures from an H200 go in tests/fixtures/ncu/ as h200_<kernel>_<edge>.csv
(N = 256, made by benchmarks/scripts/capture_ncu_fixtures.sh); the tests over
them run for every such file present.

tests/fixtures/ncu/tensor_ops_h200_2048.csv is a copy, unedited, of a capture
made on the H200 (chip gh100) on 2026-11-21: ncu's --csv --page raw output of
the tensor-core counters around `gemmlab run` of five tensor-core launches at
M = N = K = 2048, each page followed by a line "=== end KERNEL DTYPE". It holds
no CUDA-core counters (it is not the command `gemmlab profile` runs).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gemmlab.cli.app import app
from gemmlab.core.errors import ProfilerError, VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import Point
from gemmlab.measure import ncu
from gemmlab.measure.roofline import attainable_gflops, point_coordinates, ridge_point, roofline_plot

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"
SYNTHETIC = FIXTURES / "synthetic_raw.csv"
H200_CAPTURES = sorted(FIXTURES.glob("h200_*.csv"))
TENSOR_CAPTURE = FIXTURES / "tensor_ops_h200_2048.csv"
CAPTURE_N = 256
WARP = 32
NAIVE_MANGLED = "_Z5naiveIfLi16EEvPKT_S2_PS0_iii"

# What ncu has been asked for since before the registry of figures, in this order:
# the union of the registry's counters must stay this list.
CUDA_CORE_COUNTERS = (
    ncu.metrics.TIME, ncu.metrics.INST_EXECUTED,
    ncu.metrics.FADD, ncu.metrics.FMUL, ncu.metrics.FFMA, ncu.metrics.INTEGER,
    ncu.metrics.GLOBAL_LD_REQUESTS, ncu.metrics.GLOBAL_ST_REQUESTS,
    ncu.metrics.GLOBAL_LD_SECTORS, ncu.metrics.GLOBAL_ST_SECTORS,
    ncu.metrics.DRAM_READ, ncu.metrics.DRAM_WRITE,
    ncu.metrics.ACHIEVED_OCCUPANCY, ncu.metrics.THEORETICAL_OCCUPANCY,
    ncu.metrics.LIMIT_BLOCKS, ncu.metrics.LIMIT_REGISTERS, ncu.metrics.LIMIT_SHARED_MEM, ncu.metrics.LIMIT_WARPS,
    ncu.metrics.REGISTERS, ncu.metrics.SMEM_STATIC, ncu.metrics.SMEM_DYNAMIC,
    ncu.metrics.SM_THROUGHPUT, ncu.metrics.DRAM_THROUGHPUT,
    ncu.metrics.SHARED_LD_REQUESTS, ncu.metrics.SHARED_ST_REQUESTS,
    ncu.metrics.SHARED_LD_WAVEFRONTS, ncu.metrics.SHARED_ST_WAVEFRONTS,
    ncu.metrics.BANK_CONFLICTS_LD, ncu.metrics.BANK_CONFLICTS_ST,
)  # fmt: skip
# Only for a kernel that uses the tensor cores.
TENSOR_COUNTERS = (ncu.metrics.TENSOR_BF16, ncu.metrics.TENSOR_FP16, ncu.metrics.TENSOR_TF32, ncu.metrics.TENSOR_PIPE)


# --- what the kernels' structure says the counters must be ----------------------


def expected_requests(kernel_id: str, n: int, edge: int) -> tuple[int, int]:
    """Global load and store requests of naive / tiled on a square n, block edge ``edge``.

    A request is one warp-wide memory instruction, however many rows of the
    block the warp spans: with edge 16 a warp covers two rows, so its load of A
    carries two addresses, and it is still one request. Per k-step (naive) or
    per tile (tiled) every thread issues one load of A and one of B, so a warp
    issues 2 requests; at the end each thread stores one element of C, one
    request per warp.
    """
    spec = catalogue.get(kernel_id)
    threads = spec.threads_per_block(Shape.square(n), edge)
    warps_per_block = -(-threads // WARP)
    gx, gy, gz = spec.grid(Shape.square(n), edge)
    warps = gx * gy * gz * warps_per_block
    steps = n if spec.function == "naive" else n // edge
    return warps * 2 * steps, warps


def expected_cgma(kernel_id: str, n: int, edge: int) -> float:
    loads, stores = expected_requests(kernel_id, n, edge)
    return 2 * n**3 / (loads + stores)


def test_structural_cgma_tends_to_warp_size_times_the_document_cgma() -> None:
    """Per request a warp moves 32 threads' accesses: measured CGMA = 32 x analytic, less the stores."""
    for kernel_id, edge in (("naive", 8), ("naive", 16), ("naive", 32), ("tiled", 8), ("tiled", 16), ("tiled", 32)):
        analytic = catalogue.get(kernel_id).cgma(Shape.square(8192), edge)
        assert expected_cgma(kernel_id, 8192, edge) == pytest.approx(WARP * analytic, rel=0.005)
    # At N = 256 the stores weigh in: naive 64K / (2K + 1), tiled 64K / (2K/b + 1).
    assert expected_cgma("naive", 256, 16) == pytest.approx(64 * 256 / 513)
    assert expected_cgma("tiled", 256, 16) == pytest.approx(64 * 256 / 33)


# --- formulas --------------------------------------------------------------------


def test_flops_count_an_fma_as_two() -> None:
    assert ncu.metrics.flops_executed(10, 20, 30) == 90


def test_tensor_flops_sum_the_input_types_and_refuse_a_partial_sum() -> None:
    metrics: dict[str, float | None] = {
        ncu.metrics.TENSOR_BF16: 10,
        ncu.metrics.TENSOR_FP16: 20,
        ncu.metrics.TENSOR_TF32: 30,
    }
    assert ncu.metrics.tensor_flops(metrics) == 60
    assert ncu.metrics.tensor_flops({**metrics, ncu.metrics.TENSOR_TF32: None}) is None
    assert ncu.metrics.tensor_flops({}) is None


def test_gips_is_warp_instructions_per_nanosecond() -> None:
    assert ncu.metrics.gips(2_000_000, 1_000_000) == pytest.approx(2.0)  # 2e6 inst in 1 ms = 2 GIPS


def test_cgma_counts_loads_and_stores() -> None:
    assert ncu.metrics.cgma(640, 9, 1) == 64
    assert ncu.metrics.cgma(640, 0, 0) is None


def test_ratio_and_intensity_refuse_a_zero_denominator() -> None:
    assert ncu.metrics.ratio(1, 0) is None
    assert ncu.metrics.ratio(None, 2) is None
    assert ncu.metrics.arithmetic_intensity(100, 50) == 2


def test_limiting_factors_name_every_tied_minimum() -> None:
    limits = {"registers": 8, "shared memory": 32, "warps": 8, "blocks": 32}
    assert ncu.metrics.limiting_factors(limits) == ["registers", "warps"]
    assert ncu.metrics.limiting_factors({"registers": None}) == []


@pytest.mark.parametrize(
    ("text", "value"),
    [("1,234,567", 1234567.0), ("12.5", 12.5), ("0", 0.0), ("n/a", None), ("", None), (" 2,048 ", 2048.0)],
)
def test_parse_number(text: str, value: float | None) -> None:
    assert ncu.parse.parse_number(text) == value


def test_unit_factor_brings_values_to_base_units() -> None:
    assert ncu.parse.unit_factor("nsecond") == 1
    assert ncu.parse.unit_factor("usecond") == 1e3
    assert ncu.parse.unit_factor("msecond") == 1e6
    assert ncu.parse.unit_factor("Mbyte") == 1e6
    assert ncu.parse.unit_factor("byte") == 1
    assert ncu.parse.unit_factor("%") == 1


# --- the raw CSV page --------------------------------------------------------------


def test_synthetic_fixture_is_marked_as_such() -> None:
    assert SYNTHETIC.read_text().startswith("SYNTHETIC")


def test_parse_skips_prof_lines_program_output_and_the_units_row() -> None:
    page = ncu.parse.parse_raw_csv(SYNTHETIC.read_text())
    assert len(page.launches) == 1
    assert page.units[ncu.metrics.TIME] == "nsecond"
    metrics = page.metrics()
    assert set(ncu.metrics.metrics_for(naive_point())) <= set(metrics)
    assert metrics[ncu.metrics.TIME] == 41216
    assert metrics[ncu.metrics.FFMA] == 256**3
    assert metrics[ncu.metrics.GLOBAL_LD_REQUESTS] == 1_048_576


def test_parse_converts_scaled_units() -> None:
    text = (
        '"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum"\n'
        '"","","usecond","Kbyte"\n'
        '"0","k","41.5","1,024"\n'
    )
    metrics = ncu.parse.parse_raw_csv(text).metrics()
    assert metrics[ncu.metrics.TIME] == pytest.approx(41_500)
    assert metrics[ncu.metrics.DRAM_READ] == pytest.approx(1_024_000)


def test_parse_without_a_page_finds_no_launch() -> None:
    assert ncu.parse.parse_raw_csv("==PROF== Disconnected\n").launches == []


def naive_point() -> Point:
    return catalogue.point("naive", Shape.square(CAPTURE_N), 16)


def test_result_from_the_synthetic_capture() -> None:
    r = ncu.parse.result_from_output(naive_point(), SYNTHETIC.read_text(), ["ncu"])
    assert r.flops_measured == 2 * 256**3 == r.flops_model
    assert r.flops_ratio == 1
    assert r.time_ms == pytest.approx(0.041216)
    assert r.gflops == pytest.approx(2 * 256**3 / 41216)
    assert r.gips == pytest.approx(2_686_976 / 41216)
    assert r.global_requests == r.global_ld_requests + r.global_st_requests
    assert r.cgma_measured == pytest.approx(expected_cgma("naive", 256, 16))
    assert r.cgma_analytic == 1.0
    assert r.ld_sectors_per_request == 2  # both rows of a warp read the same 64 bytes of B
    assert r.dram_bytes == r.dram_bytes_read + r.dram_bytes_written
    assert r.arithmetic_intensity == pytest.approx(2 * 256**3 / r.dram_bytes)
    assert r.limiting_factors == ["registers", "warps"]
    assert r.device == "NVIDIA H200 (synthetic)"
    assert r.cc == "9.0"
    assert r.error == pytest.approx(1.2e-7)
    assert r.ncu_command == ["ncu"]
    json.dumps(r.to_dict())  # plain values only


def test_the_result_fills_the_store_columns() -> None:
    store = pytest.importorskip("gemmlab.store.store")
    d = ncu.parse.result_from_output(naive_point(), SYNTHETIC.read_text()).to_dict()
    assert set(store.PROFILE_FIELDS) <= set(d)


def test_int32_kernels_count_integer_instructions() -> None:
    point = catalogue.point("naive_i32", Shape.square(CAPTURE_N), 16)
    metrics = ncu.parse.parse_raw_csv(SYNTHETIC.read_text()).metrics()
    r = ncu.metrics.result_from_metrics(point, metrics)
    assert r.flops_measured == metrics[ncu.metrics.INTEGER]
    assert "integer" in r.ops_counter


def tc_mma_point(n: int = CAPTURE_N) -> Point:
    return catalogue.point("tc_mma", Shape.square(n), dtype="bfloat16")


def tensor_metrics(tensor_ops: float, cuda_core_flops: int = 1_000) -> dict[str, float | None]:
    """The synthetic page's counters as a bf16 tensor-core launch would show them: the
    products on the tensor path, a few FMULs on the CUDA cores, the pipe 40% busy."""
    metrics = ncu.parse.parse_raw_csv(SYNTHETIC.read_text()).metrics()
    metrics.update({ncu.metrics.FADD: 0, ncu.metrics.FMUL: cuda_core_flops, ncu.metrics.FFMA: 0})
    metrics.update({ncu.metrics.TENSOR_BF16: tensor_ops, ncu.metrics.TENSOR_FP16: 0, ncu.metrics.TENSOR_TF32: 0})
    metrics[ncu.metrics.TENSOR_PIPE] = 40.0
    return metrics


def test_flops_executed_add_the_tensor_cores_operations() -> None:
    model = 2 * CAPTURE_N**3
    r = ncu.metrics.result_from_metrics(tc_mma_point(), tensor_metrics(model))
    assert r.tensor_flops == model
    assert r.flops_measured == model + 1_000
    assert r.flops_ratio == pytest.approx((model + 1_000) / model)
    assert r.cgma_measured == pytest.approx((model + 1_000) / r.global_requests)
    assert r.tensor_pipe_pct == 40.0
    assert r.ops_counter == (
        "fadd + fmul + 2 x ffma (thread level) + tensor-core operations (sm__ops_path_tensor_src_*: bf16, fp16, tf32)"
    )


def test_a_tensor_core_kernel_without_tensor_values_says_what_its_total_lacks() -> None:
    metrics = tensor_metrics(2 * CAPTURE_N**3)
    metrics[ncu.metrics.TENSOR_FP16] = None  # ncu printed n/a: a sum of the other two would pass for the whole
    r = ncu.metrics.result_from_metrics(tc_mma_point(), metrics)
    assert r.tensor_flops is None
    assert r.flops_measured == 1_000
    assert "the tensor-core products are not in it" in r.ops_counter


def test_cuda_core_kernels_neither_ask_for_nor_report_tensor_counters() -> None:
    assert ncu.metrics.metrics_for(naive_point()) == CUDA_CORE_COUNTERS
    assert ncu.metrics.metrics_for(tc_mma_point()) == CUDA_CORE_COUNTERS + TENSOR_COUNTERS
    r = ncu.parse.result_from_output(naive_point(), SYNTHETIC.read_text())
    assert r.tensor_flops is None and r.tensor_pipe_pct is None
    assert "tensor" not in r.ops_counter


def test_a_missing_counter_is_named() -> None:
    metrics = ncu.parse.parse_raw_csv(SYNTHETIC.read_text()).metrics()
    metrics[ncu.metrics.FFMA] = None
    with pytest.raises(ProfilerError, match="ffma"):
        ncu.metrics.result_from_metrics(naive_point(), metrics)


# --- real captures (activate when tests/fixtures/ncu/h200_*.csv exist) ------------


def _capture_point(path: Path) -> Point:
    m = re.fullmatch(r"h200_(?P<kernel>.+)_(?P<edge>\d+)\.csv", path.name)
    assert m, f"{path.name} is not named h200_<kernel>_<edge>.csv"
    return catalogue.point(m["kernel"], Shape.square(CAPTURE_N), int(m["edge"]))


@pytest.mark.skipif(not H200_CAPTURES, reason="no real ncu captures (tests/fixtures/ncu/h200_*.csv) yet")
@pytest.mark.parametrize("path", H200_CAPTURES, ids=[p.stem for p in H200_CAPTURES])
def test_real_capture_matches_the_kernel_structure(path: Path) -> None:
    point = _capture_point(path)
    r = ncu.parse.result_from_output(point, path.read_text())
    loads, stores = expected_requests(point.spec.id, CAPTURE_N, point.block_edge)
    assert r.global_ld_requests == pytest.approx(loads, rel=0.02)
    assert r.global_st_requests == pytest.approx(stores, rel=0.02)
    assert r.time_ms > 0 and r.inst_executed > 0
    assert 0 < r.achieved_occupancy <= r.theoretical_occupancy + 1e-9 <= 100 + 1e-9
    if point.dtype == "int32":
        # At least one integer instruction (IMAD) per multiply-add; index arithmetic adds more.
        assert r.flops_measured >= CAPTURE_N**3
    else:
        assert r.flops_measured == 2 * CAPTURE_N**3
        assert r.cgma_measured == pytest.approx(expected_cgma(point.spec.id, CAPTURE_N, point.block_edge), rel=0.02)


# The tensor-core capture: each "=== end KERNEL DTYPE" line closes one launch's page.
TENSOR_LAUNCHES = re.findall(r"(.*?)^=== end (\S+) (\S+)$", TENSOR_CAPTURE.read_text(), re.MULTILINE | re.DOTALL)
TENSOR_TYPES = {
    "bfloat16": ncu.metrics.TENSOR_BF16,
    "float16": ncu.metrics.TENSOR_FP16,
    "tf32": ncu.metrics.TENSOR_TF32,
}


def test_the_tensor_capture_holds_five_launches_and_every_tensor_counter() -> None:
    assert [(kernel, dtype) for _, kernel, dtype in TENSOR_LAUNCHES] == [
        ("tc_cluster", "bfloat16"), ("tc_cluster", "tf32"), ("tc_cluster", "float16"),
        ("tc_mma", "bfloat16"), ("tc_wmma", "tf32"),
    ]  # fmt: skip
    # The names gemmlab asks for exist on gh100 (the page names each counter with its suffix).
    columns = {name.split(".")[0] for name in ncu.parse.parse_raw_csv(TENSOR_LAUNCHES[0][0]).launches[0]}
    assert {name.split(".")[0] for name in TENSOR_COUNTERS} <= columns


@pytest.mark.parametrize(("page", "kernel", "dtype"), TENSOR_LAUNCHES, ids=[f"{k}-{d}" for _, k, d in TENSOR_LAUNCHES])
def test_real_tensor_capture_counts_two_flops_per_multiply_add(page: str, kernel: str, dtype: str) -> None:
    """HMMA (tc_mma, tc_wmma) and HGMMA (tc_cluster) alike: 2 * 2048^3, all in the launch's input type."""
    launch = ncu.parse.parse_raw_csv(page)
    assert len(launch.launches) == 1 and f"{kernel}<" in launch.launches[0]["Kernel Name"]
    metrics = launch.metrics()
    assert ncu.metrics.tensor_flops(metrics) == metrics[TENSOR_TYPES[dtype]] == 2 * 2048**3
    assert metrics["sm__pipe_tensor_cycles_active.sum"] > 0


# --- ncu's failures -------------------------------------------------------------

PERMISSION_DENIED = """==PROF== Connected to process 812 (/usr/bin/python3.12)
==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the \
target device 0. For instructions on enabling permissions and to get more information see \
https://developer.nvidia.com/ERR_NVGPUCTRPERM
==PROF== Disconnected from process 812
==WARNING== No kernels were profiled.
"""


@pytest.mark.parametrize(
    ("output", "needle"),
    [
        (PERMISSION_DENIED, "ERR_NVGPUCTRPERM"),
        ("==ERROR== Profiling is not supported on this device\n", "not supported on this device"),
        ("==ERROR== Failed to initialize the profiler: LibraryNotLoaded\n", "could not start its profiler"),
        ("==ERROR== Failed to find metric sm__bogus.sum\n", "sm__bogus.sum"),
        ("==ERROR== Option '--bogus' is only supported for the details page.\n", "Option '--bogus'"),
    ],
)
def test_ncu_failures_become_profiler_errors(output: str, needle: str) -> None:
    error = ncu.parse.ncu_failure(output, 1)
    assert isinstance(error, ProfilerError)
    assert needle in str(error)


def test_a_missing_tensor_counter_says_the_other_kernels_still_profile() -> None:
    error = ncu.parse.ncu_failure(f"==ERROR== Failed to find metric {ncu.metrics.TENSOR_TF32}\n", 1)
    assert isinstance(error, ProfilerError)
    text = str(error)
    assert ncu.metrics.TENSOR_TF32 in text and "tensor cores" in text
    assert "kernels without tensor cores still profile" in text and "ncu --query-metrics" in text


@pytest.mark.parametrize("output", [PERMISSION_DENIED, "==ERROR== Profiling is not supported on this device\n"])
def test_counter_failures_say_what_still_works(output: str) -> None:
    text = str(ncu.parse.ncu_failure(output, 1))
    for command in ("gemmlab run", "gemmlab sweep", "gemmlab reproduce", "gemmlab compile", "gemmlab occupancy"):
        assert command in text


def test_the_childs_own_error_comes_back_as_its_class() -> None:
    line = ncu.parse.CHILD_ERROR + json.dumps({"type": "VerificationError", "cause": "wrong result", "fix": "report"})
    error = ncu.parse.ncu_failure(
        f"==PROF== Connected\n{line}\n==ERROR== The application returned an error code (4).", 4
    )
    assert isinstance(error, VerificationError)
    assert str(error) == "wrong result report"


def test_an_empty_run_and_an_unknown_exit_are_errors() -> None:
    assert "profiled no launch" in str(ncu.parse.ncu_failure("==WARNING== No kernels were profiled.\n", 0))
    assert "status 9" in str(ncu.parse.ncu_failure("something broke\n", 9))
    assert ncu.parse.ncu_failure(SYNTHETIC.read_text(), 0) is None


# --- finding ncu ------------------------------------------------------------------


def test_missing_ncu_says_how_to_install_and_what_still_works(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(ncu.command, "NCU_SEARCH_GLOBS", (str(tmp_path / "nowhere" / "*" / "ncu"),))
    with pytest.raises(ProfilerError) as info:
        ncu.command.find_ncu()
    text = str(info.value)
    assert "ncu" in text and "Install" in text and "nsight-compute" in text.lower()
    for command in ("gemmlab run", "gemmlab sweep", "gemmlab reproduce", "gemmlab compile", "gemmlab occupancy"):
        assert command in text


def test_ncu_is_found_in_an_install_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for version in ("2024.1.0", "2025.3.1"):
        folder = tmp_path / "nsight-compute" / version
        folder.mkdir(parents=True)
        (folder / "ncu").write_text("#!/bin/sh\n")
        (folder / "ncu").chmod(0o755)
    monkeypatch.setattr(ncu.command, "NCU_SEARCH_GLOBS", (str(tmp_path / "nsight-compute" / "*" / "ncu"),))
    assert ncu.command.find_ncu() == str(tmp_path / "nsight-compute" / "2025.3.1" / "ncu")


# --- the command line ncu runs ----------------------------------------------------


def test_ncu_command_profiles_one_named_launch() -> None:
    cmd = ncu.command.ncu_command("/opt/ncu", NAIVE_MANGLED, naive_point(), python="/usr/bin/python3")
    assert cmd[0] == "/opt/ncu"

    def option(name: str) -> str:
        return cmd[cmd.index(name) + 1]

    assert option("--clock-control") == "none"
    assert option("--metrics").split(",") == list(CUDA_CORE_COUNTERS)
    assert option("--kernel-name-base") == "mangled"
    assert option("--kernel-name") == NAIVE_MANGLED
    assert option("--launch-skip") == str(ncu.command.PROFILED_LAUNCH) == "1"
    assert option("--launch-count") == "1"
    assert option("--page") == "raw"
    assert option("--print-units") == "base"
    assert "--csv" in cmd
    child = ["/usr/bin/python3", "-m", "gemmlab.measure.ncu", "naive", "16", "256", "256", "256", "float32"]
    assert cmd[-9:] == child


def test_the_child_of_the_command_line_runs_and_reports_in_words_ncu_reads() -> None:
    """The tail of ncu's command line, run as it is (no ncu, no GPU needed): the module path
    starts the child, which reads its arguments and prints the one line the parent reads back,
    its result on a GPU, otherwise its error (here: no GPU), whose class comes back whole."""
    point = catalogue.point("naive", Shape.square(64), 16)
    cmd = ncu.command.ncu_command("/opt/ncu", NAIVE_MANGLED, point, python=sys.executable)
    proc = subprocess.run(cmd[cmd.index(sys.executable) :], capture_output=True, text=True, timeout=120)
    output = proc.stdout + proc.stderr
    if proc.returncode == 0:
        assert "device" in ncu.parse.child_summary(output)
    else:
        assert any(line.startswith(ncu.parse.CHILD_ERROR) for line in output.splitlines()), output
        error = ncu.parse.ncu_failure(output, proc.returncode)
        assert error is not None and not isinstance(error, ProfilerError), output


def test_mangled_name_tells_tiled_from_tiled_2x2() -> None:
    names = {
        ncu.command.mangled_name(catalogue.point(kid, Shape.square(256), edge))
        for kid, edge in (("tiled", 16), ("tiled_2x2", 16), ("tiled", 8), ("naive", 16), ("naive_i32", 16))
    }
    assert len(names) == 5
    assert ncu.command.mangled_name(naive_point()) == NAIVE_MANGLED


def test_mangled_names_of_kernels_that_need_a_newer_target() -> None:
    """bf16 mma.sync does not compile for sm_75, wgmma only for sm_90a: each takes its oldest target."""
    assert ncu.command.mangled_name(tc_mma_point()).startswith("_Z6tc_mmaI7gl_bf16")
    wgmma = catalogue.point("tc_wgmma", Shape.square(CAPTURE_N), dtype="tf32")
    assert ncu.command.mangled_name(wgmma).startswith("_Z8tc_wgmmaI7gl_tf32")


def test_ncu_command_adds_the_tensor_counters_for_a_tensor_core_kernel() -> None:
    cmd = ncu.command.ncu_command("/opt/ncu", "_Z6tc_mma", tc_mma_point(), python="/usr/bin/python3")
    assert cmd[cmd.index("--metrics") + 1].split(",") == [*CUDA_CORE_COUNTERS, *TENSOR_COUNTERS]


def test_ncu_runs_with_a_dot_as_decimal_point(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    env = ncu.command.ncu_environment()
    assert "LC_ALL" not in env and env["LC_NUMERIC"] == "C"


def stand_in_for_ncu(
    monkeypatch: pytest.MonkeyPatch, answer: Callable[[list[str]], subprocess.CompletedProcess]
) -> None:
    """``answer(cmd)`` in place of running ncu. Patching subprocess.run patches
    it for everyone, so any other command runs for real: compiling the kernel
    for its mangled name starts a fresh Python process when the cubin cache is
    cold and NVRTC's output came from CUDA's compute cache (which of the
    tests sharing a pytest-xdist worker meets that first varies)."""
    real_run = subprocess.run

    def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        return answer(cmd) if cmd[0] == "/fake/ncu" else real_run(cmd, **kwargs)

    monkeypatch.setattr(ncu.command, "find_ncu", lambda: "/fake/ncu")
    monkeypatch.setattr(ncu.command.subprocess, "run", run)


def fake_ncu(monkeypatch: pytest.MonkeyPatch, stdout: str, returncode: int = 0) -> list[list[str]]:
    """Stand in for ncu: record the command, print ``stdout``."""
    seen: list[list[str]] = []

    def answer(cmd: list[str]) -> subprocess.CompletedProcess:
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, returncode, stdout=stdout, stderr="")

    stand_in_for_ncu(monkeypatch, answer)
    return seen


def test_profile_point_end_to_end_with_a_stand_in_ncu(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = fake_ncu(monkeypatch, SYNTHETIC.read_text())
    r = ncu.command.profile_point("naive", Shape.square(256), 16)
    assert seen[0][0] == "/fake/ncu" and NAIVE_MANGLED in seen[0]
    assert r.flops_measured == 2 * 256**3
    assert r.ncu_command == seen[0]


def test_profile_point_permission_denied(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_ncu(monkeypatch, PERMISSION_DENIED, returncode=1)
    with pytest.raises(ProfilerError, match="ERR_NVGPUCTRPERM"):
        ncu.command.profile_point("naive", Shape.square(256), 16)


def test_profile_point_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(cmd: list[str]) -> subprocess.CompletedProcess:
        raise subprocess.TimeoutExpired(cmd, 1)

    stand_in_for_ncu(monkeypatch, answer)
    with pytest.raises(ProfilerError, match="within 1 s"):
        ncu.command.profile_point("naive", Shape.square(256), 16, timeout=1)


# --- the CLI ----------------------------------------------------------------------

runner = CliRunner()


def test_cli_profile_table_and_json(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_ncu(monkeypatch, SYNTHETIC.read_text())
    table = runner.invoke(app, ["profile", "naive", "--size", "256", "--block", "16"], terminal_width=200)
    assert table.exit_code == 0, table.output
    for needle in ("GIPS", "CGMA", "33,554,432", "occupancy", "registers, warps", "NVIDIA H200 (synthetic)"):
        assert needle in table.output
    as_json = runner.invoke(app, ["profile", "naive", "--size", "256", "--block", "16", "--json"])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.stdout)
    assert data["flops_measured"] == 2 * 256**3 and data["cgma_analytic"] == 1.0
    assert data["tensor_flops"] is None and data["tensor_pipe_pct"] is None
    assert "tensor" not in table.output


def with_counters(page: str, counters: dict[str, str]) -> str:
    """``page`` (one launch) with more counter columns, as ncu would print them in base units."""
    lines = page.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID",'))
    header, units, launch = (next(csv.reader([line])) for line in lines[start : start + 3])
    rows = [header + list(counters), units + [""] * len(counters), launch + list(counters.values())]
    quoted = ['"' + '","'.join(row) + '"' for row in rows]  # ncu quotes every cell
    return "\n".join([*lines[:start], *quoted, *lines[start + 3 :]])


def test_cli_profile_shows_the_tensor_cores_share(monkeypatch: pytest.MonkeyPatch) -> None:
    from gemmlab.cli.profile import profile_rows

    model = 2 * 256**3
    counters = {ncu.metrics.TENSOR_BF16: f"{model:,}", ncu.metrics.TENSOR_FP16: "0", ncu.metrics.TENSOR_TF32: "0",
                ncu.metrics.TENSOR_PIPE: "38.5"}  # fmt: skip
    seen = fake_ncu(monkeypatch, with_counters(SYNTHETIC.read_text(), counters))
    args = ["profile", "tc_mma", "--size", "256", "--dtype", "bfloat16"]
    assert runner.invoke(app, args).exit_code == 0
    assert ncu.metrics.TENSOR_PIPE in seen[0][seen[0].index("--metrics") + 1]
    data = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    # The synthetic page's FFMAs (naive's 256^3) stay in the total beside the tensor path's products.
    assert data["tensor_flops"] == model and data["flops_measured"] == 2 * model
    assert data["tensor_pipe_pct"] == 38.5
    rows = {
        row[0]: row for row in profile_rows(ncu.command.profile_point("tc_mma", Shape.square(256), dtype="bfloat16"))
    }
    assert rows["tensor-core FLOPs"][1:3] == ("33,554,432", "33,554,432")
    assert rows["tensor-core FLOPs"][3].startswith("50.0% of FLOPs executed")
    assert rows["tensor pipe busy [%]"][1] == "38.5"


def test_cli_profile_without_ncu_is_one_clean_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(ncu.command, "NCU_SEARCH_GLOBS", ())
    result = runner.invoke(app, ["profile", "naive", "--size", "256"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output and "ncu" in result.output


def test_cli_profile_checks_the_shape_first(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = fake_ncu(monkeypatch, SYNTHETIC.read_text())
    result = runner.invoke(app, ["profile", "tiled", "--size", "100", "--block", "16"])
    assert result.exit_code == 2 and "not a multiple" in result.output
    assert seen == []


# --- the registry of figures -------------------------------------------------------

L2_SECTORS = "lts__t_sectors.sum"


def test_registry_keys_are_unique_and_leave_the_results_fields_alone() -> None:
    keys = [figure.key for figure in ncu.metrics.PROFILED]
    assert len(keys) == len(set(keys))
    assert not set(keys) & {field.name for field in dataclasses.fields(ncu.metrics.ProfileResult)}


def test_a_figure_added_to_the_registry_reaches_ncu_the_result_the_cli_and_the_report(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One entry, and nothing else: ncu collects its counter, the result carries its value,
    `gemmlab profile` prints a row for it and the report has a metric (and a table) of it."""
    from gemmlab.cli.profile import profile_rows
    from gemmlab.report import model, tables

    figure = ncu.metrics.ProfiledFigure(
        "flops_per_l2_sector", "FLOPs per L2 sector", "FLOP/sector", (L2_SECTORS,),
        lambda c, p: ncu.metrics.ratio(p.flops, c.get(L2_SECTORS)),
    )  # fmt: skip
    rows_before = [row[0] for row in profile_rows(ncu.parse.result_from_output(naive_point(), SYNTHETIC.read_text()))]
    monkeypatch.setattr(ncu.metrics, "PROFILED", (*ncu.metrics.PROFILED, figure))
    seen = fake_ncu(monkeypatch, with_counters(SYNTHETIC.read_text(), {L2_SECTORS: "1,048,576"}))

    r = ncu.command.profile_point("naive", Shape.square(CAPTURE_N), 16)
    assert seen[0][seen[0].index("--metrics") + 1].split(",") == [*CUDA_CORE_COUNTERS, L2_SECTORS]
    assert r.flops_per_l2_sector == r.to_dict()["flops_per_l2_sector"] == 2 * CAPTURE_N**3 / 1_048_576 == 32
    assert r.gips == pytest.approx(2_686_976 / 41216)  # the figures before it are as they were

    rows = profile_rows(r)
    assert rows[-1] == ("FLOPs per L2 sector [FLOP/sector]", "32.00", "", L2_SECTORS)
    assert [row[0] for row in rows[:-1]] == rows_before

    (metric,) = model.profiled_metrics()
    assert (metric.key, metric.title, metric.unit) == ("flops_per_l2_sector", "FLOPs per L2 sector", "FLOP/sector")
    row = {"kernel": "naive", "m": CAPTURE_N, "n": CAPTURE_N, "k": CAPTURE_N, "block_edge": 16, "dtype": "float32",
           "median_ms": r.time_ms, "profile_json": r.to_dict()}  # fmt: skip
    assert metric.value(row) == 32 and metric.value({**row, "profile_json": None}) is None
    monkeypatch.setattr(tables, "METRICS", (*model.METRICS, metric))
    (section,) = model.build_sections([row])
    (table,) = [t for t in tables.metric_tables(section) if t.metric.key == "flops_per_l2_sector"]
    assert table.ours == {((CAPTURE_N,) * 3, 16): 32}


# --- the roofline -----------------------------------------------------------------


def test_ridge_and_roof() -> None:
    assert ridge_point(50_000, 4_000) == 12.5
    assert attainable_gflops(1.0, 50_000, 4_000) == 4_000
    assert attainable_gflops(100.0, 50_000, 4_000) == 50_000


def test_point_coordinates_from_a_profile_and_from_raw_counts() -> None:
    d = ncu.parse.result_from_output(naive_point(), SYNTHETIC.read_text()).to_dict()
    label, intensity, gflops = point_coordinates(d)
    assert label == "naive"
    assert intensity == d["arithmetic_intensity"] and gflops == d["gflops"]
    label, intensity, gflops = point_coordinates({"label": "x", "flops": 2e9, "dram_bytes": 1e9, "time_ms": 1.0})
    assert (label, intensity, gflops) == ("x", 2.0, pytest.approx(2000.0))


def test_roofline_plot_writes_a_png(tmp_path: Path) -> None:
    d = ncu.parse.result_from_output(naive_point(), SYNTHETIC.read_text()).to_dict()
    points = [
        d,
        {"label": "tiled", "flops": 2e9, "dram_bytes": 1e8, "time_ms": 0.1},
        {"label": "empty", "gflops": None},
    ]
    out = roofline_plot(points, 50_000.0, 4_000.0, tmp_path / "plots" / "roofline.png", "Roofline, synthetic")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert roofline_plot([], 50_000.0, 4_000.0, tmp_path / "empty.png", "ceilings only").exists()


# --- 8-bit tensor cores (FP8: QGMMA, INT8: IGMMA) ---------------------------------


def fp8_point(dtype: str = "e4m3", n: int = 8192) -> Point:
    return catalogue.point("tc_fp8_tma_store", Shape.square(n), dtype=dtype)


def int8_point(n: int = 4096) -> Point:
    return catalogue.point("tc_int8_wgmma", Shape.square(n), dtype="int8")


def with_tensor_columns(page: str, values: dict[str, str]) -> str:
    """The synthetic raw page with one more column per counter of ``values`` (units row: empty)."""
    lines = page.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    rows = list(csv.reader(lines[first:]))
    rows[0] += list(values)
    rows[1] += [""] * len(values)  # --print-units base: a plain count has no unit
    for row in rows[2:]:
        row += list(values.values())
    out = lines[:first] + [",".join(f'"{cell}"' for cell in row) for row in rows]
    return "\n".join(out) + "\n"


def test_8bit_kernels_ask_for_the_8bit_tensor_counters_and_16bit_ones_do_not() -> None:
    for point in (fp8_point(), fp8_point("e4m3-bf16"), int8_point()):
        assert ncu.metrics.metrics_for(point) == CUDA_CORE_COUNTERS + TENSOR_COUNTERS + ncu.metrics.TENSOR_8BIT
    assert not set(ncu.metrics.TENSOR_8BIT) & set(ncu.metrics.metrics_for(tc_mma_point()))


def test_an_fp8_launch_counts_its_tensor_operations_from_a_raw_page() -> None:
    # The H100 profile of 2026-11-24 at 8192 read 4,362,109,952 operations without the 8-bit
    # counters; with them an FP8 launch adds its 2·M·N·K in src_fp8 and 0 in the other paths.
    model = 2 * 8192**3
    values = {ncu.metrics.TENSOR_BF16: "0", ncu.metrics.TENSOR_FP16: "0", ncu.metrics.TENSOR_TF32: "0",
              ncu.metrics.TENSOR_FP8: f"{model}", ncu.metrics.TENSOR_INT8: "0",
              ncu.metrics.TENSOR_PIPE: "67.4"}  # fmt: skip
    metrics = ncu.parse.parse_raw_csv(with_tensor_columns(SYNTHETIC.read_text(), values)).metrics()
    metrics.update({ncu.metrics.FADD: 0, ncu.metrics.FMUL: 4_362_109_952, ncu.metrics.FFMA: 0})
    r = ncu.metrics.result_from_metrics(fp8_point(), metrics)
    assert r.tensor_flops == model
    assert r.flops_measured == model + 4_362_109_952
    assert r.flops_ratio == pytest.approx(1.004, abs=1e-3)
    assert r.tensor_pipe_pct == 67.4
    assert r.ops_counter.endswith("tensor-core operations (sm__ops_path_tensor_src_*: bf16, fp16, tf32, fp8, int8)")


def test_an_int8_launch_says_its_tensor_operations_are_integer() -> None:
    model = 2 * 4096**3
    metrics = tensor_metrics(0)
    metrics.update({ncu.metrics.TENSOR_FP8: 0, ncu.metrics.TENSOR_INT8: model})
    r = ncu.metrics.result_from_metrics(int8_point(), metrics)
    assert r.tensor_flops == model
    assert "int8 ones are integer" in r.ops_counter


def test_an_fp8_launch_without_the_fp8_value_says_what_its_total_lacks() -> None:
    metrics = tensor_metrics(0)
    metrics.update({ncu.metrics.TENSOR_FP8: None, ncu.metrics.TENSOR_INT8: 0})
    r = ncu.metrics.result_from_metrics(fp8_point(), metrics)
    assert r.tensor_flops is None
    assert "the tensor-core products are not in it" in r.ops_counter


def test_a_missing_8bit_counter_is_named_as_a_tensor_counter() -> None:
    error = ncu.parse.ncu_failure(f"==ERROR== Failed to find metric {ncu.metrics.TENSOR_FP8}\n", 1)
    assert isinstance(error, ProfilerError)
    assert ncu.metrics.TENSOR_FP8 in str(error) and "tensor cores" in str(error)
