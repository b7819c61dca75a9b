"""The sanitizer run of `gemmlab check`: kernels at small sizes (odd ones too)
under compute-sanitizer's tools, and a verdict per kernel that joins each
tool's reports with whether its runs gave right results."""

from __future__ import annotations

from gemmlab.measure.sanitize import DEFAULT_JOBS, TOOLS, parse_point
from gemmlab.measure.sanitizer_findings import KernelCheck, KernelVerdict

__all__ = ["DEFAULT_JOBS", "TOOLS", "KernelCheck", "KernelVerdict", "parse_point", "sanitizer_tools", "verdicts"]


def sanitizer_tools(asked: list[str] | None) -> list[str]:
    """The tools to run (``asked`` without repeats, default all of :data:`TOOLS`),
    each one known, and compute-sanitizer found: checked before any kernel,
    since without it there is nothing to check."""
    from gemmlab.measure.sanitize import find_sanitizer, require_tool

    tools = [require_tool(t) for t in dict.fromkeys(asked or TOOLS)]
    find_sanitizer()
    return tools


def verdicts(kernel_ids: list[str], tools: list[str], jobs: int = DEFAULT_JOBS) -> dict[str, KernelVerdict]:
    """Each kernel's verdict, by id: its points run under every one of ``tools``,
    ``jobs`` sanitizer processes side by side (none run for no kernel)."""
    from gemmlab.measure.sanitize import check_kernels
    from gemmlab.measure.sanitizer_findings import verdicts as joined

    reports = [check_kernels(kernel_ids, t, jobs=jobs) for t in tools] if kernel_ids else []
    return {v.kernel: v for v in joined(reports)}
