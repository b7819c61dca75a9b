"""Reading a user's text file as editors write them: UTF-8 with or without a
byte-order mark (Notepad writes one), UTF-16 with its mark, or an 8-bit
encoding such as Latin-1 (a `// Autor: José Müller` comment); what holds NUL
bytes without a UTF-16 mark is not text."""

from __future__ import annotations

import codecs
from pathlib import Path

from gemmlab.core.errors import GemmlabError


class NotText(GemmlabError):
    """A file gemmlab must read as text that is not text."""


def read_text(path: Path | str, what: str = "file") -> str:
    """The text of ``path``, decoded as its bytes say; NotText naming the file
    and the fix for one that is not text. OSError as ``Path.read_bytes``."""
    data = Path(path).read_bytes()
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            pass
    elif b"\0" not in data:
        try:
            return data.decode("utf-8-sig")  # a byte-order mark, if there is one, is not part of the text
        except UnicodeDecodeError:
            return data.decode("latin-1")  # every byte is a character: comments in an 8-bit encoding survive
    raise NotText(
        f"{path} is not a text file (it holds NUL bytes and no UTF-16 byte-order mark), so it cannot be the {what}.",
        "Give the kernel's source or declaration as text, saved as UTF-8 (any editor's default).",
    )
