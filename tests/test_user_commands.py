"""check, profile, sweep, report and tune on users' kernels, without a GPU:
the child processes' command lines, the plans and keys, resume with a fake
runner, a report page from stored rows, and the tuner's search space."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gemmlab import backends
from gemmlab.backends.nvrtc import Resources
from gemmlab.core.errors import DeclarationError, GemmlabError, UnknownName
from gemmlab.core.shapes import Shape
from gemmlab.core.timing import Timing
from gemmlab.kernels import catalogue, user
from gemmlab.measure import ncu, sanitize
from gemmlab.measure.run import RunResult
from gemmlab.report import write_report
from gemmlab.store.store import Store
from gemmlab.studies import tune
from gemmlab.studies.candidates import Device
from gemmlab.studies.points import parameter_configs, plan
from gemmlab.studies.sweep import sweep

ROOT = Path(__file__).resolve().parent.parent
NAIVE = ROOT / "examples" / "naive_define" / "matmul.toml"
TILED = ROOT / "examples" / "tiled_template" / "matmul.toml"
FAKE_GPU = Device("Fake GPU", "9.0", "sm_90a", 132)
RUN_INFO = {"gpu_name": "Fake GPU", "cc": "9.0", "command_line": "test"}

# A kernel with a parameter besides its edge: each thread adds its product STEP
# times and divides by STEP, so the result is the same for every STEP.
TWO_PARAMS_CU = """\
#define TILE 16
#define STEP 1

extern "C" __global__ void matmul_steps(const float *A, const float *B, float *C, int n)
{
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;
    for (int s = 0; s < STEP; s++)
        for (int i = 0; i < n; i++)
            sum += A[row * n + i] * B[i * n + col];
    C[row * n + col] = sum / STEP;
}
"""
TWO_PARAMS_TOML = """\
function = "matmul_steps"
problem = "matmul"
dtypes = ["float32"]
arguments = ["A", "B", "C", "n"]
grid = ["n // TILE", "n // TILE"]
block = ["TILE", "TILE"]
accepts = ["n % TILE == 0"]
edge = "TILE"

[parameters]
TILE = [16, 8]
STEP = [1, 2, 4]
"""


@pytest.fixture(autouse=True)
def fresh_declarations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test declares its kernels anew: two tests' tmp folders share a kernel id."""
    monkeypatch.setattr(catalogue, "_DECLARED", {})


@pytest.fixture
def two_params(tmp_path: Path) -> Path:
    folder = tmp_path / "steps"
    folder.mkdir()
    (folder / "matmul.cu").write_text(TWO_PARAMS_CU)
    (folder / "matmul.toml").write_text(TWO_PARAMS_TOML)
    return folder / "matmul.toml"


def fake_runner(calls: list):
    def runner(kernel, shape, block_edge, dtype, *, reps, warmup, max_seconds, variant="", config=None):
        calls.append((kernel, shape.n, block_edge, config))
        spec = user.variant(catalogue.get(kernel), config) if config else catalogue.get(kernel)
        return RunResult(
            kernel=kernel, backend=backends.for_kernel(kernel).name, m=shape.m, n=shape.n, k=shape.k,
            block_edge=block_edge, dtype=dtype, grid=(1, 1, 1), block=(block_edge, block_edge, 1), dynamic_smem=0,
            resources=Resources(30, 0, 0, 0, 0, 0), arch="sm_90", timing=Timing(1.0, 0.9, 1.2, reps),
            gflops=float(shape.n), gbytes_per_s=1.0, error=0.0, tolerance=1e-5, config=spec.config,
            source=str(spec.declaration or ""),
        )  # fmt: skip

    return runner


# -- check ----------------------------------------------------------------------


def test_sanitizer_points_name_the_declaration_and_parse_back():
    points = sanitize.points_for([str(NAIVE)])
    assert points
    for text in points:
        kernel, edge, shape = sanitize.parse_point(text)
        assert kernel == str(NAIVE.resolve())
        assert catalogue.get(kernel).id == "naive_define/matmul"
        assert edge in (8, 16, 32)
        assert shape.m == shape.n == shape.k and shape.n % edge == 0


