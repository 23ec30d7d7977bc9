"""What every file format gives the core: texts to translate, and a writer for their translations."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from lxml import etree

# Called between the steps of a long read or write; what it raises (DeadlineExceeded once the
# call's deadline has passed) stops the work.
Check = Callable[[], None]


def go_on() -> None:
    """The check of work that has no deadline: it never stops it."""


@dataclass(frozen=True)
class Limits:
    max_bytes: int             # the file (max_file_bytes)
    max_entry_chars: int       # one text (max_document_chars): longer plain text is cut at line breaks
    max_entry_lines: int       # lines in one text of a .txt (a line is at least one sentence)
    # what a zipped file (.docx, .odt) may inflate to, all its entries together: its bytes are
    # capped by max_bytes, but a zip bomb inflates a few KB to gigabytes
    max_unpacked_bytes: int = 64 * 2**20
    max_entry_sentences: int = 256  # sentences in one text of an .html (max_document_sentences), counted high
    # an .html is parsed whole in Python to be cut into entries: about 5 s and 150 MB a MiB (2 cores,
    # 2026-11-28), so it has a cap of its own below max_bytes (max_html_file_bytes)
    max_html_bytes: int = 2**20


@dataclass
class FileDocument:
    """A file read: `texts` to translate, each an entry of the documents mode (HTML when
    `html`, else plain text split into sentences), and `write`, which puts their translations
    back. `untranslated` counts the texts `write` left as they were (a .po entry whose
    placeholders did not survive)."""
    kind: str                          # "txt", "html", "srt", "vtt", "po", "xliff", "docx", "odt"
    media_type: str
    texts: list[str]
    html: bool = False
    untranslated: int = field(default=0, init=False)

    def write(self, translations: list[str], target: str, placeholders: re.Pattern | None = None,
              check: Check = go_on) -> bytes:
        """The file with `translations[i]` in place of `texts[i]`, for the target language
        `target`; `placeholders`: the spans a translation must keep (the served model's pattern);
        `check`: called between the steps of a long write."""
        raise NotImplementedError


def safe_xml_parser(**options) -> etree.XMLParser:
    """lxml's parser with no entity expansion, DTD or network, and no huge trees (the XML
    formats: XLIFF, Office Open XML, OpenDocument); `options` add the format's own."""
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False, **options)


def local_name(element) -> str:
    """An element's name without its namespace; '' for a comment or a processing instruction."""
    return etree.QName(element).localname if isinstance(element.tag, str) else ""
