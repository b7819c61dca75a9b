"""Many points at once, through Dask: one worker per GPU of a host, or a cluster of hosts.

gemmlab does not schedule work itself. A :class:`Pool` hands items to Dask
(``distributed``) and gives back each item's :class:`Outcome` as it finishes;
the process that called :meth:`Pool.map` is the only one that writes results
(workers never open the database), so a run killed halfway resumes from what
the caller stored.

Where the work runs (``scheduler``):

- ``None``, the default, needs nothing started: a Dask cluster on this host,
  closed with the pool. One single-threaded worker process per visible GPU,
  each pinned to its GPU with ``CUDA_VISIBLE_DEVICES`` (through dask-cuda's
  ``LocalCUDACluster`` when it is installed, else distributed's own
  ``SpecCluster`` of nannies, which is what ``LocalCluster`` builds); with no
  GPU, ``cpu_workers`` workers for host-backend work.
- ``"inline"``: no Dask at all; items run here one after another (tests, and
  a fallback anyone can reason about).
- an address (``tcp://host:8786``): a running cluster, started by hand with
  ``dask scheduler`` and ``dask worker ADDRESS`` (or ``dask cuda worker``) on
  each host.

A worker that dies mid-item (a kernel fault ends its process) comes back as
that item's error (Dask's ``KilledWorker``); its nanny starts a fresh
process and the other items go on. Dask retries an item whose worker died
``distributed.scheduler.allowed-failures`` times before giving up; a local
pool sets that to ``allowed_failures`` (0: a kernel that faults once faults
again, and a retry would only cost another process). So that a death costs
only the item running, the pool keeps no more items in flight than the
workers have threads: none waits on a worker that dies under another.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import importlib.util
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from gemmlab.core.errors import GemmlabError, failure_text

INLINE = "inline"
# Seconds to wait for a running scheduler to answer before saying it does not.
CONNECT_TIMEOUT_S = 5
SCALE_FIX = "Install gemmlab's scale extra: `pip install 'gemmlab[scale]'` (dask-cuda is used too where installed)."


@dataclass(frozen=True)
class Outcome:
    """What one item came to: its value, or the error in words (``exception``: the error itself, where it is
    known; ``hung``: stopped at its time limit)."""

    value: Any = None
    error: str | None = None
    exception: BaseException | None = None
    hung: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


class Pool:
    """Dask workers for many items at once; a context manager (see the module's docstring)."""

    def __init__(
        self,
        scheduler: str | None = None,
        gpus: int | None = None,
        cpu_workers: int | None = None,
        *,
        allowed_failures: int = 0,
    ) -> None:
        self.scheduler = scheduler
        self.allowed_failures = allowed_failures
        self._gpus = gpus
        self._cpu_workers = cpu_workers or 1
        self._client: Any = None
        self._cluster: Any = None
        self._gpu_ids: list[int] = []
        if scheduler != INLINE:
            _distributed()  # say now, before any work, that Dask is missing

    # -- opening and closing ---------------------------------------------

    def __enter__(self) -> Pool:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        """Start the local cluster or connect to the running one (map does this when needed)."""
        if self.scheduler == INLINE or self._client is not None:
            return
        distributed = _distributed()
        if self.scheduler is None:
            self._cluster = self._local_cluster(distributed)
            self._client = distributed.Client(self._cluster)
        else:
            self._client = _connected(distributed, self.scheduler)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()
        self._client = self._cluster = None

    def _local_cluster(self, distributed: Any) -> Any:
        """One single-threaded worker process per GPU (or ``cpu_workers`` without one)."""
        import dask

        self._gpu_ids = list(range(self._gpus if self._gpus is not None else _visible_gpus()))
        settings = {
            "distributed.scheduler.allowed-failures": self.allowed_failures,
            # One item per worker at a time: none is queued behind an item that kills its worker.
            "distributed.scheduler.worker-saturation": 1.0,
        }
        # Worker processes that may start processes of their own: grading runs each
        # submission in a watchdog child, and a daemonic process may have none. Set
        # for this process, not only inside the block below: the nannies start their
        # workers later, on the cluster's event loop, and read the setting then.
        dask.config.set({"distributed.worker.daemon": False})
        with dask.config.set(settings):
            if self._gpu_ids:
                cuda_cluster = _dask_cuda_cluster()
                if cuda_cluster is not None:
                    return cuda_cluster(CUDA_VISIBLE_DEVICES=self._gpu_ids, threads_per_worker=1,
                                        dashboard_address=None, silence_logs=logging.CRITICAL)  # fmt: skip
            envs = [{"CUDA_VISIBLE_DEVICES": str(i)} for i in self._gpu_ids] or [{}] * self._cpu_workers
            workers = {
                f"gpu-{self._gpu_ids[n]}" if self._gpu_ids else f"cpu-{n}": {
                    "cls": distributed.Nanny,
                    "options": {"nthreads": 1, "env": env, "silence_logs": logging.CRITICAL},
                }
                for n, env in enumerate(envs)
            }
            scheduler = {"cls": distributed.Scheduler, "options": {"dashboard": False, "dashboard_address": ":0"}}
            return distributed.SpecCluster(workers=workers, scheduler=scheduler, silence_logs=logging.CRITICAL)

    # -- what it is --------------------------------------------------------

    @property
    def workers(self) -> int:
        """How many workers take items now (1 inline)."""
        if self.scheduler == INLINE:
            return 1
        self.open()
        return len(self._client.scheduler_info(n_workers=-1)["workers"])

    def _threads(self) -> int:
        info = self._client.scheduler_info(n_workers=-1)["workers"]
        return max(1, sum(w.get("nthreads", 1) for w in info.values()))

    def describe(self) -> str:
        """Where the items run, in words."""
        if self.scheduler == INLINE:
            return "inline: one item after another in this process (no Dask)"
        n = self.workers
        plural = "s" * (n != 1)
        if self.scheduler is not None:
            return f"Dask cluster at {self.scheduler}: {n} worker{plural}"
        if self._gpu_ids:
            return f"local Dask cluster: {n} worker{plural} ({', '.join(f'GPU {i}' for i in self._gpu_ids)})"
        return f"local Dask cluster: {n} CPU worker{plural} (no GPU)"

    # -- running -----------------------------------------------------------

    def map(
        self, fn: Callable[[Any], Any], items: Iterable[Any], *, key: Callable[[Any], str] = str,
        limit_s: Callable[[Any], float | None] | None = None,
    ) -> Iterator[tuple[Any, Outcome]]:  # fmt: skip
        """Run ``fn(item)`` on the workers; yield (item, Outcome) in the order
        they finish. An exception in ``fn`` or a worker's death is that item's
        Outcome, never the pool's end. ``key`` names an item in Dask's dashboard.
        ``limit_s(item)``: the seconds an item may run on its worker (None: no
        limit); past it the worker's process is ended and its nanny starts a
        fresh one, which ends whatever the item
        was doing (a kernel that spins for ever with it), and its Outcome is a
        hang (``hung`` True). Inline, no limit applies."""
        if self.scheduler == INLINE:
            yield from ((item, _called(fn, item)) for item in items)
            return
        self.open()
        distributed = _distributed()
        todo = list(items)
        batch = uuid.uuid4().hex[:8]  # a fresh key per call: Dask would hand back a result it holds under the same
        waiting = iter(enumerate(todo))
        item_of: dict[Any, Any] = {}

        def submit_next() -> Any | None:
            for index, item in waiting:
                future = self._client.submit(fn, item, key=f"{key(item)} [{batch}-{index}]", pure=False)
                item_of[future.key] = item
                return future
            return None

        running = {f for f in (submit_next() for _ in range(self._threads())) if f is not None}
        watch = _Deadlines(self._client, limit_s, item_of)
        try:
            while running:
                finished = _first_finished(distributed, running, POLL_S if limit_s else None)
                for future in finished:
                    running.discard(future)
                    outcome = watch.outcome_of(future) or _outcome(future, distributed)
                    yield item_of.pop(future.key), outcome
                    following = submit_next()
                    if following is not None:
                        running.add(following)
                watch.check({f.key for f in running})
        finally:
            for future in running:  # a caller that stops early (Ctrl-C) leaves no work behind
                future.cancel()


# How often a map with time limits looks at what each worker is running.
POLL_S = 0.5


def _end_process() -> None:
    """Run on a worker whose item is past its limit: ends the worker's process at
    once (its nanny starts a fresh one), and with it whatever the item was running."""
    os._exit(75)


def _first_finished(distributed: Any, running: set[Any], poll_s: float | None) -> list[Any]:
    """The futures of ``running`` that have finished, waiting for one at most ``poll_s`` seconds (None: for ever)."""
    try:
        distributed.wait(list(running), timeout=poll_s, return_when="FIRST_COMPLETED")
    except (TimeoutError, asyncio.TimeoutError):  # two classes before Python 3.11, one after
        return []
    return [f for f in running if f.done()]


class _Deadlines:
    """The time limits of a map's items: each item's clock starts when the
    scheduler first shows it running on a worker; an item past its limit has
    its worker's process ended (the nanny starts a fresh one) and is a hang."""

    def __init__(self, client: Any, limit_s: Callable[[Any], float | None] | None, item_of: dict[Any, Any]) -> None:
        self.client, self.limit_s, self.item_of = client, limit_s, item_of
        self.since: dict[Any, float] = {}
        self.hung: dict[Any, float] = {}

    def check(self, keys: set[Any]) -> None:
        if self.limit_s is None:
            return
        now = time.monotonic()
        for worker, running in self.client.processing().items():
            for k in running:
                if k not in keys or k in self.hung:
                    continue
                limit = self.limit_s(self.item_of[k])
                if limit is not None and now - self.since.setdefault(k, now) > limit:
                    self.hung[k] = limit
                    self.client.run(_end_process, workers=[worker], on_error="ignore")

    def outcome_of(self, future: Any) -> Outcome | None:
        """A hang's Outcome for an item stopped by its limit; None for the others."""
        limit = self.hung.pop(future.key, None)
        self.since.pop(future.key, None)
        if limit is None:
            return None
        what = (
            f"no answer within the time limit of {limit:.0f} s; its Dask worker's process was ended, and with it "
            "the item (a loop that never ends, or a __syncthreads() that not every thread reaches)"
        )
        return Outcome(error=what, hung=True)


def _called(fn: Callable[[Any], Any], item: Any) -> Outcome:
    try:
        return Outcome(value=fn(item))
    except Exception as exc:
        return Outcome(error=failure_text(exc), exception=exc)


def _outcome(future: Any, distributed: Any) -> Outcome:
    """The Outcome of a finished future: its result, the exception ``fn`` raised, or the worker's death."""
    if future.status == "finished":
        return Outcome(value=future.result())
    if future.status == "cancelled":
        return Outcome(error="cancelled before it ran (the Dask cluster was closed, or the item was cancelled)")
    exc = future.exception()
    if isinstance(exc, distributed.KilledWorker):
        where = getattr(getattr(exc, "last_worker", None), "address", "a worker")
        what = (
            f"the Dask worker running it died (KilledWorker, last on {where}): a kernel that faults ends its "
            "worker's process; the worker is started again for the next item"
        )
        return Outcome(error=what, exception=exc)
    return Outcome(error=failure_text(exc), exception=exc)


def gpu_key() -> str:
    """This worker's GPU as a name the cluster can share: the host and the first
    device of CUDA_VISIBLE_DEVICES (each local worker is pinned by it; a worker
    started without it uses device 0)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"
    return f"gemmlab-gpu-{socket.gethostname()}-{visible}"


# Leases of a GPU's shared semaphore: more than the workers any host puts on
# one GPU (a worker past them waits for a lease, which costs time, not fairness).
GPU_LEASES = 16


def _gpu_locks() -> tuple[Any, Any] | None:
    """This worker's GPU's two cluster-wide locks, or None outside a Dask worker:
    ``alone`` (one timing at a time, and a gate no new sharer passes while it
    is held) and ``share`` (a semaphore whose leases the GPU's users hold)."""
    try:
        from distributed import get_worker

        get_worker()
    except (ImportError, ValueError):
        return None
    return _locks_named(gpu_key())


@functools.cache
def _locks_named(key: str) -> tuple[Any, Any]:
    """The two locks of the GPU ``key``, made once per worker process: each
    distributed Semaphore starts a lease-refreshing callback on the worker's
    loop, which one made per stage would leave running."""
    from distributed import Lock, Semaphore

    return Lock(f"{key}-alone"), Semaphore(max_leases=GPU_LEASES, name=f"{key}-share")


def gpu_shared() -> contextlib.AbstractContextManager:
    """Use this worker's GPU beside the cluster's other users of it (a
    sanitizer run, a verification), but never while one of them times: wait
    at the gate while a timing holds it, then hold one lease."""
    return _gpu_held(leases=1, keep_gate=False)


def gpu_to_itself() -> contextlib.AbstractContextManager:
    """Hold this worker's GPU against the cluster's other workers for the block.

    Timing and profiling need the GPU to themselves: a cluster started with
    more workers than GPUs would otherwise time one submission while another's
    sanitizer run or verification shares its SMs, and grade by the
    neighbour's load. Inside a Dask worker this takes the GPU's
    ``alone`` lock, then every lease of its ``share`` semaphore, so the users
    already on the GPU finish (each within its stage's time limit) and no new
    one starts; the scheduler holds both, for every worker of the cluster.
    Outside Dask (inline, tests) there is nobody to wait for."""
    return _gpu_held(leases=GPU_LEASES, keep_gate=True)


@contextlib.contextmanager
def _gpu_held(leases: int, keep_gate: bool) -> Iterator[None]:
    """``leases`` of the GPU's semaphore, taken behind its gate (the ``alone``
    lock: nobody new passes it while a timing holds it), the gate kept for the
    block or let go once the leases are held."""
    locks = _gpu_locks()
    if locks is None:
        yield
        return
    gate, share = locks
    held, gated = 0, True
    gate.acquire()
    try:
        while held < leases:
            share.acquire()
            held += 1
        if not keep_gate:
            gate.release()
            gated = False
        yield
    finally:
        if gated:
            gate.release()
        for _ in range(held):
            share.release()


def dask_installed() -> bool:
    """Whether Dask's distributed package can be imported here."""
    return importlib.util.find_spec("distributed") is not None


def _distributed() -> Any:
    """Dask's distributed package, or an error naming the extra that installs it."""
    try:
        return importlib.import_module("distributed")
    except ImportError:
        raise GemmlabError("Running on several workers needs Dask (the distributed package), which is not installed.",
                           SCALE_FIX) from None  # fmt: skip


def _dask_cuda_cluster() -> Any:
    """dask-cuda's LocalCUDACluster where it is installed (one worker per GPU, CUDA set up its way); else None."""
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        return None
    return LocalCUDACluster


def _visible_gpus() -> int:
    """The GPUs this process sees (0 without a GPU or a driver)."""
    from gemmlab.core import gpu

    try:
        return gpu.device_count()
    except Exception:  # no CuPy, no driver, no GPU: a pool for host-backend work
        return 0


def _connected(distributed: Any, address: str) -> Any:
    try:
        return distributed.Client(address, timeout=CONNECT_TIMEOUT_S)
    except (OSError, ValueError, TypeError) as exc:
        raise GemmlabError(
            f"No Dask scheduler answered at {address!r} within {CONNECT_TIMEOUT_S} s ({type(exc).__name__}: {exc}).",
            "Start one (`dask scheduler`, then `dask worker ADDRESS` on each host) and give the address it prints, "
            "e.g. --scheduler tcp://host:8786; or leave --scheduler out for a local pool of one worker per GPU.",
        ) from None
