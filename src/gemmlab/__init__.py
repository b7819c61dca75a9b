"""gemmlab: a laboratory for GPU matrix multiplication.

Pick a kernel from the catalogue, run it on your GPU, and get a verified
result, a trustworthy time and the figures that explain it.
"""

import os

# NVRTC 13.0 keeps the cubins it assembles in the CUDA compute cache
# (~/.nv/ComputeCache, keyed by the PTX) and, on a hit, skips ptxas, so the
# resource report (registers, shared memory, spills) that gemmlab reads is
# missing. NVRTC reads this variable once, when it is first loaded, so it is set
# here, before anything loads NVRTC. gemmlab loads only cubins, never PTX, and
# keeps its own cache of them, so nothing else slows down.
os.environ.setdefault("CUDA_CACHE_DISABLE", "1")

from gemmlab.catalogue import CATALOGUE, Shape, get, kernel_ids
from gemmlab.errors import GemmlabError

__version__ = "0.1.0"

__all__ = ["CATALOGUE", "GemmlabError", "Shape", "__version__", "get", "kernel_ids"]
