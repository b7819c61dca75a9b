"""Every way in which a user can hold gemmlab wrong, in one table.

Each case sets up files and fakes in a fresh folder, runs the CLI there and
checks the answer: the exit code, one line that starts with "error:", no
traceback, the words that matter, and nothing written that was not asked for
(the folder is byte for byte and mode for mode what it was). The same table,
with gemmlab's actual answers, is docs/errors.md: this test fails when the two
differ, and ``GEMMLAB_WRITE_DOCS=1`` rewrites the file instead.
"""

from __future__ import annotations

import io
import os
import re
import sqlite3
import stat
from collections.abc import Callable
from contextlib import ExitStack, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from gemmlab.cli.app import run_cli
from gemmlab.core import gpu
from gemmlab.measure import ncu, sanitize
from gemmlab.store import store
from gemmlab.store.store import Store

DOC = Path(__file__).resolve().parents[1] / "docs" / "errors.md"
WRITE_DOCS = os.environ.get("GEMMLAB_WRITE_DOCS") == "1"

# The error line is printed with soft_wrap, so it stays whole at any width; a
# wide terminal all the same, so that a long line is never the reason a case fails.


@dataclass
class Scene:
    """What a setup gets: the case's folder (also the working directory), the
    monkeypatch, and a stack for what must stay open while the CLI runs."""

    tmp: Path
    mp: pytest.MonkeyPatch
    later: ExitStack


@dataclass(frozen=True)
class Case:
    name: str
    did: str  # what the user did, in words
    argv: tuple[str, ...]  # after `gemmlab`; relative paths land in the case's folder
    code: int
    needle: str  # words the message must contain
    setup: Callable[[Scene], None] = lambda scene: None


# --- setups ----------------------------------------------------------------------

FAKE_DEVICE = gpu.DeviceInfo(
    index=0,
    name="NVIDIA H100 80GB HBM3",
    cc=(9, 0),
    sm_count=132,
    memory_bytes=80 * 2**30,
    free_bytes=1 * 2**30,  # the rest taken by another process
    sm_clock_mhz=1980.0,
    memory_clock_mhz=2619.0,
    memory_bus_bits=5120,
    l2_bytes=50 * 2**20,
    max_threads_per_block=1024,
    max_smem_per_block=48 * 1024,
    max_smem_per_block_optin=227 * 1024,
    driver_version="13.0",
    runtime_version="13.0",
)


class UntouchableCupy:
    """Stands in for CuPy where the command must stop before any allocation."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"cupy.{name} was used: the command reached the GPU")


INSUFFICIENT = RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version")


def no_gpu(scene: Scene) -> None:
    """No NVIDIA driver at all: CuPy's error is the one it gives for an old driver, libcuda is missing."""

    def missing() -> NoReturn:
        raise gpu.no_usable_gpu(INSUFFICIENT, None, 13000, None)

    scene.mp.setattr(gpu, "_cupy", missing)


def old_driver(scene: Scene) -> None:
    """A driver for CUDA 12.4 (release 550) under CuPy's CUDA 13.0 runtime."""

    def too_old() -> NoReturn:
        raise gpu.no_usable_gpu(INSUFFICIENT, 12040, 13000, "550.54.15")

    scene.mp.setattr(gpu, "_cupy", too_old)


def gpu_with_1_gib_free(scene: Scene) -> None:
    dummy = UntouchableCupy()
    scene.mp.setattr(gpu, "_cupy", lambda: dummy)
    scene.mp.setattr(gpu, "describe", lambda index=0: FAKE_DEVICE)


def results_db(scene: Scene, name: str = "results.sqlite") -> Path:
    """A valid store holding one result."""
    path = scene.tmp / name
    with Store.open(path) as db:
        run_id = db.start_run({"gpu_name": FAKE_DEVICE.name, "cc": "9.0"})
        db.add_result(run_id, "poznan-group1", {"kernel": "naive", "m": 64, "n": 64, "k": 64, "block_edge": 16,
                                                "dtype": "float32", "median_ms": 0.01, "gflops": 52.4})  # fmt: skip
    return path


def corrupt_db(scene: Scene) -> None:
    (scene.tmp / "corrupt.sqlite").write_bytes(b"these bytes are no SQLite database\n" * 200)