def test_parse_point_keeps_colons_in_a_path():
    text = sanitize.point_text("/tmp/a:b/matmul.toml", 16, Shape(37, 53, 29))
    assert sanitize.parse_point(text) == ("/tmp/a:b/matmul.toml", 16, Shape(37, 53, 29))


def test_check_picks_small_sizes_each_declaration_accepts():
    naive = catalogue.get(str(NAIVE))
    for edge in naive.block_edges:
        shapes = sanitize.small_shapes(naive, edge)
        assert shapes, edge
        assert all(s.m == s.n == s.k and s.n % edge == 0 and s.n <= 8 * edge for s in shapes)
    tiled = sanitize.small_shapes(catalogue.get(str(TILED)), 16)
    # Any size: the odd ones are kept, for the bounds checks.
    assert Shape(37, 53, 29) in tiled and Shape.square(37) in tiled


def test_check_refuses_a_kernel_with_no_small_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "matmul.cu").write_text(NAIVE.with_suffix(".cu").read_text())
    (folder / "matmul.toml").write_text(NAIVE.read_text().replace('"n % TILE == 0"', '"n % TILE == 0", "n > 4096"'))
    monkeypatch.setattr(sanitize, "find_sanitizer", lambda: "compute-sanitizer")
    with pytest.raises(GemmlabError, match="No small size"):
        sanitize.check([str(folder / "matmul.toml")], "memcheck")


# -- profile --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "edge", "name"),
    [(TILED, 16, "_Z12matmul_tiledILi16EEvPKfS1_Pfiii"), (NAIVE, 32, "matmul_naive")],
)
def test_ncu_command_names_the_users_function_and_declaration(path: Path, edge: int, name: str):
    point = catalogue.point(str(path), Shape.square(512), edge)
    command = ncu.command.ncu_command("ncu", ncu.command.mangled_name(point), point, python="python")
    assert command[command.index("--kernel-name") + 1] == name
    child = command[command.index("gemmlab.measure.ncu") + 1 :]
    assert child == [str(path.resolve()), str(edge), "512", "512", "512", "float32"]


def test_a_users_kernel_has_no_analytic_cgma():
    point = catalogue.point(str(TILED), Shape.square(512), 16)
    figure = next(f for f in ncu.metrics.PROFILED if f.key == "cgma_analytic")
    assert figure.value({}, point) is None
    assert backends.for_kernel("tiled_template/matmul").analytic_cgma("tiled_template/matmul", point.shape, 16) is None
    # The catalogue's model is still there.
    assert backends.for_kernel("tiled").analytic_cgma("tiled", point.shape, 16) == 16


# -- sweep ----------------------------------------------------------------------


def test_sweep_plans_users_kernel_beside_catalogue_ones():
    points, refused = plan([str(NAIVE), "tiled"], [Shape.square(256), Shape.square(500)], [8, 16])
    assert {(p.kernel, p.shape.n, p.block_edge) for p in points} == {
        (k, 256, e) for k in ("naive_define/matmul", "tiled") for e in (8, 16)
    }
    assert any("n % TILE == 0" in why for label, why in refused if label.startswith("naive_define/matmul 500"))


def test_param_values_give_points_with_their_own_configuration(two_params: Path):
    points, _ = plan([str(two_params), "tiled"], [Shape.square(256)], [16], params={"STEP": [1, 4]})
    mine = [p for p in points if p.kernel == "steps/matmul"]
    assert [dict(p.config) for p in mine] == [{"STEP": 1}, {"STEP": 4}]
    keys = [p.keys()[0] for p in mine]
    assert len(set(keys)) == 2 and all('"STEP"' in k for k in keys)
    # The catalogue kernel does not declare STEP: it runs once, as catalogued.
    assert [p.config for p in points if p.kernel == "tiled"] == [None]
    # NAME alone: the declared values.
    declared, _ = plan([str(two_params)], [Shape.square(256)], [16], params={"STEP": None})
    assert [dict(p.config)["STEP"] for p in declared] == [1, 2, 4]


