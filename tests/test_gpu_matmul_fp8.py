"""FP8 e4m3 through gemmlab.matmul on the GPU (issue 50), beside
torch._scaled_mm on the same tensors and scales: float32 and bfloat16 C,
torch tensors in and out, CuPy codes with fp8="e4m3", and a copy made for a
C-contiguous K x N b."""

from __future__ import annotations

import pytest

import gemmlab

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


def _hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() >= (9, 0)


def _inputs(m: int, n: int, k: int):
    torch.manual_seed(50)
    a = (torch.randn(m, k, device="cuda") * 4).to(torch.float8_e4m3fn)
    bt = (torch.randn(n, k, device="cuda") * 4).to(torch.float8_e4m3fn)  # N x K, as _scaled_mm wants B
    scale_a = torch.tensor(0.25, device="cuda")
    scale_b = torch.tensor(0.5, device="cuda")
    return a, bt, scale_a, scale_b


def _relative_error(got, want) -> float:
    got, want = got.double(), want.double()
    return float((got - want).norm() / want.norm())


@pytest.mark.skipif(not _hopper(), reason="FP8 per-tensor rungs with a bfloat16 C need sm_90a")
@pytest.mark.parametrize(("m", "n", "k"), [(4096, 4096, 4096), (300, 520, 1024), (16, 4096, 4096)])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32])
def test_fp8_tensors_match_scaled_mm(tmp_path, m: int, n: int, k: int, out_dtype) -> None:
    a, bt, scale_a, scale_b = _inputs(m, n, k)
    wanted = "bfloat16" if out_dtype == torch.bfloat16 else None
    out = gemmlab.matmul(a, bt.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=wanted, db=tmp_path / "none.sqlite")
    ref = torch._scaled_mm(a, bt.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype)
    exact = (a.float() * scale_a) @ (bt.float() * scale_b).t()
    assert out.dtype == out_dtype and tuple(out.shape) == (m, n) and out.is_cuda
    # Both sum the same exact products in FP32 (promoted every 128 K); a bfloat16 C rounds to 2^-9.
    bound = 4e-3 if out_dtype == torch.bfloat16 else 1e-4
    assert _relative_error(out, exact) < bound and _relative_error(ref, exact) < bound


@pytest.mark.skipif(not _hopper(), reason="FP8 per-tensor rungs need sm_90a")
def test_cupy_codes_with_fp8_and_float_scales_and_a_copied_b(tmp_path) -> None:
    import cupy as cp

    a, bt, _, _ = _inputs(256, 384, 512)
    codes_a = cp.from_dlpack(a.view(torch.uint8))
    codes_b = cp.ascontiguousarray(cp.from_dlpack(bt.view(torch.uint8)).T)  # K x N, C-contiguous: copied
    out = gemmlab.matmul(codes_a, codes_b, scale_a=0.25, scale_b=0.5, fp8="e4m3", db=tmp_path / "none.sqlite")
    exact = (a.float() * 0.25) @ (bt.float() * 0.5).t()
    assert isinstance(out, cp.ndarray) and out.dtype == cp.float32
    assert _relative_error(torch.from_dlpack(out), exact) < 1e-4


def test_an_e5m2_tensor_is_refused_with_where_it_runs(tmp_path) -> None:
    from gemmlab.core.errors import GemmlabError

    a = torch.randn(64, 64, device="cuda").to(torch.float8_e5m2)
    with pytest.raises(GemmlabError, match="takes e4m3 inputs; these are e5m2"):
        gemmlab.matmul(a, a.t(), scale_a=1.0, scale_b=1.0, db=tmp_path / "none.sqlite")
