"""What compute-sanitizer's runs found, read from what they printed: for one
kernel under one tool (:class:`KernelCheck`), for one tool over several
kernels (:class:`SanitizerReport`), and for one kernel across the tools with
the verification of its runs as a verdict of its own (:class:`KernelVerdict`).
The runs themselves are :mod:`gemmlab.measure.sanitize`'s."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gemmlab.core.errors import GemmlabError

_SUMMARY = re.compile(r"(ERROR|RACECHECK) SUMMARY: (\d+) (errors?|hazards?)")
_RACE_ERRORS = re.compile(r"\((\d+) errors?, (\d+) warnings?\)")

# Begins every line the child prints about a point, and the line added to a
# sanitizer run's output when it ends badly (exit status, signal, time limit),
# so that a run that printed no finding still says how it ended.
CHILD_MARK = "[gemmlab]"
EXIT_NOTE = f"{CHILD_MARK} the run under the sanitizer"


def ran_line(point: str) -> str:
    return f"{CHILD_MARK} ran {point}"


def failed_prefix(point: str) -> str:
    """Begins the child's one line for a point whose run failed; its error follows."""
    return f"{CHILD_MARK} failed {point}: "


def finding_lines(output: str, limit: int = 60, failures: bool = True) -> list[str]:
    """The sanitizer's own lines of ``output``, without host backtraces or its
    banner, and the child's and the parent's notes on how runs went: all but
    the points that ran, and (without ``failures``) those that failed."""
    keep = []
    for line in output.splitlines():
        if line.startswith("=========") and "Host Frame" not in line and "Saved host backtrace" not in line:
            if "COMPUTE-SANITIZER" not in line:
                keep.append(line)
        elif line.startswith(CHILD_MARK) and not line.startswith(f"{CHILD_MARK} ran "):
            if failures or not line.startswith(f"{CHILD_MARK} failed "):
                keep.append(line)
    return keep[:limit]


@dataclass(frozen=True)
class KernelCheck:
    """One kernel under one sanitizer tool: what the sanitizer reported, and how
    the kernel's own runs went (each point verified as `gemmlab run` verifies)."""

    kernel: str
    tool: str
    points: tuple[str, ...]
    # The sanitizer's count, added over the kernel's runs; None where a run
    # ended without its summary (crashed, killed) and no other reported any.
    reports: int | None = 0
    # (point, the child's one-line error) for each point whose run failed: a
    # wrong result, or a fault the sanitizer may also have named.
    failed: tuple[tuple[str, str], ...] = ()
    # Points that a run which ended badly never reached.
    not_run: int = 0
    # Runs that exited non-zero, were killed or ran out of time.
    bad_runs: int = 0
    # Why the kernel could not be checked at all (no small size; out of time).
    error: GemmlabError | None = None
    output: str = ""

    @property
    def clean(self) -> bool:
        return self.error is None and self.reports == 0 and not self.failed and not self.not_run and not self.bad_runs

    def findings(self, limit: int = 60) -> str:
        """The sanitizer's lines for this kernel, and how its runs ended where they ended badly."""
        return "\n".join(finding_lines(self.output, limit, failures=False))


@dataclass(frozen=True)
class SanitizerReport:
    """One tool over several kernels: a :class:`KernelCheck` for each."""

    tool: str
    kernels: tuple[KernelCheck, ...]

    @property
    def points(self) -> int:
        """How many points ran under the tool, all kernels together."""
        return sum(len(k.points) for k in self.kernels)

    @property
    def output(self) -> str:
        return "\n".join(k.output for k in self.kernels)

    @property
    def errors(self) -> int:
        """The sanitizer's reports over every kernel; -1 where it reported none
        but a run failed or ended without its summary."""
        found = sum(k.reports or 0 for k in self.kernels)
        return found or (0 if all(k.clean for k in self.kernels) else -1)

    @property
    def clean(self) -> bool:
        return all(k.clean for k in self.kernels)

    def kernel(self, kernel_id: str) -> KernelCheck:
        return next(k for k in self.kernels if k.kernel == kernel_id)

    def findings(self, limit: int = 60) -> str:
        """The sanitizer's own lines, without host backtraces, and the child's one-line errors."""
        return "\n".join(finding_lines(self.output, limit))


def parse_summary(tool: str, output: str) -> int:
    """Errors the sanitizer reported; a missing summary counts as a failure."""
    m = _SUMMARY.search(output)
    if not m:
        return -1
    if tool == "racecheck":
        r = _RACE_ERRORS.search(output[m.start() :])
        return int(r.group(1)) + int(r.group(2)) if r else int(m.group(2))
    return int(m.group(2))


