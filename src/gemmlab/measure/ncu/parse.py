"""What Nsight Compute printed: its raw CSV page, read into numbers, and the failure
its messages stand for (pure: tested on captured output, without a GPU)."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass

from gemmlab.core import errors
from gemmlab.core.errors import GemmlabError, ProfilerError
from gemmlab.kernels.spec import Point
from gemmlab.measure.ncu.metrics import ProfileResult, collected_counters, result_from_metrics

STILL_WORKS = (
    "Without the profiler these still work: `gemmlab run`, `gemmlab sweep`, `gemmlab reproduce` "
    "(without --profile), `gemmlab compile` and `gemmlab occupancy`."
)

# The lines the child (gemmlab.measure.ncu.command._child) prints about its run, among ncu's.
CHILD_RESULT = "gemmlab-profile-run: "
CHILD_ERROR = "gemmlab-profile-error: "


# --- ncu's raw CSV page (pure) --------------------------------------------------

_TIME_UNITS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
               "second": 1e9, "s": 1e9}  # fmt: skip
_PREFIXED = re.compile(r"^([KMGT])(byte|sector|request|inst|warp|wavefront|block|cycle)$")
_PREFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def unit_factor(unit: str) -> float:
    """Factor that brings a value printed in ``unit`` to the base unit (times to ns).

    ``--print-units base`` already prints base units; this keeps a capture made
    without it (ncu then scales per value: usecond, Mbyte...) from being misread.
    """
    unit = unit.strip()
    if unit in _TIME_UNITS:
        return _TIME_UNITS[unit]
    if m := _PREFIXED.match(unit):
        return _PREFIX[m.group(1)]
    return 1.0


def parse_number(text: str) -> float | None:
    """A value as ncu prints it: thousands separators allowed, 'n/a' or empty is None."""
    cleaned = text.strip().replace(",", "")
    if not cleaned:
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


@dataclass(frozen=True)
class RawPage:
    """ncu's ``--page raw --csv`` output: the units row and one row per profiled launch."""

    units: dict[str, str]
    launches: list[dict[str, str]]

    def metrics(self, index: int = -1) -> dict[str, float | None]:
        """One launch's metrics as numbers in base units (times in ns)."""
        row = self.launches[index]
        return {
            name: (v * unit_factor(self.units.get(name, "")) if (v := parse_number(row[name])) is not None else None)
            for name in row
            if "__" in name  # metric columns; the others are ID, Kernel Name, Grid Size...
        }


