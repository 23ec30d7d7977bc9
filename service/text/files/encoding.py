"""Bytes to text: a byte-order mark, else UTF-8, else the encoding a file declares, else
charset-normalizer's guess (MIT; the detector requests uses, kept up by its author). Bytes
that none of them reads as text are refused."""

from __future__ import annotations

import codecs
import re

import charset_normalizer

from attnmt.service.errors import InvalidInput

BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
# C0 controls other than tab, line feed, form feed and carriage return: not text
_BINARY = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f]")


def decode(data: bytes, declared: str | None = None) -> str:
    """The text of `data`; `declared`: the encoding the file names for itself (a .po's charset)."""
    for bom, name in BOMS:
        if data.startswith(bom):
            return _checked(_strict(data, name))
    candidates = ["utf-8"] + ([declared] if declared else [])
    for name in candidates:
        text = _strict(data, name)
        if text is not None:
            return _checked(text)
    guess = charset_normalizer.from_bytes(data).best()
    return _checked(str(guess) if guess is not None else None)


def _strict(data: bytes, name: str) -> str | None:
    try:
        return data.decode(name)
    except (UnicodeDecodeError, LookupError):
        return None


def _checked(text: str | None) -> str:
    if text is None or _BINARY.search(text):
        raise InvalidInput("the file's bytes do not decode as text in any encoding tried (UTF-8, the one it "
                           "declares, charset-normalizer's guess)")
    return text
