"""The engine's search: batch invariance, beam vs greedy, alignments, forced alignment."""

import numpy as np
import pytest

from attnmt.model.search import translate_ids
from attnmt.model.train import load_model
from attnmt.service.errors import InvalidInput
from attnmt.service.inference.batch import DecodeBatch
from attnmt.service.inference.engine import Engine
from attnmt.service.inference.offline import decode_all
from attnmt.service.inference.search import BEAM, DEFAULT_LENGTH_PENALTY, FORCED, Search, SearchOptions
from attnmt.service.inference.slots import Memory, RowMemory
from attnmt.service.text.alignment import aggregate_to_words, hard_pairs, word_groups
from attnmt.service.text.translator import Translator
from conftest import markov_model, synthetic_corpus

SHORT = "peru vidas kasa ."
LONG = "kasa granda amas libo nova . gato roja havas arbo blanka . sola vidas luna . peru amas mesa roja ."


def test_greedy_matches_pytorch_greedy(tiny_model, translator):
    model = load_model(tiny_model / "checkpoint.pt")
    texts = [s for s, _ in synthetic_corpus(20, seed=5)] + [LONG]
    ids = [translator.tokenizer.encode(t) for t in texts]
    expected = translate_ids(model, ids)
    got = translator.translate(texts)
    for e, t in zip(expected, got):
        assert t.best.target_tokens[:-1] == translator.tokenizer.pieces(e)


@pytest.mark.parametrize("beam", [1, 4])
def test_batch_invariance(translator, beam):
    """A sentence's output does not depend on what else is in its batch."""
    options = SearchOptions(beam_size=beam, n_best=beam)
    alone = translator.translate([SHORT], options)[0]
    crowd = [LONG, "gato .", SHORT, LONG + " " + LONG, "sola amas luna granda ."]
    together = translator.translate(crowd, options)[2]
    assert [h.text for h in alone.hypotheses] == [h.text for h in together.hypotheses]
    for a, b in zip(alone.hypotheses, together.hypotheses):
        assert abs(a.score - b.score) < 1e-5
        assert np.abs(a.alignment - b.alignment).max() < 1e-5
        assert np.allclose(a.token_log_probs, b.token_log_probs, atol=1e-5)


def test_joining_mid_decode_gives_the_same_answer(engine, translator):
    """Iteration-level batching: a sentence that joins a running batch at step 3
    gets the answer it gets alone."""
    alone = translator.translate([SHORT])[0].best
    batch = DecodeBatch(engine)
    batch.add([translator.search(LONG, SearchOptions())])
    for _ in range(3):
        batch.step()
    late = translator.search(SHORT, SearchOptions())
    batch.add([late])
    while not late.done:
        batch.step()
    got = translator.result(SHORT, late).best
    assert got.text == alone.text
    assert np.abs(got.alignment - alone.alignment).max() < 1e-5


def test_slot_arrays_grow_and_compact_without_changing_results(engine, translator):
    """Rows move between slots as beams open and sentences leave; answers must not."""
    texts = [SHORT, LONG, "gato .", LONG + " " + LONG, "sola amas luna granda ."]
    options = SearchOptions(beam_size=4, n_best=4)
    want = translator.translate(texts, options)
    batch = DecodeBatch(engine)                       # 8 rows at first: beams force growth mid-step
    searches = [translator.search(t, options) for t in texts]
    batch.add(searches[:2])
    batch.step()
    batch.add(searches[2:])
    while len(batch):
        batch.step()
    assert batch.n_rows == 0 and batch.memory.n == 0
    for w, search, text in zip(want, searches, texts):
        got = translator.result(text, search)
        assert [h.text for h in got.hypotheses] == [h.text for h in w.hypotheses]
        for a, b in zip(got.hypotheses, w.hypotheses):
            assert abs(a.score - b.score) < 1e-5 and np.abs(a.alignment - b.alignment).max() < 1e-5


