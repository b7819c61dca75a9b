"""The peer rungs without a GPU: their entries solve the CUDA C++ ladders'
problems, a missing extra is named, the Triton rungs compile for Hopper
ahead of any launch (when Triton is installed), and the programming-models
table and plot come out of synthetic results."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

try:  # Python 3.11 and later; tomli (the same parser) before
    import tomllib
except ModuleNotFoundError:
    import tomli as tomllib  # type: ignore[no-redef]
from typer.testing import CliRunner

from gemmlab import backends
from gemmlab.backends.peers import import_rung
from gemmlab.cli import app
from gemmlab.core.errors import ConstraintError, DeviceLimitError
from gemmlab.core.extras import MissingExtra
from gemmlab.kernels import catalogue
from gemmlab.kernels.peers import spec as peer_spec
from gemmlab.kernels.peers.spec import MODELS, PEERS
from gemmlab.measure.run import run
from gemmlab.report.models import code_lines, models_plot, models_rows, models_text

ROOT = Path(__file__).resolve().parents[1]
TRITON = peer_spec.installed("triton")
CUTE = peer_spec.installed("cutlass.cute")
TRITON_RUNGS = [s for s in PEERS if s.model == "triton"]


@pytest.mark.parametrize("spec", PEERS, ids=lambda s: s.id)
def test_a_peer_rung_is_found_by_id_and_served_by_the_peers_backend(spec: peer_spec.PeerSpec) -> None:
    assert catalogue.get(spec.id) is spec
    assert backends.for_kernel(spec.id).name == "peers"
    assert spec.id not in catalogue.kernel_ids(), "NVRTC compiles the catalogue; the peers stay apart"
    # The same problem as the CUDA C++ ladder of its element type, so the same check and baseline.
    ladder = {"float32": "sgemm", "bfloat16": "tensor", "e4m3": "lowp"}[spec.dtypes[0]]
    assert spec.problem.name == ladder
    assert (ROOT / "src/gemmlab/kernels" / str(spec.source)).is_file()


def test_the_nvrtc_backend_does_not_claim_the_peer_rungs() -> None:
    assert not set(catalogue.peer_ids()) & set(backends.nvrtc.BACKEND.kernel_ids())


def test_the_tma_rungs_refuse_rows_that_are_not_whole_16_byte_pieces() -> None:
    assert any("K = 100 is not a multiple of 8" in v for v in catalogue.get("triton_tc_tma").violations(
        catalogue.Shape(128, 128, 100), 0, "bfloat16"))  # fmt: skip
    assert any("N = 130" in v for v in catalogue.get("triton_sgemm_tma").violations(
        catalogue.Shape(128, 130, 128), 0, "float32"))  # fmt: skip
    assert catalogue.get("triton_tc_blocked").violations(catalogue.Shape(333, 517, 100), 0, "bfloat16") == []


def test_a_missing_extra_is_named_in_needs_and_when_the_rung_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peer_spec, "installed", lambda module: False)
    monkeypatch.setitem(sys.modules, "triton", None)  # import triton now raises ImportError
    spec = catalogue.get("triton_tc_blocked")
    assert "the triton extra (not installed)" in spec.needs
    with pytest.raises(MissingExtra) as caught:
        import_rung(spec)
    assert "pip install 'gemmlab[triton]'" in caught.value.fix and spec.id in str(caught.value)


def test_the_extras_are_declared_in_pyproject() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for model in MODELS.values():
        assert model.extra in extras
    assert any(d.startswith("triton") for d in extras["triton"])
    assert any(d.startswith("nvidia-cutlass-dsl") for d in extras["cute"])


def test_gemmlab_kernels_lists_the_peer_rungs_with_their_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peer_spec, "installed", lambda module: False)
    result = CliRunner().invoke(app, ["kernels", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["id"]: row for row in __import__("json").loads(result.output)}
    for spec in PEERS:
        assert f"the {MODELS[spec.model].extra} extra (not installed)" in rows[spec.id]["constraints"]


@pytest.mark.skipif(not TRITON, reason="Triton is not installed (pip install 'gemmlab[triton]')")
@pytest.mark.parametrize(("kernel", "dtype"), [(s.id, d) for s in TRITON_RUNGS for d in s.dtypes if d != "e4m3-bf16"])
def test_a_triton_rung_compiles_for_hopper_without_a_gpu(kernel: str, dtype: str) -> None:
    from gemmlab.kernels.peers.ahead import compile_ahead

    spec = catalogue.get(kernel)
    compiled = compile_ahead(spec, dtype, "sm_90")  # type: ignore[arg-type]
    assert compiled.cubin[:4] == b"\x7fELF" and compiled.seconds > 0
    # bfloat16 and float16 reach the tensor cores by wgmma; float32 without TF32 never does.
    assert ("wgmma" in compiled.ptx) == (dtype != "float32")
    assert ("cp.async.bulk.tensor" in compiled.ptx) == kernel.endswith("_tma")
    if dtype == "e4m3":  # FP8 wgmma, four per 128-deep k-tile, each followed by its promotion into FP32
        assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" in compiled.ptx


@pytest.mark.skipif(not TRITON, reason="Triton is not installed (pip install 'gemmlab[triton]')")
@pytest.mark.parametrize("spec", TRITON_RUNGS, ids=lambda s: s.id)
def test_a_triton_rungs_profiled_name_is_its_kernels_name(spec: peer_spec.PeerSpec) -> None:
    module = importlib.import_module(spec.module)  # not import_rung: it wants torch too
    assert module.KERNEL.fn.__name__ == spec.kernel_name


def test_a_missing_cute_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peer_spec, "installed", lambda module: False)
    monkeypatch.setitem(sys.modules, "cutlass", None)
    monkeypatch.setitem(sys.modules, "cutlass.cute", None)
    spec = catalogue.get("cute_tc_wgmma")
    assert "the cute extra (not installed)" in spec.needs
    with pytest.raises(MissingExtra) as caught:
        import_rung(spec)
    assert "pip install 'gemmlab[cute]'" in caught.value.fix and "CuTe DSL" in str(caught.value)


def test_the_cute_rung_refuses_k_rows_tma_cannot_describe_and_needs_sm_90a() -> None:
    spec = catalogue.get("cute_tc_wgmma")
    assert any(
        "K = 100 is not a multiple of 8" in v for v in spec.violations(catalogue.Shape(128, 128, 100), 0, "bfloat16")
    )
    assert spec.violations(catalogue.Shape(333, 517, 264), 0, "bfloat16") == []  # M and N are free
    assert spec.compile_arch("sm_90") == "sm_90a"


@pytest.mark.skipif(not CUTE, reason="the CuTe DSL is not installed (pip install 'gemmlab[cute]')")
@pytest.mark.parametrize("index", [0, 1])
def test_the_cute_rung_compiles_for_sm_90a_without_a_gpu(index: int) -> None:
    import re

    from gemmlab.kernels.peers import cute_wgmma

    config = cute_wgmma.CONFIGS[index]
    compiled = cute_wgmma.compile_kernel(config, cute_wgmma.fake_arguments(), "sm_90a")
    ptx = compiled.__ptx__
    assert ".target sm_90a" in ptx
    # Four bfloat16 wgmmas per 64-deep k-tile, as wide as the tile's N; A and B by TMA into 2 x stages mbarriers.
    assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{config.tile_n}k16.f32.bf16.bf16") == 4
    assert "cp.async.bulk.tensor.2d" in ptx
    assert ptx.count("mbarrier.init.shared.b64") == 2 * config.stages
    # One predicated store per accumulator: (64 x tile_n) / 128 threads per warpgroup.
    assert ptx.count("st.global.b32") == 64 * config.tile_n // 128
    # `gemmlab profile` finds the kernel by the name the DSL gave it.
    [name] = compiled.kernel_info
    assert re.match(catalogue.get("cute_tc_wgmma").kernel_name.removeprefix("regex:"), name), name


@pytest.mark.skipif(not CUTE, reason="the CuTe DSL is not installed (pip install 'gemmlab[cute]')")
@pytest.mark.parametrize(
    ("kernel", "dtype", "tile_k"), [("cute_tc_wgmma", "bfloat16", 64), ("cute_fp8_wgmma", "e4m3", 128)]
)
def test_the_cute_rungs_compile_is_timed_as_the_triton_rungs_are(kernel: str, dtype: str, tile_k: int) -> None:
    from gemmlab.kernels.peers.ahead import compile_ahead

    compiled = compile_ahead(catalogue.get(kernel), dtype, "sm_90")  # type: ignore[arg-type]
    assert compiled.cubin[:4] == b"\x7fELF" and compiled.seconds > 0
    # 4 stages of 128 x 128 tiles, each row 128 bytes (64 bfloat16 or 128 e4m3 elements), and their mbarriers.
    assert compiled.shared_bytes == 4 * (128 + 128) * 128 + 4 * 16
    assert importlib.import_module(catalogue.get(kernel).module).CONFIGS[0].tile_k == tile_k  # type: ignore[attr-defined]


# --- the CuTe DSL FP8 rung ------------------------------------------------------------------

CUTE_FP8 = "cute_fp8_wgmma"


def test_the_cute_fp8_rung_solves_the_lowp_problem_and_refuses_k_rows_tma_cannot_describe() -> None:
    spec = catalogue.get(CUTE_FP8)
    assert spec.problem.name == "lowp" and spec.dtypes == ("e4m3", "e4m3-bf16")
    assert spec.compile_arch("sm_90") == "sm_90a"
    with pytest.raises(DeviceLimitError):
        spec.compile_arch("sm_89")  # FP8 wgmma is Hopper's: Ada's FP8 mma.sync is another rung's
    # One e4m3 element a byte: TMA's 16-byte rows need K in multiples of 16; M and N are free.
    assert spec.violations(catalogue.Shape(333, 516, 272), 0, "e4m3-bf16") == []
    with pytest.raises(ConstraintError) as caught:
        run(CUTE_FP8, catalogue.Shape(333, 516, 264), dtype="e4m3")  # refused before any GPU is asked for
    assert "K = 264 is not a multiple of 16" in str(caught.value)
    assert "triton_fp8_blocked" in caught.value.fix  # the same problem with masks, at any K


def scale_d_flags(ptx: str) -> list[int | None]:
    """For each wgmma in the PTX, the constant its scale-d predicate came from: 0 means the wgmma
    overwrites its accumulator, 1 adds to it; None when the flag is not a constant (carried in a loop)."""
    constants: dict[str, int] = {}
    flags: list[int | None] = []
    flag: int | None = None
    for line in ptx.splitlines():
        if moved := re.match(r"\s*mov\.b32\s+(%r\d+), (\d+);", line):
            constants[moved[1]] = int(moved[2])
        elif tested := re.match(r"\s*setp\.ne\.b32 p, (%r\d+), 0;", line):
            flag = constants.get(tested[1])
        elif "wgmma.mma_async" in line:
            flags.append(flag)
    return flags


@pytest.mark.skipif(not CUTE, reason="the CuTe DSL is not installed (pip install 'gemmlab[cute]')")
@pytest.mark.parametrize("index", [0, 1])
@pytest.mark.parametrize("c_type", ["Float32", "BFloat16"])
def test_the_cute_fp8_rung_compiles_for_sm_90a_and_promotes_every_k_tile(index: int, c_type: str) -> None:
    import cutlass

    from gemmlab.kernels.peers import cute_fp8
    from gemmlab.problems.lowp import SCALE_BLOCK

    config = cute_fp8.CONFIGS[index]
    assert config.promote and config.tile_k == SCALE_BLOCK  # one promotion per k-tile: the problem's chain
    compiled = cute_fp8.compile_kernel(config, cute_fp8.fake_arguments(getattr(cutlass, c_type)), "sm_90a")
    ptx = compiled.__ptx__
    assert ".target sm_90a" in ptx
    # Four e4m3 wgmmas per 128-deep k-tile; A and B by TMA into 2 x stages mbarriers.
    assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{config.tile_n}k32.f32.e4m3.e4m3") == 4
    assert "cp.async.bulk.tensor.2d" in ptx
    assert ptx.count("mbarrier.init.shared.b64") == 2 * config.stages
    # The promotion: each tile's first wgmma overwrites the accumulator, the rest add to it; the kernel
    # waits for all of them (never leaving one batch in flight) and adds the accumulator into the FP32
    # one, one add per element, inside the loop: between its wait and the epilogue's.
    per_thread = 64 * config.tile_n // 128
    assert scale_d_flags(ptx) == [0, 1, 1, 1]
    waits = [m.start() for m in re.finditer(r"wgmma\.wait_group\.sync\.aligned\s+(\d+)", ptx)]
    assert re.findall(r"wgmma\.wait_group\.sync\.aligned\s+(\d+)", ptx) == ["0", "0"]
    adds = [m.start() for m in re.finditer(r"\badd\.f32\b", ptx)]
    assert len(adds) == per_thread and waits[0] < min(adds) and max(adds) < waits[1]
    # The epilogue: the two scales loaded and multiplied once, then once into every sum.
    assert ptx.count("ld.global.b32") == 2 and ptx.count("mul.f32") == per_thread + 1
    if c_type == "Float32":
        assert ptx.count("st.global.b32") == per_thread and "cvt.rn.bf16.f32" not in ptx
    else:
        assert ptx.count("st.global.b16") == per_thread and ptx.count("cvt.rn.bf16.f32") == per_thread
    [name] = compiled.kernel_info
    assert re.match(catalogue.get(CUTE_FP8).kernel_name.removeprefix("regex:"), name), name


@pytest.mark.skipif(not CUTE, reason="the CuTe DSL is not installed (pip install 'gemmlab[cute]')")
def test_the_cute_bf16_rung_keeps_one_batch_in_flight_and_never_promotes() -> None:
    from gemmlab.kernels.peers import cute_wgmma

    compiled = cute_wgmma.compile_kernel(cute_wgmma.CONFIGS[0], cute_wgmma.fake_arguments(), "sm_90a")
    assert re.findall(r"wgmma\.wait_group\.sync\.aligned\s+(\d+)", compiled.__ptx__) == ["1", "0"]
    assert "add.f32" not in compiled.__ptx__ and "mul.f32" not in compiled.__ptx__
    [name] = compiled.kernel_info  # the FP8 rung's profiler name does not select the bfloat16 kernel
    assert not re.match(catalogue.get(CUTE_FP8).kernel_name.removeprefix("regex:"), name), name


@pytest.mark.skipif(not CUTE, reason="the CuTe DSL is not installed (pip install 'gemmlab[cute]')")
def test_the_cute_fp8_rung_compiles_from_real_arrays_whose_bytes_it_reads_as_e4m3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher's path with host arrays in place of torch's: uint8 bytes retyped as e4m3, sizes
    left dynamic, scales as one-element tensors. What the GPU run compiles, short of the launch."""
    monkeypatch.chdir(tmp_path)  # where the DSL would write the PTX and cubin it keeps, unless told another
    import cuda.bindings.driver as cuda_driver
    import cutlass
    import numpy as np
    from cutlass.cute.runtime import from_dlpack

    from gemmlab.kernels.peers import cute_fp8, cute_wgmma

    codes = np.zeros((333, 272), np.uint8)
    a, b = (cute_wgmma.cute_matrix(codes, 16, cutlass.Float8E4M3FN) for _ in "ab")
    assert a.element_type is cutlass.Float8E4M3FN
    c = cute_wgmma.cute_matrix(np.zeros((333, 333), np.float32), 4)
    scales = [from_dlpack(np.ones(1, np.float32), assumed_align=4) for _ in "ab"]
    compiled = cute_fp8.compile_kernel(cute_fp8.CONFIGS[0], (a, b, c, *scales, cuda_driver.CUstream(0)), "sm_90a")
    assert compiled.__ptx__.count("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3") == 4
    assert list(tmp_path.iterdir()) == []


