"""The Python API (gemmlab.api): what a notebook does without the command line."""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

import gemmlab.api as lab
from conftest import needs_numba
from gemmlab.api.compile import chosen_target
from gemmlab.cli import app
from gemmlab.core import gpu
from gemmlab.core.errors import ConstraintError, DeclarationError, GemmlabError, NoGPUError
from gemmlab.core.extras import MissingExtra
from gemmlab.kernels import catalogue

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_a_kernel_by_id_by_path_and_by_the_id_of_a_path_read_before() -> None:
    assert lab.kernel("tiled").spec is catalogue.get("tiled")
    mine = lab.kernel(EXAMPLES / "naive_define" / "matmul.toml")
    assert mine.id == "naive_define/matmul"
    assert lab.kernel("naive_define/matmul").spec is mine.spec
    assert "naive_define/matmul" in mine._repr_html_()


def test_declare_builds_the_same_kernel_as_the_toml_beside_the_file(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(lab.kernels, "DECLARED_DIR", tmp_path)
    source = EXAMPLES / "tiled_template" / "matmul.cu"
    toml = lab.kernel(source).spec
    mine = lab.declare(
        source, function=toml.function, problem="matmul", dtypes=["float32"], arguments=list(toml.arguments),
        grid=["cdiv(N, TILE)", "cdiv(M, TILE)"], block=["TILE", "TILE"], edge="TILE", parameters={"TILE": [16, 8]},
    )  # fmt: skip
    assert mine.id == "tiled_template/matmul" == toml.id
    assert mine.spec.block_edges == (16, 8) and mine.spec.declaration.is_relative_to(tmp_path)
    # Declared again for the same file, the newest declaration is the one the id finds.
    assert lab.kernel("tiled_template/matmul").spec is mine.spec
    assert lab.declare(source, **_keys(mine)).spec.declaration == mine.spec.declaration
    assert lab.kernel(source).spec.declaration == source.with_suffix(".toml")


def _keys(kernel: lab.Kernel) -> dict:
    return dict(function=kernel.spec.function, problem="matmul", dtypes=["float32"],
                arguments=list(kernel.spec.arguments), grid=["cdiv(N, TILE)", "cdiv(M, TILE)"],
                block=["TILE", "TILE"], edge="TILE", parameters={"TILE": [16, 8]})  # fmt: skip


def test_declare_refuses_what_toml_cannot_say(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(lab.kernels, "DECLARED_DIR", tmp_path)
    source = EXAMPLES / "naive_define" / "matmul.cu"
    with pytest.raises(DeclarationError, match="is not a value a declaration takes"):
        lab.declare(source, function="x", grid=[1.5])
    with pytest.raises(DeclarationError, match="does not exist"):
        lab.declare(tmp_path / "nothing.cu", function="x")
    with pytest.raises(DeclarationError, match="missing"):  # the declaration's own checks still run
        lab.declare(source, function="matmul")


def test_compile_needs_no_gpu() -> None:
    resources = lab.kernel(EXAMPLES / "naive_define" / "matmul.toml").compile(arch="sm_90", block=16)
    assert resources["arch"] == "sm_90" and resources["registers"] > 0 and resources["block_edge"] == 16


def _no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_gpu():
        raise NoGPUError("No usable NVIDIA driver or GPU on this machine (test).", gpu.NO_GPU_FIX)

    monkeypatch.setattr(gpu, "_cupy", no_gpu)


def test_compile_refuses_the_edges_the_command_line_refuses_with_its_error(monkeypatch) -> None:
    pytest.importorskip("cuda.core")
    _no_gpu(monkeypatch)
    with pytest.raises(ConstraintError) as python:
        lab.kernel("tiled").compile(arch="sm_80", block=64)
    terminal = CliRunner().invoke(app, ["compile", "tiled", "--arch", "sm_80", "--block", "64"])
    assert terminal.exit_code == python.value.exit_code == 2
    assert f"error: {python.value}" == " ".join(terminal.output.split())
    assert "The block edge 64 is over tiled's largest" in str(python.value)
    # What the command line compiles, Python compiles to the same row.
    terminal = CliRunner().invoke(app, ["compile", "tiled", "--arch", "sm_80", "--block", "16", "--json"])
    assert [lab.kernel("tiled").compile(arch="sm_80", block=16)] == json.loads(terminal.stdout)


def test_compile_without_an_arch_takes_the_command_lines_target_and_says_which(monkeypatch) -> None:
    pytest.importorskip("cuda.core")
    _no_gpu(monkeypatch)
    row = lab.kernel("tiled").compile()
    assert row["arch"] == "sm_90" == chosen_target(None)[0]
    assert row["block_edge"] == catalogue.get("tiled").default_block_edge()
    # A kernel of architecture-specific instructions: the sm_90a its compile took, as the command line has it.
    assert lab.kernel("tc_wgmma").compile()["arch"] == "sm_90a"
    # With a GPU, its architecture.
    monkeypatch.setattr(gpu, "describe", lambda index: SimpleNamespace(arch="sm_80"))
    assert lab.kernel("tiled").compile(block=16)["arch"] == "sm_80"


def test_run_needs_one_shape() -> None:
    with pytest.raises(DeclarationError, match="one square size or all of m, n and k"):
        lab.run("tiled", 256, m=3)


@needs_numba
def test_a_sweep_stores_and_resumes_and_comes_back_as_a_frame(tmp_path) -> None:
    pytest.importorskip("pandas")
    db = tmp_path / "lab.sqlite"
    first = lab.sweep(["cpu_naive"], sizes=[24, 32], db=db, reps=3)
    assert len(first.summary.done) == 2
    again = lab.sweep(["cpu_naive"], sizes=[24, 32], db=db, reps=3)
    assert len(again.summary.skipped_existing) == 2 and not again.summary.done
    frame = first.frame()
    assert list(frame["m"]) == [24, 32] and (frame["gflops"] > 0).all()
    assert list(frame.columns[:3]) == ["kernel", "m", "n"]
    assert len(lab.results(db, kernel="cpu_naive")) == 2 and lab.failures(db).empty
    assert "2 measured and stored" in first._repr_html_()


def test_a_sweep_without_shapes_is_refused(tmp_path) -> None:
    with pytest.raises(DeclarationError, match="needs sizes or shapes"):
        lab.sweep(["cpu_naive"], db=tmp_path / "x.sqlite")


def test_frames_without_pandas_name_the_extra(tmp_path, monkeypatch) -> None:
    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name.split(".")[0] == "pandas":
            raise ImportError("No module named 'pandas'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    monkeypatch.delitem(__import__("sys").modules, "pandas", raising=False)
    with pytest.raises(MissingExtra, match=r"pip install 'gemmlab\[pandas\]'"):
        lab.Results([]).to_pandas()
    assert issubclass(MissingExtra, GemmlabError)


def test_a_result_shows_as_a_table() -> None:
    data = {
        "kernel": "tiled", "m": 64, "n": 64, "k": 64, "block_edge": 16, "dtype": "float32", "gflops": 10.0,
        "gbytes_per_s": 1.0, "metric": "gflops", "error": 1e-7, "tolerance": 1e-4, "grid": [4, 4, 1],
        "block": [16, 16, 1], "resources": {"registers": 30, "smem_bytes": 2048}, "ratio_to_baseline": 0.5,
        "baseline_name": "cuBLAS", "warnings": ["short kernel"], "device": {"name": "H100"},
        "timing": {"median_ms": 0.05, "min_ms": 0.04, "max_ms": 0.06, "reps": 5, "graph_launches": 0},
    }  # fmt: skip
    shown = lab.Result(data)._repr_html_()
    assert "10.0" in shown and "50.0%" in shown and "short kernel" in shown and "on H100" in shown
    assert lab.Result(data).gflops == 10.0 and lab.Result(data).row()["median_ms"] == 0.05
