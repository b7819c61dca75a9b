"""The dispatcher: per GPU, element type and shape, the fastest verified rung
and configuration of the catalogue's ladders, tuned on the shape suite
(:mod:`gemmlab.studies.suite`) and read back by ``gemmlab.matmul`` and
`gemmlab run best`.

The search
----------
A shape falls into a class (:func:`shape_class`): skinny M (M <= 16), skinny N,
K-heavy (K at least 4 x max(M, N)), few tiles (fewer 128 x 256 tiles than the
GPU has SMs, where the ladder's big tile leaves SMs idle) or large. Each class
names a handful of rungs to try (:data:`CANDIDATES`); a rung not in the
catalogue yet (one being written) is skipped with a note, so a new rung joins
the search by existing. Of each rung, the configurations its ladder gives
(``catalogue.configs``) that accept the shape and run on the GPU are ranked by
a model of how they use the GPU (:func:`fill_score`: the share of the block
slots of its waves the launch fills, with as many blocks per SM as the rung's
threads, shared memory and registers allow, times the share of the computed
tile that is C: split-K's slices count as blocks, and a persistent rung's
tiles as the blocks of its waves) and the first ``per_rung``
are kept, the rung's default first when it accepts the shape. The rungs made
for a class (:data:`EVERY_CONFIG`: the skinny rungs and the cluster split-K, cheap to
time) try every configuration on the shapes of that class, first. The other
rungs' candidates follow interleaved (each rung's best, then each one's second, ...),
and a shape stops starting candidates once ``shape_seconds`` are spent, so
what a budget cuts is the least promising. Every candidate goes through the runner (verified before
and after timing, timed in alternation with cuBLAS, both sides from CUDA graphs
or back-to-back launches below about 50 us); its result is stored in the
results table (experiment :data:`EXPERIMENT`), and the fastest verified one is
the shape's pick in the ``dispatch`` table (:meth:`Store.set_pick`). The
tuning itself is :mod:`gemmlab.studies.dispatch_tuning`.

The choice for a shape
----------------------
:func:`choose`: the verified pick stored for exactly this shape (``tuned``);
else the cost model's fastest candidate (``model``): every configuration of
the rungs that serve the element type (and of its default rungs, and the
configurations the picks name) that takes the shape, ranked by the model's
time (:mod:`gemmlab.studies.costmodel`) corrected by the picks of this GPU,
tuned here or shipped (:mod:`gemmlab.studies.shipped`). There is no
nearest-tuned-shape rule: another shape's pick speaks for this one only
through the correction, so an unseen shape never gets a pick worse than the
model's. Only when no candidate takes the shape does the first of
:data:`DEFAULTS` that accepts it run (``default``), or a ConstraintError say why none does.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from gemmlab.core.arch import sm_limits
from gemmlab.core.errors import (
    ConstraintError,
    DeviceLimitError,
    GemmlabError,
)
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.ladder import SHAPE_CLASSES, cdiv
from gemmlab.kernels.sgemm.family import REG_OVERHEAD
from gemmlab.kernels.spec import KernelSpec
from gemmlab.store.records import Pick
from gemmlab.studies.costmodel import (
    SHARED_WORK,
    Calibration,
    Correction,
    GPUModel,
    Prediction,
    predict,
)

# The results of every candidate tried are stored under this experiment.
EXPERIMENT = "dispatch"
# SMs assumed where no GPU is asked (an H100 SXM's).
ASSUMED_SMS = 132
# The tile that decides whether a shape has few tiles: the FP32 and tensor ladders' top rungs'.
BIG_TILE = (128, 256)
PER_RUNG = 3
# The most candidates per shape (the tuner's budget per shape: dispatch_tuning.py).
MAX_PER_SHAPE = 32
# The SM the block-residency model assumes (an H100's or H200's: sm_90).
SM = sm_limits((9, 0))


def serving(dtype: str, shape_class: str) -> tuple[str, ...]:
    """The rungs that take ``dtype`` and serve ``shape_class`` (Rung.serves), in their order there."""
    found = [r for r in catalogue.rungs() if dtype in r.dtypes and shape_class in r.serves]
    return tuple(r.id for r in sorted(found, key=lambda r: r.serves[shape_class]))


def fallbacks(dtype: str) -> tuple[str, ...]:
    """The rungs that are ``dtype``'s default (Rung.default_for), in their order."""
    found = [r for r in catalogue.rungs() if dtype in r.default_for]
    return tuple(r.id for r in sorted(found, key=lambda r: r.default_for[dtype]))


