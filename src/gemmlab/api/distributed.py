"""The program each rank of `gemmlab distributed` runs, one process per GPU
under torchrun (``python -m torch.distributed.run ... -m gemmlab.api.distributed``).

It lives in the API layer because its local GEMM is gemmlab's own
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
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any


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
