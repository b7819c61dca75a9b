"""A peer rung compiled ahead of any launch, for a target rather than a
device: Triton's compiler needs no GPU, only its own ptxas; the CuTe DSL's
needs none either when told the architecture. The CPU tests
compile every rung this way, and peers_bench.py times the compile (Triton's
cache off, as NVRTC's is when a CUDA rung's compile is timed)."""

from __future__ import annotations

import importlib
import os
import tempfile
import time
from dataclasses import dataclass

from gemmlab.core.errors import ConstraintError
from gemmlab.kernels.peers.spec import PeerSpec

# Triton's names of the element types a peer rung takes.
ELEMENTS = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "e4m3": "fp8e4nv"}


@dataclass(frozen=True)
class Ahead:
    """One compile: the cubin, the PTX it came from and the seconds it took."""

    cubin: bytes
    ptx: str
    seconds: float
    shared_bytes: int


def compile_ahead(spec: PeerSpec, dtype: str, arch: str = "sm_90") -> Ahead:
    """The rung's first configuration compiled for ``arch`` (sm_XY) with an empty cache."""
    if spec.model == "cute":
        return _compile_cute(spec, arch)
    if dtype not in ELEMENTS:
        raise ConstraintError(
            f"{spec.id}'s compile is timed for {', '.join(ELEMENTS)} only, not {dtype}.",
            f"Time it at {'e4m3' if dtype.startswith('e4m3') else 'one of those'}: the same inputs and mainloop.",
        )
    import triton
    from triton.backends.compiler import GPUTarget

    module = importlib.import_module(spec.module)
    element = ELEMENTS[dtype]
    config = module.configs(4 if dtype == "float32" else 2)[0]
    types, constants = module.signature(element, config, spec.problem.name == "sgemm")
    source = triton.compiler.ASTSource(module.KERNEL, types, constexprs=constants)
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
    with tempfile.TemporaryDirectory() as cache:
        previous = os.environ.get("TRITON_CACHE_DIR")
        os.environ["TRITON_CACHE_DIR"] = cache
        try:
            start = time.perf_counter()
            kernel = triton.compile(source, target=GPUTarget("cuda", int(arch[3:].rstrip("a")), 32), options=options)
            seconds = time.perf_counter() - start
        finally:
            if previous is None:
                del os.environ["TRITON_CACHE_DIR"]
            else:
                os.environ["TRITON_CACHE_DIR"] = previous
    return Ahead(kernel.asm["cubin"], kernel.asm["ptx"], seconds, kernel.metadata.shared)


def _compile_cute(spec: PeerSpec, arch: str) -> Ahead:
    """A CuTe DSL rung's first configuration, from symbolic sizes (one compile serves every shape)."""
    module = importlib.import_module(spec.module)
    config = module.CONFIGS[0]
    start = time.perf_counter()
    compiled = module.compile_kernel(config, module.fake_arguments(), spec.compile_arch(arch))
    seconds = time.perf_counter() - start
    return Ahead(compiled.__cubin__, compiled.__ptx__, seconds, config.shared_bytes)
