"""Beam steps write a Transformer's new self-attention caches into the batch's reused
buffers (`slots.StateBuffers`, `Engine.step(state_out=)`): the same answers, rows of the
batch's capacity, and memory handed from one offline batch to the next."""

import numpy as np
import pytest

from attnmt.service.inference import offline
from attnmt.service.inference.batch import DecodeBatch
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
    assert np.shares_memory(third, first) and not np.shares_memory(third, second)   # the first one's memory again
    bigger = buffers.array("k", [16, 2, 8], np.float32, avoid=third)
    assert bigger.shape == (16, 2, 8) and not np.shares_memory(bigger, third)


@pytest.fixture(scope="module")
def transformer(tiny_transformer):
    return Translator(Engine(tiny_transformer, EngineOptions(intra_op_threads=1)))


def _decode(translator: Translator, options: SearchOptions, plain: bool) -> tuple[list, list]:
    """The texts through one batch, half of them joining after two steps; plain: a batch
    without buffers (the server's), else with its own (offline decoding's)."""
    batch = DecodeBatch(translator.engine, None if plain else StateBuffers())
    searches = [translator.search(t, options) for t in TEXTS]
    batch.add(searches[:6])
    shapes = []
    for _ in range(2):
        batch.step()
        shapes.append({name: (a.shape[0], batch.rows.capacity) for name, a in batch.rows.state.items()})
    batch.add(searches[6:])
    while len(batch):
        batch.step()
    return [translator.result(t, s) for t, s in zip(TEXTS, searches)], shapes


def test_beam_steps_give_the_answers_of_the_plain_step_with_rows_of_the_batch_capacity(transformer):
    options = SearchOptions(beam_size=4, n_best=4)
    assert transformer.engine.growing                      # the caches grow by a position a step
    want, plain_shapes = _decode(transformer, options, True)
    got, shapes = _decode(transformer, options, False)
    for w, g in zip(want, got):
        assert [h.text for h in g.hypotheses] == [h.text for h in w.hypotheses]
        for a, b in zip(g.hypotheses, w.hypotheses):
            assert a.score == b.score and np.array_equal(a.alignment, b.alignment)
    # With beams and buffers, the new state has the batch's capacity in rows; the plain step's
    # (a batch without buffers, as the server's decode workers keep) has the rows that ran.
    assert all(rows == capacity for step in shapes for rows, capacity in step.values())
    assert any(rows < capacity for step in plain_shapes for rows, capacity in step.values())


def test_greedy_steps_keep_the_plain_step(transformer, monkeypatch):
    calls = []
    original = Engine.step

    def step(self, *args, **kwargs):
        calls.append(kwargs.get("state_out"))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Engine, "step", step)
    transformer.translate(TEXTS[:3])
    assert calls and all(c is None for c in calls)
    calls.clear()
    transformer.translate(TEXTS[:3], SearchOptions(beam_size=3))
    assert calls and all(c is not None for c in calls)


def test_offline_batches_hand_their_buffers_on(transformer, monkeypatch):
    monkeypatch.setattr(offline, "_SPARE", [])
    options = SearchOptions(beam_size=3)
    transformer.translate(TEXTS, options)
    assert len(offline._SPARE) == 1
    (kept,) = offline._SPARE
    memory = [b for pair in kept.pairs.values() for b in pair if b.size]
    assert memory
    transformer.translate(TEXTS, options)               # the next batch takes the same set
    assert offline._SPARE == [kept]
    assert all(any(b is c for pair in kept.pairs.values() for c in pair) for b in memory)
