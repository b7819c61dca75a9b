"""Files a user names with --out: the path checked before any work, the
folders it lacks created, and the file written whole or not at all.

The file is filled under a temporary name in its own folder, then renamed over
the path. A rename within one file system replaces the old file in one step,
so a full disk, a Ctrl-C or a crash half-way leaves the old file as it was and
no half-written one in its place. A path that exists and is neither a file nor
a folder (``/dev/null``, a named pipe) is written in place: renaming over it
would replace the device or the pipe. ``-`` means standard output; the command
that takes it writes there itself (:func:`is_stdout`).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from gemmlab.core.errors import GemmlabError

STDOUT = "-"


class OutputError(GemmlabError):
    """A file gemmlab was asked to write (--out) that cannot be written there."""


def is_stdout(path: str | Path) -> bool:
    return str(path) == STDOUT


def check_output(path: Path, flag: str = "--out", example: str = "results.csv") -> None:
    """Refuse, before any work and without writing anything, a path that
    cannot become a file: a folder, a path through a file, a folder that may
    not be written. Missing folders pass: :func:`write_file` creates them."""
    try:
        if path.is_dir():
            raise OutputError(f"{flag} {path} is a folder, and a file name is needed.",
                              f"Name a file in it, e.g. {flag} {path / example}.")  # fmt: skip
        if path.is_file() and not (os.access(path, os.W_OK) and stat.S_IMODE(path.stat().st_mode) & 0o222):
            # The rename would replace it all the same (the folder is what it needs), but whoever
            # marked the file read-only meant it to stay; the bits are read for root's sake too.
            raise OutputError(
                f"{path} is read-only.", f"Make it writable (chmod u+w {path}), or give {flag} another path."
            )
        # The nearest folder that exists ("." or "/" at worst) is where the missing ones will be made.
        nearest = next(p for p in path.parents if p.exists())
        if not nearest.is_dir():
            # mkdir would only say "File exists" or "Not a directory"; name the file in the way.
            raise OutputError(
                f"Cannot write {path}: {nearest} is a file, not a folder.",
                f"Give {flag} a path in a folder (e.g. {flag} {path.name}), or move {nearest} away.",
            )
        if not os.access(nearest, os.W_OK | os.X_OK):
            raise OutputError(f"Cannot write {path}: the folder {nearest} is not writable.", _fix(flag))
    except OSError as exc:  # a folder on the way that may not be read
        raise _cannot_write(path, exc, flag, existed=False) from None


def write_file(path: Path, write: Callable[[Path], object], flag: str = "--out") -> Path:
    """Write ``path`` whole or not at all: ``write`` fills the file it is
    given (a temporary one beside ``path``), which then replaces ``path``.
    Folders ``path`` lacks are created (and removed again if the write fails).
    An OSError becomes an :class:`OutputError` naming the path and the fix;
    anything else ``write`` raises passes through, with nothing left behind."""
    check_output(path, flag)
    if path.is_symlink():  # replace the file the link names, not the link
        path = Path(os.path.realpath(path))
    existed = path.exists()
    if existed and not path.is_file():
        try:
            write(path)
        except OSError as exc:
            raise _cannot_write(path, exc, flag, existed=False) from None
        return path
    created = next((p for p in reversed(path.parents) if not p.exists()), None)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(handle)
        tmp = Path(name)
        write(tmp)
        _sync(tmp)
        # mkstemp's file is private (0600); the result gets the old file's mode, or a new file's.
        os.chmod(tmp, stat.S_IMODE(path.stat().st_mode) if existed else 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        if isinstance(exc, OSError):
            raise _cannot_write(path, exc, flag, existed) from None
        raise
    return path


def write_text(path: Path, text: str, flag: str = "--out") -> Path:
    """:func:`write_file` of a text (UTF-8)."""
    return write_file(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), flag)


def _sync(path: Path) -> None:
    """Put the file's bytes on the disk before the rename makes it the file,
    so that a crash cannot leave the new name over an empty file. A full disk
    may only show here."""
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fix(flag: str) -> str:
    return f"Give {flag} a path in a folder you can write."


def _cannot_write(path: Path, exc: OSError, flag: str, existed: bool) -> OutputError:
    """One sentence of cause, one of fix, for what the system said."""
    kept = f"{path} is left as it was." if existed else "Nothing was written."
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return OutputError(
            f"Cannot write {path}: its disk is full ({exc.strerror}).",
            f"Free some space there, or give {flag} a path on another disk. {kept}",
        )
    return OutputError(f"Cannot write {path}: {exc.strerror or exc}.", f"{_fix(flag)} {kept}")
