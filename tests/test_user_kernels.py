"""A user's own kernel: a .cu file with a TOML declaration beside it
(docs/user-kernels.md). Read, checked, compiled and shown with no GPU."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gemmlab.backends.nvrtc import compile_kernel
from gemmlab.cli import app
from gemmlab.core.errors import CompileError, ConstraintError, DeclarationError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue, user
from gemmlab.kernels.declaration.expressions import expression

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
WORKING = ("naive_define", "tiled_template", "int32_naive")

KERNEL = """\
// a tile edge in a #define and a shared array that depends on it
#define TILE 16

extern "C" __global__ void mm(const float *A, const float *B, float *C, int n)
{
    __shared__ float tile[TILE * TILE];
    int i = blockIdx.x * TILE + threadIdx.x;
    tile[threadIdx.x] = A[i];
    __syncthreads();
    C[i] = tile[(threadIdx.x + 1) % TILE] + B[i] + n;
}
"""

DECLARATION = """\
function = "mm"
problem = "matmul"
dtypes = ["float32"]
arguments = ["A", "B", "C", "n"]
grid = ["n * n // TILE"]
block = ["TILE"]
accepts = ["n % TILE == 0"]
edge = "TILE"

[parameters]
TILE = [16, 32]
"""


def declared(tmp_path: Path, declaration: str = DECLARATION, kernel: str = KERNEL) -> Path:
    (tmp_path / "mm.cu").write_text(kernel)
    path = tmp_path / "mm.toml"
    path.write_text(declaration)
    return path


def test_a_declaration_reads_into_a_kernel_spec(tmp_path: Path) -> None:
    spec = user.load(declared(tmp_path))
    assert spec.id == f"{tmp_path.name}/mm"
    assert spec.arguments == ("A", "B", "C", "n")
    assert spec.square_only and spec.block_edges == (16, 32) and spec.default_block_edge() == 16
    assert spec.grid(Shape.square(64), 16) == (256, 1, 1)
    assert spec.block(Shape.square(64), 16) == (16, 1, 1)
    assert spec.name_expression("float32", 16) == "mm"
    assert not spec.violations(Shape.square(64), 16, "float32")
    assert any("n % TILE == 0" in v for v in spec.violations(Shape.square(40), 16, "float32"))
    assert any("square" in v for v in spec.violations(Shape(64, 32, 64), 16, "float32"))
    with pytest.raises(ConstraintError, match="n % TILE == 0"):
        catalogue.point(spec.id, Shape.square(40), 16, spec=spec)


def test_a_define_parameter_changes_the_compiled_code_not_the_file(tmp_path: Path) -> None:
    spec = user.load(declared(tmp_path))
    small = compile_kernel(spec, 16, "float32", "sm_90").resources.smem_bytes
    large = compile_kernel(spec, 32, "float32", "sm_90").resources.smem_bytes
    assert (small, large) == (16 * 16 * 4, 32 * 32 * 4)
    assert (tmp_path / "mm.cu").read_text() == KERNEL
    # The #define line is rewritten in place: every other line keeps its number.
    text = spec.source_text(32).splitlines()
    assert text[1:] == KERNEL.replace("#define TILE 16", "#define TILE 32").splitlines()
    assert text[0].startswith("#line 1 ")


def test_a_template_parameter_becomes_a_template_argument() -> None:
    spec = catalogue.get(str(EXAMPLES / "tiled_template" / "matmul.cu"))
    assert spec.name_expression("float32", 8) == "matmul_tiled<8>"
    assert spec.arguments == ("A", "B", "C", "M", "N", "K") and not spec.square_only


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: 'colour = "blue"\n' + d, ["unknown key colour", "The keys are"]),
        (lambda d: d.replace('"n"]', '"size"]'), ["arguments", "unknown argument name 'size'"]),
        (lambda d: d.replace('"n * n // TILE"', '"n * n / TILE"'), ["grid[0]", "//"]),
        (lambda d: d.replace('"TILE"]', "\"__import__('os')\"]"), ["block[0]", "__import__", "may not"]),
        (lambda d: d.replace('"TILE"]', '"TILE ** 2"]'), ["block[0]", "Pow"]),
        (lambda d: d.replace('"TILE"]', '"WIDTH"]'), ["block[0]", "'WIDTH'", "not known"]),
        (lambda d: d.replace("TILE = [16, 32]", "TILE = [16, 32]\nSTAGES = [2]"), ["parameters.STAGES", "nowhere"]),
        (lambda d: d.replace('= "mm"', '= "matmul"'), ["function", "no __global__ function 'matmul'", "mm"]),
        (lambda d: d.replace('"C", "n"]', '"C"]'), ["arguments", "3 names", "takes 4"]),
        (lambda d: d.replace('["A", "B", "C", "n"]', '["A", "n", "C", "B"]'), ["n should be an integer", "*B"]),
        (lambda d: d.replace('"float32"', '"float64"'), ["dtypes", "float64", "bfloat16"]),
        (lambda d: d.replace('problem = "matmul"', 'problem = "conv"'), ["problem", "conv"]),
        (lambda d: d.replace('edge = "TILE"', 'edge = "BLOCK"'), ["edge", "BLOCK"]),
        (lambda d: d.replace("[parameters]", "[parameters"), ["not valid TOML"]),
        (lambda d: d.replace('block = ["TILE"]\n', ""), ["missing block"]),
    ],
    ids=[
        "unknown-key", "unknown-argument", "division", "unsafe-call", "power", "unknown-name", "not-a-parameter",
        "missing-function", "argument-count", "argument-kind", "dtype", "problem", "edge", "toml", "missing-key",
    ],
)  # fmt: skip
def test_every_mistake_in_a_declaration_is_named(tmp_path: Path, change, words: list[str]) -> None:
    path = declared(tmp_path, change(DECLARATION))
    with pytest.raises(DeclarationError) as caught:
        user.load(path)
    message = str(caught.value)
    assert str(path) in message
    for word in words:
        assert word in message, (word, message)
    assert caught.value.fix


def test_the_evaluator_runs_no_python() -> None:
    """Attribute access, subscripts, lambdas and comprehensions are refused when read, never evaluated."""
    for text in ("().__class__", "[1][0]", "(lambda: 1)()", "[x for x in (1,)]", "open('f')", "1.5", "'a'"):
        with pytest.raises(DeclarationError, match="may not"):
            expression(text, "here", ("n",))
    assert expression("cdiv(n, 16) + max(n % 3, 1) - min(2, 4) * -1", "here", ("n",))({"n": 40}) == 3 + 1 + 2
    assert expression("n % 16 == 0 and not n < 16", "here", ("n",), condition=True)({"n": 32})


def test_a_cu_path_needs_its_declaration_beside_it(tmp_path: Path) -> None:
    (tmp_path / "lonely.cu").write_text(KERNEL)
    with pytest.raises(DeclarationError, match=r"lonely\.toml"):
        catalogue.get(str(tmp_path / "lonely.cu"))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("example", WORKING)
def test_every_example_compiles(example: str, arch: str) -> None:
    spec = catalogue.get(str(EXAMPLES / example / "matmul.toml"))
    for edge in spec.block_edges:
        for dtype in spec.dtypes:
            res = compile_kernel(spec, edge, dtype, arch).resources
            assert res.registers > 0 and res.spill_bytes == 0, (spec.id, edge, dtype)


@pytest.mark.parametrize("example", WORKING)
def test_the_grid_covers_c_exactly_on_accepted_shapes(example: str) -> None:
    """As tests/test_catalogue.py checks for the catalogue: one thread per
    element of C, at least every element and, where the shape is accepted
    with no remainder, exactly."""
    spec = catalogue.get(str(EXAMPLES / example / "matmul.toml"))
    for edge in spec.block_edges:
        for shape in (Shape.square(4 * edge), Shape.square(3 * edge + 5), Shape(2 * edge, 5 * edge, 3 * edge)):
            if spec.violations(shape, edge, spec.dtypes[0]):
                continue
            threads = [g * b for g, b in zip(spec.grid(shape, edge), spec.block(shape, edge), strict=True)]
            assert threads[0] >= shape.n and threads[1] >= shape.m, (spec.id, edge, shape)
            assert threads[0] - shape.n < edge and threads[1] - shape.m < edge, (spec.id, edge, shape)
            if shape.m % edge == 0 and shape.n % edge == 0:
                assert (threads[0], threads[1]) == (shape.n, shape.m)


def test_a_compile_error_names_the_users_file_and_line() -> None:
    spec = catalogue.get(str(EXAMPLES / "broken" / "matmul.toml"))
    with pytest.raises(CompileError) as caught:
        compile_kernel(spec, 16, "float32", "sm_90", use_cache=False)
    assert re.search(r"examples/broken/matmul\.cu\(11\): error: identifier \"sum\" is undefined", caught.value.cause)


def test_an_included_header_keeps_its_own_lines(tmp_path: Path) -> None:
    (tmp_path / "helpers.cuh").write_text("// a helper\n__device__ float twice(float x) { return 2 * x }\n")
    kernel = KERNEL.replace("#define TILE 16\n", '#define TILE 16\n#include "helpers.cuh"\n')
    kernel = kernel.replace("C[i] =", "C[i] = twice(1) + undeclared +")
    spec = user.load(declared(tmp_path, kernel=kernel))
    with pytest.raises(CompileError) as caught:
        compile_kernel(spec, 16, "float32", "sm_90", use_cache=False)
    assert "helpers.cuh(2): error" in caught.value.cause
    assert "mm.cu(11): error" in caught.value.cause


runner = CliRunner()


def test_compile_and_occupancy_take_a_declaration() -> None:
    out = runner.invoke(app, ["compile", str(EXAMPLES / "naive_define" / "matmul.toml"), "--arch", "sm_90", "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)
    assert [r["block_edge"] for r in rows] == [16, 8, 32] and all(r["registers"] > 0 for r in rows)
    out = runner.invoke(
        app, ["occupancy", str(EXAMPLES / "tiled_template" / "matmul.cu"), "--arch", "sm_90", "--block", "16", "--json"]
    )
    assert out.exit_code == 0, out.output
    (column,) = json.loads(out.output)
    assert column["block"] == "16x16" and column["threads_per_block"] == 256


def test_a_bad_declaration_is_one_line_through_the_cli(tmp_path: Path) -> None:
    path = declared(tmp_path, "colour = 1\n" + DECLARATION)
    out = runner.invoke(app, ["compile", str(path), "--arch", "sm_90"])
    assert out.exit_code == 2 and "unknown key colour" in out.output and "Traceback" not in out.output


@pytest.mark.gpu
@pytest.mark.parametrize("example", WORKING)
def test_every_example_runs_verified(example: str) -> None:
    from gemmlab.measure.run import run

    spec = catalogue.get(str(EXAMPLES / example / "matmul.toml"))
    for size in (64, 256, 512):
        result = run(spec.id, Shape.square(size), 16, reps=3, spec=spec)
        assert result.error <= result.tolerance and result.kernel == spec.id


def test_a_kernel_named_by_its_path_is_found_by_its_id_afterwards() -> None:
    from gemmlab import backends
    from gemmlab.studies.points import plan

    path = str(EXAMPLES / "naive_define" / "matmul.toml")
    points, refused = plan([path], [Shape.square(256), Shape.square(100)], [16])
    assert [p.kernel for p in points] == ["naive_define/matmul"]  # stored under its id, not its path
    assert "n % TILE == 0" in refused[0][1]
    assert catalogue.get("naive_define/matmul").declaration == Path(path)
    assert backends.for_kernel("naive_define/matmul").name == "nvrtc"
    assert catalogue.reference("naive_define/matmul") == str(Path(path).resolve())
    assert catalogue.reference("tiled") == "tiled"


def test_two_files_under_one_id_are_refused(tmp_path: Path) -> None:
    (tmp_path / "naive_define").mkdir()
    for name in ("matmul.cu", "matmul.toml"):
        (tmp_path / "naive_define" / name).write_text((EXAMPLES / "naive_define" / name).read_text())
    catalogue.get(str(EXAMPLES / "naive_define" / "matmul.toml"))
    with pytest.raises(DeclarationError, match="two kernels are both called naive_define/matmul"):
        catalogue.get(str(tmp_path / "naive_define" / "matmul.toml"))


# Issue 49: a graded .cu put the task's hidden seed into NVRTC's error with
# `#include "../../task.toml"`, and a folder holding only a declaration with
# `source = "../ctl_cu_tiled/matmul.cu"` was graded as a classmate's kernel.
DECLARED = (
    'function = "f"\nproblem = "matmul"\ndtypes = ["float32"]\narguments = ["A", "B", "C", "n"]\n'
    "grid = [1]\nblock = [1]\n"
)
BODY = 'extern "C" __global__ void f(const float *A, const float *B, float *C, int n) { C[0] = A[0] * B[0]; }\n'


def _kernel_with(tmp_path: Path, include: str) -> Path:
    secret = tmp_path / "task.toml"
    secret.write_text("[hidden]\nseed = 987654321\n")
    folder = tmp_path / "class" / f"student{abs(hash(include)) % 10**8}"  # ids are per process: one each
    folder.mkdir(parents=True)
    (folder / "matmul.cu").write_text(f"{include}\n{BODY}")
    (folder / "matmul.toml").write_text(DECLARED)
    (folder / "tile.cuh").write_text("// a header of the student's own\n")
    return folder / "matmul.toml"


@pytest.mark.parametrize(
    "include",
    [
        '#include "../../task.toml"',
        "#include </etc/passwd>",
        "#include <../../task.toml>",
        '#define WHERE "../../task.toml"\n#include WHERE',
        '#include "/etc/passwd"',
    ],
)
def test_an_include_that_leaves_the_kernels_folder_is_refused_naming_it(tmp_path: Path, include: str) -> None:
    from gemmlab.core.errors import CompileError

    declaration = _kernel_with(tmp_path, include)
    with pytest.raises(CompileError) as caught:
        catalogue.get(str(declaration))
    assert "matmul.cu:" in caught.value.cause and "987654321" not in str(caught.value)


@pytest.mark.parametrize("include", ['#include "tile.cuh"', "#include <cuda_fp16.h>", "#include <cuda/std/cstdint>"])
def test_the_kernels_own_files_and_cuda_headers_are_included(tmp_path: Path, include: str) -> None:

    spec = catalogue.get(str(_kernel_with(tmp_path, include)))
    assert "a header of the student's own" in spec.source_text(0) or "<" in include


def test_a_source_outside_the_submissions_folder_is_refused_when_graded(tmp_path: Path) -> None:
    from gemmlab.studies import grade

    classmate = tmp_path / "class" / "honest"
    classmate.mkdir(parents=True)
    (classmate / "matmul.cu").write_text(BODY)
    borrower = tmp_path / "class" / "lender_of_a_path"  # an id no other test declares
    borrower.mkdir()
    (borrower / "matmul.toml").write_text(DECLARED + 'source = "../honest/matmul.cu"\n')
    spec = catalogue.get(str(borrower / "matmul.toml"))  # a user may point at any file of theirs
    with pytest.raises(grade.StageFailed, match="outside the submission's folder"):
        grade.confined(spec)


# Issue 52: a student's file in another encoding than UTF-8 crashed with a
# traceback (UnicodeDecodeError), and a UTF-8 byte-order mark broke the compile.
ENCODED = {
    "latin1": ("// Autor: José Müller\n" + BODY).encode("latin-1"),
    "utf8_bom": b"\xef\xbb\xbf" + ("// Autor: José Müller\n" + BODY).encode(),
    "utf16": ("// Autor: José Müller\n" + BODY).encode("utf-16"),
}


@pytest.mark.parametrize("encoding", sorted(ENCODED))
def test_a_source_and_declaration_in_another_encoding_compile(tmp_path: Path, encoding: str) -> None:
    from gemmlab.backends.nvrtc import compile_kernel

    folder = tmp_path / f"jose_{encoding}"
    folder.mkdir()
    (folder / "matmul.cu").write_bytes(ENCODED[encoding])
    declared = "# Declaración de José\n" + DECLARED
    codec = {"latin1": "latin-1", "utf8_bom": "utf-8-sig", "utf16": "utf-16"}[encoding]
    (folder / "matmul.toml").write_bytes(declared.encode(codec))
    spec = catalogue.get(str(folder / "matmul.toml"))
    assert "José" in spec.source_text(0) and "\ufeff" not in spec.source_text(0)
    assert compile_kernel(spec, 0, "float32", "sm_90", use_cache=False).resources.registers > 0


def test_a_binary_file_is_refused_in_one_line_naming_it(tmp_path: Path) -> None:
    from gemmlab.core.text import NotText

    folder = tmp_path / "binary_student"
    folder.mkdir()
    (folder / "matmul.cu").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)))
    (folder / "matmul.toml").write_text(DECLARED)
    with pytest.raises(NotText, match=r"matmul\.cu is not a text file"):
        catalogue.get(str(folder / "matmul.toml"))
