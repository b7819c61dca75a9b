"""The stored warnings, told to a reader: what each kind means for the figure
it marks. The stored text stays as the measurement wrote it (it is what
``warnings.csv`` and the database hold); the page shows the explanation
alone, once. A warning of a kind not listed here is shown as it is.

The kinds are those written by :func:`gemmlab.measure.run.timing_warnings`
and the CPU baselines (:mod:`gemmlab.backends.cpu`); a new kind there wants a
line here."""

from __future__ import annotations

import re
from collections.abc import Callable

Explain = Callable[[re.Match[str]], str]

_KINDS: tuple[tuple[re.Pattern[str], Explain], ...] = (
    (
        re.compile(r"wide spread: max/min = ([\d.]+) over (\d+) repetitions"),
        lambda m: (
            f"The slowest of {m[2]} repetitions took {m[1]} times as long as the fastest: "
            "something else used the GPU or its clock changed during the run, so this median is less certain than most."
        ),
    ),
    (
        re.compile(r"short kernel \(([\d.]+) us\): timed by replaying a CUDA graph of (\d+) launches"),
        lambda m: (
            f"One launch lasts only {m[1]} µs, so it was timed as {m[2]} launches replayed back to back "
            "from a CUDA graph; consecutive launches overlap their start and end, so the figure is a little better "
            "than a single launch would give."
        ),
    ),
    (
        re.compile(r"short kernel \(([\d.]+) us\): launch overhead"),
        lambda m: (
            f"One launch lasts only {m[1]} µs, of which launching the kernel takes a few: "
            "the time is mostly overhead, and the rate understates the kernel itself."
        ),
    ),
    (
        re.compile(r"clocks held back during the run: (.+)"),
        lambda m: (
            f"The GPU ran below its full clock during this measurement ({m[1]}): "
            "the figure may be lower than the kernel reaches at full clock."
        ),
    ),
    (
        re.compile(r"multithreaded \((\d+) cores available\)"),
        lambda m: (
            f"numpy's BLAS could use all {m[1]} CPU cores of the machine that measured it: "
            "a multi-core figure, not comparable with a single-thread CPU loop."
        ),
    ),
    (
        re.compile(r"numpy has no BLAS for int32"),
        lambda m: (
            "numpy has no BLAS routine for int32 products: this is numpy's own single-thread loop, not a tuned library."
        ),
    ),
)


def explain(text: str) -> str:
    """The reader's sentence for a stored warning; the text itself where its kind is unknown."""
    for pattern, sentence in _KINDS:
        match = pattern.match(text)
        if match:
            return sentence(match)
    return text
