"""Many kernels in one command (`compile`, `occupancy`, `check`): each kernel
gets a status, ok or its one-line error; one kernel that fails never hides the
others' results; and a batch with failures ends with a line that counts them
and a non-zero exit code. A single kernel is answered as before: its results,
or its own error line and exit code."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from rich.markup import escape

from gemmlab.cli.app import err_console
from gemmlab.core.errors import GemmlabError

T = TypeVar("T")


class KernelsFailed(GemmlabError):
    """Some kernels of a batch failed; each one's own error was printed on its status line.
    The exit code is the highest of theirs, so that a wrong result (4) is not reported as a typo (2)."""

    def __init__(self, cause: str, fix: str, exit_code: int) -> None:
        super().__init__(cause, fix)
        self.exit_code = exit_code

    def __reduce__(self) -> tuple:
        return type(self), (self.cause, self.fix, self.exit_code)


@dataclass(frozen=True)
class Status(Generic[T]):
    """One kernel of a batch, named as the user named it: what its work gave, or the error that stopped it."""

    name: str
    value: T | None = None
    error: GemmlabError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def line(self) -> str:
        """The status line, as rich markup."""
        if self.error is None:
            return f"{escape(self.name)}: [green]ok[/]"
        return f"{escape(self.name)}: [red]error:[/] {escape(str(self.error))}"


def each(names: Iterable[str], work: Callable[[str], T]) -> list[Status[T]]:
    """``work`` on every kernel name in turn; a GemmlabError stops only the kernel that raised it."""
    statuses: list[Status[T]] = []
    for name in names:
        try:
            statuses.append(Status(name, work(name)))
        except GemmlabError as exc:
            statuses.append(Status(name, error=detached(exc)))
    return statuses


def detached(exc: GemmlabError) -> GemmlabError:
    """``exc`` without its traceback and the errors it was raised from: kept
    for a status line, it would otherwise hold every frame it passed through
    alive (a compile's NVRTC program among them) until a garbage collection."""
    exc.__traceback__ = exc.__cause__ = exc.__context__ = None
    return exc


def finish(statuses: list[Status], notes: Iterable[str] = ()) -> None:
    """End a batch: a single kernel's error is raised as it is (one line, its
    own exit code); of several kernels each gets its status line. Then the
    ``notes`` (lines about the batch as a whole), where any kernel went well;
    last, when any failed, :class:`KernelsFailed`."""
    failed = [s for s in statuses if not s.ok]
    if len(statuses) > 1:
        for status in statuses:
            err_console.print(status.line(), highlight=False, soft_wrap=True)
    if len(failed) < len(statuses):
        for note in notes:
            err_console.print(note, highlight=False, soft_wrap=True, markup=False)
    if len(statuses) == 1 and failed:
        raise failed[0].error  # type: ignore[misc]
    if failed:
        raise KernelsFailed(
            f"{len(failed)} of {len(statuses)} kernels failed: {', '.join(s.name for s in failed)}.",
            "Each one's error is on its line above; the other kernels' results are shown.",
            max(s.error.exit_code for s in failed),  # type: ignore[union-attr]
        )
