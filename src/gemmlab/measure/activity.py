"""Everything the GPU ran while a figure was taken, from CUPTI's activity records.

CUDA events around a launch time the stream they are recorded on. Work the
timed call leaves on another stream, starts from another thread, or leaves
running after it returns is outside them, and a library timed next to it
would wait behind it. So around each sample of a series (``Recorder.open``,
``close``), gemmlab records with CUPTI (NVIDIA's ``cupti-python``) every
kernel, copy and memset the process runs, with its start and end on the GPU:

- every call the runner times is wrapped in an external correlation id of
  its own (``Recorder.tagged``), which CUPTI copies onto everything the call
  launches, on any stream (the renewals and checks between samples are not
  recorded at all: a record costs cupti-python tens of microseconds);
- the hold before the start event and a marker kernel after the end event
  are wrapped the same way, so a sample's window is known on the GPU's clock,
  the kernels' own (the hold ends as the start event is reached, the marker
  starts as the end event is); CUPTI's event timestamps are used where it
  gives them;
- what runs inside a window without a tag of the window cannot be the
  runner's own work (the runner queues its renewals before the hold, on the
  same stream, and checks only after the window has ended and the device
  has been synchronised): it was launched by another thread, or before the
  window opened by a thread that is still at it.

:func:`judge` then says of each sample what ran in it: the call's own work
(its kernel names, shown with the figure), the part of that work outside the
events (it counts: the sample is lengthened to cover it, before the start
event as after the end event), and untagged work inside the window (counted
on the kernel's side, refused on the library's). It is pure, and tested with
made-up records.

Where CUPTI cannot be used (``cupti-python`` not installed, another profiler
attached, ``GEMMLAB_CUPTI=0``) the figures are the events' alone, and the
result says so (:attr:`Recorder.method`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

# Set to "0" to time by CUDA events alone (to measure what CUPTI costs, or
# under a tool that holds CUPTI itself).
VARIABLE = "GEMMLAB_CUPTI"
# A sample's own work that ends up to this long after its end event is taken
# as ending with it: the end event is reached when the last kernel on its
# stream has retired, and the two timestamps are read by different units.
LINGER_SLACK_NS = 2_000

# Tags: an external correlation id names one role in one sample.
CALL, LIBRARY, START, END = 1, 2, 3, 4
_ROLE = 10_000_000


def tag(role: int, sample: int) -> int:
    """The external correlation id of ``role`` (CALL, LIBRARY, START, END) in sample ``sample``."""
    return role * _ROLE + sample


def role_of(external: int) -> tuple[int, int]:
    """(role, sample) of an external correlation id made by :func:`tag`."""
    return external // _ROLE, external % _ROLE


@dataclass(frozen=True)
class Activity:
    """One piece of GPU work: a kernel, a copy or a memset."""

    kind: str  # "kernel", "memcpy", "memset"
    name: str
    start: int  # ns, CUPTI's clock
    end: int
    stream: int
    correlation: int


@dataclass
class Trace:
    """What CUPTI recorded over a series: the work, the external ids and
    threads of the API calls that launched it, and the event timestamps."""

    activities: list[Activity] = field(default_factory=list)
    external: dict[int, int] = field(default_factory=dict)  # correlation id -> external id
    events: dict[int, int] = field(default_factory=dict)  # correlation id of an event record -> GPU timestamp
    dropped: int = 0


@dataclass
class SampleWork:
    """What one sample's window held, by :func:`judge`."""

    sample: int
    role: int  # CALL or LIBRARY
    start: int | None  # the window's GPU timestamps (None: an event's record is missing)
    end: int | None
    names: list[str] = field(default_factory=list)  # the timed call's own kernels, copies and memsets
    lingering: list[str] = field(default_factory=list)  # its work that ran outside the events
    first_start: int | None = None  # when its first piece of work started
    last_end: int | None = None  # when its last piece of work ended
    foreign: list[str] = field(default_factory=list)  # untagged work inside a library's window

    @property
    def extra_ns(self) -> int:
        """How far the call's own work ran outside the events, before and after."""
        if self.end is None or self.start is None or self.last_end is None or self.first_start is None:
            return 0
        return max(0, self.last_end - self.end) + max(0, self.start - self.first_start)