def test_beam_rows_read_their_own_sentences_memory_at_every_step(engine, translator, monkeypatch):
    """Beam rows' copies of their sentences' memory (slots.RowMemory), kept across steps,
    equal a fresh gather at every step while beams open and narrow, sentences of mixed
    searches join and leave, and the memory grows and shrinks."""
    original, seen = RowMemory.view, {"steps": 0, "lengths": set()}

    def checked_view(self, memory, slots):
        got = original(self, memory, slots)
        assert list(got) == ["annotations", "keys", "src_mask"]
        for name, copy in got.items():
            assert np.array_equal(copy, memory.tensors[name][slots])
        seen["steps"] += 1
        seen["lengths"].add(memory.length)
        return got

    monkeypatch.setattr(RowMemory, "view", checked_view)
    batch = DecodeBatch(engine)
    # The longest leaves at step 12 (the memory shrinks), LONG's beam at step 3 while the
    # longest holds the length (rows of shorter sentences move into its rows).
    plan = [(LONG + " " + LONG, SearchOptions(max_length_ratio=0.01, max_length_extra=12)),
            (LONG, SearchOptions(beam_size=2, max_length_ratio=0.01, max_length_extra=3)),
            (SHORT, SearchOptions(beam_size=4, n_best=2)), ("gato .", SearchOptions(beam_size=3)),
            ("sola amas luna granda .", SearchOptions(beam_size=4, n_best=4))]
    searches = [translator.search(text, options) for text, options in plan]
    batch.add(searches[:3])
    batch.step()
    batch.add(searches[3:4])
    for _ in range(4):
        batch.step()
    batch.add(searches[4:])
    while len(batch):
        batch.step()
    assert seen["steps"] > 10 and len(seen["lengths"]) > 1     # the memory shrank (or grew) on the way


def test_the_memory_is_as_long_as_its_longest_live_sentence():
    """Every step reads the memory's full length: it grows to the longest sentence (in
    multiples of 8) with no headroom, and shrinks once the longest live one needs 7/8 of
    it or less, keeping what the live sentences hold."""
    memory = Memory({"annotations": ((4,), np.float32), "keys": ((2,), np.float32), "src_mask": ((), bool)})

    def add(annotations: np.ndarray, keys: np.ndarray) -> int:
        return memory.add({"annotations": annotations, "keys": keys, "src_mask": np.ones(len(keys), bool)})

    rng = np.random.default_rng(0)
    held = {}
    for n in (30, 100, 41):
        annotations = rng.normal(size=(n, 4)).astype(np.float32)
        held[add(annotations, annotations[:, :2].copy())] = annotations
    assert memory.length == 104                       # 100 rounded up, not 1.25 x 100
    memory.free([1])                                  # the longest leaves; slot 2 moves to 1
    held = {0: held[0], 1: held[2]}
    memory.shrink(41)
    assert memory.length == 48
    for slot, annotations in held.items():
        n = len(annotations)
        assert np.array_equal(memory.tensors["annotations"][slot, :n], annotations)
        assert memory.mask[slot].sum() == n and not memory.tensors["annotations"][slot, n:].any()
    memory.shrink(41)                                 # 48 > 7/8 of 48 (42): left alone
    assert memory.length == 48
    add(rng.normal(size=(37, 4)).astype(np.float32), np.zeros((37, 2), np.float32))
    assert memory.length == 48                        # it fits: no reallocation
    memory.free([1])
    memory.shrink(37)                                 # 40 <= 42
    assert memory.length == 40
    memory.free([1])
    memory.shrink(30)                                 # 32 <= 7/8 of 40 (35)
    assert memory.length == 32 and np.array_equal(memory.mask[0], [True] * 30 + [False] * 2)
    add(np.ones((70, 4), np.float32), np.ones((70, 2), np.float32))
    assert memory.length == 72                        # grown to 70 rounded, not 1.25 x 32
    add(np.ones((61, 4), np.float32), np.ones((61, 2), np.float32))
    memory.free([1])
    memory.shrink(61)                                 # 64 > 7/8 of 72 (63): not worth a copy
    assert memory.length == 72


