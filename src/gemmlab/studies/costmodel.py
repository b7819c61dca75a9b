"""How long a candidate of the ladders should take on a shape: the
dispatcher's model (:mod:`gemmlab.studies.dispatch` ranks every candidate by
it for a shape that has no pick of its own), and the correction that measured
picks make to it.

The model
---------
A launch costs a fixed latency (``GPUModel.launch_us``; a rung's workspace is
zeroed once, when bound, not before each launch) and then the longer of two
times, plus :data:`UNHIDDEN` of the shorter:

- **compute**: the launch's work units (its grid; a persistent rung's grid
  counts tiles or tile slices) are dealt out in waves of ``SMs x resident
  blocks``; each wave takes as long as one SM needs for its blocks' padded
  tiles (a 128 x 256 tile at N = 24 computes 232 columns of nothing) at the
  element type's peak rate times the rung's efficiency (:data:`EFFICIENCY`),
  less where a part-full last wave leaves an SM fewer blocks than it was made
  to hold (:func:`_wave_us`), plus :data:`WAVE_US` a wave. Clusters fill
  only the SMs they fit in at once (:func:`cluster_sms`). Split-K and stream-K enter through their work units:
  more units of fewer k-steps each. A rung that shares the last tiles' work out
  evenly (``SHARED_WORK``) has no part-full last wave.
- **memory**: the bytes DRAM must move at least (A, B and C once each, and
  split-K's partial tiles written and read back) at 85% of the nominal
  bandwidth, or the bytes the blocks read from L2 (every block its A and B
  panels), whichever takes longer.

The model is written for ranking, and it is only as good as its constants:
what it cannot see (a rung's pipeline depth, bank conflicts, a cluster's
multicast) each rung's measured times correct.

The correction
--------------
:class:`Calibration` holds, per element type, rung and configuration, the ratio of measured to
predicted time of every verified pick and timed candidate it is given (one
GPU's: those gemmlab ships and those tuned here, :class:`Timed`). A candidate's predicted
time is multiplied by, in order of preference: the ratio of the same
configuration measured at the nearest shape within :data:`NEAR` (a log
distance); else a blend of its rung's ratios (any configuration), each
weighed by how near its shape is (:data:`SPREAD`), with a prior: the median
ratio of every timed rung of that element type times :data:`UNTIMED_PENALTY`,
so that a candidate nobody has timed near this shape must look clearly faster
before it displaces one that has been.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gemmlab.core.dtypes import DTYPE_ITEMSIZE, c_itemsize, input_type
from gemmlab.core.errors import GemmlabError
from gemmlab.core.gpu import FP32_LANES_PER_SM, TENSOR_FLOPS_PER_SM_CLOCK
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.ladder import cdiv
from gemmlab.store.records import Config, Pick

if TYPE_CHECKING:
    from gemmlab.core.gpu import DeviceInfo
    from gemmlab.kernels.spec import KernelSpec

# resident(kernel, spec): blocks of that configuration one SM holds at once (studies/dispatch.py's resident_blocks).
ResidentBlocks = Callable[[str, "KernelSpec"], int]

# The share of the element type's peak a rung's inner loop reaches when the
# GPU is full of its blocks: a prior, before any measurement corrects it. The
# FP32 ladder's top rungs reach about three quarters of the FP32 lanes' peak;
# the Hopper rungs that keep the tensor cores fed by TMA and warp-specialised
# producers about the same of the dense tensor peak; sm_80 instructions
# (HMMA) on a Hopper about a third; the skinny and GEMV rungs are made for
# memory, and their compute rate rarely decides. Unlisted rungs: DEFAULT_EFFICIENCY.
EFFICIENCY: Mapping[str, float] = {
    "sgemm_padded_b": 0.75, "sgemm_edge_strips": 0.72, "sgemm_swizzle_l2": 0.7, "sgemm_multistage": 0.7,
    "sgemm_stream_k": 0.7, "sgemm_cluster_split_k": 0.65, "sgemm_small_tile": 0.55, "sgemm_split_k": 0.55,
    "sgemm_skinny": 0.3, "sgemm_skinny_n": 0.3, "sgemm_gemv_split": 0.2,
    "tc_tma_store": 0.75, "tc_cluster": 0.72, "tc_persistent": 0.7, "tc_split_tail": 0.72, "tc_wgmma": 0.6,
    "tc_split_k": 0.6, "tc_small": 0.55, "tc_any_k": 0.45, "tc_mma_pipeline": 0.3, "tc_wmma": 0.2,
    "tc_gemv": 0.1, "tc_fp8_tma_store": 0.7, "tc_fp8_wgmma": 0.55, "tc_fp8_mma": 0.15,
}  # fmt: skip
DEFAULT_EFFICIENCY = 0.3
# Of nominal DRAM bandwidth, what a streaming kernel reaches (the memory lab's copy reaches 85-90% on Hopper).
DRAM_SHARE = 0.85
# L2's bandwidth for reads spread over every SM, as a multiple of DRAM's nominal (Hopper: about 2.5).
L2_OVER_DRAM = 2.5
# What one SM reads from or writes to L2 per clock (Hopper: 64 bytes): the
# rate of a split-K fix-up, where the last block of a tile adds the other
# slices' partial tiles alone.
L2_BYTES_PER_SM_CLOCK = 64
# Rungs that add their slices' partial tiles through distributed shared
# memory, spread over the cluster's blocks, not by one block through L2.
CLUSTER_REDUCTION = frozenset({"sgemm_cluster_split_k", "tc_small"})
# Warps on one SM that keep its pipes busy however few blocks hold them (four per scheduler).
FULL_WARPS = 16
# The share of the shorter of compute and memory that the longer does not
# hide: a pipeline overlaps loads with products, but not perfectly.
UNHIDDEN = 0.3
# What each wave of blocks costs besides its arithmetic: starting the blocks,
# filling their pipelines before the first product, draining them and storing C.
WAVE_US = 2.0
# SMs that clusters of each size fill at once on a 132-SM Hopper, one block per
# SM (cuda.core's max_active_clusters times the size, measured on an H200:
# benchmarks/results/2026-11-24g_h200_cluster-occupancy.txt); a cluster must sit in
# one GPC, so some SMs stay idle. 5 was not measured: assumed between 4 and 6.
# Scaled by SMs / 132 for another GPU.
CLUSTER_SMS = {1: 132, 2: 132, 3: 117, 4: 120, 5: 110, 6: 102, 7: 105, 8: 120}
# The log distance (natural logs of M, N and K) within which one shape's
# measurement of a configuration stands for another's: 0.7 is a factor of two on one side.
NEAR = 0.7
# How far a rung's measurements at other shapes (and configurations) reach: a
# measurement at log distance d weighs exp(-(d / SPREAD)^2) against the prior's
# PRIOR_WEIGHT (the median ratio of every timed rung of the element type times
# UNTIMED_PENALTY). 128 cubed says little about 4096 cubed (d = 6): there
# the prior decides.
SPREAD = 1.0
PRIOR_WEIGHT = 0.25
UNTIMED_PENALTY = 1.15
# Persistent rungs that share out the k-iterations of the last tiles, so that
# their blocks finish together: their waves are full by construction.
SHARED_WORK = frozenset({"sgemm_stream_k", "tc_split_tail"})


@dataclass(frozen=True)
class GPUModel:
    """What the model needs of a GPU."""

    name: str
    cc: tuple[int, int]
    sms: int
    clock_ghz: float
    dram_gbs: float
    launch_us: float = 2.0  # one launch from a CUDA graph, issue to retire, on an idle GPU

    @classmethod
    def of(cls, info: DeviceInfo) -> GPUModel:
        """The model of a described GPU (``gemmlab.core.gpu.describe``)."""
        clock = (info.sm_clock_mhz or 1755.0) / 1e3
        return cls(info.name, info.cc, info.sm_count, clock, info.peak_bandwidth_gbs or 3350.0)

    @classmethod
    def assumed(cls, sms: int = 132) -> GPUModel:
        """An H100 SXM's figures, where no GPU is asked (tests, a machine without one)."""
        return cls("NVIDIA H100 80GB HBM3", (9, 0), sms, 1.98, 3352.0)

    def flops_per_sm_us(self, dtype: str) -> float:
        """Dense FLOPs one SM does per microsecond for ``dtype``'s inputs."""
        if dtype == "float32":
            per_clock = 2 * FP32_LANES_PER_SM.get(self.cc, 128)
        else:
            rates = TENSOR_FLOPS_PER_SM_CLOCK.get(self.cc) or TENSOR_FLOPS_PER_SM_CLOCK[(9, 0)]
            per_clock = rates.get(input_type(dtype), rates["bfloat16"])
        return per_clock * self.clock_ghz * 1e3


