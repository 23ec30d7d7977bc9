"""Translated files kept for download (LibreTranslate's /translate_file answers a URL):
each under a random token, in one directory, bounded in bytes and in time, and deleted
once fetched.

Why a directory and not memory: a file is kept until its client fetches it, and
`file_store_max_bytes` of them should not sit in the server's heap. The index (token ->
name, type, size, expiry) is in memory: a restart forgets it, and the store removes
what an earlier process left.
"""

from __future__ import annotations

import logging
import secrets
import shutil
import tempfile
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from attnmt.service.errors import InvalidInput, Unavailable

log = logging.getLogger("attnmt")
SUFFIX = ".translated"


@dataclass
class Stored:
    name: str               # the download's file name
    media_type: str
    size: int
    expires: float          # on the store's clock


class FileStore:
    def __init__(self, directory: Path | None, max_bytes: int, expiry_seconds: float,
                 clock: Callable[[], float] = time.monotonic):
        self.max_bytes, self.expiry_seconds, self.clock = max_bytes, expiry_seconds, clock
        self._own = directory is None           # a temporary directory of our own, removed on close
        self.directory = Path(tempfile.mkdtemp(prefix="attnmt-files-")) if directory is None else Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        for left in self.directory.glob("*" + SUFFIX):      # an earlier process's, unreachable now
            left.unlink(missing_ok=True)
        self._index: OrderedDict[str, Stored] = OrderedDict()     # oldest first
        self.size = 0

    def put(self, data: bytes, name: str, media_type: str) -> str:
        """Keep `data` and return its token; the oldest files go to make room. InvalidInput
        for a file larger than the whole store."""
        if len(data) > self.max_bytes:
            raise InvalidInput(f"the translated file is {len(data)} bytes, over file_store_max_bytes "
                               f"({self.max_bytes})")
        self.sweep()
        while self.size + len(data) > self.max_bytes:
            self._remove(next(iter(self._index)))
        token = secrets.token_urlsafe(24)
        try:
            self._path(token).write_bytes(data)
        except OSError as e:            # a full or read-only volume: the server's state, not the caller's file
            self._path(token).unlink(missing_ok=True)
            log.error("file store %s: cannot write a translated file: %s", self.directory, e)
            raise Unavailable(f"the translated file cannot be kept for download: {e.strerror}") from None
        self._index[token] = Stored(name, media_type, len(data), self.clock() + self.expiry_seconds)
        self.size += len(data)
        return token

    def take(self, token: str) -> tuple[Stored, bytes] | None:
        """The file under `token`, removed from the store; None when there is none (never
        stored, fetched already, expired or pushed out)."""
        self.sweep()
        stored = self._index.get(token)
        if stored is None:
            return None
        try:
            data = self._path(token).read_bytes()
        finally:
            self._remove(token)
        return stored, data

    def sweep(self) -> None:
        """Remove the files past their expiry."""
        now = self.clock()
        for token in [t for t, s in self._index.items() if s.expires <= now]:
            self._remove(token)

    def close(self) -> None:
        for token in list(self._index):
            self._remove(token)
        if self._own:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _remove(self, token: str) -> None:
        stored = self._index.pop(token)
        self.size -= stored.size
        self._path(token).unlink(missing_ok=True)

    def _path(self, token: str) -> Path:
        return self.directory / (token + SUFFIX)      # tokens are URL-safe base64: no separator, no dot
