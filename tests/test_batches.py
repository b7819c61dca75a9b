"""Many kernels in one command (issue 52): `compile`, `occupancy` and `check`
give each kernel a status, show every good kernel's results, go on past a
failure and end with a count of the failures. Compiles are real (NVRTC needs
no GPU); `check` is read from recorded compute-sanitizer output on the CPU,
and run for real in the GPU test at the end."""

from __future__ import annotations

import json
import re
import stat
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import needs_tool
from gemmlab.api.compile import catalogue_for
from gemmlab.cli import app
from gemmlab.core import gpu
from gemmlab.core.errors import GemmlabError, NoGPUError, VerificationError
from gemmlab.kernels import catalogue
from gemmlab.measure import run as run_module
from gemmlab.measure import sanitize
from gemmlab.measure.sanitizer_findings import KernelVerdict, SanitizerRun, kernel_check

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
runner = CliRunner()


@pytest.fixture(autouse=True)
def fresh_declarations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalogue, "_DECLARED", {})


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def kernel(folder: Path, cu: str, toml: str) -> Path:
    """A user's kernel written into ``folder``: its .cu and its declaration."""
    folder.mkdir(parents=True)
    (folder / "matmul.cu").write_text(cu)
    (folder / "matmul.toml").write_text(toml)
    return folder / "matmul.toml"


def tiled(tmp_path: Path, name: str = "good") -> Path:
    """The tiled template example (edges 16, 8, 32), under a folder name of its own."""
    example = EXAMPLES / "tiled_template"
    return kernel(tmp_path / name, (example / "matmul.cu").read_text(), (example / "matmul.toml").read_text())


def broken(tmp_path: Path) -> Path:
    """A kernel NVRTC refuses: `sum` is never declared."""
    example = EXAMPLES / "broken"
    return kernel(tmp_path / "bad", (example / "matmul.cu").read_text(), (example / "matmul.toml").read_text())


ROWS_CU = """\
extern "C" __global__ void matmul_rows(const float *A, const float *B, float *C, int M, int N, int K)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    for (int col = 0; col < N; col++) {
        float sum = 0.0f;
        for (int i = 0; i < K; i++) sum += A[row * K + i] * B[i * N + col];
        C[row * N + col] = sum;
    }
}
"""
ROWS_TOML = """\
function = "matmul_rows"
problem = "matmul"
dtypes = ["float32"]
arguments = ["A", "B", "C", "M", "N", "K"]
grid = ["cdiv(M, 128)"]
block = ["128"]
"""


def missing_sync(tmp_path: Path, cu: str | None = None) -> Path:
    """The example without its second __syncthreads (a race), or ``cu`` under its declaration."""
    example = EXAMPLES / "faulty" / "missing_sync"
    return kernel(tmp_path / "racy", cu or (example / "matmul.cu").read_text(), (example / "matmul.toml").read_text())


def no_edge(tmp_path: Path) -> Path:
    """A kernel with a fixed block of 128 threads: no block edge to choose."""
    return kernel(tmp_path / "rows", ROWS_CU, ROWS_TOML)


def statuses(output: str) -> dict[str, str]:
    """Each status line's kernel and what follows it ('ok', or 'error: ...')."""
    found = {}
    for line in output.splitlines():
        m = re.match(r"^(\S+): (ok|error: .*)$", line)
        if m and not line.startswith("error:"):
            found[m.group(1)] = m.group(2)
    return found


def assert_no_traceback(result) -> None:
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception


# -- compile --------------------------------------------------------------------------------


def test_a_compile_error_hides_no_other_kernels_result(tmp_path: Path) -> None:
    good, bad, rows = tiled(tmp_path), broken(tmp_path), no_edge(tmp_path)
    result = invoke("compile", good, bad, rows, "--arch", "sm_90", "--json")
    assert_no_traceback(result)
    assert result.exit_code == 2
    compiled = json.loads(result.stdout)
    assert sorted((r["kernel"], r["block_edge"]) for r in compiled) == [
        ("good/matmul", 8), ("good/matmul", 16), ("good/matmul", 32), ("rows/matmul", 0),
    ]  # fmt: skip
    assert all(r["registers"] > 0 for r in compiled)
    found = statuses(result.output)
    assert found[str(good)] == "ok" and found[str(rows)] == "ok"
    assert found[str(bad)].startswith("error: NVRTC could not compile") and "matmul.cu(11)" in found[str(bad)]
    assert result.stderr.splitlines()[-1].startswith(f"error: 1 of 3 kernels failed: {bad}.")


