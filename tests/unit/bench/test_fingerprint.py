"""`attnmt bench fingerprint`: the same model and sentences give the same bytes, and a
change of what is served (here the beam) changes them."""

from __future__ import annotations

import json

import pytest

from attnmt.service.cli import main
from conftest import write_corpus


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("fingerprint") / "data", {"test": 8})


def fingerprint(tiny_model, data, path, *argv: str) -> bytes:
    assert main(["bench", "fingerprint", "--model", str(tiny_model), "--data", str(data), "--out", str(path),
                 *argv]) == 0
    return path.read_bytes()


def test_a_fingerprint_is_reproducible_and_sees_a_change(tiny_model, data, tmp_path):
    first = fingerprint(tiny_model, data, tmp_path / "a.jsonl", "--beam", "3", "--n-best", "2")
    again = fingerprint(tiny_model, data, tmp_path / "b.jsonl", "--beam", "3", "--n-best", "2")
    assert first == again
    records = [json.loads(line) for line in first.decode().splitlines()]
    assert len(records) == 8 * 2
    rows, columns = records[0]["alpha_shape"]
    assert len(records[0]["token_log_probs"]) == rows and len(records[0]["alpha_sha256"]) == 64 and columns > 0
    assert float(records[0]["score"]) >= float(records[1]["score"])      # n-best, best first
    greedy = fingerprint(tiny_model, data, tmp_path / "c.jsonl", "--beam", "1", "--n-best", "1")
    assert greedy != first
