"""Errors meant for people: every one carries the cause and what to do about it.

The CLI prints ``str(error)`` on one line and exits non-zero; Python callers can
catch :class:`GemmlabError` (or a subclass) and read ``cause`` and ``fix``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class GemmlabError(Exception):
    """Base class: a problem the user can fix, described as cause + fix."""

    exit_code = 2

    def __init__(self, cause: str, fix: str = "") -> None:
        self.cause = cause
        self.fix = fix
        super().__init__(f"{cause} {fix}".strip() if fix else cause)

    def __reduce__(self) -> tuple:
        # Rebuilt from cause and fix when it crosses a pipe (gemmlab.measure.watchdog):
        # pickling an exception rebuilds it from its args, which hold the two joined.
        return type(self), (self.cause, self.fix)


def failure_text(exc: Exception) -> str:
    """How a long run (sweep, tune) reports one point that failed and goes on:
    a GemmlabError as its message, anything else as a bug to report."""
    if isinstance(exc, GemmlabError):
        return str(exc)
    return f"internal error, please report it: {type(exc).__name__}: {exc}"


class UnknownName(GemmlabError):
    """An unknown kernel, experiment, dtype or architecture name."""


class ConstraintError(GemmlabError):
    """A shape, block edge or dtype that a kernel cannot take."""


class DeviceLimitError(GemmlabError):
    """A launch that exceeds the GPU's limits (threads, shared memory, memory)."""


class NoGPUError(GemmlabError):
    """No CUDA driver or no GPU on this machine."""

    exit_code = 3


class CompileError(GemmlabError):
    """NVRTC rejected a kernel source."""


class DeclarationError(GemmlabError):
    """A user kernel's declaration (the .toml beside its .cu) that gemmlab cannot follow."""


class VerificationError(GemmlabError):
    """A kernel produced a wrong result; no figure is reported for it."""

    exit_code = 4


class KernelStopped(GemmlabError):
    """A kernel that faulted or never finished, stopped by gemmlab's watchdog
    (gemmlab.measure.watchdog); ``kind`` is "fault" or "hang"."""

    exit_code = 4

    def __init__(self, kind: str, cause: str, fix: str = "") -> None:
        self.kind = kind
        super().__init__(cause, fix)

    def __reduce__(self) -> tuple:
        return type(self), (self.kind, self.cause, self.fix)


class StoreError(GemmlabError):
    """The results database cannot be used (corrupt, locked, newer schema, read-only)."""


class ProfilerError(GemmlabError):
    """Nsight Compute is missing or cannot read the GPU's counters."""


def unknown_name(kind: str, name: str, known: Iterable[str], listing: str, cutoff: float = 0.5) -> UnknownName:
    """The error for a name that is not in ``known``, suggesting the closest ones.

    ``kind`` is what was looked up ("kernel", "experiment"); ``listing`` is the
    command that shows every name.
    """
    known = list(known)
    close = difflib.get_close_matches(name, known, n=3, cutoff=cutoff)
    hint = f"Did you mean {', '.join(close)}? " if close else ""
    return UnknownName(f"Unknown {kind} '{name}'.", f"{hint}{listing}")
