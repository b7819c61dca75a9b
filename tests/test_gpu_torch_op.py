"""torch.ops.gemmlab.matmul (issue 50's stretch): gemmlab.matmul as a PyTorch
custom operator, eager and inside torch.compile, float32 and bfloat16."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


def test_the_operator_runs_eager_and_compiled(tmp_path, monkeypatch) -> None:
    from gemmlab.api import torch_op

    monkeypatch.setenv("GEMMLAB_DB", str(tmp_path / "none.sqlite"))
    torch_op.register()
    assert torch_op.register() is torch_op.register()  # registered once
    torch.backends.cuda.matmul.allow_tf32 = False
    a, b = torch.randn(300, 200, device="cuda"), torch.randn(200, 260, device="cuda")
    eager = torch.ops.gemmlab.matmul(a, b)
    assert eager.dtype == torch.float32 and float((eager - a @ b).abs().max()) < 1e-3

    @torch.compile(fullgraph=True)
    def layer(x, w):
        return torch.relu(torch.ops.gemmlab.matmul(x, w)) + 1.0

    compiled = layer(a, b)
    assert float((compiled - (torch.relu(a @ b) + 1.0)).abs().max()) < 1e-3
    x, wt = torch.randn(256, 512, device="cuda").bfloat16(), torch.randn(384, 512, device="cuda").bfloat16()
    out = torch.ops.gemmlab.matmul(x, wt.t(), "bfloat16")
    want = x.float() @ wt.float().t()
    assert out.dtype == torch.bfloat16 and float((out.float() - want).norm() / want.norm()) < 1e-2
