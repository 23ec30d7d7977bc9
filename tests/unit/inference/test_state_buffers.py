"""An appending batch gives its caches room on reused memory (`slots.StateBuffers`), and
offline decoding hands that memory from one batch to the next."""

import numpy as np
import pytest

from attnmt.service.inference import offline
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.search import SearchOptions
from attnmt.service.inference.slots import StateBuffers
from attnmt.service.text.translator import Translator
from conftest import synthetic_corpus

TEXTS = [s for s, _ in synthetic_corpus(12, seed=17)]


def test_a_buffer_is_never_the_one_the_current_state_is_in_and_is_reused():
    buffers = StateBuffers()
    first = buffers.array("k", [4, 2, 4], np.float32, avoid=np.zeros(1, np.float32))
    second = buffers.array("k", [4, 2, 4], np.float32, avoid=first)
    assert not np.shares_memory(first, second)
    third = buffers.array("k", [4, 2, 3], np.float32, avoid=second)       # smaller: fits in the first
    assert np.shares_memory(third, first) and not np.shares_memory(third, second)
    bigger = buffers.array("k", [16, 2, 8], np.float32, avoid=third)
    assert bigger.shape == (16, 2, 8) and not np.shares_memory(bigger, third)


@pytest.fixture(scope="module")
def transformer(tiny_transformer):
    translator = Translator(Engine(tiny_transformer, EngineOptions(intra_op_threads=1)))
    assert translator.engine.append
    return translator


def test_offline_batches_hand_their_buffers_on(transformer, monkeypatch):
    monkeypatch.setattr(offline, "_SPARE", [])
    options = SearchOptions(beam_size=3)
    want = [t.best.text for t in transformer.translate(TEXTS, options)]
    assert len(offline._SPARE) == 1
    (kept,) = offline._SPARE
    memory = [b for pair in kept.pairs.values() for b in pair if b.size]
    assert memory                                       # the caches were given room on it
    got = [t.best.text for t in transformer.translate(TEXTS, options)]   # the next batch takes the same set
    assert got == want and offline._SPARE == [kept]
    assert all(any(b is c for pair in kept.pairs.values() for c in pair) for b in memory)