@dataclass(frozen=True)
class SanitizerRun:
    """One sanitizer process: what it printed, and its exit status (None: stopped at the time limit)."""

    output: str
    code: int | None


def kernel_check(kernel_id: str, tool: str, runs: list[tuple[list[str], SanitizerRun]], timeout: float) -> KernelCheck:
    """A kernel's :class:`KernelCheck` from its runs, each with the points it was given."""
    counts = [parse_summary(tool, run.output) for _, run in runs]
    found = sum(c for c in counts if c > 0)
    # A run with no summary (crashed, killed) leaves the count unknown unless another reported some.
    reports = found if found or min(counts) >= 0 else None
    failed: list[tuple[str, str]] = []
    not_run = 0
    for points, run in runs:
        lines = run.output.splitlines()
        for point in points:
            prefix = failed_prefix(point)
            reason = next((line[len(prefix) :] for line in lines if line.startswith(prefix)), None)
            if reason is not None:
                failed.append((point, reason))
            elif run.code != 0 and ran_line(point) not in lines:
                not_run += 1
    timed_out = any(run.code is None for _, run in runs)
    error = None
    if timed_out and all(run.code is None for _, run in runs):
        error = GemmlabError(
            f"compute-sanitizer ({tool}) did not finish within {timeout:.0f} s on {kernel_id}.",
            "Check fewer kernels at a time (name them), or give the check more time.",
        )
    return KernelCheck(
        kernel_id,
        tool,
        tuple(p for points, _ in runs for p in points),
        reports,
        tuple(failed),
        not_run,
        sum(run.code != 0 for _, run in runs),
        error,
        "\n".join(run.output for _, run in runs),
    )


@dataclass(frozen=True)
class KernelVerdict:
    """One kernel across the tools: what each reported, and whether its runs
    gave right results, a verdict of its own (a wrong result never keeps a
    tool from reporting, nor a report from the verification)."""

    kernel: str
    checks: tuple[KernelCheck, ...]

    @property
    def points(self) -> int:
        """Distinct points run under any tool (the per-access trackers run a few of memcheck's)."""
        return len({p for check in self.checks for p in check.points})

    @property
    def failed_points(self) -> dict[str, str]:
        """Each point whose run failed under any tool, with the first error it gave."""
        found: dict[str, str] = {}
        for check in self.checks:
            for point, error in check.failed:
                found.setdefault(point, error)
        return found

    @property
    def not_run(self) -> int:
        """The most points any tool's runs never reached (they stopped first)."""
        return max((check.not_run for check in self.checks), default=0)

    @property
    def verification(self) -> str:
        """'ok', or how many points failed their run and how many were never run."""
        if not self.points:
            return "not run"
        parts = []
        if failed := len(self.failed_points):
            parts.append(f"{failed} of {self.points} points failed")
        if self.not_run:
            parts.append(f"{self.not_run} not run")
        return ", ".join(parts) or "ok"

    def problems(self) -> list[str]:
        """Every reason the kernel is not clean, in words; empty when it is."""
        found = []
        for check in self.checks:
            if check.error is not None:
                found.append(f"{check.tool}: {check.error.cause}")
            elif check.reports is None:
                found.append(f"{check.tool}: no summary (its run ended before the sanitizer's)")
            elif check.reports:
                found.append(f"{check.tool}: {check.reports} report{'s' * (check.reports != 1)}")
            elif check.bad_runs and not check.failed:
                found.append(f"{check.tool}: {check.bad_runs} run(s) ended badly")
        if self.verification != "ok":
            found.append(f"verification: {self.verification}")
        return found

    @property
    def clean(self) -> bool:
        return not self.problems()

    def error(self) -> GemmlabError | None:
        """The kernel's status in a batch: None when clean."""
        problems = self.problems()
        if not problems:
            return None
        return GemmlabError(
            f"Not clean: {'; '.join(problems)}.",
            "The sanitizer's findings and each failed point's error are printed above.",
        )


def verdicts(reports: list[SanitizerReport]) -> list[KernelVerdict]:
    """A :class:`KernelVerdict` per kernel of ``reports`` (one report per tool, over the same kernels)."""
    if not reports:
        return []
    return [KernelVerdict(k.kernel, tuple(r.kernel(k.kernel) for r in reports)) for k in reports[0].kernels]