def test_a_peer_backend_records_the_configuration_it_chose() -> None:
    from types import SimpleNamespace

    from gemmlab.backends.peers import PeerCompiled

    compiled = PeerCompiled("sm_90", catalogue.get("triton_tc_blocked"), module=None)  # type: ignore[arg-type]
    assert compiled.tuned_config is None
    compiled.config = SimpleNamespace(kwargs={"BM": 128, "BN": 256, "BK": 64}, num_warps=8, num_stages=3)
    assert compiled.tuned_config == {"BM": 128, "BN": 256, "BK": 64, "num_warps": 8, "num_stages": 3}
    compiled.config = SimpleNamespace(kwargs={"tile_m": 128, "tile_n": 128, "tile_k": 64, "stages": 4})
    assert compiled.tuned_config == {"tile_m": 128, "tile_n": 128, "tile_k": 64, "stages": 4}


@pytest.mark.skipif(not TRITON, reason="Triton is not installed (pip install 'gemmlab[triton]')")
def test_profiling_a_peer_rung_names_its_kernel_and_skips_the_tuning_launches(monkeypatch: pytest.MonkeyPatch) -> None:
    from gemmlab.backends import peers
    from gemmlab.backends.peers import TUNE_LAUNCHES
    from gemmlab.measure import ncu

    monkeypatch.setattr(peers, "import_rung", lambda spec: importlib.import_module(spec.module))
    point = catalogue.point("triton_tc_blocked", catalogue.Shape.square(512), None, "bfloat16")
    assert ncu.command.mangled_name(point) == "blocked_gemm"
    configs = len(importlib.import_module(point.spec.module).configs(2))  # type: ignore[attr-defined]
    skip = configs * (1 + TUNE_LAUNCHES) + ncu.command.PROFILED_LAUNCH
    command = ncu.command.ncu_command("ncu", "blocked_gemm", point, skip=ncu.command.launches_to_skip(point))
    assert command[command.index("--launch-skip") + 1] == str(skip)
    assert command[command.index("--kernel-name") + 1] == "blocked_gemm"


