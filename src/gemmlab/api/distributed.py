"""`gemmlab distributed` from Python, in two halves (docs/distributed.md).

The launcher's: :func:`setup`, :func:`check_launch`, :func:`run_ladder` (one
torchrun launch per GPU count, through studies/distributed/launch.py) and
:func:`keep_results` (the rows stored as runs of the "distributed" experiment,
and written as JSON where asked; neither failure loses a run of many minutes).

The ranks': the program each rank runs, one process per GPU under torchrun
(``python -m torch.distributed.run ... -m gemmlab.api.distributed``). It lives
in the API layer because its local GEMM is gemmlab's own
(api/matmul.py's ``Matmul``, the dispatcher's rung bound once to fixed arrays):
torch's bfloat16 tensors are read by CuPy in place, as uint16 arrays (CuPy has
no bfloat16; the bits are what gemmlab's tensor ladder reads), and the GEMM is
launched on torch's current stream, so it is ordered with the NCCL work around it.

Each rank writes its own log (``rank<R>.log``, stdout and stderr) and its
answer (``rank<R>.json``: the rows, or the error) into ``--out-dir``, where
the launcher (studies/distributed/launch.py) reads them.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shlex
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gemmlab.core.errors import GemmlabError, StoreError
from gemmlab.core.outputs import OutputError, is_stdout, write_text

if TYPE_CHECKING:
    from gemmlab.studies.distributed.plan import Setup

__all__ = ["GemmlabGemm", "check_launch", "keep_results", "main", "run_ladder", "scalings", "setup", "work_folder"]


# -- the launcher --------------------------------------------------------------


def scalings() -> tuple[str, ...]:
    """How a launch's problem grows with its GPUs: strong (a fixed product), weak (fixed per GPU)."""
    from gemmlab.studies.distributed.plan import SCALINGS

    return SCALINGS


def setup(
    algorithms: str | None = None, *, grid: str | None = None, panels: int = 1, warmup: int = 3, reps: int = 10,
    seed: int = 0, local: str = "gemmlab", cpu: bool = False,
) -> Setup:  # fmt: skip
    """What every rank of a launch runs: ``algorithms`` comma-separated (None:
    the four rungs), SUMMA's ``grid`` RxC (None: the squarest) and ``panels``
    per lcm(R, C)-th of K, the repetitions, the inputs' ``seed``, the local
    GEMM (gemmlab or torch), and with ``cpu`` processes over gloo (checks the
    algorithms; the times mean nothing). An unknown algorithm or local GEMM is refused here."""
    from gemmlab.studies.distributed import plan

    return plan.Setup(
        algorithms=plan.parse_algorithms(algorithms), points=(), grid=grid, panels_per_block=panels,
        warmup=warmup, reps=reps, seed=seed, local=_local(local), device="cpu" if cpu else "cuda",
    )  # fmt: skip


def _local(text: str) -> str:
    if text not in ("gemmlab", "torch"):
        raise GemmlabError(f"--local {text!r} is neither gemmlab nor torch.", "Use --local gemmlab or --local torch.")
    return text


def check_launch(counts: Sequence[int], *, cpu: bool = False) -> None:
    """Refuse before any launch: torch missing (MissingExtra, naming the
    extra), or, on GPUs, more of them asked for than this machine shows."""
    from gemmlab.studies.distributed import launch

    launch.require_torch()
    if not cpu:
        from gemmlab.core import gpu

        launch.check_gpus(counts, gpu.device_count())


def work_folder(work_dir: Path | None = None) -> Path:
    """Where the ranks' logs and answers go: ``work_dir``, or a new temporary folder."""
    return work_dir or Path(tempfile.mkdtemp(prefix="gemmlab-distributed-"))