def test_idle_steps_run_the_spinning_session_and_give_the_same_answers(tiny_model):
    """EngineOptions.idle_spinning: steps marked idle run a second decoder-step session whose
    threads spin; same answers to the last digit, other steps on the usual session."""
    from attnmt.service.inference.engine import Engine, EngineOptions
    from attnmt.service.text.translator import Translator

    engine = Engine(tiny_model, EngineOptions(allow_spinning=False, idle_spinning=True))
    assert Engine(tiny_model, EngineOptions(allow_spinning=False))._idle_decoder is None
    translator = Translator(engine)
    runs = {"usual": 0, "idle": 0}
    for name, session in (("usual", engine.decoder), ("idle", engine._idle_decoder)):
        def counted(*args, _run=session.run, _name=name, **kwargs):
            runs[_name] += 1
            return _run(*args, **kwargs)
        session.run = counted
    answers = {}
    for idle in (False, True):
        searches = [translator.search(text, SearchOptions(beam_size=beam)) for text, beam in ((LONG, 1), (SHORT, 3))]
        batch = DecodeBatch(engine)
        batch.add(searches)
        while len(batch):
            batch.step(idle)
        answers[idle] = [(h.tokens, h.log_prob, h.alignment.tolist()) for s in searches for h in s.best()]
        assert runs["idle" if idle else "usual"] > 0 and runs["usual" if idle else "idle"] == 0
        runs = dict.fromkeys(runs, 0)
    assert answers[True] == answers[False]


def test_idle_threads_open_idle_sessions_of_that_many_threads_for_the_encoder_too(tiny_model):
    """Decode workers of one thread each (the server's default on 2 cores) step and encode a
    lone sentence on every core: idle_threads opens both idle sessions; same answers."""
    from attnmt.service.inference.engine import Engine, EngineOptions
    from attnmt.service.text.translator import Translator

    engine = Engine(tiny_model, EngineOptions(intra_op_threads=1, allow_spinning=False, idle_spinning=True,
                                              idle_threads=2))
    assert engine._idle_encoder is not None and engine._idle_decoder is not None
    assert Engine(tiny_model, EngineOptions(allow_spinning=False, idle_spinning=True))._idle_encoder is None
    translator = Translator(engine)
    calls = {"encoder": 0}
    run = engine._idle_encoder.run

    def counted(*args, **kwargs):
        calls["encoder"] += 1
        return run(*args, **kwargs)
    engine._idle_encoder.run = counted
    answers = []
    for idle in (False, True):
        search = translator.search(LONG, SearchOptions(beam_size=2))
        batch = DecodeBatch(engine)
        batch.add([search], idle)
        while len(batch):
            batch.step(idle)
        answers.append([(h.tokens, h.log_prob) for h in search.best()])
        assert calls["encoder"] == idle
    assert answers[0] == answers[1]


@pytest.mark.parametrize("beam", [1, 3])
def test_two_workers_and_threads_give_what_one_gives(tiny_model, beam):
    """decode_all(workers=2): two batches on two threads over one engine of one ONNX Runtime
    thread, every other sentence by length each; the same translations to the last digit."""
    from attnmt.service.inference.engine import Engine, EngineOptions
    from attnmt.service.inference.offline import workers_and_threads

    engine = Engine(tiny_model, EngineOptions(intra_op_threads=1))
    texts = [s for s, _ in synthetic_corpus(25, seed=11)] + [LONG, SHORT]
    results = []
    for workers in (1, 2):
        translations = Translator(engine, workers=workers).translate(texts, SearchOptions(beam_size=beam))
        results.append([(h.text, h.log_prob) for t in translations for h in t.hypotheses])
    assert results[0] == results[1]
    assert workers_and_threads("cuda") == (1, 0) and workers_and_threads("cpu", 3)[0] == 3


