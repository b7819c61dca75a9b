"""A watchdog for kernels that fault or never finish: each call runs in a child
process that the parent can kill.

A kernel that writes through a wild pointer leaves its process's CUDA context
unusable (every later call fails with the same error), and a kernel that spins
forever never hands the GPU back; neither may take the command that ran it
down. So a :class:`Worker` runs calls (one point each) in a child process and
waits for each answer with a time limit:

- the answer comes back (a result, or the exception the call raised, which is
  raised again here: a wrong result stays a VerificationError);
- the call raised a CUDA error that poisons the context (:data:`POISONING`):
  :class:`KernelStopped` of kind "fault", naming the error; the child is ended
  and the next call starts a fresh one;
- the child died without an answer (a signal, ``os._exit``): kind "fault";
- no answer within the time limit: the child is killed and the call is
  :class:`KernelStopped` of kind "hang", the limit named.

The child is *spawned*, not forked (CUDA does not survive a fork), and leads a
process group of its own, so that a kill takes whatever it started with it
(a compile in a fresh process, say) and Ctrl-C in the terminal reaches only
the parent, which then kills the child. One worker serves call after call, so
the cost of starting Python and importing CuPy is paid once per sweep, not
once per point.

What the kill relies on: when a process ends, however it ends, the driver
destroys its CUDA contexts, and with them the work still running in them; a
spinning kernel is preempted and its memory freed, so the GPU is free for the
next process. (This is the driver's behaviour on Linux for a process that owns
its context; under MPS a fault may also end other clients' work.)

The time limit of a point, unless the user states one (``--timeout``):
:func:`time_limit`, at least :data:`FLOOR_S` seconds.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from gemmlab import backends
from gemmlab.core import processes
from gemmlab.core.errors import GemmlabError, KernelStopped
from gemmlab.core.shapes import Shape

# The shortest time limit a point gets: its compile (NVRTC, seconds for a large
# kernel), its inputs and float64 reference, and the library's warm-up.
FLOOR_S = 60.0
# How much slower than the backend's crude speed model (predicted_ms) a point may
# run before it counts as hung.
SLACK = 20
# How long a fresh child may take to start Python and import what the call needs,
# apart from any point's own limit.
STARTUP_LIMIT_S = 120.0
# How long a killed worker is waited for before the next one starts.
KILL_WAIT_S = 30.0
# linux/prctl.h: the signal a process gets when its parent ends.
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class PoisoningError:
    """A CUDA error after which the context that met it cannot be used again."""

    code: int
    driver_name: str  # the driver API's name (cuda.core, cuda.bindings)
    runtime_name: str  # the runtime API's name (CuPy's CUDARuntimeError)
    meaning: str


POISONING = (
    PoisoningError(700, "CUDA_ERROR_ILLEGAL_ADDRESS", "cudaErrorIllegalAddress",
                   "a load or store outside any allocation"),
    PoisoningError(716, "CUDA_ERROR_MISALIGNED_ADDRESS", "cudaErrorMisalignedAddress",
                   "a load or store at an address not aligned to its size"),
    PoisoningError(715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "cudaErrorIllegalInstruction",
                   "an instruction the GPU cannot execute"),
    PoisoningError(719, "CUDA_ERROR_LAUNCH_FAILED", "cudaErrorLaunchFailure",
                   "the kernel stopped while running (a trap, or an exception the driver does not name)"),
    PoisoningError(714, "CUDA_ERROR_HARDWARE_STACK_ERROR", "cudaErrorHardwareStackError",
                   "the call stack overflowed (deep recursion or large local arrays)"),
    PoisoningError(710, "CUDA_ERROR_ASSERT", "cudaErrorAssert", "a device-side assert() failed"),
    PoisoningError(717, "CUDA_ERROR_INVALID_ADDRESS_SPACE", "cudaErrorInvalidAddressSpace",
                   "a shared- or local-memory instruction on an address outside that space"),
    PoisoningError(718, "CUDA_ERROR_INVALID_PC", "cudaErrorInvalidPc", "a jump to an invalid program counter"),
    PoisoningError(702, "CUDA_ERROR_LAUNCH_TIMEOUT", "cudaErrorLaunchTimeout",
                   "the display driver's watchdog stopped a long kernel"),
    PoisoningError(214, "CUDA_ERROR_ECC_UNCORRECTABLE", "cudaErrorECCUncorrectable",
                   "an uncorrectable ECC error in device memory"),
)  # fmt: skip


def poisoning_error(exc: BaseException) -> PoisoningError | None:
    """The context-poisoning CUDA error ``exc`` (or an exception it was raised
    from or during) reports, by the name in its message: cuda.core raises
    ``CUDAError("CUDA_ERROR_ILLEGAL_ADDRESS: ...")``, CuPy
    ``CUDARuntimeError("cudaErrorIllegalAddress: ...")``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = f"{type(current).__name__}: {current}"
        for error in POISONING:
            if error.driver_name in text or error.runtime_name in text:
                return error
        current = current.__cause__ or current.__context__
    return None


