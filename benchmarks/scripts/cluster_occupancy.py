"""How many thread-block clusters of each sgemm_cluster_split_k configuration
the GPU runs at once, as the driver's occupancy calculator counts them
(cuda.core's ``occupancy.max_active_clusters``): a cluster's blocks must all
find room on the SMs of one GPC, so fewer may fit than SMs / cluster size.
Usage, on a GPU machine:

    PYTHONPATH=src python3 benchmarks/scripts/cluster_occupancy.py
"""

from __future__ import annotations

from cuda.core import Device
from resident_clusters import resident

from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue

RUNG = "sgemm_cluster_split_k"


def main() -> None:
    device = Device(0)
    print(device.name, device.properties.multiprocessor_count)
    for c in catalogue.configs(RUNG):
        point, blocks, size = resident(RUNG, c, Shape(128, 4096, 4096), "float32")
        n = blocks // size
        print(f"{c['BM']}x{c['BN']} BK={c['BK']} SPLITS={c['SPLITS']} GROUPS={c['GROUPS']} smem={point.dynamic_smem}: "
              f"{n} clusters at once = {n * c['SPLITS']} blocks", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
