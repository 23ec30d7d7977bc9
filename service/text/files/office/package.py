"""The zip package of an office document, read through the standard library's zipfile and
written back entry by entry.

`Package(data, limits, what)` refuses (InvalidInput, naming `what`) a file that is not a
package it may open, before anything is inflated: an OLE file (a password-protected .docx,
a .doc), no zip, too many entries, two entries of one name, more unpacked bytes than
`limits.max_unpacked_bytes`, an encrypted entry, an absurd compression ratio. `read` and
`parse` are bounded by the unpacked bytes left, whatever the sizes declared; `parse` reads
XML without entities, DTDs or the network and refuses a part with a DTD. `repack` writes
every entry back in its order, with its name, compression, date and attributes: the parts
given re-serialised, every other one's bytes as read (inflated and deflated again with the
same method; an .odt's `mimetype` stays first and stored, as it came).
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

from lxml import etree

from attnmt.service.errors import InvalidInput
from attnmt.service.text.files.base import Check, Limits, go_on, safe_xml_parser

# Zip-bomb limits beside Limits.max_unpacked_bytes: a document with its images has tens to
# hundreds of entries; XML deflates 5-20:1, and Apache POI refuses past 100:1 (ZipSecureFile)
MAX_ENTRIES = 5000
MAX_RATIO = 100
RATIO_FROM = 1 << 20            # smaller entries may deflate better, and inflate to little anyway
ENCRYPTED_ZIP = 0x1             # general purpose flag bit 0
ZIP64_EXTRA = 0x0001            # rewritten by zipfile where needed, never copied
OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"     # a password-protected .docx, or a .doc


class Package:
    """A zip package, checked for bombs before anything is inflated. `names`: its entries'
    names, in their order."""

    def __init__(self, data: bytes, limits: Limits, what: str):
        self.what = what
        if data.startswith(OLE):
            raise InvalidInput(f"the file is not a {what}: it is an encrypted (password-protected) document or "
                               "an old binary one (.doc); save it as a document without a password")
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
        except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError, struct.error) as e:
            raise InvalidInput(f"the file is not a {what}: it is not a zip package ({e})") from None
        self.infos = self.zip.infolist()
        self.names = [info.filename for info in self.infos]
        if len(self.infos) > MAX_ENTRIES:
            raise InvalidInput(f"the {what} has {len(self.infos)} zip entries, over the limit of {MAX_ENTRIES}")
        if len(set(self.names)) != len(self.names):
            raise InvalidInput(f"the file is not a {what}: two zip entries share a name")
        unpacked = sum(info.file_size for info in self.infos)
        if unpacked > limits.max_unpacked_bytes:
            raise InvalidInput(f"the {what} unpacks to {unpacked} bytes, over the limit of "
                               f"{limits.max_unpacked_bytes} (max_unpacked_bytes)")
        for info in self.infos:
            if info.flag_bits & ENCRYPTED_ZIP:
                raise InvalidInput(f"the {what} is encrypted (password-protected): save it without a password")
            if info.file_size > RATIO_FROM and info.file_size > MAX_RATIO * max(info.compress_size, 1):
                raise InvalidInput(f"the {what} is refused: its entry {info.filename} inflates "
                                   f"{info.file_size // max(info.compress_size, 1)}:1, over the limit of "
                                   f"{MAX_RATIO}:1 (a zip bomb?)")
        self.limit = limits.max_unpacked_bytes
        self.left = self.limit          # bytes any more reads may inflate

    def read(self, name: str) -> bytes:
        """An entry's bytes, never more than the unpacked limit left, whatever its declared size."""
        try:
            with self.zip.open(name) as entry:
                data = entry.read(self.left + 1)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, ValueError, EOFError, OSError, RuntimeError,
                NotImplementedError) as e:      # a bad CRC or stream, a password asked, an unknown compression
            raise InvalidInput(f"the {self.what} is damaged: its entry {name} cannot be read ({e})") from None
        if len(data) > self.left:
            raise InvalidInput(f"the {self.what} unpacks to more than the limit of {self.left} bytes "
                               f"(max_unpacked_bytes) at its entry {name}")
        self.left -= len(data)
        return data

    def parse(self, name: str) -> etree._ElementTree:
        """An XML part's tree; InvalidInput where it is not well-formed or declares a DTD."""
        data = self.read(name)
        refused = InvalidInput(f"the {self.what} is refused: its part {name} declares a DTD, which none has "
                               "(its entities are not read)")
        if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
            raise refused
        parser = safe_xml_parser()
        try:
            tree = etree.fromstring(data, parser).getroottree()
        except etree.XMLSyntaxError as e:
            raise InvalidInput(f"the file is not a {self.what}: its part {name} is not well-formed XML: {e}") from None
        if tree.docinfo.doctype or tree.docinfo.internalDTD is not None:
            raise refused           # spelt in an encoding other than UTF-8
        return tree

    def repack(self, replaced: dict[str, bytes], check: Check = go_on) -> bytes:
        """The package with the entries in `replaced` replaced, every other one as read
        (`check` called before each)."""
        self.left = self.limit
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as packed:
            for info in self.infos:
                check()
                data = replaced[info.filename] if info.filename in replaced else self.read(info.filename)
                packed.writestr(_entry(info), data)
            packed.comment = self.zip.comment
        return out.getvalue()


def _entry(info: zipfile.ZipInfo) -> zipfile.ZipInfo:
    """A fresh ZipInfo with `info`'s name, date, compression and attributes."""
    made = zipfile.ZipInfo(info.filename, info.date_time)
    made.compress_type, made.comment = info.compress_type, info.comment
    made.create_system, made.external_attr, made.internal_attr = (info.create_system, info.external_attr,
                                                                  info.internal_attr)
    extra, at = [], 0
    while at + 4 <= len(info.extra):
        kind, size = struct.unpack_from("<HH", info.extra, at)
        if kind != ZIP64_EXTRA:
            extra.append(info.extra[at:at + 4 + size])
        at += 4 + size
    made.extra = b"".join(extra)
    return made
