"""Starting the ranks and reading their answers: the launcher's half of
`gemmlab distributed`. It never imports torch itself (the ranks do); it
checks that torch is there and that the GPUs asked for are, starts one
process per GPU through torchrun (PyTorch's launcher) with NVLink multicast
off, and turns rank 0's rows into result rows for the store.

A launch whose rank fails is named with that rank's log.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from gemmlab.core.errors import GemmlabError
from gemmlab.core.extras import MissingExtra
from gemmlab.studies.distributed import plan
from gemmlab.studies.distributed.plan import Setup

EXPERIMENT = "distributed"
RANK_PROGRAM = "gemmlab.api.distributed"
# The store's backend column for these rows: the communication library.
BACKEND = {"cuda": "nccl", "cpu": "gloo"}
# NCCL's NVLink SHARP (NVLS) maps memory with cuMulticastCreate; the machines
# this ladder runs on must keep multicast off, so every launch says so.
LAUNCH_ENV = {"NCCL_NVLS_ENABLE": "0"}


class RankFailed(GemmlabError):
    """A rank of a distributed launch exited with an error."""


def require_torch(find: Callable[[str], object] | None = None) -> None:
    """MissingExtra naming the extra when torch (its distributed package) is not installed here."""
    if (find or importlib.util.find_spec)("torch") is None:
        raise MissingExtra(
            "The distributed ladder runs one torch.distributed process per GPU, and torch is not installed.",
            "Install it with `pip install 'gemmlab[multigpu]'`.",
        )


def check_gpus(asked: Sequence[int], present: int) -> None:
    """A GemmlabError when a launch asks for more GPUs than this machine shows."""
    most = max(asked)
    if most > present:
        raise GemmlabError(
            f"A launch over {most} GPUs was asked for, and this machine shows {present}.",
            f"Ask for at most {present} (--gpus {','.join(str(g) for g in asked if g <= present) or present}),"
            " or run on a machine with more GPUs (CUDA_VISIBLE_DEVICES may be hiding some).",
        )


def points_for(scalings: Sequence[str], sizes: Sequence[int], world: int) -> tuple[tuple[str, int], ...]:
    """The (scaling, size) points of a launch over ``world`` GPUs. On one GPU
    weak and strong scaling are the same product, so it is measured once
    (strong) and serves as both series' first point."""
    kept = ["strong"] if world == 1 else list(scalings)
    return tuple((s, size) for s in kept for size in sizes)


def torchrun_command(world: int, setup_path: Path, out_dir: Path, python: str = sys.executable) -> list[str]:
    """One process per GPU on this host (--standalone picks a free rendezvous port)."""
    return [
        python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}",
        "-m", RANK_PROGRAM, "--setup", str(setup_path), "--out-dir", str(out_dir),
    ]  # fmt: skip


