"""The CPU baselines are kernels like the others (issue 52): `run` takes them,
`kernels` lists them in their own group, and a misspelt id is compared with
every id; a kernel suggested for a size it is refused must take that size;
--block is refused where it cannot apply. No GPU needed."""

from __future__ import annotations

import json
import re
import sys

import pytest
from typer.testing import CliRunner

from conftest import needs_numba
from gemmlab.backends import cpu
from gemmlab.cli.app import app
from gemmlab.core.dtypes import TOLERANCE
from gemmlab.core.errors import ConstraintError
from gemmlab.core.shapes import MAX_INDEX, Shape
from gemmlab.kernels import catalogue
from test_error_messages import error_line as _error_line

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def error_line(result, code: int = 2) -> str:
    """The one line of a clean error (test_error_messages.error_line), exit code 2 unless told."""
    return _error_line(result, code)


@pytest.fixture
def without_numba(monkeypatch: pytest.MonkeyPatch):
    """numba made unimportable, and the compiled kernels forgotten so that the import is tried again."""
    cpu._compiled.cache_clear()
    monkeypatch.setitem(sys.modules, "numba", None)
    yield
    cpu._compiled.cache_clear()


# --- run ----------------------------------------------------------------------


@needs_numba
def test_run_cpu_naive_runs_on_the_cpu_and_is_verified() -> None:
    result = invoke("run", "cpu_naive", "--size", "64", "--seed", "3")
    assert result.exit_code == 0, result.output
    assert "cpu_naive" in result.output and "on the CPU" in result.output
    assert "time (median) [ms]" in result.output  # a unit, not swallowed as markup
    checked = re.search(r"check against the reference\s*│\s*(\S+) \(tolerance (\S+)\)", result.output)
    assert checked, result.output
    assert float(checked.group(1)) <= float(checked.group(2)) == TOLERANCE["float32"]


@needs_numba
def test_run_cpu_kernel_as_json() -> None:
    result = invoke("run", "cpu_blocked", "--m", "37", "--n", "70", "--k", "129", "--dtype", "int32", "--json")
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)
    assert (row["kernel"], row["backend"], row["dtype"]) == ("cpu_blocked", "cpu", "int32")
    assert (row["m"], row["n"], row["k"]) == (37, 70, 129)
    assert row["error"] == 0.0  # int32 products are exact
    assert row["timing"]["reps"] >= 3 and row["timing"]["median_ms"] > 0 and row["gflops"] > 0


def test_run_cpu_blas_needs_no_numba(without_numba: None) -> None:
    result = invoke("run", "cpu_blas", "--size", "32", "--json")
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)
    assert row["kernel"] == "cpu_blas" and row["error"] <= TOLERANCE["float32"]


@pytest.mark.parametrize("kernel", cpu.NUMBA_KERNELS)
def test_run_without_numba_names_the_extra(without_numba: None, kernel: str) -> None:
    line = error_line(invoke("run", kernel, "--size", "64"))
    assert "numba is not installed" in line and "pip install 'gemmlab[cpu]'" in line, line


def test_run_refuses_gpu_options_for_a_cpu_kernel() -> None:
    line = error_line(invoke("run", "cpu_blas", "--size", "64", "--flush-l2", "--config", "X=1"))
    assert "cpu_blas runs on the CPU" in line and "--config, --flush-l2" in line, line
    assert "gemmlab sweep --kernels cpu_blas,tiled" in line
    # A CPU kernel among a GPU kernel's --vs is refused before the GPU is looked for (no GPU here: exit 3).
    line = error_line(invoke("run", "tiled", "--size", "64", "--vs", "naive,cpu_naive"))
    assert "cpu_naive runs on the CPU" in line and "--vs" in line, line


def test_run_refuses_a_cpu_size_the_host_memory_cannot_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    memory = 10**9
    monkeypatch.setattr(cpu, "host_memory_bytes", lambda: memory)
    largest = cpu.largest_square("float32", memory)
    assert cpu.bytes_needed(Shape.square(largest), "float32") <= memory
    assert cpu.bytes_needed(Shape.square(largest + 1), "float32") > memory
    line = error_line(invoke("run", "cpu_blas", "--size", str(largest + 1)))
    assert "host memory" in line and f"the largest square size that fits is {largest:,}" in line, line
    with pytest.raises(ConstraintError, match="host memory"):
        cpu.run_cpu("cpu_blas", Shape.square(largest + 1))  # before anything is allocated
    assert cpu.BACKEND.violations("cpu_blas", Shape.square(largest + 1), 0, "float32")
    assert not cpu.BACKEND.violations("cpu_blas", Shape.square(largest), 0, "float32")


# --- kernels --------------------------------------------------------------------


def test_kernels_json_lists_the_cpu_baselines() -> None:
    result = invoke("kernels", "--json")
    assert result.exit_code == 0, result.output
    rows = {r["id"]: r for r in json.loads(result.stdout)}
    for kernel in cpu.CPU_KERNELS:
        assert rows[kernel]["backend"] == "cpu" and rows[kernel]["dtypes"] == list(cpu.CPU_DTYPES)
        assert rows[kernel]["block_edges"] == []
    assert rows["tiled"]["backend"] == "nvrtc"
    assert any("numba" in c for c in rows["cpu_naive"]["constraints"])
    assert not any("numba" in c for c in rows["cpu_blas"]["constraints"])


