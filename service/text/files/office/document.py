"""An office document read: its paragraphs' HTML entries to translate, and the writer that
puts their translations back into the XML parts and the zip package."""

from __future__ import annotations

from typing import Callable

from lxml import etree

from attnmt.service.text.files.base import Check, FileDocument, go_on
from attnmt.service.text.files.office.package import Package
from attnmt.service.text.files.office.paragraph import Paragraph, Piece

# (a paragraph, its translated pieces, the target language) -> the paragraph's element rewritten
Rebuild = Callable[[Paragraph, list[Piece], str], None]


class OfficeFile(FileDocument):
    """`texts`: one HTML entry per paragraph with text, in the order of `paragraphs` (the
    parts in the order the format's reader gave them). `write` rebuilds each translated
    paragraph with the format's `rebuild` and repacks the package, re-serialising only the
    parts it changed."""

    def __init__(self, kind: str, media_type: str, package: Package, trees: dict[str, etree._ElementTree],
                 paragraphs: list[tuple[str, Paragraph]], rebuild: Rebuild, check: Check = go_on):
        self.package, self.trees, self.rebuild = package, trees, rebuild
        # (part, paragraph) for each text, in order
        self.paragraphs = [(name, p) for name, p in paragraphs if p.text().strip()]
        texts = []
        for _, paragraph in self.paragraphs:
            check()
            texts.append(paragraph.html())
        super().__init__(kind, media_type, texts, html=True)

    def write(self, translations, target, placeholders=None, check=go_on) -> bytes:
        self.untranslated = 0
        changed = set()
        for (name, paragraph), translation in zip(self.paragraphs, translations):
            check()
            if not translation.strip():
                self.untranslated += 1
                continue
            pieces = paragraph.translated(translation) or paragraph.fallback(translation)
            self.rebuild(paragraph, pieces, target)
            changed.add(name)
        return self.package.repack({name: _serialised(self.trees[name]) for name in changed}, check)


def _serialised(tree: etree._ElementTree) -> bytes:
    return etree.tostring(tree, xml_declaration=True, encoding="UTF-8", standalone=tree.docinfo.standalone)