def test_encoder_chunks_are_the_cheapest_split(monkeypatch):
    """Encoder calls cover every sentence once, in order, at most ENCODER_MAX_ROWS each, and
    cost no more (per-call overhead plus padded pieces) than any other split: checked
    against every split of small random inputs, and the long tail gets its own call."""
    import itertools
    import random

    from attnmt.service.inference import batch as batch_module

    def cost(lengths, cuts):
        bounds = [0, *cuts, len(lengths)]
        return sum(batch_module.ENCODER_CALL_PIECES + (b - a) * lengths[a] for a, b in zip(bounds, bounds[1:]))

    rng = random.Random(3)
    monkeypatch.setattr(batch_module, "ENCODER_MAX_ROWS", 4)
    for _ in range(200):
        lengths = sorted((rng.randint(1, 120) for _ in range(rng.randint(1, 9))), reverse=True)
        chunks = batch_module.encoder_chunks(lengths)
        assert [i for c in chunks for i in range(c.start, c.stop)] == list(range(len(lengths)))
        assert all(0 < c.stop - c.start <= 4 for c in chunks)
        allowed = [cuts for r in range(len(lengths)) for cuts in itertools.combinations(range(1, len(lengths)), r)
                   if all(b - a <= 4 for a, b in zip([0, *cuts], [*cuts, len(lengths)]))]
        assert cost(lengths, [c.start for c in chunks[1:]]) == min(cost(lengths, cuts) for cuts in allowed)
    monkeypatch.setattr(batch_module, "ENCODER_MAX_ROWS", 64)
    assert [c.stop - c.start for c in batch_module.encoder_chunks([121, 100] + [40] * 60)][-1] == 60


def test_io_binding_path_gives_the_same_answers(tiny_model, translator):
    """The IO-binding path (used on CUDA, where the attention memory stays on the
    device between steps) runs here on the CPU provider and must agree exactly."""
    from attnmt.service.inference.engine import Engine, EngineOptions
    bound = Translator(Engine(tiny_model, EngineOptions(io_binding=True, intra_op_threads=1)))
    assert bound.engine.io_binding
    texts = [SHORT, LONG, "gato .", "sola amas luna granda ."]
    for options in (SearchOptions(), SearchOptions(beam_size=3, n_best=3)):
        for a, b in zip(translator.translate(texts, options), bound.translate(texts, options)):
            assert [h.text for h in a.hypotheses] == [h.text for h in b.hypotheses]
            assert all(np.abs(x.alignment - y.alignment).max() < 1e-6 for x, y in zip(a.hypotheses, b.hypotheses))


def test_beam_one_is_greedy_exactly(translator, monkeypatch):
    """Beam size 1 normally takes the greedy path; run it through the beam path
    (select_beams with k = 1) and it must give greedy's answers exactly."""
    texts = [s for s, _ in synthetic_corpus(12, seed=8)] + [LONG]
    greedy = translator.translate(texts, SearchOptions(beam_size=1))
    monkeypatch.setattr(Search, "kind", property(lambda s: FORCED if s.forced is not None else BEAM))
    beam = translator.translate(texts, SearchOptions(beam_size=1))
    for g, b in zip(greedy, beam):
        assert len(b.hypotheses) == 1
        assert b.best.target_tokens == g.best.target_tokens
        assert b.best.token_log_probs == g.best.token_log_probs
        assert np.array_equal(b.best.alignment, g.best.alignment)


def reference_beam(engine: Engine, source: list[int], options: SearchOptions) -> list[tuple[list[int], float]]:
    """A plain beam search over full distributions (k = V), one sentence, no batching:
    Marian's semantics written the obvious way, to check the vectorised one against."""
    enc = engine.encode([source])
    beams = [([], 0.0, enc.init_state["state"][0])]          # (tokens, log P, state)
    finished, limit = [], max(1, int(options.max_length_ratio * (len(source) - 1)) + options.max_length_extra)
    for step in range(1, limit + 1):
        states = {"state": np.stack([b[2] for b in beams])}
        prev = np.array([b[0][-1] if b[0] else engine.bos_id for b in beams])
        out = engine.step(prev, states, {name: np.repeat(m, len(beams), axis=0) for name, m in enc.memory.items()},
                          engine.vocab_size, np.zeros(len(beams), dtype=np.int64))
        candidates = []
        for r, (_tokens, score, _) in enumerate(beams):
            for lp, tok in zip(out.topk_log_probs[r], out.topk_ids[r]):
                if np.isfinite(lp):
                    candidates.append((score + float(lp), r, int(tok)))
        candidates.sort(key=lambda c: -c[0])
        beams_next = []
        for score, r, tok in candidates[:options.beam_size - len(finished)]:
            tokens = beams[r][0] + [tok]
            if tok == engine.eos_id or step == limit:
                finished.append((tokens, score))
            else:
                beams_next.append((tokens, score, out.state["state"][r]))
        beams = beams_next
        if not beams:
            break
    penalty = DEFAULT_LENGTH_PENALTY if options.length_penalty is None else options.length_penalty
    finished.sort(key=lambda f: -f[1] / len(f[0]) ** penalty)
    return finished[:options.n_best]


