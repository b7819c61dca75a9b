"""The peer rungs: Triton and CuTe DSL kernels that solve exactly the problems
of the CUDA C++ ladders (problems/sgemm.py: C = alpha*A.B + beta*C_in in
float32; problems/tensor.py: C = A.B^T, A M x K and B N x K, C float32), so
the runner verifies and times them against the same cuBLAS baseline.

Each rung's file (a module of this folder) exposes ``configs(itemsize)``, the
configurations it may take, and ``launcher(operands, config)``, a function
that launches one of them on :class:`Operands`. The backend
(gemmlab.backends.peers) compiles and times every configuration once when it
binds a point and launches the fastest from then on: tuning never runs inside
the timed launches.

Triton and the CuTe DSL are optional: :data:`MODELS` names the extra that
installs each, and a rung whose library is missing says so in its needs
(`gemmlab kernels`) and refuses to run with the extra's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.spec import Constraint, KernelSpec, multiple_of
from gemmlab.problems.base import Problem
from gemmlab.problems.lowp import E4M3_BF16, SCALE_BLOCK, lowp_problem
from gemmlab.problems.sgemm import ALPHA, BETA, SGEMM
from gemmlab.problems.tensor import TENSOR

SOURCE_DOC = "gemmlab peer ladders (docs/peer-ladders.md)"


@dataclass(frozen=True)
class Model:
    """A programming model: its name in tables, the module that must import, the extra that installs it."""

    name: str
    module: str
    extra: str


MODELS = {
    "triton": Model("Triton", "triton", "triton"),
    "cute": Model("CuTe DSL", "cutlass.cute", "cute"),
}


@dataclass(frozen=True)
class PeerSpec(KernelSpec):
    """A catalogue entry for a peer rung: the model it is written in and the
    module (under gemmlab.kernels.peers) that holds its kernel and launcher."""

    model: str = "triton"
    module: str = ""
    # What Nsight Compute selects the kernel by (`gemmlab profile`): Triton
    # names a kernel after its function; the CuTe DSL after the kernel method
    # and its module, followed by its arguments' types (hence a prefix).
    kernel_name: str = ""

    @property
    def needs(self) -> list[str]:
        found = super().needs
        model = MODELS[self.model]
        if not installed(model.module):
            found.append(f"the {model.extra} extra (not installed)")
        return found


@dataclass
class Operands:
    """What a launcher needs, as the model's arrays (torch tensors): A, B, C
    (and C_in for the FP32 ladder), the sizes, the scalars, how B is laid out
    and how many SMs a persistent kernel spreads over."""

    a: Any
    b: Any
    c: Any
    c_in: Any
    m: int
    n: int
    k: int
    alpha: float
    beta: float
    b_kmajor: bool  # B stored N x K (the tensor and lowp ladders'); else K x N (the FP32 ladder's)
    sms: int
    scale_a: Any = None  # the lowp ladder's per-tensor scales (float32, one element each)
    scale_b: Any = None

    @property
    def b_stride_k(self) -> int:
        return self.b.stride(1) if self.b_kmajor else self.b.stride(0)

    @property
    def b_stride_n(self) -> int:
        return self.b.stride(0) if self.b_kmajor else self.b.stride(1)


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (Triton and the CuTe DSL take seconds)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # the parent package (cutlass of cutlass.cute) is missing
        return False


def _chosen_by_rung(shape: Shape, block_edge: int) -> Dim3:
    """The rung's launcher picks its grid from the configuration it tuned; gemmlab does not see it."""
    return (0, 0, 0)


# TMA descriptors need 16-byte row strides: the FP32 ladder's B is K x N, so N counts too.
N_FOR_TMA_F32 = multiple_of("n", lambda e: 4, "4 (B's rows of float32 in whole 16-byte pieces for TMA)")


