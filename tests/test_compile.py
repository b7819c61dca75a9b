"""NVRTC compiles every kernel with no GPU; the ptxas report is read and cached."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemmlab.backends.nvrtc import compile_kernel, normalise_arch, parse_ptxas_log
from gemmlab.core.errors import CompileError, DeviceLimitError, UnknownName
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec

LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z5tiledIfLi16EEvPKT_S2_PS0_iii' for 'sm_90a'
ptxas info    : Function properties for _Z5tiledIfLi16EEvPKT_S2_PS0_iii
ptxas         .     24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem
ptxas info    : Compile time = 2.579 ms
"""


def test_parse_ptxas_log() -> None:
    res = parse_ptxas_log(LOG)["_Z5tiledIfLi16EEvPKT_S2_PS0_iii"]
    assert (res.registers, res.smem_bytes, res.stack_bytes, res.barriers) == (40, 2048, 24, 1)
    assert res.spill_bytes == 20


@pytest.mark.parametrize("gpu_arch", ["sm_90", "sm_80"])
@pytest.mark.parametrize("spec", catalogue.CATALOGUE, ids=lambda s: s.id)
def test_every_kernel_compiles_without_spills(spec: KernelSpec, gpu_arch: str) -> None:
    """What an H100 or H200 and an A100 would run: the architecture each kernel
    compiles for there (sm_90a for the rungs built for it), so the run's cache
    hands these cubins to the tests that check the same kernels' resources."""
    try:
        arch = spec.compile_arch(gpu_arch)
    except DeviceLimitError as exc:
        pytest.skip(f"{exc.cause} (tests/test_tensor.py checks the refusal)")
    for edge in spec.block_edges or (0,):
        for dtype in spec.dtypes:
            compiled = compile_kernel(spec, edge, dtype, arch)
            assert compiled.cubin[:4] == b"\x7fELF"
            assert compiled.resources.registers > 0
            assert compiled.resources.spill_bytes == 0, (spec.id, edge, dtype, arch)


def test_static_shared_memory_matches_tiles() -> None:
    tiled = catalogue.get("tiled")
    assert compile_kernel(tiled, 16, "float32", "sm_90").resources.smem_bytes == 2 * 16 * 16 * 4
    smem = catalogue.get("tiled_prefetch_smem")
    assert compile_kernel(smem, 16, "float32", "sm_90").resources.smem_bytes == 4 * 16 * 16 * 4


def test_cache_hit_returns_same_report(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path))
    spec = catalogue.get("naive")
    first = compile_kernel(spec, 16, "float32", "sm_80")
    assert list(tmp_path.rglob("*.cubin"))
    second = compile_kernel(spec, 16, "float32", "sm_80")
    assert second.cubin == first.cubin and second.resources == first.resources


def test_damaged_cache_entry_is_rebuilt(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path))
    spec = catalogue.get("naive")
    compile_kernel(spec, 8, "float32", "sm_80")
    for meta in tmp_path.rglob("*.json"):
        meta.write_text("{not json")
    assert compile_kernel(spec, 8, "float32", "sm_80").resources.registers > 0


@pytest.mark.parametrize(("given", "want"), [("sm_90a", "sm_90a"), ("90", "sm_90"), ("9.0", "sm_90"), ("8.6", "sm_86"),
                                             ("compute_80", "sm_80"), ("SM_120", "sm_120")])  # fmt: skip
def test_normalise_arch(given: str, want: str) -> None:
    assert normalise_arch(given) == want


def test_bad_arch() -> None:
    with pytest.raises(UnknownName, match="not a GPU architecture"):
        normalise_arch("hopper")


def test_local_headers_are_inlined_into_the_source() -> None:
    """The cp.async rungs share one header; NVRTC gets one self-contained text."""
    text = catalogue.get("sgemm_multistage").source_text()
    assert '#include "' not in text
    assert "void cp_async16(" in text
    assert text.count("void cp_async16(") == 1
    assert "sgemm_multistage(" in text