def time_limit(predicted_ms: float, launches: int, max_seconds: float) -> float:
    """The seconds a point may take before it counts as hung: :data:`FLOOR_S`, or
    :data:`SLACK` times the predicted time of its ``launches`` if longer, plus
    twice ``max_seconds`` (the cap on the kernel's and the library's timed series)."""
    return max(FLOOR_S, SLACK * launches * predicted_ms / 1e3) + 2 * max_seconds


def point_time_limit(kernel: str, shape: Shape, block_edge: int | None, *, reps: int, warmup: int,
                     max_seconds: float) -> float:  # fmt: skip
    """:func:`time_limit` for one point, its launches predicted by its backend
    (warm-up, timed repetitions and two checks); :data:`FLOOR_S` where the
    backend cannot predict them."""
    try:
        predicted = backends.for_kernel(kernel).predicted_ms(kernel, shape, block_edge or 0)
    except (GemmlabError, ArithmeticError, TypeError, ValueError):
        predicted = 0.0
    return time_limit(predicted, warmup + reps + 2, max_seconds)


class Worker:
    """A child process that runs calls one at a time (see the module's
    docstring); started at the first call and again after a fault or a hang.
    Use it as a context manager, or :meth:`close` it."""

    def __init__(self, environment: dict[str, str | None] | None = None) -> None:
        """``environment``: variables the child sets (a value) or drops (None)
        before it runs anything, over those it inherits."""
        self._process: Any = None
        self._conn: Connection | None = None
        self.environment = dict(environment or {})
        # Where the child's stderr goes: CuPy prints every buffer it fails to free
        # after a fault, which is noise beside the one message the parent gives.
        self.log: Path | None = None

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, label: str, limit_s: float, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in the child, its return value here; its
        exception raised here; KernelStopped for a fault or a hang of the point
        named ``label``. ``fn`` and the arguments go to the child by pickle: a
        module-level function (or a functools.partial of one) and plain values."""
        conn = self._started()
        try:
            conn.send((fn, args, kwargs))
            answer = self._answer(conn, limit_s)
        except BaseException:  # Ctrl-C or an unpicklable call: the child's state is unknown
            self.close()
            raise
        if answer is None:
            log = self._kept_log()
            self.close()
            raise _with_log(_hang(label, limit_s), log)
        status, payload = answer
        if status == "ok":
            return payload
        if status == "raised":
            raise payload
        log = self._kept_log()
        self.close()  # a fault or a death: whatever the child held is lost
        raise _with_log(_fault(label, payload), log)

    def _kept_log(self) -> Path | None:
        """The child's log, kept past :meth:`close` when it says anything."""
        log, self.log = self.log, None
        if log is not None and log.is_file() and log.stat().st_size:
            return log
        if log is not None:
            log.unlink(missing_ok=True)
        return None

    def close(self) -> None:
        """End the child and everything it started (its process group, then
        what is left of its session and of its descendants: a process that
        left the group, see :func:`sweep`); a later call starts a fresh one."""
        if self._process is None:
            return
        started = processes.descendants(self._process.pid)
        if self._process.is_alive():
            try:
                os.killpg(self._process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self._process.kill()
        sweep(self._process.pid, started)
        # A process inside a driver call ends when the call returns; past this wait
        # the next worker starts anyway (and waits for the GPU if it must).
        self._process.join(timeout=KILL_WAIT_S)
        if self._conn is not None:
            self._conn.close()
        self._process, self._conn = None, None
        if self.log is not None:
            self.log.unlink(missing_ok=True)
            self.log = None

    def _started(self) -> Connection:
        if self._process is not None and self._process.is_alive() and self._conn is not None:
            return self._conn
        self.close()
        spawn = multiprocessing.get_context("spawn")
        ours, theirs = spawn.Pipe()
        handle, name = tempfile.mkstemp(prefix="gemmlab-worker-", suffix=".log")
        os.close(handle)
        self.log = Path(name)
        # Not a daemon: a daemonic process may not start processes of its own (a compile in a fresh one).
        process = spawn.Process(target=_serve, args=(theirs, os.getpid(), name, self.environment),
                                name="gemmlab-worker")  # fmt: skip
        process.start()
        theirs.close()
        self._process, self._conn = process, ours
        if self._answer(ours, STARTUP_LIMIT_S) != ("ready", None):
            self.close()
            raise GemmlabError(
                f"gemmlab's worker process did not start within {STARTUP_LIMIT_S:.0f} s.",
                "Check that `python -c 'import gemmlab'` works in this environment; on a busy machine, try again.",
            )
        return ours

    def _answer(self, conn: Connection, limit_s: float) -> tuple[str, Any] | None:
        """The child's next message; ("died", what) if it ended without one; None after ``limit_s``."""
        ready = wait([conn, self._process.sentinel], timeout=limit_s)
        if not ready:
            return None
        if conn in ready or conn.poll():
            try:
                return conn.recv()
            except EOFError:
                pass
        self._process.join(timeout=5)
        return "died", _death(self._process.exitcode)


def sweep(session: int, known: set[int] = frozenset()) -> list[int]:  # type: ignore[assignment]
    """SIGKILL every process still in the child's session (the child leads its
    own: ``session`` is its pid) or among the descendants ``known`` before it
    was ended, and their descendants: a process that left the child's group
    (``setpgid``) is found by its session, one that left the session too
    (``setsid``, a daemon) by its parent, if it was seen before the child
    ended. Returns the pids signalled."""
    table = processes.parents()
    doomed = {pid for pid, (_parent, sid) in table.items() if sid == session} | (set(known) & set(table))
    for pid in list(doomed):
        doomed |= processes.descendants(pid, table)
    doomed.discard(os.getpid())
    for pid in doomed:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return sorted(doomed)


def isolated(label: str, limit_s: float, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """One call in a worker of its own (see :meth:`Worker.call`)."""
    with Worker() as worker:
        return worker.call(label, limit_s, fn, *args, **kwargs)


def _serve(conn: Connection, parent: int, log: str | None = None,
           environment: dict[str, str | None] | None = None) -> None:  # fmt: skip
    """The child: lead a process group, die with the parent, take its
    ``environment``, send its stderr to ``log``, say ready, then run calls
    until the pipe closes."""
    os.setsid()
    processes.adopt_orphans()  # what its descendants leave behind stays its descendant, for close's sweep
    for name, value in (environment or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    home = (environment or {}).get("HOME")
    if home:
        os.chdir(home)
        tempfile.tempdir = None  # TMPDIR may have changed
    if log is not None:
        sys.stderr.flush()
        os.dup2(os.open(log, os.O_WRONLY | os.O_APPEND), 2)
    _die_with_parent(parent)
    sys.unraisablehook = _quiet_about_lost_context
    conn.send(("ready", None))
    while True:
        try:
            fn, args, kwargs = conn.recv()
        except EOFError:
            return
        try:
            value = fn(*args, **kwargs)
        except BaseException as exc:
            error = poisoning_error(exc)
            if error is not None:
                conn.send(("fault", error))
                os._exit(0)  # the context is lost; the parent starts a fresh worker
            conn.send(("raised", _portable(exc)))
            continue
        try:
            conn.send(("ok", value))
        except Exception as exc:  # a result that does not pickle: a bug of the runner, not of the kernel
            conn.send(("raised", _portable(exc)))


def _quiet_about_lost_context(unraisable: Any) -> None:
    """Once a kernel has faulted, every device buffer's destructor fails with
    the same CUDA error while the call unwinds; the fault is reported once, by
    the parent. Any other error in a destructor is printed as Python would."""
    if unraisable.exc_value is not None and poisoning_error(unraisable.exc_value) is not None:
        return
    sys.__unraisablehook__(unraisable)


def _die_with_parent(parent: int) -> None:
    """Ask Linux to kill this process when its parent ends, however it ends
    (prctl PR_SET_PDEATHSIG): a parent killed with SIGKILL runs no cleanup, and
    a child spinning on a hung kernel would otherwise keep the GPU. Elsewhere
    the child still ends when it next reads the closed pipe."""
    processes.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent was gone before the request
        os._exit(0)


def _portable(exc: BaseException) -> BaseException:
    """``exc`` as it can cross the pipe: itself when it pickles, else a
    RuntimeError with its type, message and where it was raised."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        where = "".join(traceback.format_exception(exc)[-3:-1]).strip()
        return RuntimeError(f"{type(exc).__name__}: {exc} ({where})")


def _with_log(stopped: KernelStopped, log: Path | None) -> KernelStopped:
    """``stopped`` with the path of what the worker printed, when it printed anything."""
    if log is None:
        return stopped
    return KernelStopped(stopped.kind, stopped.cause, f"{stopped.fix} The worker's own messages are in {log}.")


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"the worker process was ended by {signal.Signals(-exitcode).name}"
    return f"the worker process ended with exit code {exitcode} without an answer"


def _hang(label: str, limit_s: float) -> KernelStopped:
    return KernelStopped(
        "hang",
        f"hang: {label} gave no answer within the time limit of {limit_s:g} s; its process was killed, which "
        "frees the GPU, and nothing else is lost.",
        "Look for a loop that never ends or a __syncthreads() that not every thread reaches; if the point is "
        "only slow, give it more time with --timeout SECONDS.",
    )


def _fault(label: str, what: PoisoningError | str) -> KernelStopped:
    if isinstance(what, PoisoningError):
        happened = f"the kernel stopped with {what.driver_name} ({what.code}: {what.meaning})"
    else:
        happened = what
    return KernelStopped(
        "fault",
        f"fault: {label}: {happened}; its process was ended and nothing else is lost.",
        "Run `gemmlab check` on the kernel (compute-sanitizer) to find the faulting access and its line.",
    )
