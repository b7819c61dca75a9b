"""gemmlab: a laboratory for GPU matrix multiplication.

Pick a kernel from the catalogue, run it on your GPU, and get a verified
result, a trustworthy time and the figures that explain it.
"""

from typing import Any

from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels.catalogue import CATALOGUE, get, kernel_ids

__version__ = "0.1.0"

__all__ = ["CATALOGUE", "GemmlabError", "Matmul", "Shape", "__version__", "get", "kernel_ids", "matmul", "results"]


def matmul(a: Any, b: Any, c: Any = None, **options: Any) -> Any:
    """``alpha * a @ b + beta * c`` on CuPy arrays by the kernel the dispatcher
    picked for the shape and this GPU: :func:`gemmlab.api.matmul.matmul`
    (imported at the call, so that ``import gemmlab`` stays light)."""
    from gemmlab.api.matmul import matmul as dispatched

    return dispatched(a, b, c, **options)


def results(*args: Any, **kwargs: Any) -> Any:
    """The stored results, ``gemmlab.results(db).to_pandas()``:
    :func:`gemmlab.api.results.results` (imported at the call, so that
    ``import gemmlab`` does not import the API's measuring layers). The store
    itself is the package :mod:`gemmlab.store`."""
    from gemmlab.api.results import results as stored

    return stored(*args, **kwargs)


def __getattr__(name: str) -> Any:
    """``gemmlab.Matmul``: :class:`gemmlab.api.matmul.Matmul`, the product
    bound once to fixed arrays (imported on first use, as matmul is)."""
    if name == "Matmul":
        from gemmlab.api.matmul import Matmul

        return Matmul
    raise AttributeError(f"module 'gemmlab' has no attribute {name!r}")