HEADER = """#pragma once
template <typename T> __device__ T twice(T v) { return v + v; }
"""
KERNEL = """// A user's kernel outside the package, with a header beside it.
#include "parts/twice.cuh"
template <typename T, int B>
__global__ void doubled(const T* x, T* y, int n) {
    int i = blockIdx.x * B + threadIdx.x;
    if (i < n) y[i] = twice(x[i]);
}
"""


def _user_spec(source: Path) -> KernelSpec:
    return KernelSpec(
        id="user_doubled", source=source, function="doubled", source_doc="a test", summary="y = 2x",
        dtypes=("float32",), block_edges=(128,), grid=lambda s, b: (s.n // b, 1, 1), block=lambda s, b: (b, 1, 1),
    )  # fmt: skip


def test_a_kernel_outside_the_package_compiles_with_its_local_header(tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "twice.cuh").write_text(HEADER)
    (tmp_path / "doubled.cu").write_text(KERNEL)
    spec = _user_spec(tmp_path / "doubled.cu")
    assert "v + v" in spec.source_text()  # the header, inlined relative to the kernel's own folder
    compiled = compile_kernel(spec, 128, "float32", "sm_80", use_cache=False)
    assert compiled.kernel_id == "user_doubled" and compiled.arch == "sm_80"
    assert compiled.cubin[:4] == b"\x7fELF"
    assert compiled.resources.registers > 0


def test_a_broken_or_missing_outside_kernel_is_a_compile_error(tmp_path: Path) -> None:
    (tmp_path / "broken.cu").write_text(KERNEL.replace('#include "parts/twice.cuh"\n', ""))
    with pytest.raises(CompileError, match="user_doubled") as broken:
        compile_kernel(_user_spec(tmp_path / "broken.cu"), 128, "float32", "sm_80", use_cache=False)
    assert "twice" in broken.value.cause  # NVRTC's log names what it did not find
    (tmp_path / "lost.cu").write_text(KERNEL)  # its header is not there
    with pytest.raises(CompileError, match=r"twice\.cuh"):
        compile_kernel(_user_spec(tmp_path / "lost.cu"), 128, "float32", "sm_80", use_cache=False)


VECADD = (
    'extern "C" __global__ void add(float* a, const float* b, int n) { int i = threadIdx.x; if (i < n) a[i] += b[i]; }'
)


def test_a_cached_cubin_without_a_report_is_compiled_again_in_a_fresh_process(tmp_path, monkeypatch) -> None:
    """NVRTC's compute cache (on when the process compiled before gemmlab's
    backend was imported) hands back a cubin with no ptxas report; the compile
    is then done again where the cache is off."""
    from gemmlab.backends import nvrtc

    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path))
    real = nvrtc.nvrtc_compile
    calls = []

    def from_the_cache(source_text: str, expr: str, arch: str, name: str) -> tuple[bytes, str, str]:
        cubin, mangled, _log = real(source_text, expr, arch, name)
        return cubin, mangled, ""  # what a compute-cache hit leaves: no ptxas lines

    def fresh(source_text: str, expr: str, arch: str, name: str) -> tuple[bytes, str, str]:
        calls.append(expr)
        return real(source_text, expr, arch, name)

    monkeypatch.setattr(nvrtc.compile, "nvrtc_compile", from_the_cache)
    monkeypatch.setattr(nvrtc.compile, "_compile_in_fresh_process", fresh)
    compiled = compile_kernel(catalogue.get("tiled"), 16, "float32", "sm_80")
    assert calls == ["tiled<float, 16>"] and compiled.resources.registers > 0

    monkeypatch.setattr(nvrtc.compile, "_compile_in_fresh_process", from_the_cache)
    with pytest.raises(CompileError, match="no resource usage"):
        compile_kernel(catalogue.get("tiled"), 8, "float32", "sm_80")


