"""The calculator agrees with the driver's cudaOccupancyMaxActiveBlocksPerMultiprocessor
for every catalogue kernel and block edge, on the GPU at hand."""

from __future__ import annotations

import pytest

from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import Point
from gemmlab.measure.kernel_occupancy import DEFAULT_SHAPE

pytestmark = pytest.mark.gpu

CASES = [(spec.id, edge) for spec in catalogue.CATALOGUE for edge in (spec.block_edges or (0,))]


@pytest.fixture(scope="module")
def device():
    from cuda.core import Device

    from gemmlab.core import gpu

    info = gpu.describe(0)
    dev = Device(0)
    dev.set_current()
    return dev, info


@pytest.mark.parametrize(("kernel_id", "edge"), CASES, ids=[f"{k}-b{e}" for k, e in CASES])
def test_calculator_matches_driver(device, kernel_id: str, edge: int) -> None:
    from cuda.core import ObjectCode

    from gemmlab.backends.nvrtc import allow_dynamic_smem, compile_kernel
    from gemmlab.measure.occupancy import theoretical_occupancy

    _, info = device
    spec = catalogue.get(kernel_id)
    dtype = spec.dtypes[0]
    compiled = compile_kernel(spec, edge, dtype, spec.compile_arch(info.arch))
    kernel = ObjectCode.from_cubin(compiled.cubin).get_kernel(compiled.mangled_name)
    threads = spec.threads_per_block(DEFAULT_SHAPE, edge)
    dynamic = Point(spec, DEFAULT_SHAPE, edge, dtype).dynamic_smem
    # Over 48 KB, the driver counts no block until the kernel opts in, as the runner does.
    allow_dynamic_smem(kernel, compiled.resources.smem_bytes, dynamic, 0)
    driver = kernel.occupancy.max_active_blocks_per_multiprocessor(threads, dynamic)
    ours = theoretical_occupancy(
        info.cc, threads, compiled.resources.registers, compiled.resources.smem_bytes, dynamic_smem=dynamic
    )
    assert ours.active_blocks == driver, (ours.to_dict(), driver)
