"""gemmlab.matmul and gemmlab.Matmul on PyTorch tensors (issue 50): taken
through DLPack with no copy, bfloat16 natively, the result handed back as a
tensor written on PyTorch's current stream; what cannot be taken is refused
with the conversion that fixes it."""

from __future__ import annotations

import pytest

import gemmlab
from gemmlab.core.errors import GemmlabError

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


def _relative_error(got, want) -> float:
    got, want = got.double(), want.double()
    return float((got - want).abs().max() / want.abs().max())


def test_float32_tensors_give_a_float32_tensor_as_torch_computes_it(tmp_path) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(300, 200, device="cuda")
    b = torch.randn(200, 260, device="cuda")
    out = gemmlab.matmul(a, b, db=tmp_path / "none.sqlite")
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and out.is_cuda
    assert tuple(out.shape) == (300, 260) and _relative_error(out, a @ b) < 1e-5
    c = torch.randn(300, 260, device="cuda")
    scaled = gemmlab.matmul(a, b, c, alpha=1.5, beta=-0.5, db=tmp_path / "none.sqlite")
    assert _relative_error(scaled, 1.5 * (a @ b) - 0.5 * c) < 1e-5


@pytest.mark.parametrize("out_dtype", [None, "bfloat16"])
def test_bfloat16_tensors_travel_as_their_bits_and_come_back_typed(tmp_path, out_dtype: str | None) -> None:
    a = torch.randn(256, 512, device="cuda").bfloat16()
    bt = torch.randn(384, 512, device="cuda").bfloat16()  # N x K, as the tensor cores read B
    out = gemmlab.matmul(a, bt.T, out_dtype=out_dtype, db=tmp_path / "none.sqlite")
    want = a.float() @ bt.float().T
    assert out.dtype == (torch.bfloat16 if out_dtype else torch.float32)
    assert _relative_error(out.float(), want) < (1e-2 if out_dtype else 1e-3)


def test_the_product_is_ordered_on_torchs_current_stream(tmp_path) -> None:
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        a = torch.randn(2048, 2048, device="cuda")
        b = torch.randn(2048, 2048, device="cuda")
        a.mul_(2.0)  # still queued on the side stream when matmul is called
        out = gemmlab.matmul(a, b, db=tmp_path / "none.sqlite")
        want = a @ b
    torch.cuda.synchronize()
    assert _relative_error(out, want) < 1e-4


def test_a_bound_product_on_tensors_returns_its_tensor_and_sees_new_values(tmp_path) -> None:
    a = torch.randn(128, 192, device="cuda")
    b = torch.randn(192, 160, device="cuda")
    product = gemmlab.Matmul(a, b, db=tmp_path / "none.sqlite")
    first = product.run()
    assert isinstance(first, torch.Tensor) and _relative_error(first, a @ b) < 1e-5
    a.copy_(torch.randn_like(a))
    second = product.run()
    assert second.data_ptr() == first.data_ptr() and _relative_error(second, a @ b) < 1e-5


def test_what_cannot_be_taken_is_refused_with_the_fix(tmp_path) -> None:
    with pytest.raises(GemmlabError, match=r"on cpu.*\.cuda\(\)"):
        gemmlab.matmul(torch.ones(4, 4), torch.ones(4, 4, device="cuda"))
    with pytest.raises(GemmlabError, match=r"a is torch\.float16\. Convert it first: a\.float\(\) or a\.bfloat16\(\)"):
        gemmlab.matmul(torch.ones(4, 4, device="cuda", dtype=torch.float16), torch.ones(4, 4, device="cuda"))
