"""The calculator agrees with the driver's cudaOccupancyMaxActiveBlocksPerMultiprocessor
for every catalogue kernel and block edge, on the GPU at hand."""

from __future__ import annotations

import pytest

from gemmlab import catalogue
from gemmlab.catalogue import DTYPE_ITEMSIZE
from gemmlab.kernel_occupancy import DEFAULT_SHAPE

pytestmark = pytest.mark.gpu

CASES = [(spec.id, edge) for spec in catalogue.CATALOGUE for edge in (spec.block_edges or (0,))]


@pytest.fixture(scope="module")
def device():
    from cuda.core import Device

    from gemmlab import gpu

    info = gpu.describe(0)
    dev = Device(0)
    dev.set_current()
    return dev, info


@pytest.mark.parametrize(("kernel_id", "edge"), CASES, ids=[f"{k}-b{e}" for k, e in CASES])
def test_calculator_matches_driver(device, kernel_id: str, edge: int) -> None:
    from cuda.core import ObjectCode

    from gemmlab.compile import compile_kernel
    from gemmlab.occupancy import theoretical_occupancy

    _, info = device
    spec = catalogue.get(kernel_id)
    dtype = spec.dtypes[0]
    compiled = compile_kernel(spec, edge, dtype, info.arch)
    kernel = ObjectCode.from_cubin(compiled.cubin).get_kernel(compiled.mangled_name)
    threads = spec.threads_per_block(DEFAULT_SHAPE, edge)
    dynamic = spec.dynamic_smem_elems(DEFAULT_SHAPE, edge) * DTYPE_ITEMSIZE[dtype]
    driver = kernel.occupancy.max_active_blocks_per_multiprocessor(threads, dynamic)
    ours = theoretical_occupancy(
        info.cc, threads, compiled.resources.registers, compiled.resources.smem_bytes, dynamic_smem=dynamic
    )
    assert ours.active_blocks == driver, (ours.to_dict(), driver)
