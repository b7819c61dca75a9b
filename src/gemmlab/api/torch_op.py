"""``torch.ops.gemmlab.matmul``: gemmlab.matmul as a PyTorch custom operator
(``torch.library.custom_op``, torch 2.4 on), so that a model compiled with
``torch.compile`` keeps it in its graph instead of breaking the graph there.

    import gemmlab.api.torch_op as op
    op.register()                                   # once per process
    c = torch.ops.gemmlab.matmul(a, b)              # float32, or bfloat16 with out_dtype
    c = torch.ops.gemmlab.matmul(a, bt.t(), "bfloat16")

The operator takes what gemmlab.matmul takes from tensors (float32; bfloat16
with ``b`` the transpose view of an N x K tensor), no alpha, beta, C or FP8
scales, and returns a new tensor; its fake (meta) version gives the shape and
type for tracing without running anything.

This module has no ``from __future__ import annotations``: torch reads the
operator's schema from the function's annotations, as objects.
"""

from typing import Any, Optional

_OPERATOR: Any = None


def register() -> Any:
    """Register ``torch.ops.gemmlab.matmul`` (once per process) and return it.
    MissingExtra naming the ``torch`` extra without PyTorch; a GemmlabError
    with the fix for a torch older than 2.4."""
    global _OPERATOR
    if _OPERATOR is not None:
        return _OPERATOR
    from gemmlab.core.errors import GemmlabError
    from gemmlab.core.extras import require

    torch = require("torch", "torch", "torch.ops.gemmlab.matmul")
    if not hasattr(torch.library, "custom_op"):
        raise GemmlabError(
            f"torch {torch.__version__} has no torch.library.custom_op (torch 2.4 on has).",
            "Upgrade PyTorch, or call gemmlab.matmul outside the compiled region.",
        )

    @torch.library.custom_op("gemmlab::matmul", mutates_args=())
    def matmul(a: torch.Tensor, b: torch.Tensor, out_dtype: Optional[str] = None) -> torch.Tensor:  # type: ignore[name-defined]  # noqa: UP045
        from gemmlab.api.matmul import matmul as run

        return run(a, b, out_dtype=out_dtype)

    @matmul.register_fake
    def _(a: torch.Tensor, b: torch.Tensor, out_dtype: Optional[str] = None) -> torch.Tensor:  # type: ignore[name-defined]  # noqa: UP045
        bf16_c = out_dtype is not None and str(out_dtype).replace("torch.", "") in ("bfloat16", "bf16")
        return a.new_empty((a.shape[0], b.shape[1]), dtype=torch.bfloat16 if bf16_c else torch.float32)

    _OPERATOR = matmul
    return matmul
