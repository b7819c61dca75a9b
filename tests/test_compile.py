"""NVRTC compiles every kernel with no GPU; the ptxas report is read and cached."""

from __future__ import annotations

import pytest

from gemmlab.backends.nvrtc import compile_kernel, normalise_arch, parse_ptxas_log
from gemmlab.core.errors import DeviceLimitError, UnknownName
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
