"""The program each rank of `gemmlab distributed` runs, one process per GPU
under torchrun (``python -m torch.distributed.run ... -m gemmlab.api.distributed``).

It lives in the API layer because its local GEMM is ``gemmlab.matmul``
(api/matmul.py): torch's bfloat16 tensors are handed to CuPy through DLPack
without a copy, as int16 views (CuPy has no bfloat16; the bits are what
gemmlab's tensor ladder reads as uint16), on torch's current stream, so the
GEMM is ordered with the NCCL work around it.

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


def gemmlab_gemm(a: Any, bt: Any) -> Any:
    """a . bt^T in float32 by the dispatcher's rung, on torch CUDA tensors (bfloat16, C-contiguous)."""
    import cupy as cp
    import torch

    from gemmlab.api.matmul import matmul

    stream = torch.cuda.current_stream(a.device)
    with cp.cuda.Device(a.device.index), cp.cuda.ExternalStream(stream.cuda_stream, a.device.index):
        a_bits = cp.from_dlpack(a.view(torch.int16)).view(cp.uint16)
        bt_bits = cp.from_dlpack(bt.view(torch.int16)).view(cp.uint16)
        return torch.from_dlpack(matmul(a_bits, bt_bits.T))


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
        primary = gemmlab_gemm if setup.local == "gemmlab" else None
    else:
        dist.init_process_group("gloo")
        primary = None
    try:
        return ladder.run_rank(setup, ladder.LocalGemm(primary))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