def parse_raw_csv(text: str) -> RawPage:
    """Read the raw page out of everything ncu and the program printed.

    The page is a header row (``"ID","Process ID",...,"Kernel Name",...`` then one
    column per metric), a units row (empty ID) and one row per launch (numeric
    ID). ``==PROF==`` lines and the program's own output come before it; every
    row of the page is quoted, so lines that do not start with a quote are not
    part of it.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        return RawPage({}, [])
    rows = list(csv.reader(line for line in lines[start:] if line.startswith('"')))
    header = rows[0]
    units: dict[str, str] = {}
    launches = []
    for row in rows[1:]:
        if len(row) != len(header):
            continue
        record = dict(zip(header, row, strict=True))
        if record["ID"].strip().isdigit():
            launches.append(record)
        elif not units and not record["ID"].strip():
            units = record
    return RawPage(units, launches)


# --- ncu's failures (pure) ------------------------------------------------------

_UNKNOWN_METRIC = re.compile(r"Failed to find metric (\S+)", re.IGNORECASE)


def ncu_failure(output: str, returncode: int) -> GemmlabError | None:
    """The error a failed or empty ncu run stands for, or None when it went well.

    Checked in order of cause: counters the driver withholds, a GPU ncu cannot
    profile, a metric this ncu lacks, the program's own error, nothing profiled.
    """
    low = output.lower()
    if "err_nvgpuctrperm" in low or "does not have permission to access nvidia gpu performance counters" in low:
        return ProfilerError(
            "ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): the driver keeps them for "
            "administrators.",
            "Run the command as root, or let every user read them (set NVreg_RestrictProfilingToAdminUsers=0 for "
            "the nvidia kernel module and reload it; see https://developer.nvidia.com/ERR_NVGPUCTRPERM). "
            + STILL_WORKS,
        )
    if "profiling is not supported on this device" in low or "device not supported" in low:
        return ProfilerError(
            "ncu cannot profile this GPU: it reports that profiling is not supported on this device (a "
            "virtualised GPU without profiling enabled, or a GPU this ncu version does not know).",
            "Profile on a bare-metal GPU or a vGPU with profiling enabled, or install a newer Nsight Compute. "
            + STILL_WORKS,
        )
    if "failed to initialize the profiler" in low or "librarynotloaded" in low:
        return ProfilerError(
            'ncu could not start its profiler on this machine ("Failed to initialize the profiler"); sandboxed '
            "or virtualised runtimes often hide the counters.",
            "Profile on a machine with direct access to the GPU. " + STILL_WORKS,
        )
    if m := _UNKNOWN_METRIC.search(output):
        name = m.group(1).rstrip(".")
        base = name.split(".")[0]
        everything = collected_counters(tensor_cores=True, eight_bit=True)
        tensor_only = set(everything) - set(collected_counters(tensor_cores=False))
        if base in {metric.split(".")[0] for metric in tensor_only}:
            # Only tensor-core kernels ask for these, so the other kernels still profile on this GPU.
            return ProfilerError(
                f"Nsight Compute has no counter {name} for this GPU; gemmlab reads it for the kernels that use "
                "the tensor cores (their operations and the tensor pipe's busy share).",
                f"Install Nsight Compute 2023.1 or newer. If `ncu --query-metrics` lists no {base} on this GPU, "
                "please report it with `ncu --version` and the GPU's name; kernels without tensor cores still "
                "profile, and `gemmlab run` times this one.",
            )
        return ProfilerError(
            f"This Nsight Compute does not know the metric {name}, which gemmlab reads.",
            "Install Nsight Compute 2023.1 or newer (the one of your CUDA toolkit usually is).",
        )
    if child := _child_error(output):
        return child
    if reported := [line for line in output.splitlines() if line.startswith("==ERROR==")]:
        return ProfilerError("ncu failed: " + " ".join(reported), "Please report it with `ncu --version`.")
    if returncode != 0:
        tail = "\n".join(line for line in output.splitlines()[-15:] if line.strip())
        return ProfilerError(f"ncu exited with status {returncode}. Its last lines:\n{tail}")
    if not parse_raw_csv(output).launches:
        return ProfilerError(
            "ncu ran but profiled no launch of the kernel (the launch index or the name filter matched nothing).",
            "Please report this with `gemmlab profile ... --json` output and `ncu --version`.",
        )
    return None


def _child_error(output: str) -> GemmlabError | None:
    """The gemmlab error the child printed (a wrong result, a device limit...), re-raised as its own class."""
    for line in output.splitlines():
        if line.startswith(CHILD_ERROR):
            info = json.loads(line.removeprefix(CHILD_ERROR))
            cls = getattr(errors, info.get("type", ""), GemmlabError)
            if not (isinstance(cls, type) and issubclass(cls, GemmlabError)):
                cls = GemmlabError
            return cls(info["cause"], info.get("fix", ""))
    return None


def child_summary(output: str) -> dict:
    """What the child reported about its run (device name, error against float64)."""
    for line in output.splitlines():
        if line.startswith(CHILD_RESULT):
            return json.loads(line.removeprefix(CHILD_RESULT))
    return {}


def result_from_output(
    point: Point, output: str, command: list[str] | None = None, returncode: int = 0
) -> ProfileResult:
    """Parse a whole ncu run (stdout and stderr) for ``point``; raise what a failure stands for."""
    if failure := ncu_failure(output, returncode):
        raise failure
    page = parse_raw_csv(output)
    summary = child_summary(output)
    return result_from_metrics(
        point,
        page.metrics(-1),
        device=summary.get("device", ""),
        cc=page.launches[-1].get("CC", ""),
        error=summary.get("error"),
        command=command,
    )