def judge(trace: Trace, samples: Sequence[tuple[int, int]]) -> list[SampleWork]:
    """For each (role, sample) in ``samples``, what ran in its window (see the module's docstring)."""
    marks: dict[tuple[int, int], int] = {}
    for correlation, stamp in trace.events.items():
        external = trace.external.get(correlation)
        if external is not None and role_of(external)[0] in (START, END):
            marks[role_of(external)] = stamp
    untagged: list[Activity] = []
    owned: list[tuple[tuple[int, int], Activity]] = []
    for activity in trace.activities:
        external = trace.external.get(activity.correlation)
        if external is None:
            untagged.append(activity)
            continue
        role, sample = role_of(external)
        if role == START:  # the hold: the start event is reached as it ends
            marks.setdefault((START, sample), activity.end)
        elif role == END:  # the marker launched behind the end event: it starts as the event is reached
            marks.setdefault((END, sample), activity.start)
        else:
            owned.append(((role, sample), activity))
    work = {key: SampleWork(key[1], key[0], marks.get((START, key[1])), marks.get((END, key[1]))) for key in samples}
    for key, activity in owned:
        if (found := work.get(key)) is not None:
            _own(found, activity)
    for activity in untagged:
        for found in work.values():
            if found.start is None or found.end is None:
                continue
            if activity.start < found.end and activity.end > found.start:
                if found.role == CALL:
                    _own(found, activity)  # another thread of the timed code's: its work
                else:
                    found.foreign.append(activity.name)
    return [work[key] for key in samples]


def _own(found: SampleWork, activity: Activity) -> None:
    found.names.append(activity.name)
    found.first_start = activity.start if found.first_start is None else min(found.first_start, activity.start)
    found.last_end = activity.end if found.last_end is None else max(found.last_end, activity.end)
    late = found.end is not None and activity.end > found.end + LINGER_SLACK_NS
    early = found.start is not None and activity.start < found.start - LINGER_SLACK_NS
    if late or early:
        found.lingering.append(activity.name)


def distinct(names: Sequence[str], limit: int = 6) -> str:
    """Names in order of first appearance, each once, at most ``limit`` (then how many more)."""
    seen = list(dict.fromkeys(names))
    shown = ", ".join(seen[:limit])
    return shown + (f" and {len(seen) - limit} more" if len(seen) > limit else "")


class Recorder:
    """CUPTI's activity records over a timed series, or nothing where CUPTI
    cannot be used: ``available`` says which and ``reason`` why not."""

    def __init__(self) -> None:
        self.available = False
        self.reason = ""
        self._cupti: Any = None
        self._records: list[Any] = []
        self._kinds: list[Any] = []
        if os.environ.get(VARIABLE) == "0":
            self.reason = f"{VARIABLE}=0"
            return
        try:
            from cupti import cupti
        except ImportError:
            self.reason = "cupti-python is not installed (pip install cupti-python)"
            return
        self._cupti = cupti
        self._kinds = [
            cupti.ActivityKind.CONCURRENT_KERNEL,
            cupti.ActivityKind.MEMCPY,
            cupti.ActivityKind.MEMSET,
            cupti.ActivityKind.CUDA_EVENT,
            # API records carry the external ids onto the work they launch.
            cupti.ActivityKind.RUNTIME,
            cupti.ActivityKind.DRIVER,
            cupti.ActivityKind.EXTERNAL_CORRELATION,
        ]
        self.available = True

    @property
    def method(self) -> str:
        """How the work in a window was known, in the words stored with each figure."""
        if self.available:
            return "CUDA events; CUPTI: every kernel, copy and memset the call launched, on any stream or thread"
        return f"CUDA events only (CUPTI not used: {self.reason})"

    def start(self) -> None:
        """Get ready to record; on failure (another profiler holds CUPTI, an old
        driver) fall back to the events alone, with the reason kept."""
        if not self.available:
            return
        try:
            _register(self._cupti, self._records)
            self.open()
            self._cupti.activity_enable_cuda_event_device_timestamps(1)
            self.close()
        except Exception as exc:  # cuptiError: MULTIPLE_SUBSCRIBERS under ncu, NOT_INITIALIZED, ...
            self.available = False
            self.reason = f"CUPTI refused to record ({exc})"
            self._disable()

    def open(self) -> None:
        """Record from now: around each sample only (cupti-python takes tens of
        microseconds over each record, and the renewals and checks between
        samples are hundreds of launches). Work launched before a window and
        still running in it is not seen; a thread that keeps launching is."""
        if self.available:
            for kind in self._kinds:
                self._cupti.activity_enable(kind)

    def close(self) -> None:
        """Stop recording (the window's work has ended: the device was synchronised)."""
        if self.available:
            self._disable()

    def flushed(self) -> Trace:
        """What was recorded since the last call, every buffer flushed."""
        if not self.available:
            return Trace()
        self._cupti.activity_flush_all(1)
        records, self._records[:] = list(self._records), []
        return _trace(self._cupti, records)

    def stop(self) -> None:
        """Stop recording; what is left unflushed is dropped."""
        if self.available:
            self._disable()
            with contextlib.suppress(Exception):
                self._cupti.activity_flush_all(1)
            self._records.clear()

    def _disable(self) -> None:
        for kind in self._kinds:
            with contextlib.suppress(Exception):
                self._cupti.activity_disable(kind)

    @contextlib.contextmanager
    def tagged(self, external: int) -> Iterator[None]:
        """Everything launched from this thread inside the block carries ``external``."""
        if not self.available:
            yield
            return
        kind = self._cupti.ExternalCorrelationKind.CUSTOM0
        self._cupti.activity_push_external_correlation_id(kind, external)
        try:
            yield
        finally:
            self._cupti.activity_pop_external_correlation_id(kind)


