"""How many blocks of a configuration the GPU runs at once, as the driver's
occupancy calculator counts them, against the blocks its grid asks for: a
clustered kernel needs all the blocks of a cluster on SMs of one GPC, so
clusters of 4 or 8 may fit fewer blocks than the GPU has SMs, and a grid
larger than that runs in more than one wave. Usage, on a GPU machine:

    PYTHONPATH=src python3 benchmarks/scripts/resident_clusters.py RUNG '{"SPLITS": 2}' 4096x128x4096 [bfloat16]
"""

from __future__ import annotations

import json
import math
import sys

from config_ab import parse_shape
from cuda.core import Device

from gemmlab.backends.nvrtc import blocks_at_once, compile_kernel, load_kernel
from gemmlab.core import gpu
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import Point


def resident(rung: str, config: dict, shape: Shape, dtype: str) -> tuple[Point, int, int]:
    """The point, how many of its blocks the GPU holds at once (whole
    clusters for a clustered kernel), and its blocks per cluster (1: none)."""
    spec = catalogue.variant(rung, config)
    point = catalogue.point(spec.id, shape, None, dtype, spec=spec)
    device = Device(0)
    device.set_current()
    info = gpu.describe(0)
    kernel = load_kernel(point, compile_kernel(spec, 0, dtype, spec.archs[0] if spec.archs else info.arch))
    size = math.prod(spec.cluster) if spec.cluster else 1
    return point, blocks_at_once(kernel, point, info, device.create_stream()), size


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    rung, config, shape_text = argv[:3]
    dtype = argv[3] if len(argv) == 4 else "bfloat16"
    point, blocks, size = resident(rung, json.loads(config), parse_shape(shape_text), dtype)
    what = f"{blocks // size} clusters of {size}" if size > 1 else f"{blocks // gpu.describe(0).sm_count} blocks per SM"
    grid_blocks = point.grid[0] * point.grid[1] * point.grid[2]
    waves = grid_blocks / blocks if blocks else float("inf")
    print(f"{rung} {config} {shape_text} {dtype} on {gpu.describe(0).name}: grid {point.grid} = {grid_blocks} blocks; "
          f"resident at once: {blocks} ({what}); {waves:.2f} waves")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
