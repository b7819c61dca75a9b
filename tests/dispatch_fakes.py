"""What the dispatcher's tests hand the tuner instead of a GPU: a runner's
result for one candidate, timed at ``ms`` beside a cuBLAS of 0.5 ms."""

from __future__ import annotations

from types import SimpleNamespace

from gemmlab.core.shapes import Shape
from gemmlab.core.timing import Timing


def fake_result(spec, shape: Shape, ms: float) -> SimpleNamespace:
    base = Timing.of([0.5])
    return SimpleNamespace(
        to_dict=lambda: {"kernel": spec.id, "m": shape.m, "n": shape.n, "k": shape.k, "dtype": "float32",
                         "config": spec.config, "timing": Timing.of([ms]), "baseline_timing": base,
                         "ratio_to_baseline": 0.5 / ms, "backend": "nvrtc"},
        timing=Timing.of([ms]), baseline_timing=base,
    )  # fmt: skip