# Each of these is read off the rungs (kernels/ladder.py: Rung's serves, every_config, default_for).
# What matmul runs on a shape no tuned pick accepts: the first of these whose
# default configuration accepts it and runs on the GPU (FP32: the top rung,
# then a rung that takes any size; BF16: Hopper's, then the sm_80 rungs).
DEFAULTS = {dtype: fallbacks(dtype) for dtype in dict.fromkeys(d for r in catalogue.rungs() for d in r.default_for)}
# The rungs each shape class tries per element type, best guess first; one
# without the element type is left out. Each class ends with an sm_80 rung,
# which is what a GPU before Hopper gets (the Hopper rungs have no
# configuration it runs).
CANDIDATES = {dtype: {cls: serving(dtype, cls) for cls in SHAPE_CLASSES} for dtype in DEFAULTS}
# Rungs made for one shape class, whose every configuration is tried on the
# shapes of that class (short launches: the whole search costs seconds).
EVERY_CONFIG = {r.id: r.every_config for r in catalogue.rungs() if r.every_config}

TUNED, MODEL, DEFAULT = "tuned", "model", "default"


@dataclass(frozen=True)
class Candidate:
    kernel: str
    config: dict
    spec: KernelSpec

    @property
    def label(self) -> str:
        return f"{self.kernel} {' '.join(f'{k}={v}' for k, v in self.config.items())}"


def shape_class(shape: Shape, sms: int = ASSUMED_SMS) -> str:
    """The class of ``shape`` that decides which rungs are tried (see the module's docstring)."""
    if shape.m <= 16:
        return "skinny-m"
    if shape.n <= 16:
        return "skinny-n"
    if shape.k >= 4 * max(shape.m, shape.n):
        return "k-heavy"
    if cdiv(shape.m, BIG_TILE[0]) * cdiv(shape.n, BIG_TILE[1]) < sms:
        return "few-tiles"
    return "large"


def accepts(spec: KernelSpec, shape: Shape, dtype: str, arch: str | None = None) -> str | None:
    """None when ``spec`` runs ``shape`` in ``dtype`` (on ``arch``, when given); else why not."""
    if dtype not in spec.dtypes:
        return f"{spec.id} has no {dtype} version"
    broken = spec.violations(shape, 0, dtype)
    if broken:
        return "; ".join(broken)
    if arch is not None:
        try:
            spec.compile_arch(arch)
        except DeviceLimitError as exc:
            return exc.cause
    return None


