"""The tamper check: the grader signs each grades row it writes with a key of its own,
so a row another process wrote or changed (a submission's code can reach the database)
is told apart and named, never counted."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

from gemmlab.store.records import Grade

# The stage and grade shown for a grades row the grader did not write as it is
# (see trusted): named on that row, never blamed on another submission.
TAMPERED = "isolation"
# Where the grader keeps the key it signs verdicts with (default
# ~/.config/gemmlab/grader.key, made on first use, readable by its owner only).
KEY_VARIABLE = "GEMMLAB_GRADER_KEY"


def key_path() -> Path:
    if os.environ.get(KEY_VARIABLE):
        return Path(os.environ[KEY_VARIABLE])
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return config / "gemmlab" / "grader.key"


def grader_key() -> bytes:
    """The grader's signing key, made (32 random bytes, mode 0600) if there is none."""
    path = key_path()
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another grading process made it meanwhile
            pass
        else:
            with os.fdopen(handle, "wb") as out:
                out.write(secrets.token_bytes(32))
    return path.read_bytes()


def signature(row: Grade, key: bytes) -> str:
    """The HMAC-SHA256 of a grades row's fields (all but the signature itself)."""
    return hmac.new(key, json.dumps(row.signed(), sort_keys=True, default=str).encode(), hashlib.sha256).hexdigest()


def trusted(row: Grade, key: bytes, signed_from: int) -> bool | None:
    """Whether the grader wrote ``row`` as it is: True (its signature holds),
    False (changed or forged: another process wrote it), None (it predates
    signatures, schema v14: nothing can be said)."""
    if row.id is None or row.id < signed_from:
        return None
    return hmac.compare_digest(str(row.signature or ""), signature(row, key))
