"""gemmlab: a laboratory for GPU matrix multiplication.

Pick a kernel from the catalogue, run it on your GPU, and get a verified
result, a trustworthy time and the figures that explain it.
"""

from gemmlab.catalogue import CATALOGUE, Shape, get, kernel_ids
from gemmlab.errors import GemmlabError

__version__ = "0.1.0"

__all__ = ["CATALOGUE", "GemmlabError", "Shape", "__version__", "get", "kernel_ids"]
