"""The least time a launch can take on a GPU, and the refusal of a time under it.

A kernel that skips work it was given, or hands back an answer computed
before, can look faster than the hardware allows. The checks after every
launch catch such a kernel by its output; this is the check by physics,
for what gets past them. The floor is the larger of:

- the FLOPs over the fastest rate the GPU has for the element type, at the
  highest SM clock it runs (the nominal rate from the SM count and the
  per-clock rate of the pipe, core.gpu; never below what a correct kernel
  reaches, since a measured peak is a share of it). float32 takes the
  faster of the FP32 lanes and the TF32 tensor cores at a third of their
  rate: three TF32 products give float32 accuracy ("3xTF32"), so a correct
  float32 kernel can run that fast;
- the bytes that must come from device memory over its nominal bandwidth:
  the minimum bytes (each input read once, the output written once) less
  the L2's size, which inputs written just before the launch may still
  occupy.

A time more than MARGIN under the floor is refused as impossible, naming
the figures. Pure: the device's figures come in as values.
"""

from __future__ import annotations

from dataclasses import dataclass

from gemmlab.core.dtypes import peak_type
from gemmlab.core.errors import VerificationError

# How far under the floor a time must be to be refused: the nominal rates are
# upper bounds already; this covers a clock read a little low.
MARGIN = 0.05
# Element types whose arithmetic runs on the FP32 lanes or slower (integer
# multiply-adds, float64 on a part with full-rate FP64 at most FP32's rate).
LANE_TYPES = ("int32", "float64")


@dataclass(frozen=True)
class Floor:
    ms: float  # the least time one launch can take; 0 where nothing is known
    why: str  # the figures it came from, in words


def floor_ms(
    flops: int, min_bytes: int, dtype: str, *, fp32_gflops: float | None, tensor_gflops: dict[str, float | None],
    bandwidth_gbs: float | None, l2_bytes: int, gpu: str, clock_mhz: float | None,
) -> Floor:  # fmt: skip
    """The floor of one launch: ``fp32_gflops`` and ``tensor_gflops`` (by
    input type) are the nominal rates at ``clock_mhz``; ``bandwidth_gbs`` the
    device memory's nominal bandwidth."""
    rate, pipe = _fastest(dtype, fp32_gflops, tensor_gflops)
    compute_ms = flops / (rate * 1e9) * 1e3 if rate and flops else 0.0
    dram = max(0, min_bytes - l2_bytes)
    memory_ms = dram / (bandwidth_gbs * 1e9) * 1e3 if bandwidth_gbs and dram else 0.0
    clock = f" at {clock_mhz:.0f} MHz" if clock_mhz else ""
    if compute_ms >= memory_ms and compute_ms > 0:
        assert rate is not None  # a compute time needs a rate
        why = f"{flops:.3g} operations at {gpu}'s peak of {rate / 1e3:.1f} TFLOP/s for {dtype} ({pipe}{clock})"
        return Floor(compute_ms, why)
    if memory_ms > 0:
        why = (f"{dram:.3g} bytes beyond the L2's {l2_bytes / 2**20:.0f} MiB at {gpu}'s nominal "
               f"{bandwidth_gbs:.0f} GB/s")  # fmt: skip
        return Floor(memory_ms, why)
    return Floor(0.0, "no rate known for this GPU and type")


def _fastest(dtype: str, fp32: float | None, tensor: dict[str, float | None]) -> tuple[float | None, str]:
    """The fastest rate for ``dtype`` (a result's type: its inputs' type names
    the tensor-core rate, core.dtypes.peak_type) and the pipe it is of."""
    inputs = peak_type(dtype)
    if tensor.get(inputs):
        return tensor[inputs], "tensor cores"
    if dtype == "float32":
        tf32 = tensor.get("tf32")
        if tf32 and (fp32 is None or tf32 / 3 > fp32):
            return tf32 / 3, "TF32 tensor cores at a third of their rate (3xTF32)"
        return fp32, "FP32 lanes"
    if fp32 and inputs in ("float16", "bfloat16"):
        return 2 * fp32, "FP32 lanes, two 16-bit values each"
    if dtype in LANE_TYPES:
        return fp32, "FP32 lanes"
    return None, ""


def refuse_under(samples_ms: list[float], floor: Floor, what: str) -> None:
    """VerificationError when any of ``samples_ms`` is more than MARGIN under ``floor``."""
    if floor.ms <= 0:
        return
    fastest = min(samples_ms)
    if fastest < floor.ms * (1 - MARGIN):
        raise VerificationError(
            f"{what} took {fastest * 1e3:.3g} us on a timed launch, under the {floor.ms * 1e3:.3g} us that is "
            f"the least it can take: {floor.why}. Such a time is impossible; the launch did not do the work "
            "it was given, or the work was done elsewhere.",
            "No figure is reported. If the kernel is correct, report this with the command you ran.",
        )