def newer_db(scene: Scene) -> None:
    path = results_db(scene)
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {store.SCHEMA_VERSION + 97}")
    conn.close()


def read_only_db(scene: Scene) -> None:
    results_db(scene).chmod(0o444)


def locked_db(scene: Scene) -> None:
    """Another process holds the write lock and keeps readers out (EXCLUSIVE locking mode)."""
    path = results_db(scene)
    holder = sqlite3.connect(path, isolation_level=None)
    scene.later.callback(holder.close)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("DELETE FROM results WHERE 0")
    scene.mp.setattr(store, "DEFAULT_TIMEOUT_S", 0.2)


def out_under_a_file(scene: Scene) -> None:
    results_db(scene)
    (scene.tmp / "notes.txt").write_text("a file, not a folder\n")


def empty_path(scene: Scene) -> Path:
    bin_dir = scene.tmp.parent / f"{scene.tmp.name}-bin"  # outside the watched folder
    bin_dir.mkdir(exist_ok=True)
    scene.mp.setenv("PATH", str(bin_dir))
    return bin_dir


def no_ncu(scene: Scene) -> None:
    empty_path(scene)
    scene.mp.setattr(ncu.command, "NCU_SEARCH_GLOBS", ())


def ncu_not_permitted(scene: Scene) -> None:
    """A real `ncu` process that answers as ncu does for a user the driver keeps from the counters."""
    stand_in = empty_path(scene) / "ncu"
    stand_in.write_text(
        "#!/bin/sh\n"
        "echo '==PROF== Connected to process 812 (/usr/bin/python3)'\n"
        "echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
        "Counters on the target device 0. For instructions on enabling permissions and to get more information "
        "see https://developer.nvidia.com/ERR_NVGPUCTRPERM'\n"
        "echo '==WARNING== No kernels were profiled.'\n"
        "exit 1\n"
    )
    stand_in.chmod(0o755)
    scene.mp.setattr(ncu.command, "NCU_SEARCH_GLOBS", ())


def no_sanitizer(scene: Scene) -> None:
    empty_path(scene)
    scene.mp.setattr(sanitize, "SANITIZER_SEARCH_DIRS", ())


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def broken_kernel(scene: Scene) -> None:
    """The example whose .cu does not compile, copied into the case's folder."""
    (scene.tmp / "mykernel").mkdir()
    for name in ("matmul.cu", "matmul.toml"):
        (scene.tmp / "mykernel" / name).write_text((EXAMPLES / "broken" / name).read_text())


def declaration_with_unknown_key(scene: Scene) -> None:
    (scene.tmp / "matmul.cu").write_text((EXAMPLES / "naive_define" / "matmul.cu").read_text())
    text = (EXAMPLES / "naive_define" / "matmul.toml").read_text()
    (scene.tmp / "matmul.toml").write_text(text.replace("function =", "kernel =", 1))


def naive_define_with(scene: Scene, old: str, new: str) -> None:
    """The naive_define example in the case's folder, its declaration with ``old`` replaced by ``new``."""
    (scene.tmp / "matmul.cu").write_text((EXAMPLES / "naive_define" / "matmul.cu").read_text())
    text = (EXAMPLES / "naive_define" / "matmul.toml").read_text()
    assert old in text
    (scene.tmp / "matmul.toml").write_text(text.replace(old, new, 1))


def parameter_used_nowhere(scene: Scene) -> None:
    naive_define_with(scene, "TILE = [16, 8, 32]", "TILE = [16, 8, 32]\nUNROLL = [1, 2]")


def zero_block_dimension(scene: Scene) -> None:
    naive_define_with(scene, 'block = ["TILE", "TILE"]', 'block = ["TILE", "0"]')


def binary_source(scene: Scene) -> None:
    naive_define_with(scene, "function =", "function =")
    (scene.tmp / "matmul.cu").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))


# --- the table -------------------------------------------------------------------

SWEEP_CPU = ("sweep", "--kernels", "cpu_naive", "--sizes", "64")