def test_vectorised_beam_matches_a_plain_beam_search(engine, translator):
    texts = [s for s, _ in synthetic_corpus(10, seed=21)] + [LONG]
    options = SearchOptions(beam_size=4, n_best=4)
    got = translator.translate(texts, options)
    for text, translation in zip(texts, got):
        want = reference_beam(engine, translator.encode(text), options)
        assert [h.target_tokens for h in translation.hypotheses] == \
            [translator.tokenizer.pieces(tokens) for tokens, _ in want]
        assert np.allclose([h.log_prob for h in translation.hypotheses], [lp for _, lp in want], atol=1e-4)


def test_alignment_rows_sum_to_one_and_words_preserve_it(translator):
    for t in translator.translate([SHORT, LONG], SearchOptions(beam_size=3, n_best=3)):
        for h in t.hypotheses:
            assert h.alignment.shape == (len(h.target_tokens), len(h.source_tokens))
            assert np.allclose(h.alignment.sum(1), 1, atol=1e-5)
            assert h.word_alignment.shape == (len(h.target_words), len(h.source_words))
            assert np.allclose(h.word_alignment.sum(1), 1, atol=1e-5)
            assert h.source_words[-1] == "</s>"


def test_word_grouping_and_hard_alignments():
    pieces = ["▁Y", "▁aconte", "ció", "▁en", "▁", "«", "luz", "»", "</s>"]
    assert word_groups(pieces) == [[0], [1, 2], [3], [4, 5, 6, 7], [8]]    # '▁' joins «luz»
    alpha = np.array([[0.1, 0.6, 0.3], [0.7, 0.2, 0.1]])      # 2 target x 3 source pieces
    words = aggregate_to_words(alpha, [[0], [1, 2]], [[0, 1]])
    assert np.allclose(words, [[0.4, 0.6]])
    src, tgt = ["a", "b", "</s>"], ["x", "y"]
    assert hard_pairs(alpha, src, tgt) == [(0, 1), (1, 0)]
    assert hard_pairs(alpha, src, tgt, threshold=0.5) == [(0, 1), (1, 0)]
    assert hard_pairs(alpha, src, tgt, threshold=0.1) == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_toy_alignment_follows_the_reordering(translator):
    """In the toy language adjectives follow nouns in the source and precede them in
    the target: the hard alignment must cross, not run down the diagonal."""
    hyp = translator.translate(["kasa granda vidas peru ."])[0].best
    assert hyp.text == "the big house sees the dog ."
    pairs = set(hyp.hard_alignment())
    src, tgt = hyp.source_words, hyp.target_words
    assert (src.index("granda"), tgt.index("big")) in pairs
    assert (src.index("kasa"), tgt.index("house")) in pairs


def test_forced_alignment_of_own_output_reproduces_it(translator):
    for hyp in (t.best for t in translator.translate([SHORT, LONG])):
        forced = translator.align([(hyp_src, hyp.text)])[0].best if (hyp_src := " ".join(
            w for w in hyp.source_words if w != "</s>")) else None
        assert forced.target_tokens == hyp.target_tokens
        assert np.abs(forced.alignment - hyp.alignment).max() < 1e-5
        assert abs(forced.log_prob - hyp.log_prob) < 1e-4


def test_search_options_are_checked():
    with pytest.raises(InvalidInput, match="beam_size"):
        SearchOptions(beam_size=0).validate()
    with pytest.raises(InvalidInput, match="n_best"):
        SearchOptions(beam_size=2, n_best=3).validate()
    with pytest.raises(InvalidInput, match="max_length_ratio"):
        SearchOptions(max_length_ratio=0).validate()


def test_unknown_piece_is_replaced_from_the_source(translator):
    search = translator.search(SHORT, SearchOptions(), target="the dog sees the house .")
    unk = translator.engine.unk_id
    search.forced[1] = unk                      # force an <unk> into the output
    decode_all(translator.engine, [search])
    plain = translator.result(SHORT, search).best
    replaced = translator.result(SHORT, search, replace_unk=True).best
    assert plain.target_tokens[1] == "<unk>" and "⁇" in plain.text
    attended = plain.source_tokens[int(plain.alignment[1].argmax())]
    assert replaced.target_tokens[1] == attended


