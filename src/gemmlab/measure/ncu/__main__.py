"""The child Nsight Compute watches: ``python -m gemmlab.measure.ncu KERNEL EDGE M N K DTYPE``
runs that one point through the runner (see gemmlab.measure.ncu.command)."""

import sys

from gemmlab.measure.ncu.command import _child

sys.exit(_child(sys.argv[1:]))