CASES: list[Case] = [
    Case("unknown kernel", "misspelt a kernel id", ("run", "tild", "--size", "64"), 2, "Did you mean tiled"),
    Case("unknown command", "misspelt a command", ("rnu", "tiled"), 2, "No such command"),
    Case("unknown option", "gave an option that does not exist", ("run", "tiled", "--sise", "64"), 2,
         "No such option"),
    Case("size that is not a number", "gave letters for a size", ("run", "tiled", "--size", "abc"), 2,
         "Invalid value for '--size'"),
    Case("unknown experiment", "misspelt an experiment", ("reproduce", "poznan-grup1"), 2,
         "Did you mean poznan-group1"),
    Case("size the kernel cannot take", "asked `tiled` for a size that is not a multiple of its block edge",
         ("run", "tiled", "--size", "1000", "--block", "16"), 2, "`tiled_any_size`"),
    Case("zero size", "gave a size of 0", ("run", "tiled", "--size", "0"), 2, "positive"),
    Case("negative size", "gave a negative M", ("run", "tiled", "--m", "-4", "--n", "8", "--k", "8"), 2,
         "positive"),
    Case("size given twice", "gave --size and --m together", ("run", "tiled", "--size", "64", "--m", "32"), 2,
         "not both"),
    Case("no size", "gave no size", ("run", "tiled"), 2, "A size is needed"),
    Case("sweep size zero", "listed 0 among a sweep's sizes",
         ("sweep", "--kernels", "naive", "--sizes", "64,0"), 2, "positive"),
    Case("block edge over the limit", "asked for 64x64 threads per block",
         ("run", "naive", "--size", "64", "--block", "64"), 2, "outside 1..32"),
    Case("dtype the kernel lacks", "asked `tiled` for int32", ("run", "tiled", "--size", "64", "--dtype", "int32"),
         2, "no int32 version"),
    Case("unknown dtype", "asked for a data type gemmlab does not know",
         ("run", "tiled", "--size", "64", "--dtype", "float128"), 2, "Unknown dtype 'float128'"),
    Case("bad architecture", "gave a GPU's marketing name as --arch", ("compile", "tiled", "--arch", "hopper"), 2,
         "not a GPU architecture"),
    Case("K in pieces the tensor cores cannot copy", "asked `tc_mma` for K = 30 in bfloat16",
         ("run", "tc_mma", "--m", "64", "--n", "64", "--k", "30", "--dtype", "bfloat16"), 2,
         "whole 16-byte pieces"),
    Case("Hopper kernel for another GPU", "compiled the wgmma kernel for an A100 (sm_80)",
         ("compile", "tc_wgmma", "--arch", "sm_80"), 2, "sm_90a only"),
    Case("your kernel does not compile", "compiled a .cu with an undeclared variable on line 11",
         ("compile", "mykernel/matmul.cu", "--arch", "sm_90"), 2, "matmul.cu(11): error", broken_kernel),
    Case("mistake in a declaration", "wrote `kernel =` for `function =` in a kernel's .toml",
         ("compile", "matmul.toml", "--arch", "sm_90"), 2, "unknown key kernel", declaration_with_unknown_key),
    Case("too many threads", "asked the occupancy calculator for 2048 threads per block",
         ("occupancy", "--cc", "9.0", "--threads", "2048"), 2, "over the limit of 1024"),
    Case("too many registers", "asked the occupancy calculator for 300 registers per thread",
         ("occupancy", "--cc", "9.0", "--threads", "256", "--regs", "300"), 2, "over the limit of 255"),
    Case("raw occupancy without threads", "used the raw occupancy form without --threads",
         ("occupancy", "--cc", "9.0"), 2, "needs --cc and --threads"),
    Case("kernel id that looks like markup", "typed a kernel id with square brackets",
         ("run", "[/x]", "--size", "64"), 2, "Unknown kernel '[/x]'"),
    Case("no GPU: run", "ran a kernel on a machine without an NVIDIA driver or GPU",
         ("run", "tiled", "--size", "64"), 3, "No NVIDIA driver was found", no_gpu),
    Case("no GPU: devices", "listed the GPUs on a machine without one", ("devices",), 3, "work without a GPU",
         no_gpu),
    Case("no GPU: sweep", "started a sweep on a machine without a GPU",
         ("sweep", "--kernels", "naive", "--sizes", "64", "--blocks", "16", "--db", "results.sqlite"), 3,
         "work without a GPU", no_gpu),
    Case("driver too old", "ran a kernel with a driver older than CuPy's CUDA runtime",
         ("run", "tiled", "--size", "64"), 3, "older than the CUDA 13.0 runtime", old_driver),
    Case("unknown kernel without a GPU", "compiled a kernel id that does not exist, on a machine without a GPU",
         ("compile", "nope"), 2, "Unknown kernel 'nope'", no_gpu),
    Case("target older than NVRTC supports", "compiled for a Fermi GPU (sm_20)",
         ("compile", "tiled", "--arch", "sm_20"), 2, "older than the oldest it supports"),
    Case("not enough GPU memory", "ran N = 16384 on a GPU with 1 GiB free",
         ("run", "tiled", "--size", "16384", "--block", "32"), 2, "GiB of device memory", gpu_with_1_gib_free),
    Case("missing database", "asked for a report of a database that does not exist",
         ("report", "--db", "missing.sqlite", "--out", "report"), 2, "No results database at missing.sqlite"),
    Case("corrupt database: report", "pointed report at a file that is not a database",
         ("report", "--db", "corrupt.sqlite", "--out", "report"), 2, "not a usable results database", corrupt_db),
    Case("corrupt database: sweep", "pointed a sweep at a file that is not a database",
         (*SWEEP_CPU, "--db", "corrupt.sqlite"), 2, "not a usable results database", corrupt_db),
    Case("newer database: report", "reported from a database written by a newer gemmlab",
         ("report", "--db", "results.sqlite", "--out", "report"), 2, "newer gemmlab", newer_db),
    Case("newer database: sweep", "swept into a database written by a newer gemmlab",
         (*SWEEP_CPU, "--db", "results.sqlite"), 2, "newer gemmlab", newer_db),
    Case("read-only database", "swept into a database marked read-only (chmod 444)",
         (*SWEEP_CPU, "--db", "results.sqlite"), 2, "is read-only", read_only_db),
    Case("locked database", "swept into a database another process holds locked",
         (*SWEEP_CPU, "--db", "results.sqlite"), 2, "locked by another process", locked_db),
    Case("report folder under a file", "gave --out a path inside a regular file",
         ("report", "--db", "results.sqlite", "--out", "notes.txt/report", "--no-occupancy"), 2,
         "Cannot write the report", out_under_a_file),
    Case("no ncu", "profiled on a machine without Nsight Compute",
         ("profile", "naive", "--size", "64", "--block", "16"), 2, "Nsight Compute (ncu) was not found", no_ncu),
    Case("ncu not permitted", "profiled where the driver keeps the counters for administrators",
         ("profile", "naive", "--size", "64", "--block", "16"), 2, "ERR_NVGPUCTRPERM", ncu_not_permitted),
    Case("no compute-sanitizer", "checked a kernel on a machine without compute-sanitizer", ("check", "naive"), 2,
         "compute-sanitizer was not found", no_sanitizer),
    Case("parameter used nowhere", "declared a parameter that neither the source nor the launch names",
         ("compile", "matmul.toml", "--arch", "sm_90"), 2, "UNROLL is used nowhere", parameter_used_nowhere),
    Case("zero block dimension", "declared a block whose y dimension is 0",
         ("compile", "matmul.toml", "--arch", "sm_90"), 2, "block", zero_block_dimension),
    Case("source that is not text", "gave a compiled binary as the kernel's .cu",
         ("compile", "matmul.toml", "--arch", "sm_90"), 2, "is not a text file", binary_source),
    Case("--block for a kernel without an edge", "asked a fixed-block kernel for another block edge",
         ("compile", "sgemm_multistage", "--arch", "sm_90", "--block", "16"), 2, "has no block edge to choose"),
    Case("block edge of 0", "swept a block edge of 0",
         ("sweep", "--kernels", "tiled", "--sizes", "64", "--blocks", "0"), 2, "positive"),
    Case("unknown experiment in a report", "asked the report for an experiment that does not exist",
         ("report", "--db", "results.sqlite", "--out", "report", "--experiments", "poznan-grup1"), 2,
         "Unknown experiment", results_db),
    Case("export to a folder", "gave export a folder as --out", ("export", "--db", "results.sqlite", "--out", "."),
         2, "is a folder", results_db),
]  # fmt: skip


