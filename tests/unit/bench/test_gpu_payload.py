"""The CUDA provider's kernels pruned to one GPU generation (bench/gpu_payload.py), on a fatbin
laid out as the CUDA runtime reads it."""

from __future__ import annotations

import struct

import pytest

from attnmt.bench.gpu_payload import FATBIN_MAGIC, fatbin_entries, zero_others

ENTRY_HEADER = 64


def entry(kind: int, sm: int, payload: bytes) -> bytes:
    header = bytearray(ENTRY_HEADER)
    struct.pack_into("<HHII", header, 0, kind, 0x0101, ENTRY_HEADER, len(payload))
    struct.pack_into("<I", header, 28, sm)
    return bytes(header) + payload


def container(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body


def test_only_the_chosen_generations_machine_code_is_kept():
    kernels = {80: b"A" * 40, 90: b"B" * 24, 120: b"C" * 32}
    first = container(*(entry(2, sm, code) for sm, code in kernels.items()))
    second = container(entry(1, 90, b"P" * 16), entry(2, 90, b"D" * 8))
    data = bytearray(b"\x7fELF" + bytes(12) + first + bytes(8) + second + b"tail")   # padding between containers
    start, size = 16, len(first) + 8 + len(second)
    seen = [(kind, sm, bytes(data[at:at + n])) for kind, sm, at, n in fatbin_entries(data, start, size)]
    assert seen == [(2, 80, b"A" * 40), (2, 90, b"B" * 24), (2, 120, b"C" * 32), (1, 90, b"P" * 16), (2, 90, b"D" * 8)]
    before = len(data)
    tally = zero_others(data, start, size, 90)
    assert tally == {"sass_sm80": 40, "sass_sm90": 32, "sass_sm120": 32, "ptx_sm90": 16}
    kept = [(kind, sm, bytes(data[at:at + n])) for kind, sm, at, n in fatbin_entries(data, start, size)]
    assert kept == [(2, 80, bytes(40)), (2, 90, b"B" * 24), (2, 120, bytes(32)), (1, 90, bytes(16)), (2, 90, b"D" * 8)]
    assert len(data) == before and data.endswith(b"tail")     # zeroed in place: the layout is untouched
    with pytest.raises(ValueError, match="no machine code for sm_75"):
        zero_others(bytearray(data), start, size, 75)
