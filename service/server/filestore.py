"""Translated files kept for download (LibreTranslate's /translate_file answers a URL):
each under a random token, in one directory, bounded in bytes and in time, and deleted
once fetched.

Why a directory and not memory: a file is kept until its client fetches it, and
`file_store_max_bytes` of them should not sit in the server's heap.

The directory is the whole store, with no index in memory, so replicas that share it (a
ReadWriteMany volume) serve each other's files. A file is `<token>.translated` with
`<token>.json` beside it (download name, media type, size, expiry in wall-clock epoch
seconds: replicas share no monotonic clock), each written under a temporary name and
renamed into place, the metadata last: whoever finds the metadata finds the whole file. A
download claims the file by renaming it to a name of its own store; of two replicas renaming
one file at once the rename succeeds for one, which answers with the file, and the other
answers as for an unknown token. Any replica removes expired files, and a put reads every metadata file to
count the directory's bytes (about 0.02 ms a file on local disk).

A directory of our own (`file_store_dir` unset) is new at start and removed at shutdown. A
named one may hold other replicas' live files: a start removes only the expired ones and
what interrupted writes and claims left.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from attnmt.service.errors import InvalidInput, Unavailable

log = logging.getLogger("attnmt")
SUFFIX = ".translated"
META = ".json"
TOKEN = re.compile(r"[A-Za-z0-9_-]{32}")        # secrets.token_urlsafe(24): no separator, no dot
LEFTOVERS = ("translated", "claimed", "tmp")      # the ends of names an interrupted put or take leaves


@dataclass
class Stored:
    name: str               # the download's file name
    media_type: str
    size: int
    expires: float          # wall-clock epoch seconds (the store's clock)
    kept: float             # time.time() at put: the order the oldest go in to make room


class FileStore:
    def __init__(self, directory: Path | None, max_bytes: int, expiry_seconds: float,
                 clock: Callable[[], float] = time.time):
        self.max_bytes, self.expiry_seconds, self.clock = max_bytes, expiry_seconds, clock
        self._own = directory is None           # a temporary directory of our own, removed on close
        self.directory = Path(tempfile.mkdtemp(prefix="attnmt-files-")) if directory is None else Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._tag = secrets.token_hex(6)        # in this store's temporary and claimed names
        self.sweep()

    @property
    def size(self) -> int:
        """Bytes in the directory's unexpired files, every replica's."""
        return sum(s.size for s in self._live().values())

    def put(self, data: bytes, name: str, media_type: str) -> str:
        """Keep `data` and return its token; the oldest files go to make room. InvalidInput
        for a file larger than the whole store."""
        if len(data) > self.max_bytes:
            raise InvalidInput(f"the translated file is {len(data)} bytes, over file_store_max_bytes "
                               f"({self.max_bytes})")
        token = secrets.token_urlsafe(24)
        try:
            live = self._live()
            held = sum(s.size for s in live.values())
            for old, stored in sorted(live.items(), key=lambda item: item[1].kept):
                if held + len(data) <= self.max_bytes:
                    break
                self._remove(old, expired=False)
                held -= stored.size
            stored = Stored(name, media_type, len(data), self.clock() + self.expiry_seconds, time.time())
            self._write(token + SUFFIX, data)
            self._write(token + META, json.dumps(asdict(stored)).encode())
        except OSError as e:            # a full or read-only volume: the server's state, not the caller's file
            (self.directory / (token + SUFFIX)).unlink(missing_ok=True)
            log.error("file store %s: cannot keep a translated file: %s", self.directory, e)
            raise Unavailable(f"the translated file cannot be kept for download: {e.strerror}") from None
        return token

    def take(self, token: str) -> tuple[Stored, bytes] | None:
        """The file under `token`, removed from the store; None when there is none (never
        stored, fetched already, here or by another replica, expired or pushed out)."""
        if not TOKEN.fullmatch(token):      # before any path is made of it
            return None
        claimed = self._claim(token)
        if claimed is None:
            return None
        try:
            stored = self._metadata(token)
            if stored is None or stored.expires <= self.clock():
                return None
            return stored, claimed.read_bytes()
        except FileNotFoundError:           # a sweep took the claim for a leftover: only after 2 expiries
            return None
        finally:
            claimed.unlink(missing_ok=True)
            (self.directory / (token + META)).unlink(missing_ok=True)

    def sweep(self) -> None:
        """Remove the expired files, every replica's, and what interrupted puts and takes left."""
        self._live()

    def close(self) -> None:
        """Remove a directory of our own; a named one keeps its files for the other replicas
        (or the next start), each until fetched or expired."""
        if self._own:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _live(self) -> dict[str, Stored]:
        """The unexpired files by token, after removing the expired ones and the leftovers."""
        names, now, live = set(os.listdir(self.directory)), self.clock(), {}
        for name in names:
            token, _, end = name.partition(".")
            if "." + end == META and TOKEN.fullmatch(token):
                stored = self._metadata(token)
                if stored is not None and stored.expires > now:
                    live[token] = stored
                elif stored is not None:
                    self._remove(token, expired=True)
                elif self._left_over(name):         # unreadable, and for long
                    (self.directory / name).unlink(missing_ok=True)
            elif end.endswith(LEFTOVERS) and token + META not in names and self._left_over(name):
                (self.directory / name).unlink(missing_ok=True)
        return live

    def _left_over(self, name: str) -> bool:
        """A file no put or take is still writing or reading: under a name no token makes, or
        older than twice the expiry (a claim keeps the file's time, and is made within the
        expiry). The file system's clock, not the store's."""
        if not TOKEN.fullmatch(name.partition(".")[0]):
            return True
        try:
            return time.time() - (self.directory / name).stat().st_mtime > 2 * self.expiry_seconds
        except FileNotFoundError:
            return False

    def _remove(self, token: str, expired: bool) -> None:
        claimed = self._claim(token)
        if claimed is not None:
            claimed.unlink(missing_ok=True)
        # A claim lost to a download leaves it the metadata, which it reads next; an expired
        # file's is of no use to anyone
        if claimed is not None or expired:
            (self.directory / (token + META)).unlink(missing_ok=True)

    def _claim(self, token: str) -> Path | None:
        """The file under `token` renamed to a name of ours, or None when it is gone: of several
        replicas claiming one file at once, the rename succeeds for one."""
        claimed = self.directory / f"{token}.{self._tag}.claimed"
        try:
            os.rename(self.directory / (token + SUFFIX), claimed)
        except FileNotFoundError:
            return None
        return claimed

    def _metadata(self, token: str) -> Stored | None:
        try:
            return Stored(**json.loads((self.directory / (token + META)).read_bytes()))
        except FileNotFoundError:           # removed under us by a download or another replica's sweep
            return None
        except (ValueError, TypeError) as e:        # written by something else: not a file of ours
            log.warning("file store %s: unreadable %s%s: %s", self.directory, token, META, e)
            return None

    def _write(self, name: str, data: bytes) -> None:
        """`data` under `name`, whole or not at all: written beside it, then renamed."""
        temp = self.directory / f"{name.partition('.')[0]}.{self._tag}.tmp"
        try:
            temp.write_bytes(data)
            os.replace(temp, self.directory / name)
        finally:
            temp.unlink(missing_ok=True)
