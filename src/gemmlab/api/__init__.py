"""gemmlab from Python: what the command line does, for notebooks and scripts.

    import gemmlab.api as lab

    mine = lab.kernel("examples/naive_define/matmul.toml")   # or a catalogue id, or lab.declare(...)
    mine.compile(arch="sm_90")                                 # registers, shared memory, spills: no GPU needed
    result = mine.run(1024, block=16)                          # verified and timed beside cuBLAS
    result                                                     # a table in Jupyter
    lab.run(mine, 1024, vs=["tiled", "sgemm_padded_b"])        # a comparison on one shape
    sweep = lab.sweep([mine, "tiled"], sizes=[256, 512, 1024], db="lab.sqlite")
    sweep.frame()                                              # a pandas DataFrame (the `pandas` extra)
    lab.results("lab.sqlite").to_pandas()                      # everything stored; also .to_csv(), .to_parquet()

Every function raises the same :class:`~gemmlab.core.errors.GemmlabError`
subclasses the command line prints; their ``cause`` and ``fix`` say what went
wrong and what to do. docs/api.md is the reference with examples.
"""

from gemmlab.api.kernels import Kernel, declare, declared_dir, kernel
from gemmlab.api.results import Comparison, Result, Results, Sweep, failures, results
from gemmlab.api.run import run
from gemmlab.api.sweep import sweep

__all__ = [
    "Comparison",
    "Kernel",
    "Result",
    "Results",
    "Sweep",
    "declare",
    "declared_dir",
    "failures",
    "kernel",
    "results",
    "run",
    "sweep",
]