@pytest.mark.parametrize(("kernel", "dtype"), [("triton_tc_tma", "bfloat16"), ("triton_fp8_blocked", "e4m3")])
def test_a_peer_rung_is_profiled_with_the_tensor_core_counters(kernel: str, dtype: str) -> None:
    """Its compiler chooses the instructions, so nothing in the spec claims
    wgmma: the counters are collected as for a user's kernel."""
    from gemmlab.measure.ncu.metrics import TENSOR_8BIT, TENSOR_OPS, metrics_for

    wanted = set(TENSOR_OPS) | (set(TENSOR_8BIT) if dtype == "e4m3" else set())
    assert wanted <= set(metrics_for(catalogue.point(kernel, catalogue.Shape.square(512), None, dtype)))


# --- the programming-models table and plot, from synthetic rows ---------------------------

PEER_MODELS = {"triton_tc_tma": "Triton", "triton_tc_blocked": "Triton", "cute_x": "CuTe DSL"}


def _row(kernel: str, backend: str, gflops: float | None, baseline: float, n: int = 4096) -> dict:
    return {"kernel": kernel, "backend": backend, "dtype": "bfloat16", "m": n, "n": n, "k": n, "gflops": gflops,
            "baseline_gflops": baseline, "baseline_name": "cuBLAS GemmEx"}  # fmt: skip


