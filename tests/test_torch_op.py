"""torch.ops.gemmlab.matmul without PyTorch: the error names the extra."""

from __future__ import annotations

import importlib.util

import pytest

from gemmlab.core.extras import MissingExtra


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="PyTorch is installed here")
def test_without_torch_the_operator_names_the_extra() -> None:
    from gemmlab.api import torch_op

    with pytest.raises(MissingExtra) as caught:
        torch_op.register()
    assert "gemmlab[torch]" in caught.value.fix