def test_a_compile_batch_prints_the_table_of_the_good_ones(tmp_path: Path) -> None:
    good, bad = tiled(tmp_path), broken(tmp_path)
    result = invoke("compile", bad, good, "--arch", "sm_90")
    assert_no_traceback(result)
    assert result.exit_code == 2
    table = [line for line in result.stdout.splitlines() if "good/mat" in line]
    assert len(table) == 3  # one row per block edge
    assert "1 of 2 kernels failed" in result.output


def test_one_kernel_that_fails_is_its_own_error_line(tmp_path: Path) -> None:
    result = invoke("compile", broken(tmp_path), "--arch", "sm_90")
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: NVRTC could not compile"), lines
    assert invoke("compile", tmp_path / "bad" / "matmul.toml", "--arch", "sm_90", "--json").stdout == ""


def test_block_for_a_kernel_without_an_edge_is_refused_in_its_own_status(tmp_path: Path) -> None:
    good, rows = tiled(tmp_path), no_edge(tmp_path)
    result = invoke("compile", good, rows, "--arch", "sm_90", "--block", "16", "--json")
    assert_no_traceback(result)
    assert result.exit_code == 2
    assert [(r["kernel"], r["block_edge"]) for r in json.loads(result.stdout)] == [("good/matmul", 16)]
    assert statuses(result.output)[str(rows)] == (
        "error: rows/matmul has no block edge to choose, so --block does not apply to it. "
        "Leave out --block for it, or declare a block parameter (docs/user-kernels.md)."
    )
    alone = invoke("occupancy", rows, "--arch", "sm_90", "--block", "16")
    assert alone.exit_code == 2 and "has no block edge to choose" in alone.output


