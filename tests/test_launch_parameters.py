"""Issue 52: a kernel that reads its block size from blockDim declares that size
as a launch-only parameter (named by the declaration, never by the file); the
declared first value of a parameter, the edge's too, is its default; and the
messages about accepts, empty block dimensions and --blocks 0 give the right fix.
All of it without a GPU: NVRTC compiles, nothing launches."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gemmlab import backends
from gemmlab.backends.nvrtc import Resources, compile_kernel
from gemmlab.cli import app
from gemmlab.core.errors import DeclarationError
from gemmlab.core.shapes import Shape
from gemmlab.core.timing import Timing
from gemmlab.kernels import catalogue, user
from gemmlab.kernels.declaration.expressions import expression
from gemmlab.kernels.spec import kernel_source
from gemmlab.measure.run import RunResult
from gemmlab.store.store import Store
from gemmlab.studies import tune
from gemmlab.studies.points import plan, variant_spec
from gemmlab.studies.sweep import sweep

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
runner = CliRunner()

# As five of the nine students of the newcomer's class wrote it: no #define for
# the block size, every index from blockDim, a bounds check for any M, N, K.
STUDENT = """\
// naive matmul, one thread per element of C
extern "C" __global__ void matmul(const float *A, const float *B, float *C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; ++k)
            sum += A[row * K + k] * B[k * N + col];
        C[row * N + col] = sum;
    }
}
"""

STUDENT_DECLARATION = """\
function = "matmul"
problem = "matmul"
dtypes = ["float32"]
arguments = ["A", "B", "C", "M", "N", "K"]
grid = ["cdiv(N, BS)", "cdiv(M, BS)"]
block = ["BS", "BS"]
edge = "BS"

