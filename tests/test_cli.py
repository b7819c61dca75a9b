"""The CLI answers bad input with one line and a non-zero exit code, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from gemmlab.cli.app import app
from gemmlab.core import gpu
from gemmlab.core.errors import NoGPUError

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def assert_clean_error(result, code: int, *needles: str) -> None:
    text = result.output
    assert result.exit_code == code, text
    assert "Traceback" not in text
    for needle in needles:
        assert needle in text, text


def test_kernels_json_fields() -> None:
    result = invoke("kernels", "--json")
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert {"id", "source_doc", "block_edges", "dtypes"} <= set(rows[0])
    assert any(r["id"] == "tiled" for r in rows)


def test_compile_json_without_gpu() -> None:
    result = invoke("compile", "tiled", "naive", "--arch", "sm_90a", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert {"kernel", "block_edge", "arch", "registers", "smem_bytes", "spill_bytes"} <= set(rows[0])
    assert {r["kernel"] for r in rows} == {"tiled", "naive"}
    assert all(r["arch"] == "sm_90a" and r["spill_bytes"] == 0 for r in rows)


def test_compile_all_leaves_out_what_cannot_target_the_arch() -> None:
    result = invoke("compile", "--arch", "sm_80", "--json")
    assert result.exit_code == 0, result.output
    compiled = {r["kernel"] for r in json.loads(result.stdout)}
    # The candidate rungs too (sgemm_small_tile, tc_any_k): every kernel NVRTC can compile for the target.
    assert {"tiled", "sgemm_multistage", "tc_mma", "sgemm_small_tile"} <= compiled
    assert not compiled & {"tc_wgmma", "tc_warpspecialized", "tc_persistent", "tc_cluster"}
    # Those left out are named in one line, with why.
    (left_out,) = [line for line in result.stderr.splitlines() if line.startswith("Left out ")]
    assert "tc_wgmma" in left_out and "(sm_90a only)" in left_out and "triton_tc_tma" in left_out
    assert "Traceback" not in result.output
    # Named, a kernel that cannot target the architecture is an error, not a silent skip.
    assert_clean_error(invoke("compile", "tc_wgmma", "--arch", "sm_80"), 2, "sm_90a only")


def test_unknown_kernel() -> None:
    assert_clean_error(invoke("run", "tild", "--size", "64"), 2, "Unknown kernel 'tild'", "tiled")


def test_size_the_kernel_cannot_take() -> None:
    assert_clean_error(invoke("run", "tiled", "--size", "1000", "--block", "16"), 2, "not a multiple", "tiled_any_size")


def test_missing_size() -> None:
    assert_clean_error(invoke("run", "tiled"), 2, "A size is needed")
    assert_clean_error(invoke("run", "tiled", "--size", "64", "--m", "3"), 2, "not both")
    # Every product needs K, not only the documents' matmul (K = 1 was once taken silently).
    for kernel_id in ("sgemm_multistage", "tc_persistent"):
        assert_clean_error(invoke("run", kernel_id, "--m", "64", "--n", "64"), 2, "A size is needed")


def test_negative_size() -> None:
    assert_clean_error(invoke("run", "tiled", "--m", "-4", "--n", "8", "--k", "8"), 2, "positive")


def test_block_edge_over_limit() -> None:
    assert_clean_error(invoke("run", "naive", "--size", "64", "--block", "64"), 2, "outside 1..32")


def test_bad_arch() -> None:
    assert_clean_error(invoke("compile", "tiled", "--arch", "hopper"), 2, "not a GPU architecture")


def test_no_gpu_message_names_what_still_works(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_gpu():
        raise NoGPUError("No usable NVIDIA driver or GPU on this machine (test).", gpu.NO_GPU_FIX)

    monkeypatch.setattr(gpu, "_cupy", no_gpu)
    for args in (("run", "tiled", "--size", "64"), ("devices",)):
        assert_clean_error(invoke(*args), 3, "No usable NVIDIA driver", *gpu.WORKS_WITHOUT_GPU)


def test_real_process_without_gpu() -> None:
    """On a machine with no GPU (CI), the installed entry point says so plainly."""
    try:
        gpu.cupy()
        pytest.skip("this machine has a GPU")
    except NoGPUError:
        pass
    proc = subprocess.run([sys.executable, "-m", "gemmlab", "run", "naive", "--size", "64"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr
    assert "work without a GPU" in proc.stderr


def test_occupancy_raw_json() -> None:
    result = invoke("occupancy", "--cc", "9.0", "--threads", "256", "--regs", "32", "--smem", "4096", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key in ("active_blocks", "active_warps", "active_threads", "occupancy", "warps_per_block",
                "regs_per_block", "smem_per_block", "limits", "limiting_factors"):  # fmt: skip
        assert key in data
    assert set(data["limits"]) == {"warps", "registers", "shared_memory", "blocks"}


def test_occupancy_kernel_table() -> None:
    result = invoke("occupancy", "tiled", "--arch", "sm_90", "--block", "8", "--block", "16")
    assert result.exit_code == 0, result.output
    assert "8x8" in result.output and "16x16" in result.output and "Limiting factor" in result.output


def test_occupancy_raw_needs_threads() -> None:
    assert_clean_error(invoke("occupancy", "--cc", "9.0"), 2, "needs --cc and --threads")


def test_occupancy_over_limit() -> None:
    result = invoke("occupancy", "--cc", "9.0", "--threads", "2048")
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_help_lists_the_commands_in_their_order() -> None:
    from gemmlab.cli import app

    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    listed = [line.split()[1] for line in out.splitlines() if line.startswith("│ ") and line.split()[1].isalpha()]
    core = ["doctor", "devices", "kernels", "compile", "run"]
    assert listed == [
        *core,
        "check",
        "stress",
        "occupancy",
        "sweep",
        "reproduce",
        "peak",
        "profile",
        "report",
        "export",
        "tune",
        "grade",
        "distributed",  # a command: Typer lists the groups (dispatch) after the commands
        "dispatch",
    ]


@pytest.mark.parametrize(("command", "words"), [("tune", "[parameters]"), ("sweep", "series, in seconds")])
def test_help_texts_keep_their_brackets_from_rich_markup(command: str, words: str) -> None:
    """Rich reads '[parameters]' or '[s]' in a help text as markup and drops it."""
    result = CliRunner().invoke(app, [command, "--help"], terminal_width=200)
    assert words in " ".join(result.output.split())