# --- running a case --------------------------------------------------------------


def snapshot(folder: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every path under ``folder``: its mode, and a file's bytes."""
    found: dict[str, tuple[int, bytes | None]] = {}
    for path in sorted(folder.rglob("*")):
        mode = path.lstat().st_mode
        found[str(path.relative_to(folder))] = (mode, path.read_bytes() if stat.S_ISREG(mode) else None)
    return found


def play(case: Case, tmp: Path, mp: pytest.MonkeyPatch) -> str:
    """Run ``case`` in ``tmp``, check everything, and return gemmlab's answer with ``tmp`` as <tmp>."""
    with ExitStack() as later:
        case.setup(Scene(tmp, mp, later))
        mp.chdir(tmp)
        before = snapshot(tmp)
        # The real entry point (not CliRunner's standalone mode), so that
        # click's own usage errors go through gemmlab's one-line report too.
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = run_cli(list(case.argv))
        after = snapshot(tmp)
    command = "gemmlab " + " ".join(case.argv)
    stdout, stderr = out.getvalue(), err.getvalue()
    assert "Traceback" not in stdout + stderr, stdout + stderr
    assert code == case.code, f"{command}: exit {code}\n{stdout}{stderr}"
    assert stdout == "", f"{command} printed to stdout: {stdout!r}"
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), f"{command}: not one error line: {stderr!r}"
    assert case.needle in lines[0], lines[0]
    assert after == before, f"{command} changed files: {sorted(set(after) ^ set(before)) or 'contents or modes'}"
    return _without_tmp(lines[0], tmp)


