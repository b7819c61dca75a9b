"""Run one configuration of a tunable rung at one shape through gemmlab's
runner (verified, then timed a few launches, no baseline): the process to put
under Nsight Compute or compute-sanitizer when the configuration is not the
catalogue's default, which `gemmlab profile` and `gemmlab check` run. Usage:

    ncu --clock-control none --kernel-name regex:RUNG --launch-skip 2 --launch-count 1 --set full \\
        python3 benchmarks/scripts/launch_variant.py RUNG '{"BM": 128}' 128x4096x4096 float32
"""

from __future__ import annotations

import json
import sys

from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.measure.run import run


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    rung, config, shape, dtype = argv
    m, n, k = (int(s) for s in shape.lower().split("x"))
    spec = catalogue.variant(rung, json.loads(config))
    result = run(spec.id, Shape(m, n, k), spec=spec, dtype=dtype, reps=3, warmup=1, baseline=False)
    print(f"{rung} {config} {shape} {dtype}: {result.timing.median_ms * 1e3:.2f} us, error {result.error:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
