"""Files translated with their formatting kept: a file's bytes become the texts to translate
(`FileDocument.texts`, each an entry of the documents mode, service/text/documents.py), and
their translations are written back into the file's own structure (`FileDocument.write`).

One module per family: plain.py (.txt), html.py (.html, .htm), subtitles.py and cues.py (.srt, .vtt),
gettext.py (.po, .pot), xliff.py (.xlf, .xliff), office/ (.docx, .odt). Reading refuses
(InvalidInput) what is not a file of its extension: an unknown extension (naming the ones
served), no bytes, bytes that do not decode (encoding.py), a structure its parser does not
take, a zip package past its limits. Nothing here schedules or stores: the core splits a
file's texts into jobs (service/server/files.py).

A file of the largest size takes seconds to read and to write (a 1 MiB page 5 s to read, a
.docx of 200,000 paragraphs 17 s to read and 13 s to write; 2 cores, 2026-11-29), so `read`
and `write` take a `check` (base.Check), which the readers and writers call between their
steps: the server's stops the work at the call's deadline.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Callable

from attnmt.service.errors import InvalidInput
from attnmt.service.text.files import gettext, html, office, plain, subtitles, xliff
from attnmt.service.text.files.base import Check, FileDocument, Limits, go_on

# extension -> its reader: (the file's bytes, the limits, a check) -> FileDocument
READERS: dict[str, Callable[[bytes, Limits, Check], FileDocument]] = {
    ".txt": plain.read_text, ".html": html.read_html, ".htm": html.read_html,
    ".srt": subtitles.read_srt, ".vtt": subtitles.read_vtt,
    ".po": gettext.read, ".pot": gettext.read,
    ".xlf": xliff.read, ".xliff": xliff.read,
    ".docx": office.read_docx, ".odt": office.read_odt,
}
EXTENSIONS = tuple(READERS)     # LibreTranslate's `supportedFilesFormat`


def extension(name: str) -> str:
    """The extension a file name ends in, lower-cased ('' without one)."""
    return PurePosixPath(name.replace("\\", "/")).suffix.lower()


def check_format(name: str) -> None:
    """InvalidInput naming the formats served, unless `name` ends in one of their extensions."""
    if extension(name) not in READERS:
        raise InvalidInput(f"file format not supported ({extension(name) or 'no extension'}); "
                           f"served: {', '.join(EXTENSIONS)}")


def read(name: str, data: bytes, limits: Limits, check: Check = go_on) -> FileDocument:
    """The file `name` holding `data`, ready to translate; InvalidInput for what cannot be."""
    check_format(name)
    reader = READERS[extension(name)]
    if len(data) > limits.max_bytes:
        raise InvalidInput(f"the file is {len(data)} bytes, over the limit of {limits.max_bytes} (max_file_bytes)")
    if not data.strip():
        raise InvalidInput("the file is empty")
    return reader(data, limits, check)


def translate_texts(document: FileDocument, translate: Callable[[list[str], bool], list[str]], chunk: int = 64,
                    progress: Callable[[int, int], None] | None = None) -> list[str]:
    """The document's texts translated `chunk` at a time by translate(texts, html), in order;
    progress(done, texts) after each chunk. The offline path's loop (`attnmt translate --file`
    and what measures it); the server plans its own jobs (service/server/files.py)."""
    translations: list[str] = []
    for start in range(0, len(document.texts), chunk):
        translations += translate(document.texts[start:start + chunk], document.html)
        if progress is not None:
            progress(len(translations), len(document.texts))
    return translations


def translated_name(name: str, target: str) -> str:
    """LibreTranslate's name for the translation of `name`: `guide.po` -> `guide_en.po`."""
    path = PurePosixPath(name.replace("\\", "/").rsplit("/", 1)[-1])
    stem = "".join(c for c in path.stem if c.isalnum() or c in "-_.") or "file"
    return f"{stem}_{target}{path.suffix.lower()}"


__all__ = ["EXTENSIONS", "Check", "FileDocument", "Limits", "check_format", "extension", "go_on", "read",
           "translate_texts", "translated_name"]