def test_param_mistakes_are_refused(two_params: Path):
    with pytest.raises(GemmlabError, match="--blocks"):
        plan([str(two_params)], [Shape.square(256)], params={"TILE": [8]})
    with pytest.raises(GemmlabError, match="declares the parameter STPE"):
        plan([str(two_params)], [Shape.square(256)], params={"STPE": [2]})
    with pytest.raises(DeclarationError, match="positive whole number"):
        user.variant(catalogue.get(str(two_params)), {"STEP": 0})


def test_variant_compiles_with_its_values(two_params: Path):
    spec = user.variant(catalogue.get(str(two_params)), {"STEP": 4, "TILE": 8})
    assert spec.config == {"STEP": 4} and spec.block_edges == (8,)
    text = spec.source_text(8)
    assert "#define STEP 4" in text and "#define TILE 8" in text
    assert spec.grid(Shape.square(64), 8) == (8, 8, 1)
    # The catalogue keeps the kernel as declared.
    assert catalogue.get("steps/matmul").config == {"STEP": 1}


def test_sweep_of_params_stores_configurations_and_resumes(two_params: Path, tmp_path: Path):
    points, _ = plan([str(two_params)], [Shape.square(256)], [8, 16], params={"STEP": [1, 2]})
    calls: list = []
    with Store.open(tmp_path / "r.db") as store:
        first = sweep(points, store, runner=fake_runner(calls), progress=False, run_info=RUN_INFO)
        again = sweep(points, store, runner=fake_runner(calls), progress=False, run_info=RUN_INFO)
        rows = store.rows()
    assert len(first.done) == 4 and not first.failed
    assert len(again.skipped_existing) == 4 and not again.done and len(calls) == 4
    assert {(r["block_edge"], json.loads(r["config"])["STEP"]) for r in rows} == {(8, 1), (8, 2), (16, 1), (16, 2)}
    assert {r["source"] for r in rows} == {str(two_params)}
    assert {c[3]["STEP"] for c in calls} == {1, 2}


# -- report ---------------------------------------------------------------------


def _row(kernel: str, n: int, edge: int, gflops: float, **extra) -> dict:
    return {"experiment": None, "kernel": kernel, "backend": "nvrtc", "m": n, "n": n, "k": n, "block_edge": edge,
            "dtype": "float32", "variant": "", "median_ms": 2 * n**3 / gflops / 1e6, "gflops": gflops,
            "gbytes_per_s": 1.0, "metric": "gflops", "baseline_name": "cuBLAS", "baseline_gflops": 9000.0,
            "ratio_to_baseline": gflops / 9000.0, "error": 1e-7, "warnings": [], "gpu_name": "Fake GPU",
            "cc": "9.0", "date": "2026-01-01", **extra}  # fmt: skip


