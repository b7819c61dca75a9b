"""The submissions of a class: found in files and folders, hashed (a changed file is a new
attempt), and each kept to its own folder's sources."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gemmlab.core.errors import GemmlabError

KERNEL_SUFFIXES = (".toml", ".py")


@dataclass(frozen=True)
class Submission:
    """One student's kernel: ``kernel`` is the file gemmlab reads (a declaration
    or a Python file); None when the folder holds none (it fails to compile)."""

    name: str
    folder: Path
    kernel: Path | None
    files: tuple[Path, ...]

    @property
    def is_python(self) -> bool:
        """A Python callable: imported only by a process that neither times nor checks it."""
        return self.kernel is not None and self.kernel.suffix == ".py"

    @functools.cached_property
    def source_hash(self) -> str:
        """What a resubmission changes: the bytes of the submission's files."""
        digest = hashlib.sha256()
        for path in self.files:
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
        return digest.hexdigest()[:16]


def find_submissions(paths: Sequence[Path]) -> list[Submission]:
    """The submissions in ``paths``: a kernel file (a .cu finds its .toml), a
    folder that holds one, or a folder of such folders (one per student)."""
    found: list[Submission] = []
    for path in paths:
        if not path.exists():
            raise GemmlabError(f"{path} not found.", "Give submission files or folders that exist.")
        if path.is_file():
            found.append(_file_submission(path))
        elif _kernel_files(path):
            found.append(_folder_submission(path))
        else:
            found += [_folder_submission(sub) for sub in sorted(path.iterdir()) if _is_student(sub)]
    if not found:
        raise GemmlabError(
            f"no submission found in {', '.join(map(str, paths))}.",
            "Give a kernel file, a folder with one, or a folder of such folders (one per student).",
        )
    names = [s.name for s in found]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise GemmlabError(
            f"two submissions are both called {', '.join(twice)}.",
            "A submission is called by its folder's name: give each student a folder of their own.",
        )
    return found


def _is_student(path: Path) -> bool:
    return path.is_dir() and not path.name.startswith((".", "_"))


def _files(folder: Path) -> tuple[Path, ...]:
    return tuple(sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts))


def _kernel_files(folder: Path) -> list[Path]:
    tomls = sorted(folder.glob("*.toml"))
    return tomls or sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))


def _folder_submission(folder: Path) -> Submission:
    kernels = _kernel_files(folder)
    if len(kernels) > 1:
        raise GemmlabError(f"{folder} holds more than one kernel: {', '.join(p.name for p in kernels)}.",
                           "Leave one declaration (.toml) or one Python file in each submission's folder.")  # fmt: skip
    return Submission(folder.name, folder.resolve(), kernels[0].resolve() if kernels else None, _files(folder))


def _file_submission(path: Path) -> Submission:
    kernel = path.with_suffix(".toml") if path.suffix == ".cu" else path
    if kernel.suffix not in KERNEL_SUFFIXES or not kernel.is_file():
        raise GemmlabError(f"{path} is not a kernel gemmlab can grade.",
                           "Give a declaration (.toml, or the .cu beside it) or a Python file.")  # fmt: skip
    # Every file of the folder: whatever the kernel includes lies in it (kernels/spec.py refuses the rest),
    # so a change to any file it compiles is a new attempt.
    return Submission(path.resolve().parent.name, path.resolve().parent, kernel.resolve(), _files(path.parent))


class StageFailed(GemmlabError):
    """A submission that fails a stage for a reason of its own making."""


def confined(spec: Any) -> None:
    """StageFailed when a submission's declaration names a kernel file outside
    its own folder (issue 49: a folder holding only a declaration with
    ``source = "../ctl_cu_tiled/matmul.cu"`` was graded as a classmate's
    kernel). Its includes are confined by the kernel loader (kernels/spec.py)."""
    if spec.declaration is None:
        return
    folder, source = Path(spec.declaration).resolve().parent, Path(spec.source).resolve()
    if not source.is_relative_to(folder):
        raise StageFailed(
            f"the declaration names the kernel file {source}, outside the submission's folder {folder}.",
            'Submit your own kernel: keep its files in your folder and name it there (source = "matmul.cu").',
        )