def resident_blocks(candidate: Candidate) -> int:
    """Blocks of the candidate an SM holds at once, by its threads, shared
    memory and (FP32 ladder) register estimate, at least its MIN_BLOCKS: what
    a wave is made of."""
    rung, c = catalogue.ladder(candidate.kernel).rung(candidate.kernel), candidate.config
    threads = rung.threads(c)
    fits = [SM.max_blocks_per_sm, SM.max_threads_per_sm // threads,
            SM.smem_per_sm // (rung.smem_bytes(c) + SM.reserved_smem_per_block)]  # fmt: skip
    if rung.max_accumulators:  # the FP32 ladder's registers: accumulators, fragments and an allowance
        regs = rung.outputs(c) + rung.fragments(c) + REG_OVERHEAD
        fits.append(max(SM.regs_per_sm // (threads * regs), c.get("MIN_BLOCKS", 1)))
    return max(1, min(fits))


# SHARED_WORK (costmodel.py): persistent rungs whose waves are full by
# construction. The other persistent rungs walk whole tiles, and a last wave
# part full is as idle as a part-full wave of blocks (3000 cubed: 288 tiles of
# 128 x 256 on 132 SMs take three waves' time, 384 of 128 x 192 the same three).


def fill_score(candidate: Candidate, shape: Shape, sms: int) -> float:
    """How much of the GPU the launch keeps doing useful work, from 0 to 1: the
    share of its waves' block slots (SMs x resident blocks) it fills, times the
    share of its tiles' outputs that are C (a 16-row tile at M = 1 computes 15
    rows of nothing). A persistent kernel's waves are of tiles (its blocks walk
    them), unless it shares the work out evenly (SHARED_WORK)."""
    spec = candidate.spec
    used = _used(candidate, shape)
    if spec.persistent and candidate.kernel in SHARED_WORK:
        return used
    if spec.persistent:
        rows, cols = _tile(candidate)
        blocks = cdiv(shape.m, rows) * cdiv(shape.n, cols)
    else:
        blocks = _grid_blocks(candidate, shape)
    slots = sms * resident_blocks(candidate)
    return used * blocks / (math.ceil(blocks / slots) * slots)


def _used(candidate: Candidate, shape: Shape) -> float:
    """The share of the candidate's tiles' outputs that are C."""
    rows, cols = _tile(candidate)
    return shape.m * shape.n / (cdiv(shape.m, rows) * rows * cdiv(shape.n, cols) * cols)


def _grid_blocks(candidate: Candidate, shape: Shape) -> int:
    x, y, z = candidate.spec.grid(shape, 0)
    return x * y * z


def candidates(
    shape: Shape, dtype: str, *, sms: int = ASSUMED_SMS, arch: str | None = None, per_rung: int = PER_RUNG,
    rungs: Sequence[str] | None = None,
) -> tuple[list[Candidate], list[str]]:  # fmt: skip
    """The candidates worth timing at ``shape`` (``rungs``: these instead of
    the class's), interleaved across the rungs, best first; and notes on the
    rungs passed over."""
    cls = shape_class(shape, sms)
    wanted = rungs if rungs is not None else CANDIDATES[dtype][cls]
    whole: list[Candidate] = []  # the configurations of the rungs made for this class: all, first
    per_kernel: list[list[Candidate]] = []
    notes: list[str] = []
    for kernel in wanted:
        try:
            ladder = catalogue.ladder(kernel)
        except GemmlabError:
            notes.append(f"{kernel}: not in the catalogue yet, skipped")
            continue
        if dtype not in ladder.rung(kernel).dtypes:
            continue
        ranked = _ranked(kernel, shape, dtype, sms, arch)
        if not ranked:
            notes.append(f"{kernel}: no configuration takes {shape} in {dtype}")
        if cls in EVERY_CONFIG.get(kernel, ()):
            whole += ranked
        else:
            per_kernel.append(ranked[:per_rung])
    found = whole + interleaved(per_kernel)
    if len(found) > MAX_PER_SHAPE:
        notes.append(f"{shape} {dtype}: {len(found) - MAX_PER_SHAPE} candidates not tried, "
                     f"{MAX_PER_SHAPE} per shape at most")  # fmt: skip
    return found[:MAX_PER_SHAPE], notes


def interleaved(lists: Sequence[Sequence[Candidate]]) -> list[Candidate]:
    """Each list's first, then each one's second, and so on."""
    return [c for rank in itertools.zip_longest(*lists) for c in rank if c is not None]


def fill_rank(candidate: Candidate, shape: Shape, sms: int) -> tuple[int, float]:
    """The fill score to 0.05 (closer than that the model cannot tell). Below
    0.05 no configuration fills a twentieth of the GPU (128 cubed in FP32: 4
    tiles of 64 x 64 or 16 of 32 x 32), and the score only says how many
    blocks an SM could hold (fewer makes it look fuller); there the useful
    blocks per SM rank them, more first: a problem that small is served by
    more blocks, not by more reuse of each operand."""
    score = 20 * fill_score(candidate, shape, sms)
    if score >= 1:
        return 1, round(score)
    return 0, _used(candidate, shape) * _grid_blocks(candidate, shape) / sms


def _ranked(kernel: str, shape: Shape, dtype: str, sms: int, arch: str | None) -> list[Candidate]:
    """The rung's configurations that accept the shape and run on a caller's
    arrays: its default first, then by fill score (fill_rank), then tile area
    (more reuse of each operand)."""
    taken = []
    for config in catalogue.configs(kernel):
        spec = catalogue.variant(kernel, config)
        if spec.problem.operands is not None and accepts(spec, shape, dtype, arch) is None:
            taken.append(Candidate(kernel, config, spec))
    default = catalogue.ladder(kernel).rung(kernel).config()
    first = [c for c in taken if c.config == default]
    rest = [c for c in taken if c.config != default]
    rest.sort(key=lambda c: (fill_rank(c, shape, sms), math.prod(_tile(c))), reverse=True)
    return first + rest


def _tile(candidate: Candidate) -> tuple[int, int]:
    return catalogue.ladder(candidate.kernel).rung(candidate.kernel).tile(candidate.config)


# -- choosing for a shape -------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    """What the dispatcher runs for one shape, and why."""

    kernel: str
    config: dict
    reason: str  # TUNED, MODEL or DEFAULT
    tuned_shape: Shape | None = None  # the shape the pick was tuned on (tuned)
    median_ms: float | None = None  # its time there, and cuBLAS's
    cublas_ms: float | None = None
    timing_method: str | None = None
    cublas_timing_method: str | None = None
    predicted_us: float | None = None  # the corrected model's time (model)
    basis: str = ""  # what the correction rests on (model)
    ranked: int = 0  # candidates the model ranked (model)

    @property
    def spec(self) -> KernelSpec:
        return catalogue.variant(self.kernel, self.config)

    def why(self) -> str:
        if self.reason == TUNED:
            return "tuned on this shape"
        if self.reason == MODEL:
            return (f"the fastest of {self.ranked} candidates by the cost model, {self.predicted_us:.1f} us "
                    f"predicted ({self.basis})")  # fmt: skip
        return "no candidate the model ranks takes this shape: the element type's default rung"


def choose(
    picks: Sequence[Pick], shape: Shape, dtype: str, arch: str | None = None, *, gpu: GPUModel | None = None,
    calibration: Calibration | None = None,
) -> Choice:  # fmt: skip
    """The kernel and configuration for ``shape`` among ``picks`` (the stored
    picks of one GPU, see :meth:`Store.picks`), as the module's docstring says;
    ConstraintError when nothing of the element type takes the shape.
    ``gpu``: the GPU the model is of (default: an H100's figures);
    ``calibration``: the picks' correction of it, when already made."""
    for pick in picks:
        if pick.dtype == dtype and pick.verified and pick.shape == shape:
            try:
                spec = catalogue.variant(pick.kernel, pick.config.values)
            except GemmlabError:
                continue  # a kernel or configuration this gemmlab no longer has
            if accepts(spec, shape, dtype, arch) is None:
                return Choice(pick.kernel, spec.config or {}, TUNED, pick.shape, pick.median_ms, pick.cublas_ms,
                              pick.timing_method, pick.cublas_timing_method)  # fmt: skip
    gpu = gpu or GPUModel.assumed()
    if calibration is None:
        calibration = Calibration.of(picks, gpu, resident)
    ranked = model_ranked(shape, dtype, arch, gpu, calibration, picks)
    if not ranked:
        return default_choice(shape, dtype, arch)
    best = ranked[0]
    return Choice(best.candidate.kernel, best.candidate.config, MODEL, predicted_us=best.us,
                  basis=best.correction.basis, ranked=len(ranked))  # fmt: skip


@dataclass(frozen=True)
class Ranked:
    """A candidate, the model's time for it at a shape, and the correction applied."""

    us: float
    candidate: Candidate
    prediction: Prediction
    correction: Correction


def resident(kernel: str, spec: KernelSpec) -> int:
    return resident_blocks(Candidate(kernel, spec.config or {}, spec))


def model_ranked(
    shape: Shape, dtype: str, arch: str | None, gpu: GPUModel, calibration: Calibration, picks: Sequence[Pick] = ()
) -> list[Ranked]:  # fmt: skip
    """Every configuration of the rungs that serve ``dtype`` (any shape class)
    and of its default rungs, with the configurations ``picks`` name, that
    takes ``shape`` (on ``arch``), fastest first by the corrected model."""
    kernels = [r.id for r in catalogue.rungs() if dtype in r.dtypes and (r.serves or dtype in r.default_for)]
    configs: dict[str, list[dict]] = {kernel: list(catalogue.configs(kernel)) for kernel in kernels}
    for pick in picks:
        if pick.dtype == dtype and pick.kernel in configs and pick.config.values not in configs[pick.kernel]:
            configs[pick.kernel].append(pick.config.values)
    found = []
    for kernel, listed in configs.items():
        for config in listed:
            try:
                spec = catalogue.variant(kernel, config)
            except GemmlabError:
                continue
            if spec.problem.operands is None or accepts(spec, shape, dtype, arch) is not None:
                continue  # it cannot run on a caller's arrays, or not at this shape
            predicted = predict(kernel, spec, shape, dtype, gpu, resident(kernel, spec))
            correction = calibration.correction(dtype, kernel, spec.config or {}, shape)
            found.append(Ranked(predicted.us * correction.factor, Candidate(kernel, spec.config or {}, spec),
                                predicted, correction))  # fmt: skip
    found.sort(key=lambda r: (round(r.us, 2), r.prediction.compute_us))  # a tie: the more compute to spare
    return found


def default_choice(shape: Shape, dtype: str, arch: str | None = None) -> Choice:
    reasons = []
    for kernel in DEFAULTS[dtype]:
        spec = catalogue.variant(kernel, {})  # a candidate rung too (not in catalogue.get until measured)
        why = accepts(spec, shape, dtype, arch)
        if why is None:
            return Choice(kernel, spec.config or {}, DEFAULT)
        reasons.append(f"{kernel}: {why}")
    raise ConstraintError(
        f"No kernel of gemmlab takes {shape.m} x {shape.n} x {shape.k} in {dtype}: {'; '.join(reasons)}.",
        "Pad the matrices to a shape these rules accept, or use cuBLAS for this one.",
    )


def percent_of_cublas(pick: Pick) -> float | None:
    """cuBLAS's time over the pick's, as a percentage (same work on both sides)."""
    if not pick.cublas_ms or not pick.median_ms:
        return None
    return 100.0 * pick.cublas_ms / pick.median_ms