[parameters]
BS = [8, 16, 32]   # the file has no BS: the kernel reads its block size from blockDim
"""

# A shared-memory tile as large as the block, sized at launch (extern __shared__).
TILED = """\
extern "C" __global__ void tiled(const float *A, const float *B, float *C, int n)
{
    extern __shared__ float tiles[];  // two blockDim.x x blockDim.x tiles
    int t = blockDim.x;
    float *As = tiles, *Bs = tiles + t * t;
    int row = blockIdx.y * t + threadIdx.y, col = blockIdx.x * t + threadIdx.x;
    float sum = 0.0f;
    for (int k0 = 0; k0 < n; k0 += t) {
        As[threadIdx.y * t + threadIdx.x] = A[row * n + k0 + threadIdx.x];
        Bs[threadIdx.y * t + threadIdx.x] = B[(k0 + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < t; ++k)
            sum += As[threadIdx.y * t + k] * Bs[k * t + threadIdx.x];
        __syncthreads();
    }
    C[row * n + col] = sum;
}
"""

TILED_DECLARATION = """\
function = "tiled"
problem = "matmul"
dtypes = ["float32"]
arguments = ["A", "B", "C", "n"]
grid = ["n // BS", "n // BS"]
block = ["BS", "BS"]
dynamic_smem = "2 * BS * BS * itemsize"
accepts = ["n % BS == 0"]
edge = "BS"

[parameters]
BS = [16, 8, 32]
"""


def written(tmp_path: Path, name: str, kernel: str, declaration: str) -> Path:
    """``matmul.cu`` and ``matmul.toml`` in a folder of their own: a user's kernel
    is known by its folder and stem for the rest of the process, so each test's is
    called after the test (``name_<test>/matmul``)."""
    folder = tmp_path / f"{name}_{tmp_path.name}"
    folder.mkdir()
    (folder / "matmul.cu").write_text(kernel)
    (folder / "matmul.toml").write_text(declaration)
    return folder / "matmul.toml"


@pytest.fixture
def student(tmp_path: Path) -> Path:
    return written(tmp_path, "student_blockdim", STUDENT, STUDENT_DECLARATION)


# -- item 3: a launch-only parameter ----------------------------------------------


def test_a_blockdim_kernel_declares_its_block_size_and_compiles_at_each(student: Path) -> None:
    spec = catalogue.get(str(student.with_suffix(".cu")))
    (bs,) = spec.parameters
    assert (bs.name, bs.kind, bs.values) == ("BS", "launch", (8, 16, 32))
    assert spec.block_edges == (8, 16, 32) and spec.default_block_edge() == 8
    shape = Shape(100, 70, 30)
    file_text = kernel_source(spec.source)
    for edge in spec.block_edges:
        # Not given to NVRTC: the compiled text is the file's at every value, so
        # the compile cache holds one cubin for all of them.
        assert spec.source_text(edge) == file_text and spec.name_expression("float32", edge) == "matmul"
        assert spec.block(shape, edge) == (edge, edge, 1)
        assert spec.grid(shape, edge) == (-(-70 // edge), -(-100 // edge), 1)
        assert not spec.violations(shape, edge, "float32")
        one = user.variant(spec, {"BS": edge})
        assert one.block_edges == (edge,) and one.default_block_edge() == edge
        assert one.block(shape, edge) == (edge, edge, 1)
        assert compile_kernel(one, edge, "float32", "sm_90", use_cache=False).resources.registers > 0


def test_compile_and_sweep_list_the_variants_in_declared_order(student: Path) -> None:
    out = runner.invoke(app, ["compile", str(student), "--arch", "sm_90", "--json"])
    assert out.exit_code == 0, out.output
    assert [r["block_edge"] for r in json.loads(out.output)] == [8, 16, 32]
    points, refused = plan([str(student)], [Shape.square(64)])
    assert [p.block_edge for p in points] == [8, 16, 32] and not refused
    assert tune.search_space(str(student), [Shape.square(64)]) == [{"BS": 8}, {"BS": 16}, {"BS": 32}]
    # An edge beyond the declared ones is tried like any other, within the launch limits.
    points, refused = plan([str(student)], [Shape.square(64)], [4, 64])
    assert [p.block_edge for p in points] == [4]
    assert "4096 threads, over the 1024" in refused[0][1]


def test_a_launch_only_parameter_sizes_shared_memory_and_is_constrained(tmp_path: Path) -> None:
    spec = user.load(written(tmp_path, "tiled_blockdim", TILED, TILED_DECLARATION))
    assert [p.kind for p in spec.parameters] == ["launch"] and spec.default_block_edge() == 16
    for edge in (8, 16, 32):
        point = catalogue.point(spec.id, Shape.square(64), edge, spec=spec)
        assert point.dynamic_smem == 2 * edge * edge * 4 and point.block == (edge, edge, 1)
    assert spec.violations(Shape.square(48), 32, "float32") == [
        "the declaration accepts only `n % BS == 0`, false for M = 48, N = 48, K = 48, n = 48, BS = 32"
    ]
    assert not spec.violations(Shape.square(48), 16, "float32")
    assert compile_kernel(spec, 32, "float32", "sm_90", use_cache=False).resources.smem_bytes == 0  # all dynamic


def test_a_launch_only_parameter_besides_the_edge_is_stored_in_the_configuration(tmp_path: Path) -> None:
    """Swept with --param, each point's configuration names BS, as the runner
    stores it (measure_point runs variant_spec's entry, whose config it stores)."""
    declaration = STUDENT_DECLARATION.replace('edge = "BS"\n', "")
    path = written(tmp_path, "student_param", STUDENT, declaration)
    spec = catalogue.get(str(path))
    assert spec.block_edges == () and spec.config == {"BS": 8}
    points, refused = plan([str(path)], [Shape.square(64)], params={"BS": [16, 32]})
    assert [dict(p.config) for p in points] == [{"BS": 16}, {"BS": 32}] and not refused
    assert variant_spec(spec.id, {"BS": 32}).block(Shape.square(64), 0) == (32, 32, 1)

    def measured(kernel, shape, block_edge, dtype, *, reps, warmup, max_seconds, variant="", config=None):
        entry = variant_spec(kernel, config)
        return RunResult(
            kernel=kernel, backend=backends.for_kernel(kernel).name, m=shape.m, n=shape.n, k=shape.k,
            block_edge=block_edge, dtype=dtype, grid=entry.grid(shape, block_edge),
            block=entry.block(shape, block_edge), dynamic_smem=0, resources=Resources(30, 0, 0, 0, 0, 0),
            arch="sm_90", timing=Timing(1.0, 0.9, 1.2, reps),
            gflops=1.0, gbytes_per_s=1.0, error=0.0, tolerance=1e-5, config=entry.config,
        )  # fmt: skip

    info = {"gpu_name": "Fake GPU", "cc": "9.0", "command_line": "test"}
    with Store.open(tmp_path / "r.db") as store:
        sweep(points, store, runner=measured, progress=False, run_info=info)
        rows = store.rows()
    assert sorted(json.loads(r["config"])["BS"] for r in rows) == [16, 32]


def test_a_parameter_used_nowhere_is_refused_saying_so(tmp_path: Path) -> None:
    declaration = STUDENT_DECLARATION.replace('edge = "BS"\n', "").replace('"BS"', "16").replace(", BS)", ", 16)")
    path = written(tmp_path, "unused", STUDENT, declaration)
    with pytest.raises(DeclarationError) as caught:
        user.load(path)
    assert "parameters.BS: BS is used nowhere" in caught.value.cause
    assert "no expression of the declaration" in caught.value.cause
    assert 'block = ["BS", "BS"]' in caught.value.fix and "or remove it" in caught.value.fix


def test_a_name_the_file_holds_a_value_under_is_refused(tmp_path: Path) -> None:
    """A launch sized by BS = 8 under a kernel that indexes with its own BS = 16 would be wrong."""
    kernel = (
        STUDENT.replace("{\n", "{\n    const int BS = 16;\n", 1).replace("blockDim.y", "BS").replace("blockDim.x", "BS")
    )
    path = written(tmp_path, "own_constant", kernel, STUDENT_DECLARATION)
    with pytest.raises(DeclarationError) as caught:
        user.load(path)
    assert "names BS (`const int BS = 16;`)" in caught.value.cause and "#define BS" in caught.value.fix
    # A name in a comment or a string is not the file's.
    quiet = STUDENT.replace("// naive matmul", '// naive matmul, BS threads a side\n#define LABEL "BS"')
    assert user.load(written(tmp_path, "quiet", quiet, STUDENT_DECLARATION)).parameters[0].kind == "launch"


# -- item 4: the first value is the default ---------------------------------------


def test_the_declared_first_edge_is_the_default_and_the_catalogue_keeps_its_own(student: Path) -> None:
    for example in ("naive_define", "tiled_template"):
        spec = catalogue.get(str(EXAMPLES / example / "matmul.toml"))
        assert spec.block_edges == (16, 8, 32) and spec.default_block_edge() == 16
        assert catalogue.point(spec.id, Shape.square(64), spec=spec).block_edge == 16
        assert user.all_values(spec) == {"TILE": 16}
    spec = catalogue.get(str(student))
    assert catalogue.point(spec.id, Shape(40, 24, 8), spec=spec).block == (8, 8, 1)
    # The catalogue lists the edges its documents measured in ascending order and runs the largest by default.
    for kernel in ("naive", "tiled"):
        edges = catalogue.get(kernel).block_edges
        assert list(edges) == sorted(edges) and catalogue.get(kernel).default_block_edge() == edges[-1]


# -- item 13: messages that name the right fix --------------------------------------


def _listed_operators(fix: str) -> tuple[list[str], list[str]]:
    arithmetic = re.search(r"names, (.+?), cdiv", fix).group(1).split()
    comparisons = re.search(r"comparisons \(([^)]*)\)", fix).group(1).split()
    return arithmetic, comparisons


def test_the_accepts_hint_lists_every_operator_the_evaluator_takes() -> None:
    with pytest.raises(DeclarationError) as caught:
        expression("n % 16 = 0", "here, accepts[0]", ("n",), condition=True)
    assert "`==` to compare, not `=`" in caught.value.fix
    arithmetic, comparisons = _listed_operators(caught.value.fix)
    assert "==" in comparisons and len(comparisons) == 6 and len(arithmetic) == 5
    for n, op in itertools.product((2, 3, 4), comparisons):
        condition = expression(f"n {op} 3", "here", ("n",), condition=True)
        assert bool(condition({"n": n})) == eval(f"{n} {op} 3"), (n, op)  # two literals and an operator
    for n, op in itertools.product((7, 9), arithmetic):
        value = expression(f"n {op} 3", "here", ("n",))
        assert value({"n": n}) == eval(f"{n} {op} 3"), (n, op)
    assert caught.value.fix.endswith("), and, or, not.")
    assert expression("n > 1 and not n == 3 or n == 8", "here", ("n",), condition=True)({"n": 8})
    # The message a refused node gets lists the same operators.
    with pytest.raises(DeclarationError) as refused:
        expression("n is 3", "here", ("n",), condition=True)
    assert _listed_operators(refused.value.fix) == (arithmetic, comparisons)
    assert "a comparison other than == != < <= > >=" in refused.value.cause


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("n % 16 == 0 && n > 0", "`and`, not `&&`"),
        ("n < 8 || n > 64", "`or`, not `||`"),
        ("!(n < 8)", "`not`, not `!`"),
    ],
)
def test_c_spellings_in_a_condition_are_named(text: str, hint: str) -> None:
    with pytest.raises(DeclarationError) as caught:
        expression(text, "here", ("n",), condition=True)
    assert hint in caught.value.fix and "`==`" not in caught.value.fix