@dataclass(frozen=True)
class Prediction:
    """The model's time for one candidate at one shape, before any correction, and its parts."""

    us: float
    compute_us: float
    memory_us: float
    fixed_us: float
    waves: float
    padded_share: float  # the share of the computed tiles' outputs that are C


def predict(kernel: str, spec: KernelSpec, shape: Shape, dtype: str, gpu: GPUModel, resident: int) -> Prediction:
    """The model's time for ``spec`` (a configuration of rung ``kernel``) at
    ``shape``; ``resident``: the blocks of it one SM holds at once."""
    rung = catalogue.ladder(kernel).rung(kernel)
    config = spec.config or {}
    bm, bn = rung.tile(config)
    m, n, k = shape.m, shape.n, shape.k
    tiles = cdiv(m, bm) * cdiv(n, bn)
    x, y, z = spec.grid(shape, 0)
    units = max(x * y * z, 1)
    slices = max(1, round(units / tiles))  # split-K slices (or stream-K's), 1 for a plain rung
    padded_flops = 2.0 * cdiv(m, bm) * bm * cdiv(n, bn) * bn * k
    unit_us = padded_flops / units / (gpu.flops_per_sm_us(dtype) * EFFICIENCY.get(kernel, DEFAULT_EFFICIENCY))
    sms = cluster_sms(gpu.sms, math.prod(spec.cluster) if spec.cluster else 1)
    slots = sms * resident
    if spec.persistent and kernel in SHARED_WORK and units > slots:
        waves = units / slots
        compute_us = waves * resident * unit_us
    else:
        full, rest = divmod(units, slots)
        waves = float(full + (rest > 0))
        warps = max(1, rung.threads(config) // 32)
        compute_us = full * _wave_us(resident, resident, warps, unit_us)
        if rest:
            compute_us += _wave_us(math.ceil(rest / sms), resident, warps, unit_us)
    compute_us += math.ceil(waves) * WAVE_US
    in_bytes, out_bytes = DTYPE_ITEMSIZE[dtype], c_itemsize(dtype)
    dram = (m * k + k * n) * in_bytes + m * n * out_bytes
    if dtype == "float32":
        dram += m * n * 4  # the FP32 kernels read C whatever beta is
    l2 = units * (bm + bn) * cdiv(k, slices) * in_bytes
    memory_us = max(dram / (gpu.dram_gbs * DRAM_SHARE * 1e3), l2 / (gpu.dram_gbs * L2_OVER_DRAM * 1e3))
    if slices > 1 and kernel not in CLUSTER_REDUCTION:
        # Each slice's block writes its partial tile, then the tile's last block reads them all back.
        compute_us += (slices + 1) * bm * bn * 4 / (L2_BYTES_PER_SM_CLOCK * gpu.clock_ghz * 1e3)
    fixed_us = gpu.launch_us
    used = m * n / (cdiv(m, bm) * bm * cdiv(n, bn) * bn)
    body = max(compute_us, memory_us) + UNHIDDEN * min(compute_us, memory_us)
    return Prediction(fixed_us + body, compute_us, memory_us, fixed_us, waves, used)


def cluster_sms(sms: int, cluster: int) -> int:
    """The SMs a launch in clusters of ``cluster`` blocks keeps busy at once (:data:`CLUSTER_SMS`)."""
    if cluster <= 1:
        return sms
    known = CLUSTER_SMS.get(cluster, CLUSTER_SMS[8] * cluster // 16)
    return max(cluster, round(known * sms / 132))


def _wave_us(blocks: int, resident: int, warps: int, unit_us: float) -> float:
    """One wave's time on the busiest SM, holding ``blocks`` of ``warps`` warps
    each where its configuration was made for ``resident``: the blocks' units at
    the SM's full rate, shared. The SM reaches that rate with the blocks it was
    made for, or with :data:`FULL_WARPS` warps, whichever comes first; below,
    its rate falls as the square root of the share (fewer warps hide less
    latency, though each one's independent instructions still overlap)."""
    share = min(1.0, max(blocks / resident, blocks * warps / FULL_WARPS))
    return blocks * unit_us / math.sqrt(share)


def log_distance(a: Shape, b: Shape) -> float:
    return math.dist((math.log(a.m), math.log(a.n), math.log(a.k)), (math.log(b.m), math.log(b.n), math.log(b.k)))


@dataclass(frozen=True)
class Correction:
    """The factor a candidate's predicted time is multiplied by, and what it rests on."""

    factor: float
    basis: str


@dataclass(frozen=True)
class Timed:
    """One verified candidate's time at one shape on one GPU: a tuner's result
    that was not (or not only) a pick, read from a results database or a
    shipped table. A :class:`Pick` serves the calibration as well."""

    dtype: str
    shape: Shape
    kernel: str
    config: Config
    median_ms: float
    verified: bool = True


def timed_rows(rows: Iterable[Mapping]) -> list[Timed]:
    """Stored result rows of the dispatcher's experiment (``Store.rows``; the
    tuners store only candidates that verified) as :class:`Timed`."""
    return [Timed(row["dtype"], Shape(row["m"], row["n"], row["k"]), row["kernel"], Config(row.get("config") or ""),
                  float(row["median_ms"])) for row in rows if row.get("median_ms")]  # fmt: skip


@dataclass
class Calibration:
    """Measured over predicted time of verified picks and timed candidates,
    per element type, rung and configuration (module docstring)."""

    # (dtype, kernel, configuration text) -> [(shape, ratio)]
    by_config: dict[tuple[str, str, str], list[tuple[Shape, float]]] = field(default_factory=dict)

    @classmethod
    def of(cls, picks: Iterable[Pick | Timed], gpu: GPUModel, resident: ResidentBlocks) -> Calibration:
        """The calibration from ``picks`` (and timed candidates), all of one GPU
        (unverified ones and ones whose configuration this gemmlab no longer
        has are left out)."""
        found = cls()
        for pick in picks:
            if not pick.verified or pick.median_ms <= 0:
                continue
            try:
                spec = catalogue.variant(pick.kernel, pick.config.values)
            except GemmlabError:  # a rung or configuration since removed: nothing to learn from
                continue
            predicted = predict(pick.kernel, spec, pick.shape, pick.dtype, gpu, resident(pick.kernel, spec))
            key = (pick.dtype, pick.kernel, Config.of(spec.config or {}).text)
            found.by_config.setdefault(key, []).append((pick.shape, 1e3 * pick.median_ms / predicted.us))
        return found

    def correction(self, dtype: str, kernel: str, config: Mapping[str, int], shape: Shape) -> Correction:
        same = self.by_config.get((dtype, kernel, Config.of(dict(config)).text), [])
        near = [(log_distance(shape, s), s, r) for s, r in same if log_distance(shape, s) <= NEAR]
        if near:
            _, where, ratio = min(near, key=lambda found: found[0])
            return Correction(ratio, f"this configuration measured at {where}")
        every = [r for (d, _, _), rows in self.by_config.items() if d == dtype for _, r in rows]
        if not every:
            return Correction(1.0, "no measurement on this GPU: the model alone")
        prior = math.log(UNTIMED_PENALTY * statistics.median(every))
        measured = [(s, r) for (d, kk, _), rows in self.by_config.items() if (d, kk) == (dtype, kernel)
                    for s, r in rows]  # fmt: skip
        rung = [(math.exp(-((log_distance(shape, s) / SPREAD) ** 2)), r) for s, r in measured]
        weight = sum(w for w, _ in rung)
        if weight < 1e-3:
            return Correction(math.exp(prior), f"{kernel} not timed near this shape on this GPU")
        blended = (sum(w * math.log(r) for w, r in rung) + PRIOR_WEIGHT * prior) / (weight + PRIOR_WEIGHT)
        return Correction(math.exp(blended), f"{len(rung)} measurement(s) of {kernel}, the nearest weighing most")
