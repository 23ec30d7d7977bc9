"""A file's jobs (service/server/files.py) and the store of translated files (filestore.py)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

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


# Replicas sharing file_store_dir: two stores on one directory


def test_a_file_kept_by_one_replica_is_fetched_once_from_another(tmp_path):
    a, b = FileStore(tmp_path, 100, 60), FileStore(tmp_path, 100, 60)
    token = a.put("¿Dónde?".encode(), "a_en.txt", "text/plain")
    stored, data = b.take(token)
    assert (stored.name, stored.media_type, data) == ("a_en.txt", "text/plain", "¿Dónde?".encode())
    assert a.take(token) is None and b.take(token) is None
    assert not list(tmp_path.iterdir())


@pytest.fixture
def switch_often():
    """Threads switch between any two steps of a take, not every 5 ms."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def fetched_at_once(stores: list[FileStore], token: str, count: int) -> list:
    """`count` threads taking `token` at the same moment, from the stores in turn."""
    start, got = threading.Barrier(count), []

    def fetch(store: FileStore) -> None:
        start.wait()
        got.append(store.take(token))

    threads = [threading.Thread(target=fetch, args=(stores[i % len(stores)],)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return got


def test_of_replicas_claiming_one_file_at_once_one_gets_it(tmp_path, switch_often):
    stores = [FileStore(tmp_path, 10_000, 60) for _ in range(2)]
    for _ in range(50):
        got = fetched_at_once(stores, stores[0].put(b"x" * 100, "a", "text/plain"), 8)
        assert sum(found is not None for found in got) == 1
    assert not list(tmp_path.iterdir())


def test_expiry_is_seen_by_every_replica(tmp_path):
    clock = Clock()
    a, b = FileStore(tmp_path, 100, 60, clock=clock), FileStore(tmp_path, 100, 60, clock=clock)
    first, second = a.put(b"12345", "a", "text/plain"), a.put(b"678", "b", "text/plain")
    assert b.size == 8
    clock.now = 61
    assert b.take(first) is None and b.size == 0          # b's sweep removes a's expired file
    assert not list(tmp_path.iterdir()) and a.take(second) is None


def test_the_byte_bound_counts_every_replica_s_files(tmp_path):
    a, b = FileStore(tmp_path, 10, 60), FileStore(tmp_path, 10, 60)
    first = a.put(b"123456", "a", "text/plain")
    second = b.put(b"1234", "b", "text/plain")        # fits beside a's
    third = b.put(b"12345", "c", "text/plain")        # a's, the oldest, goes to make room
    assert a.size == b.size == 9
    assert b.take(first) is None and a.take(second)[1] == b"1234" and a.take(third)[1] == b"12345"
    with pytest.raises(InvalidInput, match="file_store_max_bytes"):
        b.put(b"x" * 11, "d", "text/plain")


def test_a_start_on_a_shared_directory_keeps_the_live_files(tmp_path):
    clock = Clock()
    a = FileStore(tmp_path, 100, 60, clock=clock)
    expired = a.put(b"old", "a", "text/plain")
    clock.now = 30
    live = a.put(b"new", "b", "text/plain")
    clock.now = 61
    a.close()
    # what an interrupted put and an interrupted take left, older than twice the expiry
    stale = time.time() - 121
    for name in (f"{'A' * 32}.0123456789ab.tmp", f"{'B' * 32}.0123456789ab.claimed", f"{'C' * 32}.translated"):
        (tmp_path / name).write_bytes(b"x")
        os.utime(tmp_path / name, (stale, stale))
    writing = tmp_path / f"{'D' * 32}.translated"      # a put between its file and its metadata
    writing.write_bytes(b"x")
    b = FileStore(tmp_path, 100, 60, clock=clock)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live + ".json", live + ".translated", writing.name])
    assert b.take(live)[1] == b"new" and b.take(expired) is None


@pytest.mark.parametrize("token", ["../" + "a" * 29, "a" * 31, "a" * 33, "a" * 27 + ".json", "a/" * 16, ""])
def test_a_token_out_of_the_alphabet_or_length_never_reaches_the_file_system(tmp_path, monkeypatch, token):
    store = FileStore(tmp_path / "files", 100, 60)
    (tmp_path / ("a" * 29 + ".translated")).write_bytes(b"secret")    # where ../ would lead

    def touched(*args, **kwargs):
        raise AssertionError("the file system was touched")

    for name in ("rename", "replace", "listdir", "stat", "open", "unlink"):
        monkeypatch.setattr(os, name, touched)
    monkeypatch.setattr(Path, "read_bytes", touched)
    assert store.take(token) is None
