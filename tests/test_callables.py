"""A user's kernel as a Python function (kernels/callables.py, backends/python.py):
declarations read and checked, import failures and missing libraries named,
the backend registered. No GPU needed."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from gemmlab import backends
from gemmlab.backends import python as python_backend
from gemmlab.backends.base import DeviceBackend
from gemmlab.cli import app
from gemmlab.core.errors import ConstraintError, DeclarationError, GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import callables, catalogue
from gemmlab.problems.matmul import MATMUL

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

FUNCTION = """\
def matmul(A, B, C, TILE=16):
    C[...] = A @ B

"""
DECLARATION = {
    "function": "matmul",
    "problem": "matmul",
    "dtypes": ["float32"],
    "arrays": "cupy",
    "parameters": {"TILE": [16, 32]},
    "edge": "TILE",
    "accepts": ["K % TILE == 0"],
}


def written(tmp_path: Path, declaration: dict | None = None, body: str = FUNCTION) -> Path:
    path = tmp_path / "kernel.py"
    text = body + (f"GEMMLAB = {declaration!r}\n" if declaration is not None else "")
    path.write_text(text)
    return path


def test_a_python_file_reads_into_a_kernel_spec(tmp_path: Path) -> None:
    spec = callables.load(written(tmp_path, DECLARATION))
    assert spec.id == f"{tmp_path.name}/kernel" and spec.backend == "python"
    assert spec.problem is MATMUL and spec.declaration == tmp_path / "kernel.py"
    assert spec.block_edges == (16, 32) and spec.default_block_edge() == 16
    assert spec.values(32) == {"TILE": 32} and spec.config is None
    assert spec.callable is not None and spec.callable.__name__ == "matmul"
    assert spec.grid(Shape.square(64), 16) == (0, 0, 0)  # the function picks its own
    assert spec.violations(Shape(64, 64, 48), 32, "float32") == [
        "the declaration accepts only `K % TILE == 0`, false for M = 64, N = 64, K = 48, TILE = 32"
    ]
    with pytest.raises(ConstraintError, match="has no float16 version"):
        spec.check(Shape.square(64), 16, "float16")


def test_parameters_other_than_the_edge_are_its_configuration(tmp_path: Path) -> None:
    body = "def matmul(A, B, C, BLOCK_M, BLOCK_K):\n    pass\n"
    declared = {**DECLARATION, "parameters": {"BLOCK_M": [128, 64], "BLOCK_K": [32, 64]}, "edge": "BLOCK_M"}
    declared.pop("accepts")
    spec = callables.load(written(tmp_path, declared, body))
    assert spec.values(64) == {"BLOCK_M": 64, "BLOCK_K": 32} and spec.config == {"BLOCK_K": 32}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: {**d, "colour": 1}, ["unknown key colour in GEMMLAB", "The keys in GEMMLAB are"]),
        (lambda d: {k: v for k, v in d.items() if k != "arrays"}, ["missing arrays in GEMMLAB"]),
        (lambda d: {**d, "problem": "sort"}, ["unknown problem 'sort'"]),
        (lambda d: {**d, "arrays": "jax"}, ["'arrays'", "'jax' is not a kind of array", "cupy, torch, numba"]),
        (lambda d: {**d, "dtypes": ["bfloat16"]}, ["'dtypes'", "'bfloat16'", "float32, int32, float16"]),
        (lambda d: {**d, "function": "mm"}, ["no function 'mm'", "its functions: matmul"]),
        (lambda d: {**d, "edge": "BLOCK"}, ["'edge'", "'BLOCK' is not one of the parameters (TILE)"]),
        (lambda d: {**d, "parameters": {"TILE": [16, 0]}}, ["['TILE']", "not all positive whole numbers"]),
        (lambda d: {**d, "parameters": {"K": [16]}, "edge": None}, ["'K' cannot be a parameter's name"]),
        (lambda d: {**d, "parameters": {"TILE": [16], "WARPS": [4]}}, ["matmul(A, B, C, TILE=..., WARPS=...)"]),
        (lambda d: {**d, "accepts": ["K / TILE == 2"]}, ["'accepts'", "use // for whole-number division"]),
        (lambda d: {**d, "accepts": ["N % BLOCK == 0"]}, ["names 'BLOCK', which is not known here"]),
    ],
)
def test_every_mistake_in_a_declaration_is_named(tmp_path: Path, change, words: list[str]) -> None:
    declared = {k: v for k, v in change(DECLARATION).items() if v is not None}
    with pytest.raises(DeclarationError) as caught:
        callables.load(written(tmp_path, declared))
    message = str(caught.value)
    assert str(tmp_path / "kernel.py") in message
    for word in words:
        assert word in message, (word, message)


def test_a_file_without_a_declaration_says_what_to_add(tmp_path: Path) -> None:
    with pytest.raises(DeclarationError, match=r"defines no GEMMLAB dict.*Add GEMMLAB = \{\"function\""):
        callables.load(written(tmp_path, None))


def test_a_file_that_raises_is_named_with_its_line(tmp_path: Path) -> None:
    body = "import math\n\nSCALE = math.sqrt(-1)\n"
    with pytest.raises(DeclarationError) as caught:
        callables.load(written(tmp_path, DECLARATION, body))
    message = str(caught.value)
    assert "at line 3 (`SCALE = math.sqrt(-1)`)" in message
    assert "ValueError: math domain error" in message and "Traceback" not in message


def test_a_syntax_error_is_named_with_its_line(tmp_path: Path) -> None:
    with pytest.raises(DeclarationError, match=r"at line 2 \(`return A @@ B`\).*SyntaxError"):
        callables.load(written(tmp_path, DECLARATION, "def matmul(A, B, C, TILE):\n    return A @@ B\n"))


def test_a_function_that_raises_when_called_is_named_with_its_line(tmp_path: Path) -> None:
    body = "def matmul(A, B, C, TILE=16):\n    raise ValueError(f'no tile of {TILE}')\n"
    spec = callables.load(written(tmp_path, DECLARATION, body))
    with pytest.raises(ValueError) as raised:
        spec.callable("A", "B", "C", TILE=32)
    error = callables.call_error(spec, raised.value, {"TILE": 32})
    assert str(error).startswith(
        f"{spec.id}: matmul raised at line 2 of {spec.source} (`raise ValueError(f'no tile of {{TILE}}')`): "
        "ValueError: no tile of 32."
    )
    assert "calls it as matmul(A, B, C, TILE=32) with cupy arrays" in error.fix


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(DeclarationError, match="does not exist"):
        callables.load(tmp_path / "absent.py")


def test_a_file_importing_a_missing_extra_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = written(tmp_path, DECLARATION, "import triton\n\n" + FUNCTION)
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` raises ModuleNotFoundError
    with pytest.raises(GemmlabError) as caught:
        callables.load(path)
    assert not isinstance(caught.value, DeclarationError)
    assert str(caught.value) == (
        f"triton is not installed, and {path} imports it. Install it with `pip install 'gemmlab[triton]'`."
    )


def test_torch_arrays_without_torch_name_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(callables, "installed", lambda module: module != "torch")
    with pytest.raises(GemmlabError, match=r"torch is not installed.*\"arrays\": \"torch\".*gemmlab\[torch\]"):
        callables.load(written(tmp_path, {**DECLARATION, "arrays": "torch"}))


def test_numba_functions_must_take_the_stream(tmp_path: Path) -> None:
    with pytest.raises(DeclarationError, match="and `stream` as keyword arguments"):
        callables.load(written(tmp_path, {**DECLARATION, "arrays": "numba"}))
    body = "def matmul(A, B, C, TILE, stream):\n    pass\n"
    assert callables.load(written(tmp_path, {**DECLARATION, "arrays": "numba"}, body)).arrays == "numba"


def test_the_examples_read(tmp_path: Path) -> None:
    cupy_spec = catalogue.get(str(EXAMPLES / "cupy_matmul" / "matmul.py"))
    assert (cupy_spec.id, cupy_spec.dtypes, cupy_spec.arrays) == ("cupy_matmul/matmul", ("float32",), "cupy")
    numba_spec = catalogue.get(str(EXAMPLES / "numba_matmul" / "matmul.py"))
    assert numba_spec.block_edges == (16, 8, 32) and numba_spec.edge == "TILE"
    assert backends.for_kernel("cupy_matmul/matmul") is python_backend.BACKEND


def test_the_triton_example_reads_without_a_gpu() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    spec = catalogue.get(str(EXAMPLES / "triton_matmul" / "matmul.py"))
    assert (spec.id, spec.dtypes, spec.arrays, spec.edge) == ("triton_matmul/matmul", ("float16",), "torch", "BLOCK_M")
    assert spec.block_edges == (128, 64) and spec.config == {"BLOCK_N": 128, "BLOCK_K": 32}


def test_the_python_backend_is_registered() -> None:
    backend = backends.for_spec(callables.load(EXAMPLES / "cupy_matmul" / "matmul.py"))
    assert backend.name == backends.PYTHON == "python" and isinstance(backend, DeviceBackend)
    assert python_backend.BACKEND in backends.BACKENDS and not backend.on_host
    assert backend.analytic_cgma("cupy_matmul/matmul", Shape.square(64), 0) is None


def test_triton_resources_come_from_the_returned_kernel() -> None:
    kernel = SimpleNamespace(n_regs=128, n_spills=3, metadata=SimpleNamespace(shared=65536))
    found = python_backend.triton_resources(kernel, None)
    assert (found.registers, found.smem_bytes, found.spill_store_bytes) == (128, 65536, 12)
    assert python_backend.triton_resources(None, None) is None


def test_triton_resources_come_from_the_modules_only_compiled_kernel() -> None:
    kernel = SimpleNamespace(n_regs=40, n_spills=0, metadata=SimpleNamespace(shared=0))
    jit = SimpleNamespace(device_caches={0: ({"key": kernel}, "target", "backend")})
    autotuned = SimpleNamespace(fn=jit)
    module = SimpleNamespace(tile=autotuned, helper=len)
    assert python_backend.triton_resources(None, module).registers == 40
    two = SimpleNamespace(device_caches={0: ({"a": kernel, "b": kernel}, "target")})
    assert python_backend.triton_resources(None, SimpleNamespace(tile=two)) is None  # which one ran is unknown


def test_unknown_resources_read_unknown_in_the_run_table() -> None:
    from gemmlab.cli.run import _resources_text

    assert _resources_text(python_backend.UNKNOWN) == "unknown / unknown"


runner = CliRunner()


@pytest.mark.parametrize("command", ["compile", "occupancy"])
def test_compile_and_occupancy_refuse_a_python_kernel_in_one_line(command: str) -> None:
    path = str(EXAMPLES / "cupy_matmul" / "matmul.py")
    out = runner.invoke(app, [command, path, "--arch", "sm_90"])
    assert out.exit_code == 2, out.output
    assert "is a Python function" in out.output and f"gemmlab run {path}" in out.output
    assert "Traceback" not in out.output


def test_a_broken_python_kernel_is_one_line_through_the_cli(tmp_path: Path) -> None:
    path = written(tmp_path, {**DECLARATION, "dtypes": ["float64"]})
    out = runner.invoke(app, ["run", str(path), "--size", "64", "--json"])
    assert out.exit_code == 2 and "'float64' is not an element type" in out.output
    assert "Traceback" not in out.output and not out.output.lstrip().startswith("{")  # no JSON for a refused kernel


def test_the_profiler_names_the_kernel_the_declaration_names_or_the_one_triton_kernel(tmp_path) -> None:
    from gemmlab.kernels.callables import profiled_name

    folder = tmp_path / "named"
    folder.mkdir()
    path = folder / "mm.py"
    path.write_text(
        "def matmul(A, B, C):\n    pass\n\n"
        'GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy",\n'
        '           "kernel_name": "regex:gemm"}\n'
    )
    spec = callables.load(path)
    assert profiled_name(spec) == "regex:gemm" and spec.cgma is None
    path.write_text(path.read_text().replace(',\n           "kernel_name": "regex:gemm"}', "}"))
    with pytest.raises(DeclarationError, match="cannot tell which GPU kernel matmul launches"):
        profiled_name(callables.load(path))