@pytest.mark.parametrize(
    ("block", "bs", "words"),
    [
        ("[0, 16]", "[8]", ["block[0]: `0` gives 0 threads in x;", "Write 1 for a dimension"]),
        (
            '["BS", "BS // 32"]',
            "[64, 16]",
            ["block[1]: `BS // 32` gives 0 threads in y at BS = 16", "max(1, BS // 32)"],
        ),
        ('["BS", "BS - 8"]', "[16, 8]", ["block[1]", "0 threads in y at BS = 8"]),
    ],
)
def test_an_empty_block_dimension_is_refused_when_read(tmp_path: Path, block: str, bs: str, words: list[str]) -> None:
    declaration = STUDENT_DECLARATION.replace('block = ["BS", "BS"]', f"block = {block}")
    declaration = declaration.replace("BS = [8, 16, 32]", f"BS = {bs}")
    path = written(tmp_path, "empty_block", STUDENT, declaration)
    with pytest.raises(DeclarationError) as caught:
        user.load(path)
    message = str(caught.value)
    assert str(path) in message and "at least 1 in each dimension" in message
    for word in words:
        assert word in message, (word, message)
    out = runner.invoke(app, ["compile", str(path), "--arch", "sm_90"])
    assert out.exit_code == 2 and "block[" in out.output and "Traceback" not in out.output


