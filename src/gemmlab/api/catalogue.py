"""The kernels a command can name, and the choices it checks a kernel against:
the catalogue as `gemmlab kernels` lists it, a kernel looked up by name (a
CPU baseline refused where a command has nothing to say about one), whether
``--block`` applies to a kernel at all, and which element type it compiles."""

from __future__ import annotations

from collections.abc import Sequence

from gemmlab.core.errors import ConstraintError, GemmlabError
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec

__all__ = [
    "chosen_dtype",
    "cpu_baselines",
    "gpu_kernel",
    "gpu_kernels",
    "gpu_specs",
    "kernel_id",
    "kernel_ids",
    "no_block_edge",
    "refuse_block",
]


def kernel_ids() -> list[str]:
    """The catalogue's ids, in its order (its candidate rungs, peers and users' kernels are not among them)."""
    return catalogue.kernel_ids()


def kernel_id(name: str) -> str:
    """The id of the kernel ``name`` names: a catalogue id as it is, a user's
    declaration (read now and remembered) by its folder/stem."""
    return catalogue.get(name).id


def gpu_specs() -> list[KernelSpec]:
    """Every GPU kernel gemmlab ships: the catalogue, then its candidate rungs, then the peer rungs."""
    return [
        *catalogue.CATALOGUE,
        *(catalogue.get(i) for i in catalogue.candidate_ids()),
        *(catalogue.get(i) for i in catalogue.peer_ids()),
    ]


def gpu_kernels() -> list[dict]:
    """A row per kernel of :func:`gpu_specs`, as `gemmlab kernels --json` lists it."""
    return [
        {
            "id": s.id,
            "backend": s.backend,
            "source_doc": s.source_doc,
            "summary": s.summary,
            "source": s.source,
            "block_edges": list(s.block_edges),
            "dtypes": list(s.dtypes),
            "constraints": s.needs,
        }
        for s in gpu_specs()
    ]


def cpu_baselines() -> list[dict]:
    """A row per CPU baseline (it runs on this host, no GPU needed), as :func:`gpu_kernels` has them."""
    from gemmlab.backends import cpu

    return [
        {
            "id": kernel_id,
            "backend": cpu.BACKEND.name,
            "source_doc": cpu.CPU_SOURCE_DOC[kernel_id],
            "summary": summary,
            "source": "backends/cpu.py",
            "block_edges": [],
            "dtypes": list(cpu.CPU_DTYPES),
            "constraints": cpu.needs(kernel_id),
        }
        for kernel_id, summary in cpu.CPU_KERNELS.items()
    ]


def gpu_kernel(name: str, command: str) -> KernelSpec:
    """The GPU kernel ``name`` names (:func:`gemmlab.kernels.catalogue.get`); a CPU
    baseline is refused by name, with the command that does run it."""
    from gemmlab.backends.cpu import CPU_KERNELS

    if name in CPU_KERNELS:
        raise GemmlabError(
            f"{name} is a CPU baseline: it runs on this host's CPU, so `gemmlab {command}` (NVRTC and the GPU's "
            "limits) has nothing to say about it.",
            f"Run it with `gemmlab run {name} --size 256`, or beside GPU kernels with "
            f"`gemmlab sweep --kernels {name},tiled --sizes 256`.",
        )
    return catalogue.get(name)


def refuse_block(spec: KernelSpec, block: Sequence[int] | None) -> None:
    """``--block`` given for a kernel that has no block edge to choose: refused, never ignored."""
    if block and not spec.takes_block_edge:
        raise no_block_edge(spec.id)


def no_block_edge(kernel_id: str) -> ConstraintError:
    """The refusal of a block edge given for a kernel that has none to choose
    (a tensor-core rung, a CPU baseline, a declaration without a block parameter)."""
    return ConstraintError(
        f"{kernel_id} has no block edge to choose, so --block does not apply to it.",
        "Leave out --block for it, or declare a block parameter (docs/user-kernels.md).",
    )


def chosen_dtype(spec: KernelSpec, dtype: str | None) -> str:
    """The element type ``spec`` is built for: ``dtype``, else its first; an error when it has no such version."""
    kind = dtype or spec.dtypes[0]
    if kind not in spec.dtypes:
        raise ConstraintError(f"{spec.id} has no {kind} version.", f"It takes {', '.join(spec.dtypes)}.")
    return kind