# --- a constructed model on which greedy search cannot find the best output ---

def test_beam_finds_the_better_hypothesis_greedy_misses(tiny_model, engine, tmp_path):
    vocab, bos, eos, a, b = engine.manifest.vocab_size, engine.bos_id, engine.eos_id, 10, 11
    probs = np.full((vocab, vocab), 1e-6)
    probs[bos, [a, b]] = [0.6, 0.4]          # greedy takes a ...
    probs[a, [eos, a, b]] = [0.4, 0.3, 0.3]  # ... and then ends at 0.6 * 0.4 = 0.24
    probs[b, eos] = 0.99                     # while b </s> has 0.4 * 0.99 = 0.396
    for row in range(vocab):
        if probs[row].sum() < 0.5:
            probs[row, eos] = 1.0
    table = np.log(probs / probs.sum(1, keepdims=True)).astype(np.float32)
    markov = Engine(markov_model(tmp_path, tiny_model, table))
    greedy, beam = Search([20, 21, eos]), Search([20, 21, eos], SearchOptions(beam_size=2, n_best=2, length_penalty=0))
    decode_all(markov, [greedy, beam])
    assert greedy.best()[0].tokens == [a, eos]
    assert beam.best()[0].tokens == [b, eos]
    assert beam.best()[0].log_prob == pytest.approx(table[bos, b] + table[b, eos], abs=1e-5)
    assert beam.best()[0].log_prob > greedy.best()[0].log_prob
    assert beam.best()[1].tokens == [a, eos]           # the n-best list keeps the runner-up
    # The alignment of the chosen hypothesis comes from its own rows (uniform here: 1/3 each).
    assert np.allclose(beam.best()[0].alignment, 1 / 3)


def test_early_exit_stops_a_beam_when_its_best_candidate_ends(tiny_model, engine, tmp_path):
    """OpenNMT-py's rule beside Marian's: `a </s>` is the best candidate at step 2;
    Marian's rule goes on with `b b ...` until beam_size hypotheses finish, early exit stops."""
    vocab, bos, eos, a, b = engine.manifest.vocab_size, engine.bos_id, engine.eos_id, 10, 11
    probs = np.full((vocab, vocab), 1e-6)
    probs[bos, [a, b]] = [0.6, 0.4]
    probs[a, eos] = 0.9
    probs[b, b] = 0.99                       # b's branch runs on for a while
    for row in range(vocab):
        if probs[row].sum() < 0.5:
            probs[row, eos] = 1.0
    table = np.log(probs / probs.sum(1, keepdims=True)).astype(np.float32)
    markov = Engine(markov_model(tmp_path, tiny_model, table))
    source = [20, 21, 22, 23, eos]
    marian = Search(source, SearchOptions(beam_size=2, length_penalty=0, max_length_extra=20))
    early = Search(source, SearchOptions(beam_size=2, length_penalty=0, max_length_extra=20, early_exit=True))
    pair = Search(source, SearchOptions(beam_size=2, n_best=2, length_penalty=0, max_length_extra=20,
                                        early_exit=True))
    decode_all(markov, [marian, early, pair])
    assert marian.best()[0].tokens == early.best()[0].tokens == [a, eos]      # raw log P: the same best
    assert early.steps == 2 and marian.steps > 10
    assert len(pair.finished) == 2 and pair.steps > 2            # n_best 2: waits for a second hypothesis


def test_early_exit_keeps_the_best_translation_when_scores_are_raw(translator):
    texts = [s for s, _ in synthetic_corpus(24, seed=5)]
    marian = translator.translate(texts, SearchOptions(beam_size=4, length_penalty=0))
    early = translator.translate(texts, SearchOptions(beam_size=4, length_penalty=0, early_exit=True))
    for x, y in zip(marian, early):
        assert x.best.text == y.best.text and x.best.score == pytest.approx(y.best.score, abs=1e-6)


