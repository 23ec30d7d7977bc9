"""A file's jobs (service/server/files.py) and the store of translated files (filestore.py)."""

from __future__ import annotations

import pytest

from attnmt.service.errors import InvalidInput
from attnmt.service.server.files import plan
from attnmt.service.server.filestore import FileStore


def test_jobs_hold_the_entries_and_sentences_allowed():
    assert plan([1, 1, 1, 1, 1], max_entries=2, max_sentences=10) == [range(0, 2), range(2, 4), range(4, 5)]
    assert plan([3, 3, 3, 20, 1], max_entries=64, max_sentences=7) == [range(0, 2), range(2, 3), range(3, 4),
                                                                         range(4, 5)]
    assert plan([], 64, 256) == []


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_file_is_fetched_once(tmp_path):
    store = FileStore(tmp_path, max_bytes=100, expiry_seconds=60)
    token = store.put(b"hello", "a_en.txt", "text/plain")
    stored, data = store.take(token)
    assert (stored.name, data) == ("a_en.txt", b"hello")
    assert store.take(token) is None and not list(tmp_path.iterdir())


def test_files_expire_and_make_room(tmp_path):
    clock = Clock()
    store = FileStore(tmp_path, max_bytes=10, expiry_seconds=60, clock=clock)
    first = store.put(b"12345", "a", "text/plain")
    second = store.put(b"12345", "b", "text/plain")
    third = store.put(b"123", "c", "text/plain")          # the oldest goes to make room
    assert store.take(first) is None and store.size == 8
    clock.now = 61
    assert store.take(second) is None and store.take(third) is None and store.size == 0
    assert not list(tmp_path.iterdir())
    with pytest.raises(InvalidInput, match="file_store_max_bytes"):
        store.put(b"x" * 11, "d", "text/plain")


def test_an_own_directory_is_removed_and_leftovers_cleared(tmp_path):
    (tmp_path / "old.translated").write_bytes(b"x")
    (tmp_path / "keep.txt").write_bytes(b"x")
    FileStore(tmp_path, 10, 60)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
    store = FileStore(None, 10, 60)
    store.put(b"abc", "a", "text/plain")
    store.close()
    assert not store.directory.exists()