def run_ladder(
    setup: Setup, counts: Sequence[int], work_dir: Path, scalings: Sequence[str], sizes: Sequence[int],
    *, timeout_s: float | None = None,
) -> tuple[dict[int, list[dict]], list[dict]]:  # fmt: skip
    """One launch per GPU count of ``counts``, each verified and timed, at most
    ``timeout_s`` seconds each: {GPU count: its rows}, and every row in that
    order with its scaling efficiency."""
    from gemmlab.studies.distributed import launch

    found = launch.run_ladder(setup, counts, work_dir, scalings, sizes, timeout_s=timeout_s)
    return found, launch.with_scaling([row for world in counts for row in found[world]])


def keep_results(found: dict[int, list[dict]], document: dict, db: Path, out: Path | None, work_dir: Path) -> str:
    """Store the rows (``found``: {GPU count: its rows}) and write ``document``
    to ``out``; say where they went. A run takes minutes, so neither failure
    loses it: rows the database refuses (locked, read-only, newer) are kept in
    a file the StoreError names (:func:`_set_aside`); an ``out`` that cannot be
    written is an OutputError that says the rows are stored all the same."""
    text = json.dumps(document, indent=1)
    try:
        _store(db, found)
    except StoreError as refused:
        raise StoreError(
            f"Storing the rows failed: {refused.cause}",
            f"{refused.fix} All {len(document['rows'])} rows are kept in {_set_aside(text, out, work_dir)}; "
            "no gemmlab command loads that file into a database, so run again to store them.",
        ) from None
    if out is None:
        return f"stored in {db}"
    try:
        written = _write_out(out, text)
    except OutputError as exc:
        raise OutputError(exc.cause, f"{exc.fix} The rows are stored in {db} all the same.") from None
    return f"stored in {db}, rows in {written}"


def _write_out(out: Path, text: str) -> str:
    """Write the rows to --out: a file, or standard output for ``-``."""
    if is_stdout(out):
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return "standard output"
    return str(write_text(out, text))


def _set_aside(text: str, out: Path | None, work_dir: Path) -> str:
    """Where rows the database refused are kept: --out if it is a file and
    can be written, else a new JSON file in the current folder, else (that
    folder cannot be written either) the ranks' own answers in the work folder."""
    if out is not None:
        try:
            written = _write_out(out, text)
        except OutputError:
            pass
        else:
            if not is_stdout(out):  # rows on a terminal or in a pipe are not kept: set them aside as well
                return f"{written} (JSON, as --out writes it)"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path, again = Path(f"gemmlab-distributed-{stamp}.json"), itertools.count(2)
    while path.exists():  # never over an earlier run's rows
        path = Path(f"gemmlab-distributed-{stamp}-{next(again)}.json")
    try:
        return f"{write_text(path, text)} (JSON, as --out writes it)"
    except OutputError:
        return f"the ranks' answers ({work_dir}/<P>gpu/rank0.json)"


def _store(db: Path, found: dict[int, list[dict]]) -> None:
    """One run per launch, one row per algorithm and point."""
    from gemmlab.store.store import Store
    from gemmlab.studies.distributed import launch
    from gemmlab.studies.sweep import run_record

    with Store.open(db) as store:
        for world, rows in found.items():
            run_id = store.start_run(run_record(shlex.join(sys.argv) + f"  # launch over {world}"))
            store.add_results(run_id, launch.EXPERIMENT, [launch.store_row(row) for row in rows])


# -- each rank -----------------------------------------------------------------