def test_report_gives_a_users_kernel_its_own_page(tmp_path: Path):
    source = str(NAIVE)
    rows = [
        _row("naive_define/matmul", 256, 16, 111.5, source=source, config=None),
        _row("naive_define/matmul", 512, 16, 222.5, source=source, config=None),
        _row("tiled", 256, 16, 333.5, source=""),
        _row("tiled", 512, 16, 444.5, source=""),
    ]
    failure = {"experiment": None, "kernel": "naive_define/matmul", "m": 1024, "n": 1024, "k": 1024,
               "block_edge": 32, "dtype": "float32", "config": None, "kind": "wrong", "source": source,
               "reason": "C differs from the reference at (3, 7)"}  # fmt: skip
    index = write_report(rows, tmp_path / "out", failures=[failure], occupancy=False)
    page = index.parent / "kernel-naive_define-matmul" / "index.html"
    assert "kernel-naive_define-matmul/index.html" in index.read_text()
    text = page.read_text()
    assert "naive_define/matmul" in text and source in text
    assert "222.5" in text and "111.5" in text and "9,000.0" in text  # its figures beside cuBLAS
    assert "tiled" in text  # the kernel it was swept with
    assert "C differs from the reference at (3, 7)" in text and "wrong" in text
    assert (page.parent / "gflops_vs_size.png").stat().st_size > 1000
    assert (page.parent / "gflops_vs_size.svg").read_text().lstrip().startswith("<?xml")  # the vector twin
    csv_lines = (page.parent / "table.csv").read_text().splitlines()
    assert csv_lines[1].startswith("256,16,-,") and len(csv_lines) == 3
    # The catalogue kernel gets no page of its own.
    assert not (index.parent / "kernel-tiled").exists()


def test_an_integer_kernels_page_counts_operations_not_flops(tmp_path: Path):
    source = str(NAIVE)
    rows = [_row("int32_naive/matmul", n, 16, 50.0 * n, source=source, config=None, dtype="int32") for n in (256, 512)]
    index = write_report(rows, tmp_path / "out", occupancy=False)
    folder = index.parent / "kernel-int32_naive-matmul"
    header = (folder / "table.csv").read_text().splitlines()[0]
    assert "GOPS" in header and "GFLOPS" not in header
    assert "GOPS against the size" in (folder / "index.html").read_text()
    # A float kernel's page keeps FLOPs.
    float_rows = [_row("naive_define/matmul", 256, 16, 111.5, source=source, config=None)]
    index = write_report(float_rows, tmp_path / "out2", occupancy=False)
    assert "GFLOPS" in (index.parent / "kernel-naive_define-matmul" / "table.csv").read_text().splitlines()[0]


def test_report_reads_failures_from_the_database(tmp_path: Path):
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        run_id = store.start_run(RUN_INFO)
        row = _row("tiled_template/matmul", 256, 16, 100.0, source=str(TILED))
        store.add_results(run_id, None, [{k: v for k, v in row.items() if k not in ("gpu_name", "cc", "date")}])
        store.add_failure(run_id, None, {"kernel": "tiled_template/matmul", "m": 512, "n": 512, "k": 512,
                                         "dtype": "float32", "kind": "fault", "reason": "illegal address"})  # fmt: skip
    index = write_report(db, tmp_path / "out", occupancy=False)
    text = (index.parent / "kernel-tiled_template-matmul" / "index.html").read_text()
    assert "illegal address" in text and "100.0" in text


# -- tune -----------------------------------------------------------------------


def test_tune_searches_a_declarations_parameters(two_params: Path):
    space = tune.search_space(str(two_params), [Shape.square(1024)])
    assert space[0] == {"TILE": 16, "STEP": 1}  # the declaration's default first
    assert sorted((c["TILE"], c["STEP"]) for c in space) == [(t, s) for t in (8, 16) for s in (1, 2, 4)]
    # At 24 only TILE = 8 divides n: the declaration's accepts filters the rest.
    assert {c["TILE"] for c in tune.search_space(str(two_params), [Shape.square(24)])} == {8}
    assert tune.search_space(str(TILED), [Shape.square(1000)]) == [{"TILE": 16}, {"TILE": 8}, {"TILE": 32}]