_REGISTERED: dict[str, list[Any]] = {}


def _register(cupti: Any, sink: list[Any]) -> None:
    """CUPTI's buffer callbacks, registered once per process; the records
    go to the recorder that is recording now."""
    _REGISTERED["sink"] = sink
    if _REGISTERED.get("done"):
        return
    reader = _readers(cupti)

    def requested() -> tuple[int, int]:
        return 8 * 1024 * 1024, 0

    def completed(activities: list[Any]) -> None:
        names: dict[int, str] = {}
        sink = _REGISTERED["sink"]
        for record in activities:
            read = reader(record)
            if read is not None:
                sink.append(read(record, names))

    cupti.activity_register_callbacks(requested, completed)
    _REGISTERED["done"] = [True]


def _readers(cupti: Any) -> Any:
    """What to read of each record while CUPTI's buffer is alive, by the
    record's class (ActivityKernel10, ActivityMemcpy6, ...; which versions a
    CUPTI emits is its own): the fields straight from the record's bytes, at
    the offsets of cupti-python's layout of that class (its attribute reads
    cost about 25 us each, and a series makes thousands of records), and a
    kernel's name once per launch (a graph replay's nodes share one). None for
    a class not kept."""
    found: dict[type, Any] = {}

    def at(cls: type, *fields: str) -> list[tuple[int, Any]] | None:
        layout = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower() + "_dtype"  # ActivityKernel10: activity_kernel10
        dtype = getattr(cupti, layout, None)
        if dtype is None or any(f not in dtype.fields for f in fields):
            return None
        return [(dtype.fields[f][1], _C_TYPES[dtype.fields[f][0].str]) for f in fields]

    def read(ptr: int, fields: list[tuple[int, Any]]) -> list[int]:
        return [kind.from_address(ptr + offset).value for offset, kind in fields]

    def make(cls: type) -> Any:
        name = cls.__name__
        if name.startswith("ActivityKernel") and (launch := at(cls, "start", "end", "correlation_id", "name")):

            def kernel(record: Any, names: dict[int, str]) -> tuple:
                start, end, correlation, text = read(record.ptr, launch)
                if correlation not in names:
                    names[correlation] = ctypes.string_at(text).decode(errors="replace") if text else "?"
                return ("kernel", names[correlation], start, end, 0, correlation)

            return kernel
        for what in ("memcpy", "memset"):
            pattern = f"Activity{what.capitalize()}\\d*"
            if re.fullmatch(pattern, name) and (fields := at(cls, "start", "end", "correlation_id")):
                return _copy_reader(what, fields, read)
        if name == "ActivityExternalCorrelation" and (fields := at(cls, "correlation_id", "external_id")):
            return lambda record, names: ("external", *read(record.ptr, fields))
        if name.startswith("ActivityCudaEvent") and (fields := at(cls, "correlation_id", "device_timestamp")):
            return lambda record, names: ("event", *read(record.ptr, fields))
        return None

    def reader(record: Any) -> Any:
        cls = type(record)
        if cls not in found:
            found[cls] = make(cls)
        return found[cls]

    return reader


def _copy_reader(what: str, fields: list[tuple[int, Any]], read: Any) -> Any:
    def copy(record: Any, names: dict[int, str]) -> tuple:
        start, end, correlation = read(record.ptr, fields)
        return (what, what, start, end, 0, correlation)

    return copy


_C_TYPES = {"<i4": ctypes.c_int32, "<u4": ctypes.c_uint32, "<i8": ctypes.c_int64, "<u8": ctypes.c_uint64}


def _trace(cupti: Any, records: list[tuple]) -> Trace:
    trace = Trace()
    for record in records:
        what = record[0]
        if what in ("kernel", "memcpy", "memset"):
            trace.activities.append(Activity(*record))
        elif what == "external":
            trace.external[record[1]] = record[2]
        elif what == "event":
            trace.events[record[1]] = record[2]
    with contextlib.suppress(Exception):
        trace.dropped = int(cupti.activity_get_num_dropped_records(0, 0))
    return trace