def _without_tmp(text: str, tmp: Path) -> str:
    for form in sorted({str(tmp.resolve()), str(tmp)}, key=len, reverse=True):
        text = text.replace(form, "<tmp>")
    return text


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    play(case, tmp_path, monkeypatch)


def test_case_names_are_unique() -> None:
    assert len({c.name for c in CASES}) == len(CASES)


# --- the document ----------------------------------------------------------------

INTRO = """\
# When gemmlab says no

Every error gemmlab reports is one line on stderr: `error:`, what went wrong,
and what to do about it. No traceback, and nothing written on the way: a
command that fails before it runs creates no database or report folder, and a
database it cannot use (corrupt, newer, read-only, locked) is left byte for
byte as it was. Exit codes: 2 for input or setup the user can fix, 3 for a
missing GPU or driver, 4 for a wrong result (see `gemmlab/errors.py`).

This table is generated by `tests/test_errors_doc.py`, which runs every case
and fails when this file no longer matches gemmlab's answers; rewrite it with
`GEMMLAB_WRITE_DOCS=1 python3 -m pytest tests/test_errors_doc.py`. `<tmp>`
stands for the folder the case ran in.
"""


# Outside code spans: `<` (so that `<tmp>` is not taken for an HTML tag), `[`, `*`,
# backslashes, and underscores that could open or close emphasis (not those inside
# a word, as in sm_90, which Markdown leaves alone).
_MARKDOWN = re.compile(r"[<\[*\\]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def _cell(text: str) -> str:
    """Markdown for a table cell: pipes escaped everywhere, the rest outside code spans."""
    parts = text.split("`")
    marked = "`".join(
        part if i % 2 else _MARKDOWN.sub(lambda m: "\\" + m.group(0), part) for i, part in enumerate(parts)
    )
    return marked.replace("|", "\\|")


def render(answers: list[tuple[Case, str]]) -> str:
    lines = [INTRO, "| case | what you did | exit code | what gemmlab answers |", "| --- | --- | --- | --- |"]
    for case, answer in answers:
        did = f"{case.did}: `gemmlab {' '.join(case.argv)}`"
        lines.append(f"| {_cell(case.name)} | {_cell(did)} | {case.code} | {_cell(answer)} |")
    return "\n".join(lines) + "\n"


def test_errors_doc_matches(tmp_path_factory: pytest.TempPathFactory) -> None:
    answers = []
    for case in CASES:
        with pytest.MonkeyPatch.context() as mp:
            answers.append((case, play(case, tmp_path_factory.mktemp("case"), mp)))
    text = render(answers)
    if WRITE_DOCS:
        DOC.write_text(text)
        return
    assert DOC.is_file() and DOC.read_text() == text, (
        f"{DOC} does not match gemmlab's answers; rewrite it with "
        "GEMMLAB_WRITE_DOCS=1 python3 -m pytest tests/test_errors_doc.py"
    )
