"""The profiler's view of one kernel launch, read from NVIDIA Nsight Compute.

Three modules, one question each:

- :mod:`~gemmlab.measure.ncu.metrics`: what ncu counts (the counter names) and the
  figures the documents report from those counts (GIPS, CGMA, occupancy, FLOPs
  executed...), collected in the registry ``PROFILED``; :class:`ProfileResult`.
- :mod:`~gemmlab.measure.ncu.parse`: what ncu printed: its raw CSV page, and the
  failure its messages stand for.
- :mod:`~gemmlab.measure.ncu.command`: running ncu: finding it, its command line,
  :func:`~gemmlab.measure.ncu.command.profile_point`, and the child process ncu
  watches (``python -m gemmlab.measure.ncu``, :mod:`gemmlab.measure.ncu.__main__`).

ncu keeps its default cache control: it flushes the caches before each replay
pass, so DRAM bytes read are those of a cold L2. Writes are counted when they
leave the L2, which is write-back: an output that fits in it (4 MB at N = 1024
in float32, against 50 MB of L2 on an H200) can show 0 bytes written.

Everything below the command line itself is pure: the formulas, the CSV
parser and the reading of ncu's failure messages are tested without a GPU.
"""

from gemmlab.measure.ncu import command, metrics, parse

__all__ = ["command", "metrics", "parse"]