def _peer(
    id: str, model: str, module: str, summary: str, *, fp32: bool, dtypes: tuple[str, ...],
    tma: bool = False, archs: tuple[str, ...] = (), constraints: tuple[Constraint, ...] = (),
    problem: Problem | None = None, min_cc: tuple[int, int] | None = None, kernel: str,
    any_size: str = "tiled_any_size",
) -> PeerSpec:  # fmt: skip
    return PeerSpec(
        id=id,
        source=f"peers/{module}.py",
        function=module,
        source_doc=SOURCE_DOC,
        summary=summary,
        dtypes=dtypes,
        block_edges=(),
        grid=_chosen_by_rung,
        block=_chosen_by_rung,
        constraints=(*((N_FOR_TMA_F32,) if tma and fp32 else ()), *constraints),
        problem=problem or (SGEMM if fp32 else TENSOR),
        templated_on_edge=False,
        cgma=None,  # the compiler chooses the loads; gemmlab has no model of them
        archs=archs,
        min_cc=min_cc or ((9, 0) if tma else (8, 0)),
        k_bytes_multiple=16 if tma else 0,
        backend="peers",
        model=model,
        module=f"gemmlab.kernels.peers.{module}",
        kernel_name=kernel,
        any_size_alternative=any_size,
    )


PEERS: tuple[PeerSpec, ...] = (
    _peer(
        "triton_sgemm_blocked",
        "triton",
        "triton_blocked",
        f"Triton tiles, tuned at bind time, FP32 without TF32: C = {ALPHA}*A.B {BETA:+}*C as the FP32 ladder",
        fp32=True,
        dtypes=("float32",),
        kernel="blocked_gemm",
    ),
    _peer(
        "triton_sgemm_tma",
        "triton",
        "triton_tma",
        "persistent Triton kernel, A and B by TMA descriptors, FP32 without TF32, the FP32 ladder's problem",
        fp32=True,
        dtypes=("float32",),
        tma=True,
        kernel="persistent_tma_gemm",
    ),
    _peer(
        "triton_tc_blocked",
        "triton",
        "triton_blocked",
        "Triton tiles on the tensor cores, tuned at bind time: C = A.B^T as the tensor ladder",
        fp32=False,
        dtypes=("bfloat16", "float16"),
        kernel="blocked_gemm",
    ),
    _peer(
        "triton_tc_tma",
        "triton",
        "triton_tma",
        "persistent Triton kernel, A and B by TMA descriptors: C = A.B^T as the tensor ladder",
        fp32=False,
        dtypes=("bfloat16", "float16"),
        tma=True,
        kernel="persistent_tma_gemm",
    ),
    _peer(
        "cute_tc_wgmma",
        "cute",
        "cute_wgmma",
        "CuTe DSL: wgmma from shared memory, TMA loads in an mbarrier ring of 3-4 stages, C = A.B^T (tensor ladder)",
        fp32=False,
        dtypes=("bfloat16", "float16"),
        tma=True,
        archs=("sm_90a",),  # wgmma exists only in the architecture-specific target
        kernel="regex:^kernel_cutlass_kernel_gemmlabkernelspeerscute_wgmmaWgmmaGemm",
    ),
    _peer(
        "triton_fp8_blocked",
        "triton",
        "triton_fp8",
        "Triton tiles, e4m3 tl.dot promoted to FP32 every 128 K, per-tensor scales: the lowp ladder's problem",
        fp32=False,
        dtypes=("e4m3", E4M3_BF16),
        problem=lowp_problem("tensor", SCALE_BLOCK),
        min_cc=(8, 9),  # FP8 tensor cores: Ada and Hopper
        kernel="scaled_fp8_gemm",
    ),
    _peer(
        "cute_fp8_wgmma",
        "cute",
        "cute_fp8",
        "CuTe DSL: cute_tc_wgmma's kernel on e4m3 k-tiles of 128, each promoted to FP32, per-tensor scales (lowp)",
        fp32=False,
        dtypes=("e4m3", E4M3_BF16),
        tma=True,  # K in 16-byte rows: a multiple of 16 e4m3 elements
        archs=("sm_90a",),
        problem=lowp_problem("tensor", SCALE_BLOCK),  # promoted every 128 K: the lowp problem's chain
        # The kernel is cute_wgmma's class; its name carries the element type of A's TMA atom.
        kernel="regex:^kernel_cutlass_kernel_gemmlabkernelspeerscute_wgmmaWgmmaGemm.*f8E4M3FN",
        any_size="triton_fp8_blocked",  # masks, not TMA: the same problem at any K
    ),
)
