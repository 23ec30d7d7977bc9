"""Word-processor documents: Office Open XML (.docx) and OpenDocument Text (.odt), their zip
package through the standard library's zipfile, their XML through lxml (BSD).

Each paragraph with text is one entry of the HTML mode; its runs come back around the
translated words with their original properties, and every other entry of the package is
written back as read, in its order. A file that is not such a package, or is one past the
limits, is refused (InvalidInput) before anything is inflated.

- package.py: the zip package, its refusals (zip bomb, encryption, duplicate names, the
  unpacked budget) and its writing back;
- paragraph.py: a paragraph as an HTML entry (runs as tags, other elements as atoms), and a
  translation's tags back into pieces;
- document.py: the FileDocument both formats give the core;
- docx.py (WordprocessingML) and odt.py (OpenDocument): what each format translates, and how
  its runs are read and rebuilt.
"""

from attnmt.service.text.files.office.document import OfficeFile
from attnmt.service.text.files.office.docx import (
    DOCX_BREAKS,
    DOCX_MARKERS,
    DOCX_TABS,
    DOCX_TYPE,
    DOCX_WRAPPERS,
    XML_SPACE,
    W,
    read_docx,
)
from attnmt.service.text.files.office.odt import ODT_TYPE, OFFICE, STYLE, TEXT, read_odt
from attnmt.service.text.files.office.package import (
    ENCRYPTED_ZIP,
    MAX_ENTRIES,
    MAX_RATIO,
    OLE,
    RATIO_FROM,
    ZIP64_EXTRA,
    Package,
)
from attnmt.service.text.files.office.paragraph import Paragraph, Piece

# the names office.py had when it was one module
__all__ = ["DOCX_BREAKS", "DOCX_MARKERS", "DOCX_TABS", "DOCX_TYPE", "DOCX_WRAPPERS", "ENCRYPTED_ZIP", "MAX_ENTRIES",
           "MAX_RATIO", "ODT_TYPE", "OFFICE", "OLE", "OfficeFile", "Package", "Paragraph", "Piece", "RATIO_FROM",
           "STYLE", "TEXT", "W", "XML_SPACE", "ZIP64_EXTRA", "read_docx", "read_odt"]
