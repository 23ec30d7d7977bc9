"""A translated file answered as a download: the `Content-Disposition` both file routes send
(`POST /v1/translate_file`, LibreTranslate's `GET /download_file/<token>`).

A header is Latin-1 on the wire, and a file's name may be any text (`文件.txt` becomes
`文件_en.txt`), so the name goes twice, as RFC 6266 advises: `filename="..."`, an ASCII
stand-in every client reads, and `filename*=UTF-8''...`, the name itself percent-encoded
(RFC 5987), which clients that know it prefer. Starlette's FileResponse writes the latter
alone, for a file on disk; werkzeug's send_file writes both, but is not a dependency here.
"""

from __future__ import annotations

import unicodedata
from urllib.parse import quote

# what a quoted-string may hold as it is: printable ASCII, less its own quote and escape
_PLAIN = {chr(c) for c in range(0x20, 0x7f)} - {'"', "\\"}


def attachment(name: str) -> str:
    """`Content-Disposition` for a download named `name`."""
    if all(c in _PLAIN for c in name):
        return f'attachment; filename="{name}"'
    # "Canción.txt" -> "Cancion.txt": accents dropped; what has no ASCII form becomes "_"
    ascii_name = "".join(c if c in _PLAIN else "_" for c in unicodedata.normalize("NFKD", name)
                         if not unicodedata.combining(c))
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name, safe='')}"
