"""gemmlab: a laboratory for GPU matrix multiplication.

Pick a kernel from the catalogue, run it on your GPU, and get a verified
result, a trustworthy time and the figures that explain it.
"""

from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels.catalogue import CATALOGUE, get, kernel_ids

__version__ = "0.1.0"

__all__ = ["CATALOGUE", "GemmlabError", "Shape", "__version__", "get", "kernel_ids"]
