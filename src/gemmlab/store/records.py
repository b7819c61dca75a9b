"""What leaves the store typed: a configuration's one stored text (:class:`Config`),
the dispatcher's picks (:class:`Pick`) and the grader's verdicts (:class:`Grade`).

Each record is frozen and mirrors its table: a column that may be NULL (or
that an older file, read as it is, lacks) is a field that defaults to None.
Result rows still leave the store as dicts (:meth:`gemmlab.store.store.Store.rows`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from gemmlab.core.shapes import Shape


@dataclass(frozen=True)
class Config:
    """A configuration (a kernel's named template parameters) as the store
    keeps it: one text, JSON with sorted keys, whatever order the parameters
    were given in; ``""`` for a kernel without any. A rung takes the same
    parameters as a dict (:data:`gemmlab.kernels.ladder.Config`): ``values``.

    ``Config(text)`` reads JSON text (stored or given) into that form;
    :meth:`of` takes a dict, text, a Config or None."""

    text: str = ""

    def __post_init__(self) -> None:
        if self.text:
            object.__setattr__(self, "text", json.dumps(json.loads(self.text), sort_keys=True))

    @classmethod
    def of(cls, config: dict | str | Config | None) -> Config:
        if isinstance(config, Config):
            return config
        if not config:
            return cls()
        return cls(config if isinstance(config, str) else json.dumps(config, sort_keys=True))

    @property
    def values(self) -> dict[str, Any]:
        """The named parameters as a dict, in sorted order ({} for none)."""
        return json.loads(self.text) if self.text else {}

    def __bool__(self) -> bool:
        return bool(self.text)

    def __str__(self) -> str:
        return self.text


def config_text(config: dict | str | Config | None) -> str:
    """The stored form of a configuration (named template parameters): JSON
    with sorted keys, so that one configuration has one text whatever order
    it was given in; ``""`` for a kernel without one. Stored text is read back
    and written again in this form."""
    return Config.of(config).text


def _known(cls: type, row: Mapping[str, Any]) -> dict[str, Any]:
    """The columns of a stored row that ``cls`` has a field for."""
    return {f.name: row[f.name] for f in fields(cls) if f.name in row}


# A pick of the dispatcher (see Store.set_pick; id and created are computed):
# the fastest verified kernel and configuration for one shape on one GPU, its
# time and cuBLAS's, timed in alternation, each with how it was timed.
PICK_FIELDS = (
    "run_id", "gpu_name", "cc", "dtype", "m", "n", "k", "kernel", "config", "median_ms", "cublas_ms", "verified",
    "timing_method", "cublas_timing_method",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Pick:
    """The dispatcher's pick for one (GPU, element type, shape): a row of the
    ``dispatch`` table (schema v11), filled by `gemmlab dispatch tune`
    (:mod:`gemmlab.studies.dispatch`) and read by ``gemmlab.matmul``."""

    gpu_name: str
    cc: str
    dtype: str
    m: int
    n: int
    k: int
    kernel: str
    config: Config
    median_ms: float
    cublas_ms: float | None
    verified: bool
    # How each side was timed (gemmlab.core.timing.Timing.method).
    timing_method: str | None = None
    cublas_timing_method: str | None = None
    run_id: int | None = None
    id: int | None = None  # given by the store, as created is
    created: str | None = None

    @property
    def shape(self) -> Shape:
        return Shape(self.m, self.n, self.k)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Pick:
        found = _known(cls, row)
        return cls(**{**found, "config": Config(found["config"]), "verified": bool(found["verified"])})


# A verdict of `gemmlab grade` as the grades table stores it (run id and time apart).
GRADE_FIELDS = (
    "task", "submission", "attempt", "source_hash", "path", "stage", "reason", "share_geomean", "grade", "wall_s",
    "occupancy", "profile", "signature",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Grade:
    """One graded attempt of a submission on a task: a row of the ``grades``
    table (schema v9), written by `gemmlab grade` (:mod:`gemmlab.studies.grade`)
    and read by its leaderboard (:mod:`gemmlab.report.leaderboard`). Its fields
    keep the stored values as they are: the grader's signature covers them."""

    task: str
    submission: str
    attempt: int
    source_hash: str
    stage: str  # the stage it reached
    grade: str
    created: str
    path: str = ""  # the submission's declaration
    reason: str | None = None  # why it stopped
    share_geomean: float | None = None  # geometric-mean share of the library
    wall_s: float | None = None  # v10
    occupancy: str | None = None  # v10: its kernel's theoretical occupancy, JSON
    profile: str | None = None  # v12: its kernel's Nsight Compute profile, JSON
    signature: str | None = None  # v14: the grader's HMAC of the signed fields
    run_id: int | None = None
    id: int | None = None  # given by the store

    def signed(self) -> dict[str, Any]:
        """The fields the grader's signature covers: all of :data:`GRADE_FIELDS` but the signature."""
        return {name: getattr(self, name) for name in GRADE_FIELDS if name != "signature"}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Grade:
        return cls(**_known(cls, row))