def test_an_empty_dimension_from_a_size_or_a_value_given_later_is_refused_at_launch(tmp_path: Path) -> None:
    declaration = STUDENT_DECLARATION.replace('block = ["BS", "BS"]', 'block = ["BS", "BS // 32"]')
    path = written(tmp_path, "later", STUDENT, declaration.replace("BS = [8, 16, 32]", "BS = [32, 64]"))
    spec = user.load(path)
    assert "has 0 threads in y; each dimension needs at least 1" in " ".join(
        spec.violations(Shape.square(64), 16, "float32")
    )
    sized = STUDENT_DECLARATION.replace('block = ["BS", "BS"]', 'block = ["BS", "M // 64"]')
    spec = user.load(written(tmp_path, "sized", STUDENT, sized))
    assert spec.violations(Shape(32, 64, 64), 8, "float32") == [
        "the declared block (8, 0, 1) has 0 threads in y; each dimension needs at least 1"
    ]
    assert not spec.violations(Shape(64, 64, 64), 8, "float32")


def test_sweep_blocks_zero_names_the_zero_and_the_kernels_edges(student: Path) -> None:
    out = runner.invoke(app, ["sweep", "--kernels", f"{student},tiled", "--sizes", "256", "--blocks", "0,16"])
    assert out.exit_code == 2 and "Traceback" not in out.output
    text = " ".join(out.output.split())
    assert "so it is positive; 0 is not" in text and "256,512" not in text
    assert f"{student.parent.name}/matmul: 8,16,32" in text and "tiled: 1,2,4,8,16,22,32" in text
    out = runner.invoke(app, ["sweep", "--kernels", "cpu_naive", "--sizes", "256", "--blocks=-4"])
    assert out.exit_code == 2 and "-4 is not" in " ".join(out.output.split())


def test_a_block_edge_below_one_is_not_told_to_be_smaller(student: Path) -> None:
    spec = catalogue.get(str(student))
    (problem,) = spec.violations(Shape.square(64), 0, "float32")
    assert "it is at least 1" in problem and "most a block" not in problem