ROWS = [
    _row("tc_wgmma", "nvrtc", 600e3, 700e3),
    _row("tc_mma", "nvrtc", 400e3, 710e3),
    _row("triton_tc_blocked", "peers", 500e3, 690e3),
    _row("triton_tc_tma", "peers", 550e3, 705e3),
    _row("triton_tc_tma", "peers", None, 700e3, n=2048),  # failed: no figure, so no row of its own
    _row("naive_define/matmul", "python", 900e3, 700e3),  # a user's kernel is no model of the table
]


def test_models_rows_keep_each_models_fastest_verified_rung_and_the_fastest_cublas() -> None:
    rows = models_rows(ROWS, PEER_MODELS, lines={"tc_wgmma": 300}, compile_s={"triton_tc_tma": 0.4})
    assert [(r.dtype, r.m) for r in rows] == [("bfloat16", 4096)]
    best = rows[0].best
    assert (best["CUDA C++"].kernel, best["CUDA C++"].gflops, best["CUDA C++"].lines) == ("tc_wgmma", 600e3, 300)
    assert (best["Triton"].kernel, best["Triton"].compile_s) == ("triton_tc_tma", 0.4)
    assert best["cuBLAS"].gflops == 710e3
    assert "CuTe DSL" not in best


def test_models_text_shows_tflops_rung_lines_and_compile_time_and_a_dash_for_a_missing_model() -> None:
    text = models_text(models_rows(ROWS, PEER_MODELS, lines={"tc_wgmma": 300}, compile_s={"tc_wgmma": 2.5}))
    header, line = text.splitlines()
    assert header.split()[:3] == ["dtype", "M", "x"] and "CuTe DSL TFLOPS" in header
    assert "600.0 (tc_wgmma) [300 lines, 2.5 s compile]" in line
    assert "550.0 (triton_tc_tma)" in line
    assert re.search(r"\s-\s+710\.0$", line), line  # no CuTe DSL result; cuBLAS's figure alone


def test_models_plot_draws_a_bar_per_model_with_a_result(tmp_path: Path) -> None:
    plots = models_plot(models_rows(ROWS, PEER_MODELS), tmp_path)
    assert [p.file for p in plots] == ["programming_models.png"]
    assert (tmp_path / "programming_models.png").stat().st_size > 0 and (tmp_path / "programming_models.svg").exists()
    assert models_plot([], tmp_path) == []


def test_code_lines_count_neither_blank_lines_nor_comment_lines() -> None:
    assert code_lines("int x;\n\n// why\n  # also why\nx = 1;\n") == 2


def test_a_compile_time_for_a_c_type_ahead_does_not_know_is_refused_in_words() -> None:
    from gemmlab.kernels.peers.ahead import compile_ahead

    with pytest.raises(ConstraintError, match="Time it at e4m3"):
        compile_ahead(catalogue.get("triton_fp8_blocked"), "e4m3-bf16")  # type: ignore[arg-type]