def test_the_fresh_process_compiles_with_the_compute_cache_off() -> None:
    from gemmlab.backends import nvrtc

    cubin, mangled, log = nvrtc.compile._compile_in_fresh_process(VECADD, "add", "sm_80", "add.cu")
    assert cubin and mangled == "add" and nvrtc.parse_ptxas_log(log)["add"].registers > 0


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_wmma_kernel_compiles_with_the_headers_gemmlab_installs(dtype: str) -> None:
    """Issue 49: `#include <mma.h>` failed on an H200 whose headers (the
    nvidia-cuda-runtime wheel's) had mma.h but not the crt/mma.h it includes.
    gemmlab depends on nvidia-cuda-crt, which ships it; the example compiles
    against the headers gemmlab finds, the compile cache out of the way."""
    from gemmlab.backends import nvrtc

    include = nvrtc.compile._toolkit_include()
    assert include is not None and (Path(include) / "crt" / "mma.h").is_file(), include
    spec = catalogue.get(str(EXAMPLES / "wmma_half" / "matmul.toml"))
    compiled = compile_kernel(spec, 0, dtype, "sm_90", use_cache=False)
    assert compiled.resources.smem_bytes == 1024  # the float tile the warp stores through


def test_a_toolkit_header_missing_from_the_include_folder_names_the_package(tmp_path: Path, monkeypatch) -> None:
    from gemmlab.backends import nvrtc

    folder = tmp_path / "include"
    folder.mkdir()
    (folder / "mma.h").write_text('#include "crt/mma.h"\n')  # as the runtime wheel's mma.h does
    monkeypatch.setattr(nvrtc.compile, "_toolkit_include", lambda: str(folder))
    kernel = tmp_path / "k"
    kernel.mkdir()
    (kernel / "matmul.cu").write_text(
        '#include <mma.h>\nextern "C" __global__ void f(const float *A, const float *B, float *C, int n) {}\n'
    )
    (kernel / "matmul.toml").write_text('function = "f"\nproblem = "matmul"\ndtypes = ["float32"]\n'
                                        'arguments = ["A", "B", "C", "n"]\ngrid = [1]\nblock = [1]\n')  # fmt: skip
    spec = catalogue.get(str(kernel / "matmul.toml"))
    with pytest.raises(CompileError, match=r"lack crt/mma\.h.*pip install nvidia-cuda-crt"):
        compile_kernel(spec, 0, "float32", "sm_90", use_cache=False)


def test_a_grading_worker_never_reads_a_cubin_from_the_shared_cache(tmp_path: Path, monkeypatch) -> None:
    """Issue 49: a Python submission wrote a cubin into the shared cache under
    the key of a classmate's kernel, which was then graded at 11.5x cuBLAS.
    With the private cache (every grading worker), the disk cache is neither
    read nor written: a planted entry is not used."""
    from gemmlab.backends import nvrtc

    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "shared"))
    spec = catalogue.get("tiled")
    honest = compile_kernel(spec, 16, "float32", "sm_90")
    (planted,) = (tmp_path / "shared" / "cubin").glob("*.json")
    meta = planted.read_text().replace(f'"registers": {honest.resources.registers}', '"registers": 7')
    planted.write_text(meta)  # the poisoner's entry, under the honest kernel's key
    assert compile_kernel(spec, 16, "float32", "sm_90").resources.registers == 7  # the shared cache believes it
    monkeypatch.setenv(nvrtc.PRIVATE_CACHE_ENV, "1")
    monkeypatch.setattr(nvrtc.compile, "_IN_MEMORY", {})
    private = compile_kernel(spec, 16, "float32", "sm_90")
    assert private.resources.registers == honest.resources.registers and private.cubin == honest.cubin
    assert compile_kernel(spec, 16, "float32", "sm_90") is not private  # kept in memory, handed back a copy
    assert len(list((tmp_path / "shared" / "cubin").glob("*.json"))) == 1  # nothing written