def test_compile_without_a_gpu_or_arch_uses_the_default_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_gpu():
        raise NoGPUError("No usable NVIDIA driver or GPU on this machine (test).", gpu.NO_GPU_FIX)

    monkeypatch.setattr(gpu, "_cupy", no_gpu)
    result = invoke("compile", "tiled", "--block", "16", "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["arch"] == "sm_90" and row["block_edge"] == 16
    assert "No usable GPU here, so the target is sm_90 (Hopper); choose another with --arch" in result.output


def test_a_hopper_kernel_for_another_target_says_how_to_ask_for_sm_90a() -> None:
    result = invoke("compile", "tc_wgmma", "--arch", "sm_80")
    assert result.exit_code == 2
    line = result.output.strip()
    assert "Hopper-only instructions" in line and "sm_90a only" in line and "`--arch sm_90a`" in line


def test_the_catalogue_for_a_target_keeps_the_candidates_and_names_what_it_leaves_out() -> None:
    every = [*catalogue.kernel_ids(), *catalogue.candidate_ids(), *catalogue.peer_ids()]
    kept, line = catalogue_for("sm_90a", None, None)
    assert set(catalogue.candidate_ids()) <= set(kept)
    # What NVRTC does not compile is named, and why, in one line; nothing else is missing.
    assert set(every) - set(kept) == set(catalogue.peer_ids())
    assert line.startswith(f"Left out {len(catalogue.peer_ids())} of {len(every)} catalogue kernels: ")
    assert "\n" not in line and all(peer in line for peer in catalogue.peer_ids())
    assert "Triton rungs, built by their own compiler" in line
    kept, line = catalogue_for("sm_80", None, None)
    assert "tc_wgmma" not in kept and "tc_mma" in kept
    assert re.search(r"tc_wgmma[^;]*\(sm_90a only\)", line), line
    kept, line = catalogue_for("sm_90a", None, "int32")
    assert kept and all("int32" in catalogue.get(k).dtypes for k in kept)
    assert "(no int32 version)" in line


def test_a_python_kernel_is_named_by_its_library_and_a_peer_by_its_model() -> None:
    cupy_kernel = str(EXAMPLES / "cupy_matmul" / "matmul.py")
    for command in ("compile", "occupancy"):
        result = invoke(command, cupy_kernel, "--arch", "sm_90")
        assert result.exit_code == 2
        assert "CuPy" in result.output and "Triton" not in result.output, result.output
    result = invoke("compile", "triton_tc_tma", "--arch", "sm_90a")
    assert result.exit_code == 2
    assert "triton_tc_tma is a Triton rung" in result.output and "None" not in result.output


# -- occupancy ------------------------------------------------------------------------------


def test_an_edge_too_big_for_an_old_gpu_is_a_column_that_says_so(tmp_path: Path) -> None:
    good = tiled(tmp_path)
    result = invoke("occupancy", good, "--cc", "1.2", "--json")
    assert result.exit_code == 0, result.output
    columns = {c["block"]: c for c in json.loads(result.stdout)}
    assert set(columns) == {"8x8", "16x16", "32x32"}
    assert columns["32x32"] == {
        "kernel": "good/matmul",
        "block": "32x32",
        "over_limit": "1024 threads per block is over the limit of 512 on compute capability 1.2. "
        "Use a smaller block (e.g. a smaller block_edge).",
    }
    # The edges that fit are worked under 1.2's rules: 512 threads per block at most.
    assert columns["16x16"]["threads_per_block"] == 256 and columns["8x8"]["threads_per_block"] == 64
    assert all(columns[e]["device"]["max_threads_per_block"] == 512 for e in ("8x8", "16x16"))
    table = invoke("occupancy", good, "--cc", "1.2")
    assert table.exit_code == 0
    # The 32x32 column: '-' for each of the calculator's 14 rows, then the reason, wrapped in its cell.
    assert table.stdout.count(" - │") == 14 and "Over the device's" in table.stdout
    assert "1024 threads per" in table.stdout
    # Every edge over the limit leaves no table: the kernel's error, alone.
    alone = invoke("occupancy", good, "--cc", "1.2", "--block", "32")
    assert alone.exit_code == 2 and "over the limit of 512" in alone.output and alone.stdout == ""


def test_occupancy_of_several_kernels_goes_on_past_one_that_fails(tmp_path: Path) -> None:
    good, bad = tiled(tmp_path), broken(tmp_path)
    result = invoke("occupancy", good, bad, "tiled", "--arch", "sm_90", "--block", "16")
    assert_no_traceback(result)
    assert result.exit_code == 2
    assert "Occupancy of good/matmul, sm_90 compile" in result.stdout
    assert "Occupancy of tiled, sm_90 compile" in result.stdout
    found = statuses(result.output)
    assert found[str(good)] == "ok" and found["tiled"] == "ok" and "NVRTC could not compile" in found[str(bad)]
    assert "1 of 3 kernels failed" in result.output


# -- check: the child, and its output read back -----------------------------------------------


def test_the_child_goes_on_past_a_wrong_result_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    ran = []

    def launches(kernel, shape, edge, *, launches):
        ran.append(shape.m)
        if shape.m == 16:
            raise VerificationError("C differs from the reference at 12\nof 256 elements.", "Fix the kernel.")

    monkeypatch.setattr(run_module, "checked_launches", launches)
    assert sanitize._child(["k:8:16:16:16", "k:8:32:32:32"]) == 0
    assert ran == [16, 32]  # the wrong result did not stop the next point
    assert capsys.readouterr().out.splitlines() == [
        "[gemmlab] failed k:8:16:16:16: VerificationError: C differs from the reference at 12 of 256 elements. "
        "Fix the kernel.",
        "[gemmlab] ran k:8:32:32:32",
    ]


def test_after_a_fault_the_child_stops_in_one_line(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    def launches(kernel, shape, edge, *, launches):
        raise RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")

    monkeypatch.setattr(run_module, "checked_launches", launches)
    assert sanitize._child(["k:8:16:16:16", "k:8:32:32:32"]) == 1
    out = capsys.readouterr().out
    fault = "RuntimeError: cudaErrorIllegalAddress: an illegal memory access was encountered"
    assert out == f"[gemmlab] failed k:8:16:16:16: {fault}\n"  # one line, and the second point never ran


# racecheck's output for a tiled kernel without its second __syncthreads (the
# format of compute-sanitizer 2025.x), after the child's lines for two points
# whose results were also wrong. "1 hazard displayed (1 error, ...)": singular.
RACECHECK_OUTPUT = """\
========= COMPUTE-SANITIZER
[gemmlab] failed {p1}: VerificationError: C differs from the reference at 48 of 1024 elements.
[gemmlab] failed {p2}: VerificationError: C differs from the reference at 7 of 4096 elements.
========= Error: Race reported between Write access at matmul_tiled(const float *, const float *, float *, int, int, int)+0x1f0 in matmul.cu:19
=========     and Read access at matmul_tiled(const float *, const float *, float *, int, int, int)+0x2c0 in matmul.cu:23 [6144 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""  # noqa: E501
MEMCHECK_OUTPUT = """\
========= COMPUTE-SANITIZER
[gemmlab] ran {p1}
[gemmlab] ran {p2}
========= ERROR SUMMARY: 0 errors
"""
P1, P2 = "/k/matmul.toml:32:32:32:32", "/k/matmul.toml:32:64:64:64"


def test_a_race_with_a_wrong_result_is_read_as_both() -> None:
    race = kernel_check(
        "k/matmul", "racecheck", [([P1, P2], SanitizerRun(RACECHECK_OUTPUT.format(p1=P1, p2=P2), 0))], 60
    )
    assert race.reports == 1 and race.not_run == 0 and not race.clean
    assert [p for p, _ in race.failed] == [P1, P2]
    assert race.failed[0][1] == "VerificationError: C differs from the reference at 48 of 1024 elements."
    assert "matmul.cu:19" in race.findings() and "COMPUTE-SANITIZER" not in race.findings()
    assert "[gemmlab]" not in race.findings()  # the failed points are the verification's, shown apart
    mem = kernel_check("k/matmul", "memcheck", [([P1, P2], SanitizerRun(MEMCHECK_OUTPUT.format(p1=P1, p2=P2), 0))], 60)
    assert mem.clean
    verdict = KernelVerdict("k/matmul", (mem, race))
    assert verdict.verification == "2 of 2 points failed"
    assert verdict.problems() == ["racecheck: 1 report", "verification: 2 of 2 points failed"]
    assert str(verdict.error()).startswith("Not clean: racecheck: 1 report; verification: 2 of 2 points failed.")
    assert KernelVerdict("k/matmul", (mem,)).error() is None


def test_a_run_that_stopped_counts_the_points_it_never_reached() -> None:
    output = f"[gemmlab] ran {P1}\n[gemmlab] the run under the sanitizer was killed by signal 9 (SIGKILL)\n"
    check = kernel_check("k/matmul", "memcheck", [([P1, P2], SanitizerRun(output, -9))], 60)
    assert check.reports is None and check.not_run == 1 and check.bad_runs == 1
    verdict = KernelVerdict("k/matmul", (check,))
    assert verdict.verification == "1 not run"
    assert verdict.problems()[0].startswith("memcheck: no summary")


# A stand-in for compute-sanitizer: replays the recorded output above for the
# points it is given, racecheck's for the racy kernel and clean runs otherwise.
FAKE = """#!{python}
import sys
args = sys.argv[1:]
tool = args[args.index("--tool") + 1]
points = [a for a in args[args.index("gemmlab.measure.sanitize") + 1:] if not a.startswith("--")]
racy = tool == "racecheck" and "racy" in points[0]
print("========= COMPUTE-SANITIZER")
for p in points:
    if racy:
        print(f"[gemmlab] failed {{p}}: VerificationError: C differs from the reference at 48 of 1024 elements.")
    else:
        print(f"[gemmlab] ran {{p}}")
if racy:
    print({race!r})
print("========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)" if racy else
      "========= ERROR SUMMARY: 0 errors")
"""


@pytest.fixture
def fake_sanitizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    race = "\n".join(RACECHECK_OUTPUT.splitlines()[3:6])
    path = tmp_path / "compute-sanitizer"
    path.write_text(FAKE.format(python=sys.executable, race=race))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(sanitize, "find_sanitizer", lambda: str(path))
    return path


def test_check_reports_every_tool_per_kernel_whatever_the_verification(tmp_path: Path, fake_sanitizer) -> None:
    racy = missing_sync(tmp_path)
    good = tiled(tmp_path)
    result = invoke("check", racy, good, "nope", "--tool", "memcheck", "--tool", "racecheck", "--jobs", "1", "--json")
    assert_no_traceback(result)
    assert result.exit_code == 2
    found = {v["kernel"]: v for v in json.loads(result.stdout)}
    assert set(found) == {"racy/matmul", "good/matmul"}
    assert found["good/matmul"]["clean"] and found["good/matmul"]["verification"] == "ok"
    mine = found["racy/matmul"]
    assert not mine["clean"]
    assert mine["tools"]["racecheck"]["reports"] == 1 and mine["tools"]["memcheck"]["reports"] == 0
    assert mine["verification"].endswith("points failed") and mine["failed_points"]
    assert mine["problems"][0] == "racecheck: 1 report"
    lines = statuses(result.output)
    assert lines[str(good)] == "ok" and lines[str(racy)].startswith("error: Not clean: racecheck: 1 report;")
    assert lines["nope"].startswith("error: Unknown kernel 'nope'")
    assert result.stderr.splitlines()[-1].startswith(f"error: 2 of 3 kernels failed: {racy}, nope.")
    # The findings: the sanitizer's lines at the kernel's source, the failed runs in one line each.
    assert "matmul.cu:19" in result.output and "VerificationError: C differs" in result.output


def test_check_table_has_a_verdict_per_kernel(tmp_path: Path, fake_sanitizer) -> None:
    racy = missing_sync(tmp_path)
    result = runner.invoke(app, ["check", str(racy), "--tool", "racecheck", "--jobs", "1"], terminal_width=200)
    assert result.exit_code == 2
    row = next(line for line in result.stdout.splitlines() if "racy/matmul" in line)
    assert re.search(r"points failed.*│ 1 / \d+ .*│ not clean", row), row
    assert "reports -1" not in result.output and "Traceback" not in result.output
    # One kernel: its own error is the last line, as for any command.
    assert result.stderr.splitlines()[-1].startswith("error: Not clean: racecheck: 1 report; verification: ")


def test_a_kernel_out_of_time_is_its_own_error_and_the_api_raises_when_all_are(fake_sanitizer) -> None:
    with pytest.raises(GemmlabError, match="Unknown sanitizer tool"):
        sanitize.check(["tiled"], "leakcheck")
    # naive hangs; tiled finishes at once.
    fake_sanitizer.write_text(
        '#!/bin/sh\ncase "$*" in *naive:*) sleep 30 ;; esac\necho "========= ERROR SUMMARY: 0 errors"\n'
    )
    report = sanitize.check_kernels(["tiled", "naive"], "memcheck", timeout=2, jobs=2)
    assert report.kernel("tiled").reports == 0 and report.kernel("tiled").error is None
    assert "did not finish within 2 s on naive" in str(report.kernel("naive").error)
    with pytest.raises(GemmlabError, match="did not finish within 2 s on naive"):
        sanitize.check(["naive"], "memcheck", timeout=2, jobs=2)


# -- check on the GPU ------------------------------------------------------------------------

needs_sanitizer = needs_tool(sanitize.find_sanitizer, "compute-sanitizer")


@pytest.mark.gpu
@needs_sanitizer
def test_racecheck_names_a_race_that_also_gives_a_wrong_answer(tmp_path: Path) -> None:
    """A tiled kernel without its second __syncthreads and with a wrong result
    as well (it adds 1 to every element): verification fails at every point,
    and racecheck, running on, still names the race at the lines of the file."""
    source = (EXAMPLES / "faulty" / "missing_sync" / "matmul.cu").read_text()
    wrong = source.replace("C[row * N + col] = sum;", "C[row * N + col] = sum + 1.0f;")
    assert wrong != source
    racy = missing_sync(tmp_path, wrong)
    result = invoke("check", racy, "--tool", "racecheck", "--json")
    assert_no_traceback(result)
    assert result.exit_code == 2
    (found,) = json.loads(result.stdout)
    assert found["tools"]["racecheck"]["reports"] > 0, result.output
    assert found["verification"].endswith("points failed") and found["failed_points"]
    assert all(f["error"].startswith("VerificationError: ") for f in found["failed_points"])
    assert re.search(r"\bmatmul\.cu:(19|2\d)\b", result.output), result.output
