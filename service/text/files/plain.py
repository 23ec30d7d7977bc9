"""Plain text files: the documents mode as it is (service/text/documents.py).

A .txt is cut into paragraphs (a blank line ends one), each an entry split into sentences
with its line breaks kept, so the file comes back line for line; a paragraph over the
entry limits is cut at line breaks (and a line over them at a space). HTML is html.py's.
"""

from __future__ import annotations

from attnmt.service.text.files.base import Check, FileDocument, Limits, go_on
from attnmt.service.text.files.encoding import decode


class TextFile(FileDocument):
    def write(self, translations, target, placeholders=None, check=go_on) -> bytes:
        # each paragraph's translation keeps its own whitespace and line breaks (documents.Layout)
        return "".join(translations).encode("utf-8")


def read_text(data: bytes, limits: Limits, check: Check = go_on) -> TextFile:
    """The text's paragraphs; `check` goes unused: 5 MB are read in 0.14 s."""
    return TextFile("txt", "text/plain; charset=utf-8", paragraphs(decode(data), limits))


def paragraphs(text: str, limits: Limits) -> list[str]:
    """`text` cut into entries that join back to it: after each blank line, and where an entry
    would pass the limits."""
    entries: list[str] = []
    current: list[str] = []
    size = 0
    for line in _lines(text, limits.max_entry_chars):
        if current and (size + len(line) > limits.max_entry_chars or len(current) >= limits.max_entry_lines):
            entries.append("".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line)
        if not line.strip():            # a blank line ends the paragraph
            entries.append("".join(current))
            current, size = [], 0
    if current:
        entries.append("".join(current))
    return entries


def _lines(text: str, max_chars: int):
    """The lines of `text` with their ends, a line over `max_chars` cut after a space."""
    for line in text.splitlines(keepends=True):
        while len(line) > max_chars:
            cut = line.rfind(" ", 0, max_chars) + 1 or max_chars
            yield line[:cut]
            line = line[cut:]
        yield line