def test_a_users_kernel_is_told_by_the_catalogue_not_by_a_slash(two_params: Path, monkeypatch):
    monkeypatch.setattr(catalogue, "_DECLARED", {})
    # A slash that names no user's kernel (a misspelt catalogue id): the tuner
    # refuses it as it refuses any other name outside its ladders, listing the
    # tunable kernels, rather than taking it for a user's kernel.
    with pytest.raises(UnknownName, match="Unknown tunable kernel 'sgemm/warptile'") as found:
        tune.resolved_dtype("sgemm/warptile")
    assert "sgemm_warptile" in found.value.fix
    # Nor does a sweep take it for one whose parameters it sets.
    assert not catalogue.is_declared("sgemm/warptile")
    assert parameter_configs("sgemm/warptile", {"STEP": [2, 4]}) == [None]
    # A user's kernel read by its path is then known by its id, folder/stem.
    kernel_id = catalogue.get(str(two_params)).id
    assert catalogue.is_declared(kernel_id)
    assert tune.search_space(kernel_id, [Shape.square(24)]) == tune.search_space(str(two_params), [Shape.square(24)])
    assert parameter_configs(kernel_id, {"STEP": [2, 4]}) == [(("STEP", 2),), (("STEP", 4),)]


def test_tune_stores_candidates_and_the_choice_for_a_users_kernel(tmp_path: Path):
    calls = []

    def runner(spec, shape, *, dtype, reps, warmup, max_seconds, baseline):
        edge = spec.default_block_edge()
        calls.append(edge)
        result = fake_runner([])(spec.id, shape, edge, dtype, reps=reps, warmup=warmup, max_seconds=max_seconds)
        result.gflops = {8: 50.0, 16: 300.0, 32: 200.0}[edge]
        return result

    with Store.open(tmp_path / "t.db") as store:
        summary = tune.tune(str(TILED), [512], store, runner=runner, device=FAKE_GPU, progress=False)
        again = tune.tune(str(TILED), [512], store, runner=runner, device=FAKE_GPU, progress=False)
        chosen = tune.tuned_spec("tiled_template/matmul", Shape.square(512), store, "Fake GPU")
    assert sorted(calls) == [8, 16, 32]  # the second search measured nothing
    assert len(again.already) == 3
    assert summary.best["small"].config == {"TILE": 16}
    assert chosen.id == "tiled_template/matmul" and chosen.block_edges == (16,)


def test_tune_refuses_a_declaration_without_parameters(tmp_path: Path):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "matmul.cu").write_text(NAIVE.with_suffix(".cu").read_text())
    text = NAIVE.read_text().replace('edge = "TILE"\n', "").split("[parameters]")[0]
    (folder / "matmul.toml").write_text(text.replace("TILE", "16"))
    with pytest.raises(GemmlabError, match="nothing to tune"):
        tune.resolved_dtype(str(folder / "matmul.toml"))


def test_sweep_param_option_is_read():
    from gemmlab.cli.sweep import parse_params

    assert parse_params(["STEP=1,4", "UNROLL"]) == {"STEP": [1, 4], "UNROLL": None}
    with pytest.raises(GemmlabError, match="given twice"):
        parse_params(["STEP=1", "STEP=2"])
    with pytest.raises(GemmlabError, match="NAME=v1,v2"):
        parse_params(["=4"])
    with pytest.raises(GemmlabError, match="whole numbers"):
        parse_params(["STEP=a"])


def test_a_users_float_kernel_is_profiled_with_the_tensor_core_counters_too() -> None:
    from gemmlab.measure.ncu.metrics import TENSOR_OPS, metrics_for, uses_tensor_cores

    naive = catalogue.point(str(NAIVE), Shape.square(64), 16)
    assert uses_tensor_cores(naive) and set(TENSOR_OPS) <= set(metrics_for(naive))
    assert not uses_tensor_cores(catalogue.point("tiled", Shape.square(64), 16))


