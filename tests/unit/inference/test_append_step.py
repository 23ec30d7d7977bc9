"""A Transformer's append step (`decoder_step_append`, `slots.Rows.append_state`): caches with
room to grow, the step returning only the new entries, against the step that returns the
caches with them appended: the same translations, on every path a batch takes."""

import numpy as np
import pytest

from attnmt.service.inference.batch import DecodeBatch
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.search import SearchOptions
from attnmt.service.inference.slots import Rows
from attnmt.service.text.translator import Translator
from conftest import synthetic_corpus, without_append_step

TEXTS = [s for s, _ in synthetic_corpus(24, seed=23)]


@pytest.fixture(scope="module")
def engines(tiny_transformer, tmp_path_factory):
    plain = without_append_step(tiny_transformer, tmp_path_factory.mktemp("plain") / "tiny-transformer")
    return Engine(tiny_transformer, EngineOptions(intra_op_threads=1)), Engine(plain, EngineOptions(intra_op_threads=1))


def test_the_host_path_takes_the_append_step_where_the_directory_has_it(tiny_transformer, engines):
    appending, plain = engines
    assert appending.append and not plain.append
    assert {i.name for i in appending.decoder.get_inputs()} - {i.name for i in plain.decoder.get_inputs()} \
        == {"cache_length"}
    assert not Engine(tiny_transformer, EngineOptions(intra_op_threads=1, io_binding=True)).append   # device path


def _through_one_batch(engine: Engine, options: SearchOptions, room: int, monkeypatch) -> tuple[list, list]:
    """TEXTS through one batch, a third joining after three steps and a third after six (rows of
    different ages), with `room` positions of room; returns the translations and, after each
    step, (cache_len, the caches' positions)."""
    monkeypatch.setattr(Rows, "APPEND_ROOM", room)
    translator = Translator(engine)
    batch = DecodeBatch(engine)
    searches = [translator.search(t, options) for t in TEXTS]
    seen, step = [], 0
    while step < 6 or len(batch):
        if step % 3 == 0 and step <= 6:
            batch.add(searches[step // 3 * 8:(step // 3 + 1) * 8])
        batch.step()
        step += 1
        if batch.rows.n and batch.rows.appending:
            seen.append((batch.rows.cache_len, {a.shape[2] for a in batch.rows.state.values()}))
    return [translator.result(t, s) for t, s in zip(TEXTS, searches)], seen


@pytest.mark.parametrize("options", [SearchOptions(), SearchOptions(beam_size=4, n_best=3)], ids=["greedy", "beam"])
@pytest.mark.parametrize("room", [1, 16])
def test_the_append_step_translates_as_the_appending_graph_does(engines, options, room, monkeypatch):
    appending, plain = engines
    got, seen = _through_one_batch(appending, options, room, monkeypatch)
    want, _ = _through_one_batch(plain, options, room, monkeypatch)
    for g, w in zip(got, want):
        assert [h.text for h in g.hypotheses] == [h.text for h in w.hypotheses]
        for a, b in zip(g.hypotheses, w.hypotheses):
            assert abs(a.score - b.score) < 1e-4 and np.abs(a.alignment - b.alignment).max() < 1e-5
    # every cache holds the positions in use (room is given when a step finds it full); with
    # room 1 the caches were given room many times
    assert seen and all(min(lengths) >= used for used, lengths in seen)
    assert len({max(lengths) for _, lengths in seen}) > (3 if room == 1 else 0)


def test_offline_translation_is_the_same_with_either_step(engines):
    appending, plain = engines
    for options in (SearchOptions(), SearchOptions(beam_size=3)):
        got = Translator(appending, workers=2).translate(TEXTS, options)
        want = Translator(plain, workers=2).translate(TEXTS, options)
        assert [t.best.text for t in got] == [t.best.text for t in want]


def test_the_cache_budget_counts_the_room(engines):
    """max_cache_bytes holds the caches with their room: an appending batch's bounds are
    Rows.APPEND_ROOM positions a row above the plain step's."""
    appending, plain = engines
    batches = []
    for engine in (appending, plain):
        translator, batch = Translator(engine), DecodeBatch(engine)
        batch.add([translator.search(t, SearchOptions()) for t in TEXTS[:4]])
        batch.step()
        batches.append(batch)
    entry = appending.cache_entry_bytes
    assert entry == plain.cache_entry_bytes > 0
    (a, p) = batches
    assert a.cache_peak_bytes(8, 20) - p.cache_peak_bytes(8, 20) == 8 * Rows.APPEND_ROOM * entry
    assert a.cache_bytes() - p.cache_bytes() == 4 * Rows.APPEND_ROOM * entry