def launch_env(base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.update(LAUNCH_ENV)
    return env


def launch(setup: Setup, world: int, work_dir: Path, timeout_s: float | None = None) -> list[dict]:
    """Run ``setup`` over ``world`` processes and return rank 0's rows.
    ``work_dir`` keeps the setup, torchrun's output and each rank's log and answer."""
    work_dir.mkdir(parents=True, exist_ok=True)
    setup_path = work_dir / "setup.json"
    setup_path.write_text(json.dumps(setup.to_json(), indent=1))
    launcher_log = work_dir / "torchrun.log"
    with launcher_log.open("w") as log:
        try:
            done = subprocess.run(torchrun_command(world, setup_path, work_dir), env=launch_env(), stdout=log,
                                  stderr=subprocess.STDOUT, timeout=timeout_s, check=False)  # fmt: skip
        except subprocess.TimeoutExpired:
            raise RankFailed(f"The launch over {world} processes ran past {timeout_s:.0f} s and was stopped.",
                             f"See the ranks' logs in {work_dir}; try smaller --sizes.") from None  # fmt: skip
    return read_answers(work_dir, world, done.returncode, launcher_log)


def read_answers(work_dir: Path, world: int, returncode: int, launcher_log: Path) -> list[dict]:
    """Rank 0's rows, or RankFailed naming the first rank that failed and its log."""
    for rank in range(world):
        answer_path = work_dir / f"rank{rank}.json"
        log = work_dir / f"rank{rank}.log"
        if not answer_path.is_file():
            where = log if log.is_file() else launcher_log
            raise RankFailed(f"Rank {rank} of {world} stopped without an answer (torchrun exit code {returncode}).",
                             f"Its log: {where}.")  # fmt: skip
        answer = json.loads(answer_path.read_text())
        if "error" in answer:
            raise RankFailed(f"Rank {rank} of {world} failed: {answer['error']}", f"Its log: {log}.")
    if returncode != 0:
        raise RankFailed(f"torchrun exited with code {returncode} after every rank answered.",
                         f"Its output: {launcher_log}.")  # fmt: skip
    return json.loads((work_dir / "rank0.json").read_text())["rows"]


def run_ladder(setup: Setup, gpus: Sequence[int], work_dir: Path, scalings: Sequence[str],
               sizes: Sequence[int], timeout_s: float | None = None) -> dict[int, list[dict]]:  # fmt: skip
    """One launch per GPU count, in the order given: {GPU count: its rows}."""
    found = {}
    for world in gpus:
        for name in setup.algorithms:
            for scaling, size in points_for(scalings, sizes, world):
                plan.check_shape(name, *plan.global_shape(scaling, size, world), world, setup.grid_for(world),
                                 setup.panels_per_block)  # fmt: skip
        this = replace(setup, points=points_for(scalings, sizes, world))
        found[world] = launch(this, world, work_dir / f"{world}gpu", timeout_s)
    return found


def store_row(row: dict) -> dict:
    """A ladder row as a results row (no schema change): the algorithm is the
    kernel, the GPU count and scaling the variant, the layout the
    configuration; ``gflops`` is per GPU; the communication and GEMM times and
    the overlap, which have no column, are told in ``warnings``."""
    config = {"gpus": row["gpus"], "scaling": row["scaling"]}
    if row.get("grid"):
        config["grid"] = row["grid"]
    notes = [
        f"distributed: {row['gpus']} GPUs, comm alone {row['comm_ms']:.3f} ms, GEMM alone {row['gemm_ms']:.3f} ms, "
        f"overlap efficiency {_fraction(row['overlap_efficiency'])}; gflops is per GPU; local GEMM {row['local_gemm']}"
    ]
    if row.get("fallback_reason"):
        notes.append(f"gemmlab.matmul failed, torch.matmul ran instead: {row['fallback_reason']}")
    if not row["verified"]:
        notes.append(f"not verified: relative error {row['error']:.3g} over tolerance {row['tolerance']:.3g}")
    return {
        "kernel": row["algorithm"], "m": row["m"], "n": row["n"], "k": row["k"], "dtype": "bfloat16",
        "variant": f"{row['gpus']}gpu-{row['scaling']}", "backend": BACKEND[row["device"]], "config": config,
        "median_ms": row["median_ms"], "min_ms": row["min_ms"], "max_ms": row["max_ms"], "reps": row["reps"],
        "gflops": row["tflops_per_gpu"] * 1e3, "error": row["error"], "tolerance": row["tolerance"],
        "metric": "relative_error", "timing_method": "cuda events, slowest rank" if row["device"] == "cuda"
        else "host clock, slowest rank", "warnings": notes,
    }  # fmt: skip


def _fraction(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def with_scaling(rows: list[dict]) -> list[dict]:
    """Each row with ``scaling_efficiency`` against the same algorithm and
    size on one GPU (None where no one-GPU row was measured): strong, t1/(P tP); weak, t1/tP."""
    one = {(r["algorithm"], r["size"]): r["median_ms"] for r in rows if r["gpus"] == 1}
    out = []
    for r in rows:
        base = one.get((r["algorithm"], r["size"]))
        eff = plan.scaling_efficiency(r["scaling"], base, r["median_ms"], r["gpus"]) if base else None
        out.append({**r, "scaling_efficiency": eff})
    return out