def test_run_takes_the_tuned_configuration_of_a_users_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from gemmlab.api.run import configured

    def runner(spec, shape, *, dtype, reps, warmup, max_seconds, baseline):
        edge = spec.default_block_edge()
        result = fake_runner([])(spec.id, shape, edge, dtype, reps=reps, warmup=warmup, max_seconds=max_seconds)
        result.gflops = {8: 50.0, 16: 300.0, 32: 200.0}[edge]
        return result

    db = tmp_path / "t.db"
    with Store.open(db) as store:
        tune.tune(str(TILED), [512], store, runner=runner, device=FAKE_GPU, progress=False)
    monkeypatch.setattr(tune, "current_device", lambda: FAKE_GPU)
    spec, source = configured(catalogue.get(str(TILED)), Shape.square(512), db, None, tuned=True)
    assert source == "tuned" and spec.block_edges == (16,) and user.all_values(spec) == {"TILE": 16}
    assert spec is not catalogue.get(spec.id)  # so the worker is given the values with the declaration
    declared, source = configured(catalogue.get(str(TILED)), Shape.square(512), db, None, tuned=False)
    assert source == "declaration" and declared is catalogue.get("tiled_template/matmul")


def test_run_from_python_takes_the_tuned_configuration_as_the_command_line_does(tmp_path: Path, monkeypatch) -> None:
    """Issue 51: `gemmlab run sgemm_padded_b 4096` ran the tuned configuration,
    `gemmlab.api.run("sgemm_padded_b", 4096)` the catalogue's default. Both now
    go through gemmlab.api.run's policy: tuned unless told otherwise, or given."""
    import gemmlab.api as lab
    from gemmlab.measure import run as measure_run

    kernel = "sgemm_warptile"
    configs = catalogue.configs(kernel)
    favoured = configs[1]

    def tuning_runner(spec, shape, *, dtype, reps, warmup, max_seconds, baseline):
        result = fake_runner([])("tiled", shape, 16, dtype, reps=reps, warmup=warmup, max_seconds=max_seconds)
        result.kernel, result.config = spec.id, spec.config
        result.gflops = 900.0 if spec.config == favoured else 100.0
        return result

    db = tmp_path / "t.db"
    monkeypatch.setattr(tune, "current_device", lambda: FAKE_GPU)
    with Store.open(db) as store:
        tune.tune(kernel, [1024], store, runner=tuning_runner, device=FAKE_GPU, progress=False, configs=configs[:3])
    ran = []

    def measured(kernel_id, shape, edge, kind, *, spec=None, **options):
        ran.append(spec.config)
        result = fake_runner([])("tiled", shape, 16, kind or "float32", reps=1, warmup=0, max_seconds=1)
        result.kernel, result.config = kernel_id, spec.config
        return result

    monkeypatch.setattr(measure_run, "run", measured)
    tuned = lab.run(kernel, 1024, db=db)
    assert ran[-1] == favoured and tuned.config_source == "tuned"
    lab.run(kernel, 1024, db=db, tuned=False)
    assert ran[-1] == catalogue.get(kernel).config
    given = lab.run(kernel, 1024, db=db, config=configs[2])
    assert ran[-1] == configs[2] and given.config_source == "given"


def test_tune_runs_a_users_candidates_watched_and_rejects_a_hang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from gemmlab.core.errors import KernelStopped

    given = []

    def watched(worker, kernel_id):
        given.append((type(worker).__name__, kernel_id))

        def runner(spec, shape, *, dtype, reps, warmup, max_seconds, baseline):
            edge = spec.default_block_edge()
            if edge == 32:
                raise KernelStopped("hang", f"hang: {kernel_id} gave no answer within the time limit of 60 s.")
            result = fake_runner([])(spec.id, shape, edge, dtype, reps=reps, warmup=warmup, max_seconds=max_seconds)
            result.gflops = float(edge)
            return result

        return runner

    monkeypatch.setattr(tune, "_watched_runner", watched)
    with Store.open(tmp_path / "t.db") as store:
        summary = tune.tune(str(TILED), [512], store, device=FAKE_GPU, progress=False)
        rejected = store.candidates("Fake GPU", "tiled_template/matmul", status="rejected")
    assert given == [("Worker", "tiled_template/matmul")]
    assert [r["config"] for r in rejected] == ['{"TILE": 32}'] and "time limit" in rejected[0]["reason"]
    assert summary.best["small"].config == {"TILE": 16}