def test_the_server_cap_on_target_length_wins_over_the_ratio(translator):
    options = SearchOptions(max_length_ratio=10, max_length_extra=1000, max_target_tokens=7)
    search = translator.search(LONG, options)
    assert search.max_length == 7
    decode_all(translator.engine, [search])
    assert len(search.best()[0].tokens) <= 7


def test_cuda_gives_the_cpu_answers(tiny_model, translator):
    """Runs only where ONNX Runtime really has a GPU (never on the development machine); α within
    1e-3, as tests/unit/inference/test_cuda.py explains (an H200 gave 1.5e-4 here)."""
    from attnmt.service.errors import ModelLoadError
    from attnmt.service.inference.engine import EngineOptions
    try:
        gpu = Translator(Engine(tiny_model, EngineOptions(device="cuda")))
    except ModelLoadError as e:
        pytest.skip(f"no usable GPU here: {str(e)[:80]}")
    texts = [SHORT, LONG, "gato .", "sola amas luna granda ."]
    for options in (SearchOptions(), SearchOptions(beam_size=4, n_best=4)):
        for a, b in zip(translator.translate(texts, options), gpu.translate(texts, options)):
            assert [h.text for h in a.hypotheses] == [h.text for h in b.hypotheses]
            for x, y in zip(a.hypotheses, b.hypotheses):
                assert np.abs(x.alignment - y.alignment).max() < 1e-3
                assert abs(x.score - y.score) < 1e-3


def test_offline_beams_take_more_rows_per_step_than_greedy(engine, translator, monkeypatch):
    """decode_all's default: 64 rows a step for greedy, 160 with beams (measured faster)."""
    from attnmt.service.inference import offline
    texts = [s for s, _ in synthetic_corpus(100, seed=11)]
    seen: list[int] = []
    original = Engine.step
    monkeypatch.setattr(Engine, "step",
                        lambda self, prev, *a, **k: seen.append(len(prev)) or original(self, prev, *a, **k))
    translator.translate(texts, SearchOptions())
    assert max(seen) == offline.OFFLINE_ROWS == 64
    seen.clear()
    translator.translate(texts, SearchOptions(beam_size=5))
    assert offline.OFFLINE_ROWS < max(seen) <= offline.OFFLINE_BEAM_ROWS == 160


def test_a_request_naming_no_length_penalty_gets_the_model_s(tiny_model, engine, tmp_path):
    """A model's manifest may carry the length penalty chosen on its dev sets (`decoding`,
    `attnmt fit-length-penalty`): a search that names none gets it, one that names one keeps its
    own, and a model without it gets 1.0. Here `a </s>` wins on log P over length (-0.26 against
    -0.36 for `b c </s>`) and `b c </s>` over length squared (-0.119 against -0.128)."""
    from attnmt.model.export.measured import update_manifest
    vocab, bos, eos, a, b, c = engine.manifest.vocab_size, engine.bos_id, engine.eos_id, 10, 11, 12
    probs = np.full((vocab, vocab), 1e-6)
    probs[bos, [a, b]] = [0.6, 0.4]
    probs[a, eos] = 1.0
    probs[b, c] = 0.9
    probs[c, eos] = 0.95
    for row in range(vocab):
        if probs[row].sum() < 0.5:
            probs[row, eos] = 1.0
    table = np.log(probs / probs.sum(1, keepdims=True)).astype(np.float32)
    (tmp_path / "plain").mkdir()
    (tmp_path / "tuned").mkdir()
    plain = markov_model(tmp_path / "plain", tiny_model, table)
    assert Translator(Engine(plain)).search("hola", SearchOptions(beam_size=2)).options.length_penalty == 1.0
    tuned = markov_model(tmp_path / "tuned", tiny_model, table)
    update_manifest(tuned, decoding={"length_penalty": 2.0, "chosen_on": "dev"})
    translator = Translator(Engine(tuned))
    unset = translator.search("hola", SearchOptions(beam_size=2))
    named = translator.search("hola", SearchOptions(beam_size=2, length_penalty=1.0))
    decode_all(translator.engine, [unset, named])
    assert unset.options.length_penalty == 2.0
    assert unset.best()[0].tokens == [b, c, eos]
    assert named.best()[0].tokens == [a, eos]
