"""A Transformer's append steps (`decoder_step_append`, `slots.Rows.append_state`; and
`decoder_step_grouped`, the memory per sentence and the rows grouped by sentence): caches with
room to grow, the step returning only the new entries, against the step that returns the
caches with them appended: the same translations, on every path a batch takes."""

import numpy as np
import pytest

from attnmt.service.inference.batch import GROUPED_ROWS, DecodeBatch
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.search import SearchOptions
from attnmt.service.inference.slots import Rows
from attnmt.service.text.translator import Translator
from conftest import synthetic_corpus, without_append_step, without_grouped_step

TEXTS = [s for s, _ in synthetic_corpus(24, seed=23)]


@pytest.fixture(scope="module")
def engines(tiny_transformer, tmp_path_factory):
    """By the step each takes: the grouped append step (the export's), the append step over
    each row's copy of the memory (a directory exported before the grouped one) and the step
    that appends (one exported before either)."""
    one = EngineOptions(intra_op_threads=1)
    append = without_grouped_step(tiny_transformer, tmp_path_factory.mktemp("append") / "tiny-transformer")
    plain = without_append_step(tiny_transformer, tmp_path_factory.mktemp("plain") / "tiny-transformer")
    return {"grouped": Engine(tiny_transformer, one), "append": Engine(append, one), "plain": Engine(plain, one)}


def test_the_host_path_takes_the_append_step_where_the_directory_has_it(tiny_transformer, engines):
    grouped, appending, plain = engines["grouped"], engines["append"], engines["plain"]
    assert grouped.append and grouped.grouped and appending.append and not appending.grouped and not plain.append
    inputs = {name: {i.name for i in engine.decoder.get_inputs()} for name, engine in engines.items()}
    assert inputs["append"] - inputs["plain"] == {"cache_length"} and inputs["grouped"] == inputs["append"]
    grouped_step = {i.name for i in grouped.sessions.cached("decoder_step_grouped").get_inputs()}
    assert grouped_step - inputs["append"] == {"group_rows", "row_places"}
    device = Engine(tiny_transformer, EngineOptions(intra_op_threads=1, io_binding=True))
    assert not device.append and not device.grouped


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
@pytest.mark.parametrize("step", ["append", "grouped"])
def test_the_append_step_translates_as_the_appending_graph_does(engines, step, options, room, monkeypatch):
    appending, plain = engines[step], engines["plain"]
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


def test_offline_translation_is_the_same_with_any_step(engines):
    for options in (SearchOptions(), SearchOptions(beam_size=3)):
        want = [t.best.text for t in Translator(engines["plain"], workers=2).translate(TEXTS, options)]
        for step in ("append", "grouped"):
            assert [t.best.text for t in Translator(engines[step], workers=2).translate(TEXTS, options)] == want


def test_beam_steps_of_many_rows_read_each_sentences_memory_once(engines, monkeypatch):
    """Beams through the grouped step while a step has GROUPED_ROWS rows or more: the batch's
    memory goes to the graph as it is, one entry per sentence, where the append step's rows
    read copies of it (slots.RowMemory); the narrower steps after take the append step."""
    fed = {}
    for name in ("grouped", "append"):
        engine = engines[name]
        monkeypatch.setattr(engine, "step", lambda *a, _step=engine.step, _name=name, **k: fed.setdefault(
            _name, []).append((len(a[0]), len(a[2]["src_mask"]), k.get("groups") is not None)) or _step(*a, **k))
        translator, batch = Translator(engine), DecodeBatch(engine)
        batch.add([translator.search(t, SearchOptions(beam_size=4)) for t in TEXTS[:12]])
        while len(batch):
            batch.step()
    wide = [(rows, sentences, grouped) for rows, sentences, grouped in fed["grouped"] if rows >= GROUPED_ROWS]
    assert wide and all(grouped and sentences < rows for rows, sentences, grouped in wide)
    assert not any(grouped for rows, _, grouped in fed["grouped"] if rows < GROUPED_ROWS)
    assert all(rows == sentences and not grouped for rows, sentences, grouped in fed["append"])


def test_the_cache_budget_counts_the_room(engines):
    """max_cache_bytes holds the caches with their room: an appending batch's bounds are
    Rows.APPEND_ROOM positions a row above the plain step's."""
    appending, plain = engines["append"], engines["plain"]
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
