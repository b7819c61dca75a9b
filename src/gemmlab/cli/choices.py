"""What `compile` and `occupancy` settle for each kernel before building it:
the target (the one asked for, this GPU's, or a default where there is no
GPU, since compiling needs none), the architecture the kernel itself compiles
for within that target, whether ``--block`` applies to it at all, and that it is
a GPU kernel (a CPU baseline has nothing to compile and no occupancy)."""

from __future__ import annotations

from gemmlab.core.arch import sm_limits
from gemmlab.core.errors import ConstraintError, DeviceLimitError, GemmlabError, NoGPUError
from gemmlab.kernels.spec import KernelSpec

# The target without --arch on a machine with no GPU: Hopper, the GPU the
# catalogue's results and most of its tensor-core rungs were made for.
DEFAULT_TARGET = "sm_90"


def chosen_target(arch: str | None) -> tuple[str, str | None]:
    """The target to compile for and, where it is the default for a machine
    without a GPU, the line that says so and how to choose another."""
    from gemmlab.backends.nvrtc import check_target, normalise_arch

    if arch:
        return check_target(normalise_arch(arch)), None
    from gemmlab.core import gpu

    try:
        return gpu.describe(0).arch, None
    except NoGPUError:
        return DEFAULT_TARGET, (
            f"No usable GPU here, so the target is {DEFAULT_TARGET} ({sm_limits(DEFAULT_TARGET).arch}); "
            "choose another with --arch, e.g. --arch sm_80 or --arch sm_90a."
        )


def kernel_arch(spec: KernelSpec, target: str) -> str:
    """The architecture ``spec`` compiles for on ``target`` (its sm_XYa
    variant where it uses architecture-specific instructions), or an error
    that names the architecture it needs and the --arch that asks for it."""
    try:
        return spec.compile_arch(target)
    except DeviceLimitError as exc:
        refusal = exc
    if spec.archs:
        families = " or ".join(dict.fromkeys(sm_limits(arch).arch for arch in spec.archs))
        raise DeviceLimitError(
            f"{spec.id} uses {families}-only instructions, so it compiles for {' or '.join(spec.archs)} only; "
            f"the target is {target}.",
            f"Ask for it with `--arch {spec.archs[0]}` (compiling needs no GPU), or choose a kernel without "
            "architecture-specific instructions (`gemmlab kernels` lists what each needs).",
        ) from None
    if spec.min_cc == (0, 0):
        raise refusal
    major, minor = spec.min_cc
    raise DeviceLimitError(
        f"{spec.id} needs compute capability {major}.{minor} or newer; the target is {target}.",
        f"Ask for a newer target, e.g. `--arch sm_{major}{minor}` (compiling needs no GPU), or choose a kernel for "
        "older GPUs (`gemmlab kernels` lists what each needs).",
    ) from None


def refuse_block(spec: KernelSpec, block: list[int] | None) -> None:
    """``--block`` given for a kernel that has no block edge to choose: refused, never ignored."""
    if block and not spec.takes_block_edge:
        raise ConstraintError(
            f"{spec.id} has no block edge to choose, so --block does not apply to it.",
            "Leave out --block for it, or declare a block parameter (docs/user-kernels.md).",
        )


def gpu_kernel(name: str, command: str) -> KernelSpec:
    """The GPU kernel ``name`` names (:func:`gemmlab.kernels.catalogue.get`); a CPU
    baseline is refused by name, with the command that does run it."""
    from gemmlab.backends.cpu import CPU_KERNELS
    from gemmlab.kernels import catalogue

    if name in CPU_KERNELS:
        raise GemmlabError(
            f"{name} is a CPU baseline: it runs on this host's CPU, so `gemmlab {command}` (NVRTC and the GPU's "
            "limits) has nothing to say about it.",
            f"Run it with `gemmlab run {name} --size 256`, or beside GPU kernels with "
            f"`gemmlab sweep --kernels {name},tiled --sizes 256`.",
        )
    return catalogue.get(name)