def test_kernels_lists_the_cpu_baselines_in_their_own_group(without_numba: None, monkeypatch) -> None:
    from gemmlab.cli.app import console

    # Wide enough that no cell wraps. The console read COLUMNS once, when it was made (pytest-xdist's
    # workers export COLUMNS=80), so its width is set on it rather than through the environment.
    monkeypatch.setattr(console, "_width", 250)
    result = runner.invoke(app, ["kernels"])
    assert result.exit_code == 0, result.output
    gpu_part, _, cpu_part = result.output.partition("CPU baselines: run on this host's CPU")
    assert cpu_part, result.output
    ids = lambda text: set(re.findall(r"^│ (\S+) ", text, flags=re.MULTILINE))
    assert ids(cpu_part) == set(cpu.CPU_KERNELS)
    assert not ids(gpu_part) & set(cpu.CPU_KERNELS) and "tiled" in ids(gpu_part)
    assert "numba (the cpu extra, not installed: pip install 'gemmlab[cpu]')" in cpu_part


# --- suggestions ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "meant"), [("cpu_nave", "cpu_naive"), ("cpu_blocke", "cpu_blocked"), ("sgemm_skiny", "sgemm_skinny")]
)
def test_a_misspelt_id_is_compared_with_every_id(typed: str, meant: str) -> None:
    line = error_line(invoke("run", typed, "--size", "64"))
    assert f"Unknown kernel '{typed}'. Did you mean {meant}," in line, line


def _named_kernels(fix: str) -> list[tuple[str, int | None]]:
    """The kernels a fix suggests, each with the block edge it names (None: the kernel's default)."""
    found = re.findall(r"use `(\w+)`(?: with --block (\d+))?", fix)
    return [(name, int(edge) if edge else None) for name, edge in found]


# Shapes that each break some kernel's rule: a multiple of no edge, a grid
# over 65535 blocks along M, skinny, and K too short for 16-byte rows.
AWKWARD = [Shape.square(1000), Shape(3_000_000, 1, 1), Shape(3_000_000, 32, 32), Shape(9, 4096, 4096),
           Shape(64, 64, 7), Shape(1023, 1, 1025)]  # fmt: skip


@pytest.mark.parametrize("shape", AWKWARD, ids=str)
def test_a_suggested_kernel_takes_the_shape(shape: Shape) -> None:
    """Every kernel a refusal names takes the shape it was refused, at the edge it names."""
    suggested = 0
    for spec in catalogue.CATALOGUE:
        try:
            catalogue.point(spec.id, shape)
        except ConstraintError as refused:
            for name, edge in _named_kernels(refused.fix):
                catalogue.point(name, shape, edge, spec.dtypes[0])  # raises if it cannot take it
                suggested += 1
    assert suggested, f"no refusal at {shape} named a kernel"


def test_a_size_over_the_index_limit_names_no_kernel() -> None:
    line = error_line(invoke("run", "tiled", "--size", "99999999999"))
    assert "tiled_any_size" not in line and "No GPU kernel takes it" in line, line
    assert str(int(MAX_INDEX**0.5)) in line  # 46340, the largest square
    largest = Shape.square(46340)
    assert not catalogue.get("tiled_any_size").violations(largest, 32, "float32")
    assert catalogue.get("tiled_any_size").violations(Shape.square(46341), 32, "float32")


def test_the_alternative_is_named_only_when_it_takes_the_shape() -> None:
    with pytest.raises(ConstraintError) as tiled:
        catalogue.point("tiled", Shape.square(1000), 16)
    assert "`tiled_any_size`" in tiled.value.fix
    # tiled_any_size cannot take 3,000,000 rows (93,750 blocks along grid y); another of its family is named.
    assert catalogue.get("tiled_any_size").violations(Shape(3_000_000, 1, 1), 32, "float32")
    with pytest.raises(ConstraintError) as naive:
        catalogue.point("naive", Shape(3_000_000, 1, 1))
    named = _named_kernels(naive.value.fix)
    assert named and named[0][0] != "tiled_any_size", naive.value.fix


# --- --block ------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["cpu_naive", "sgemm_coalesced", "tc_mma"])
def test_block_is_refused_for_a_kernel_without_an_edge(kernel: str) -> None:
    line = error_line(invoke("run", kernel, "--size", "64", "--block", "16"))
    assert line == (
        f"error: {kernel} has no block edge to choose, so --block does not apply to it. "
        "Leave out --block for it, or declare a block parameter (docs/user-kernels.md)."
    )


@pytest.mark.parametrize("edge", ["0", "-4"])
def test_a_block_edge_below_one_lists_the_kernels_edges(edge: str) -> None:
    line = error_line(invoke("run", "tiled", "--size", "64", "--block", edge))
    assert "positive" in line and "smaller" not in line, line
    listed = ", ".join(map(str, catalogue.get("tiled").block_edges))
    assert f"from 1 to {catalogue.get('tiled').max_edge}; its listed ones are {listed}." in line, line


@pytest.mark.parametrize("command", ["compile", "occupancy"])
def test_compile_and_occupancy_name_a_cpu_baseline_and_the_command_that_runs_it(command: str) -> None:
    line = error_line(invoke(command, "cpu_naive", "--arch", "sm_90"))
    assert "cpu_naive is a CPU baseline" in line and "`gemmlab run cpu_naive --size 256`" in line, line
    assert "Unknown kernel" not in line


@pytest.mark.parametrize(("edge", "says"), [("0", "is not positive"), ("64", "is over tiled's largest, 32")])
@pytest.mark.parametrize("command", ["compile", "occupancy"])
def test_an_edge_off_either_side_of_the_range_gets_the_fix_for_that_side(command: str, edge: str, says: str) -> None:
    line = error_line(invoke(command, "tiled", "--arch", "sm_90", "--block", edge))
    assert says in line and "Give --block from 1 to 32" in line and "smaller" not in line, line