class GemmlabGemm:
    """a . bt^T in float32 by the dispatcher's rung, on torch CUDA tensors
    (bfloat16, C-contiguous), with the host's work done once per pair of buffers.

    The ladder multiplies the same buffers at every repetition, and the
    conversions between torch and CuPy, the checks and the tensor maps cost
    the host more than a 4096 GEMM takes the GPU (benchmarks/results/
    2026-11-29b_h200_matmul-overhead.txt). So each pair of inputs, by address,
    shape and device, gets a ``Matmul`` on its first call, with its own
    float32 C; later calls launch it again. A call returns that C: the next
    call on the same pair writes over it.

    The CuPy views do not hold the tensors' memory, so the plans keep nothing
    alive. A plan is found again only by a live tensor at the same address
    with the same shape, which is the memory the plan's tensor maps describe.
    At most ``keep`` plans are kept (the newest used)."""

    def __init__(self, keep: int = 8) -> None:
        self.keep = keep
        self.plans: dict[tuple, tuple[Any, Any]] = {}  # key -> (Matmul, its C as a torch tensor)
        self.streams: dict[int, Any] = {}  # torch stream handle -> CuPy's view of that stream

    def __call__(self, a: Any, bt: Any) -> Any:
        import cupy as cp
        import torch

        if not (a.is_contiguous() and bt.is_contiguous()):
            raise ValueError("the local GEMM takes C-contiguous tensors")
        key = (a.device.index, a.data_ptr(), tuple(a.shape), bt.data_ptr(), tuple(bt.shape))
        stream = torch.cuda.current_stream(a.device)
        handle = stream.cuda_stream
        if handle not in self.streams:
            self.streams[handle] = _cupy_stream(cp, stream, a.device.index)
        with cp.cuda.Device(a.device.index), self.streams[handle]:
            if key in self.plans:
                self.plans[key] = self.plans.pop(key)  # the newest used goes last
            else:
                self.plans[key] = self._plan(cp, torch, a, bt)
                while len(self.plans) > self.keep:
                    self.plans.pop(next(iter(self.plans)))
            product, c = self.plans[key]
            product.run()
        return c

    @staticmethod
    def _plan(cp: Any, torch: Any, a: Any, bt: Any) -> tuple[Any, Any]:
        from gemmlab.api.matmul import Matmul

        c = torch.empty((a.shape[0], bt.shape[0]), dtype=torch.float32, device=a.device)
        product = Matmul(_bits(cp, a), _bits(cp, bt).T, out=cp.from_dlpack(c))
        return product, c


def _cupy_stream(cp: Any, stream: Any, device_index: int) -> Any:
    """CuPy's view of a torch stream: through the CUDA stream protocol where
    both have it (CuPy 14 deprecates ExternalStream), else by its handle."""
    if hasattr(stream, "__cuda_stream__") and hasattr(cp.cuda.Stream, "from_external"):
        return cp.cuda.Stream.from_external(stream)
    return cp.cuda.ExternalStream(stream.cuda_stream, device_index)


def _bits(cp: Any, t: Any) -> Any:
    """A CuPy uint16 array over a bfloat16 tensor's memory, not holding it."""
    memory = cp.cuda.UnownedMemory(t.data_ptr(), t.numel() * t.element_size(), None, t.device.index)
    return cp.ndarray(tuple(t.shape), dtype=cp.uint16, memptr=cp.cuda.MemoryPointer(memory, 0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gemmlab.api.distributed", description=__doc__)
    parser.add_argument("--setup", type=Path, required=True, help="the launch's setup (JSON, plan.Setup)")
    parser.add_argument("--out-dir", type=Path, required=True, help="where each rank writes its log and answer")
    args = parser.parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    _log_to(args.out_dir / f"rank{rank}.log")
    answer = args.out_dir / f"rank{rank}.json"
    try:
        rows = _run(json.loads(args.setup.read_text()))
    except BaseException as exc:
        traceback.print_exc()
        answer.write_text(json.dumps({"rank": rank, "error": f"{type(exc).__name__}: {exc}"}))
        return 1
    answer.write_text(json.dumps({"rank": rank, "rows": rows}))
    return 0


def _log_to(path: Path) -> None:
    """Send this process's stdout and stderr (NCCL's and CUDA's too: file descriptors 1 and 2) to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)


def _run(setup_json: dict) -> list[dict]:
    import torch
    import torch.distributed as dist

    from gemmlab.studies.distributed import ladder
    from gemmlab.studies.distributed.plan import Setup

    setup = Setup.from_json(setup_json)
    if setup.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
        primary = GemmlabGemm() if setup.local == "gemmlab" else None
    else:
        dist.init_process_group("gloo")
        primary = None
    try:
        return ladder.run_rank(setup, ladder.LocalGemm(primary))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
