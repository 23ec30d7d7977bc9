"""Glossaries (service/text/glossary.py): matching, attention-guided replacement, the
named glossaries of a server, and the whole path over gRPC, the client and the CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import grpc
import numpy as np
import pytest

from attnmt.bench.glossary import honoured
from attnmt.service.client import Client
from attnmt.service.errors import ConfigError
from attnmt.service.inference.search import SearchOptions
from attnmt.service.server.settings import BUNDLED_MODEL
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from attnmt.service.text.glossary import Entry, Glossary, load_all, read_tsv
from attnmt.service.text.placeholders import detokenize
from attnmt.service.text.translator import Hypothesis, Translation, normalise
from conftest import REPO, TESTS, RunningServer

BIBLE_GLOSSARY = TESTS / "data" / "glossary-bible.tsv"
BIBLE = BUNDLED_MODEL.parent.parent / "data" / "bible"


def glossary(**terms: str) -> Glossary:
    return Glossary([Entry(s.replace("_", " "), t) for s, t in terms.items()])


# --- matching -------------------------------------------------------------------

def test_whole_words_case_insensitive_leftmost_longest():
    g = Glossary([Entry("Assuero", "Ahasuerus"), Entry("rey Assuero", "King Ahasuerus"),
                  Entry("vida eterna", "eternal life")])
    found = g.find("Y el REY ASSUERO dijo: Assueros no; la vida  eterna, y Assuero.")
    assert [(o.text, o.start, o.end, g.entries[o.entry].target) for o in found] == [
        ("REY ASSUERO", 2, 4, "King Ahasuerus"), ("vida eterna", 8, 10, "eternal life"),
        ("Assuero", 11, 12, "Ahasuerus")]        # 'Assueros' is another word; whitespace is normalised


def test_the_case_of_the_first_letter_follows_the_occurrence():
    g = Glossary([Entry("vida eterna", "eternal life"), Entry("Noemi", "Naomi")])
    targets = [g.target_for(o) for o in g.find("Vida eterna tiene; y noemi, y vida eterna, NOEMI")]
    assert targets == ["Eternal life", "naomi", "eternal life", "Naomi"]


def test_tsv_files_and_their_errors(tmp_path):
    good = tmp_path / "g.tsv"
    good.write_text("# comment\n\nNoemi\tNaomi\nvida eterna\teternal life\n", encoding="utf-8")
    assert read_tsv(good) == [Entry("Noemi", "Naomi"), Entry("vida eterna", "eternal life")]
    bad = tmp_path / "bad.tsv"
    bad.write_text("Noemi\tNaomi\nonly a source\n", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.tsv:2"):
        read_tsv(bad)
    with pytest.raises(ConfigError, match="glossaries.names"):
        load_all({"names": bad})
    with pytest.raises(ConfigError, match="glossaries.gone"):
        load_all({"gone": tmp_path / "missing.tsv"})


def test_the_bible_glossary_has_20_terms_some_of_several_words():
    entries = read_tsv(BIBLE_GLOSSARY)
    assert len(entries) == 20
    assert sum(len(e.source.split()) > 1 for e in entries) >= 5


# --- replacement through the alignment ---------------------------------------------

def aligned_into_occurrence(hyp: Hypothesis) -> bool:
    return all(honoured(hyp, m) for m in hyp.glossary)


def test_a_term_replaces_the_aligned_words_and_is_aligned_to_its_source(translator):
    plain = translator.translate(["kasa granda vidas peru ."])[0]
    assert plain.best.text == "the big house sees the dog ."
    done = glossary(peru="hound", kasa_granda="mansion").apply(plain).best
    assert done.text == "the mansion sees the hound ."
    assert [(m.source, m.target, m.changed) for m in done.glossary] == [("kasa granda", "mansion", True),
                                                                        ("peru", "hound", True)]
    assert aligned_into_occurrence(done)
    assert np.allclose(done.alignment.sum(axis=1), 1, atol=1e-5)          # still a distribution per row
    assert done.quality.score == plain.best.quality.score                   # quality describes the model's output


def test_a_term_the_model_already_wrote_is_reported_unchanged(translator):
    plain = translator.translate(["peru vidas kasa ."])[0]
    done = glossary(peru="dog").apply(plain).best
    assert done.text == plain.best.text
    assert [(m.target, m.changed) for m in done.glossary] == [("dog", False)]


def test_every_hypothesis_of_the_n_best_gets_the_terms(translator):
    plain = translator.translate(["gato roja havas libo ."], SearchOptions(beam_size=3, n_best=3))[0]
    done = glossary(libo="volume").apply(plain)
    assert len(done.hypotheses) == 3
    assert all("volume" in h.text.split() and aligned_into_occurrence(h) for h in done.hypotheses)


def test_a_dropped_term_is_inserted_after_the_most_attending_word():
    # Target "the dog ." for source "peru kasa ."; no target word is aligned to "kasa".
    alpha = np.array([[0.7, 0.2, 0.05, 0.05], [0.6, 0.3, 0.05, 0.05], [0.1, 0.1, 0.7, 0.1], [0.1, 0.1, 0.1, 0.7]])
    hyp = Hypothesis("the dog .", ["▁the", "▁dog", "▁.", "</s>"], [-0.1] * 4, -0.4, -0.1, alpha,
                     ["▁peru", "▁kasa", "▁.", "</s>"])
    done = glossary(kasa="house").apply(Translation("peru kasa .", hyp.source_tokens, [hyp])).best
    assert done.text == "the dog house ."
    assert aligned_into_occurrence(done) and done.glossary[0].changed
    assert done.token_log_probs[2] == 0.0                                    # inserted, not generated


def test_an_insertion_inside_a_span_another_term_replaces_goes_after_that_term():
    # "a" was dropped (most attended by "y"); "b" is translated by "x y", which "beta gamma" replaces.
    alpha = np.array([[0.1, 0.8, 0.05, 0.05, 0], [0.3, 0.6, 0.05, 0.05, 0], [0.05, 0.05, 0.85, 0.05, 0],
                      [0, 0, 0, 1.0, 0], [0, 0, 0, 0, 1.0]])
    hyp = Hypothesis("x y z .", ["▁x", "▁y", "▁z", "▁.", "</s>"], [-0.1] * 5, -0.5, -0.1, alpha,
                     ["▁a", "▁b", "▁c", "▁.", "</s>"])
    done = glossary(a="alpha", b="beta gamma").apply(Translation("a b c .", hyp.source_tokens, [hyp])).best
    assert done.text == "beta gamma alpha z ."
    assert aligned_into_occurrence(done) and [m.target for m in done.glossary] == ["alpha", "beta gamma"]


def test_a_hypothesis_with_no_target_pieces_gets_the_term_as_its_translation():
    hyp = Hypothesis("", [], [], 0.0, 0.0, np.zeros((0, 3), dtype=np.float32), ["▁peru", "▁kasa", "</s>"])
    done = glossary(kasa="house").apply(Translation("peru kasa", hyp.source_tokens, [hyp])).best
    assert done.text == "house" and done.target_tokens == ["▁house"] and done.token_log_probs == [0.0]
    assert done.alignment.tolist() == [[0.0, 1.0, 0.0]]                     # all of it on "kasa"
    assert done.target_words == ["house"] and done.glossary[0].target_start == 0


def test_closing_punctuation_stays_where_the_model_put_it():
    alpha = np.array([[0.9, 0.1, 0.0], [0.1, 0.8, 0.1], [0.0, 0.1, 0.9]])
    hyp = Hypothesis("Notmi, dijo", ["▁Not", "mi", ",", "</s>"][:3], [-1.0, -1.0, -0.1], -2.1, -0.7, alpha,
                     ["▁Noemi", ",", "</s>"])
    done = glossary(Noemi="Naomi").apply(Translation("Noemi,", hyp.source_tokens, [hyp])).best
    assert done.text == "Naomi,"


def _abbreviation(pieces: list[str]) -> Hypothesis:
    """Target "the U.N. met ." (or what `pieces` spell) for the source "la ONU se reunió ."."""
    source = ["▁la", "▁ONU", "▁se", "▁reunió", "▁.", "</s>"]
    column = {"▁the": 0, "▁U": 1, ".": 1, "N": 1, "▁met": 3, "▁.": 4, "</s>": 5, ".»": 1, "▁»": 4}
    alpha = np.full((len(pieces), len(source)), 0.01)
    for i, piece in enumerate(pieces):
        alpha[i, column[piece]] = 0.95
    return Hypothesis(detokenize(pieces), pieces, [-0.1] * len(pieces), -1.0, -0.1, alpha, source)


@pytest.mark.parametrize(("pieces", "term", "text"), [
    (["▁the", "▁U", ".", "N", ".", "▁met", "▁.", "</s>"], "UN", "the UN met ."),   # the abbreviation's point
    (["▁the", "▁U", ".", "N", ".", "</s>"], "UN", "the UN."),                       # ... and the sentence's
    (["▁the", "▁U", ".", "N", ".»", "▁met", "▁.", "</s>"], "UN", "the UN» met ."),
    (["▁the", "▁U", ".", "N", ".", "▁met", "▁.", "</s>"], "U. N.", "the U. N. met ."),   # the term brings its own
    (["▁the", "▁U", ".", "N", ".", "</s>"], "U. N.", "the U. N."),
])
def test_an_abbreviations_last_point_goes_with_it(pieces, term, text):
    hyp = _abbreviation(pieces)
    done = glossary(ONU=term).apply(Translation("la ONU se reunió .", hyp.source_tokens, [hyp])).best
    assert done.text == text
    assert len(done.target_tokens) == len(done.token_log_probs) == done.alignment.shape[0]


def test_a_point_after_a_word_that_is_no_abbreviation_stays():
    alpha = np.array([[0.9, 0.05, 0.05], [0.05, 0.9, 0.05], [0.05, 0.05, 0.9]])
    hyp = Hypothesis("Hello, dog.", ["▁dog", ".", "</s>"], [-0.1] * 3, -0.3, -0.1, alpha, ["▁peru", "▁.", "</s>"])
    assert glossary(peru="hound").apply(Translation("peru .", hyp.source_tokens, [hyp])).best.text == "hound."


def test_a_term_never_replaces_a_placeholder_put_back():
    # "%s" (target word 0) attends most to "nombre", as "name" does: the term takes "name" alone
    alpha = np.array([[0.8, 0.1, 0.05, 0.05], [0.6, 0.3, 0.05, 0.05], [0.1, 0.1, 0.7, 0.1], [0.1, 0.1, 0.1, 0.7]])
    hyp = Hypothesis("%s name .", ["▁%s", "▁name", "▁.", "</s>"], [-0.1] * 4, -0.4, -0.1, alpha,
                     ["▁nombre", "▁%s", "▁.", "</s>"], placeholder_targets=frozenset({0}),
                     placeholder_sources=frozenset({1}))
    done = glossary(nombre="first name").apply(Translation("nombre %s .", hyp.source_tokens, [hyp])).best
    assert done.text == "%s first name ." and done.placeholder_targets == {0}
    # without the mark, the most attending word is the placeholder, and the term took its place
    unmarked = Hypothesis("%s name .", hyp.target_tokens, [-0.1] * 4, -0.4, -0.1, alpha, hyp.source_tokens)
    assert "%s" not in glossary(nombre="first name").apply(Translation("nombre %s .", hyp.source_tokens,
                                                                      [unmarked])).best.text


def test_a_term_inside_a_placeholder_is_left_to_the_program():
    alpha = np.eye(4)
    hyp = Hypothesis("%(name)s and name", ["▁%(name)s", "▁and", "▁name", "</s>"], [-0.1] * 4, -0.4, -0.1, alpha,
                     ["▁%(name)s", "▁y", "▁name", "</s>"], placeholder_targets=frozenset({0}),
                     placeholder_sources=frozenset({0}))
    done = glossary(name="nombre").apply(Translation("%(name)s y name", hyp.source_tokens, [hyp])).best
    assert done.text == "%(name)s and nombre" and [m.source_start for m in done.glossary] == [2]


@pytest.mark.skipif(not (BUNDLED_MODEL.parent / "transformer-en-es" / "manifest.json").exists(),
                    reason="no bundled English→Spanish model")
def test_the_bundled_models_placeholders_survive_a_glossary_that_names_them():
    from attnmt.service.inference.engine import Engine, EngineOptions
    from attnmt.service.text.translator import Translator
    english = Translator(Engine(BUNDLED_MODEL.parent / "transformer-en-es", EngineOptions(intra_op_threads=1)))
    terms = glossary(name="nombre", SUFF="SUF")
    done = english.translate(["Use %(name)s for the name", "append SUFF to %(SUFF)s"], glossary=terms)
    assert "%(name)s" in done[0].best.text and "nombre" in done[0].best.text
    assert "%(SUFF)s" in done[1].best.text and "SUF " in done[1].best.text


# --- the bundled model and the Bible glossary ------------------------------------------

@pytest.mark.skipif(not (BUNDLED_MODEL / "manifest.json").exists() or not (BIBLE / "test.es").exists(),
                    reason="no bundled model or Bible test split")
def test_bible_glossary_is_honoured_everywhere_and_bleu_does_not_fall():
    import sacrebleu

    from attnmt.service.inference.engine import Engine
    from attnmt.service.text.translator import Translator
    g = Glossary(read_tsv(BIBLE_GLOSSARY))
    sources = (BIBLE / "test.es").read_text(encoding="utf-8").splitlines()
    refs = (BIBLE / "test.en").read_text(encoding="utf-8").splitlines()
    plain = Translator(Engine(BUNDLED_MODEL)).translate(sources)            # greedy: the quick check
    done = [g.apply(t) for t in plain]
    occurrences = sum(len(g.find(s)) for s in sources)
    matches = [(t.best, m) for t in done for m in t.best.glossary]
    assert occurrences >= 200 and len(matches) == occurrences
    assert all(honoured(h, m) for h, m in matches)
    before = sacrebleu.corpus_bleu([t.best.text for t in plain], [refs]).score
    after = sacrebleu.corpus_bleu([t.best.text for t in done], [refs]).score
    assert after >= before


# --- over gRPC ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def glossary_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("glossaries") / "pets.tsv"
    path.write_text("# pets\nperu\thound\ngato\tkitten\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def glossary_server(tiny_model, glossary_file):
    with RunningServer([tiny_model], {"ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_GLOSSARIES": f"pets={glossary_file}",
                                      "ATTNMT_MAX_GLOSSARY_ENTRIES": "3"}) as running:
        yield running


@pytest.fixture(scope="module")
def glossary_stub(glossary_server):
    with grpc.insecure_channel(glossary_server.address) as channel:
        yield pb_grpc.TranslatorStub(channel)


def test_translate_with_request_and_named_glossaries(glossary_stub):
    response = glossary_stub.Translate(pb.TranslateRequest(
        sentences=["kasa granda vidas peru .", "Gato amas libo ."], glossary_name="pets",
        glossary=[pb.GlossaryEntry(source="kasa granda", target="mansion")],
        options=pb.DecodingOptions(alignment=pb.ALIGNMENT_WORDS)))
    first, second = response.translations
    assert first.text == "the mansion sees the hound ."
    assert [(m.entry, m.source, m.target) for m in first.hypotheses[0].glossary_applied] == [
        (0, "kasa granda", "mansion"), (1, "peru", "hound")]      # request entries first, then the named ones
    hyp = first.hypotheses[0]
    links = {(link.source, link.target) for link in hyp.alignment.links}
    for m in hyp.glossary_applied:
        assert list(hyp.target_words[m.target_start:m.target_end]) == m.target.split()
        occurrence = range(m.source_start, m.source_end)
        assert all(any((s, t) in links for s in occurrence) for t in range(m.target_start, m.target_end))
    assert "Kitten" in second.text.split()                         # the occurrence's capital is kept
    plain = glossary_stub.Translate(pb.TranslateRequest(sentences=["kasa granda vidas peru ."])).translations[0]
    assert plain.text == "the big house sees the dog ." and not plain.hypotheses[0].glossary_applied


def test_documents_get_the_glossary_in_every_sentence(glossary_stub):
    response = glossary_stub.Translate(pb.TranslateRequest(
        sentences=["peru vidas kasa . gato havas libo ."], split_sentences=True, glossary_name="pets"))
    (document,) = response.translations
    assert document.text == "the hound sees the house . the kitten has the book ."
    assert [[m.target for m in s.translation.hypotheses[0].glossary_applied] for s in document.sentences] == [
        ["hound"], ["kitten"]]


@pytest.mark.parametrize("request_kwargs, message", [
    (dict(glossary_name="nope"), "glossary_name: no glossary 'nope'"),
    (dict(glossary=[pb.GlossaryEntry(source="peru", target="")]), "glossary[0]"),
    (dict(glossary=[pb.GlossaryEntry(source=f"w{i}", target="x") for i in range(4)]), "max_glossary_entries"),
])
def test_bad_glossaries_are_invalid_argument(glossary_stub, request_kwargs, message):
    with pytest.raises(grpc.RpcError) as info:
        glossary_stub.Translate(pb.TranslateRequest(sentences=["peru vidas kasa ."], **request_kwargs))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and message in info.value.details()


def test_stream_and_client_carry_glossaries(glossary_server):
    with Client(glossary_server.address) as client:
        (t,) = client.translate(["peru vidas kasa ."], glossary={"kasa": "home"}, glossary_name="pets")
        assert t.best.text == "the hound sees the home ."
        assert [m.target for m in t.best.glossary] == ["hound", "home"]
        answers = dict(client.stream([("a", "peru vidas kasa ."), ("b", "gato havas libo .")],
                                     glossary=[("libo", "tome")], glossary_name="pets"))
    assert answers["a"].best.text == "the hound sees the house ."
    assert answers["b"].best.text == "the kitten has the tome ."


def test_cli_glossary_offline_and_through_a_server(glossary_server, tiny_model, glossary_file):
    command = [sys.executable, "-m", "attnmt.service.cli", "translate", "--glossary", str(glossary_file), "--json",
               "--beam", "1", "peru vidas kasa ."]              # greedy both ways, as the server's default here
    offline = subprocess.run(command + ["--model", str(tiny_model)], capture_output=True, text=True, check=True)
    served = subprocess.run(command + ["--server", glossary_server.address], capture_output=True, text=True,
                            check=True)
    for out in (offline.stdout, served.stdout):
        line = json.loads(out)
        assert line["text"] == "the hound sees the house ."
        assert [g["target"] for g in line["glossary"]] == ["hound"]
        assert 0 <= line["quality"]["score"] <= 1
    named = subprocess.run([sys.executable, "-m", "attnmt.service.cli", "translate", "--server",
                            glossary_server.address, "--glossary-name", "pets", "gato vidas kasa ."],
                           capture_output=True, text=True, check=True)
    assert named.stdout.strip() == "the kitten sees the house ."


def test_a_term_the_model_wrote_in_another_case_is_written_as_given():
    # "dog" is not "DOG" (nor "github" "GitHub"): only a first letter's case may differ (a sentence's start)
    alpha = np.array([[0.8, 0.1, 0.05, 0.05], [0.1, 0.8, 0.05, 0.05], [0.1, 0.1, 0.7, 0.1], [0.1, 0.1, 0.1, 0.7]])
    hyp = Hypothesis("the dog .", ["▁the", "▁dog", "▁.", "</s>"], [-0.1] * 4, -0.4, -0.1, alpha,
                     ["▁kasa", "▁peru", "▁.", "</s>"])
    done = glossary(peru="DOG").apply(Translation("kasa peru .", hyp.source_tokens, [hyp])).best
    assert done.text == "the DOG ." and done.glossary[0].changed


@pytest.mark.parametrize("invisible", ["\u200b", "\u200c", "\u200e", "\u200f", "\ufeff", "\u061c", "\u2581", "\ufffd"])
def test_a_character_the_tokenizer_reads_as_a_break_is_one_to_the_glossary_too(invisible):
    # "La\u200bcasa" is two words to SentencePiece: whitespace-split as one, it moved every later
    # occurrence by a word ("HOME house is big and HOME house is red.")
    import sentencepiece
    model = REPO / "models" / "transformer-es-en" / "spm.model"
    tokenizer = sentencepiece.SentencePieceProcessor(model_file=str(model))
    text = f"La{invisible}casa es grande y la casa es roja."
    words = sum(piece.startswith("▁") for piece in tokenizer.encode(text, out_type=str))
    assert len(normalise(text).split()) == words == 9
    occurrences = glossary(casa="HOME").find(text)
    assert [o.start for o in occurrences] == [1, 6]


def test_an_apostrophe_typed_as_an_accent_or_between_letters_as_a_backtick_is_read_as_one():
    assert normalise("It´s late, I can`t cook.") == "It's late, I can't cook."
    # a backtick that is not between letters may quote a placeholder (GNU's `%s'): kept
    assert normalise("see `%s' and `ls' now") == "see `%s' and `ls' now"


@pytest.mark.parametrize("text, capitals", [
    ("LA CASA ES GRANDE.", True), ("GUARDAR", True), ("UN TEXTO LARGO EN MAYÚSCULAS CON UNA x", True),
    ("NO SE PUEDE ABRIR %s", True),            # a placeholder's small letters are the program's
    ("El USB no funciona.", False), ("IMPORTANTE: lea esto", False), ("A", False), ("123 %s", False),
])
def test_a_sentence_in_capitals_is_told_apart(text, capitals):
    from attnmt.model.data.placeholders import PATTERN
    from attnmt.service.text.translator import shouted
    assert shouted(text, re.compile(PATTERN)) is capitals


def test_a_sentence_in_capitals_is_read_in_sentence_case():
    from attnmt.service.text.translator import sentence_case
    assert sentence_case("¡ATENCIÓN! NO TOCAR.") == "¡Atención! no tocar."
    assert sentence_case("⦃1⦄: NO") == "⦃1⦄: No"        # its first letter, after a sentinel


def test_a_term_that_replaces_the_sentences_first_word_starts_with_a_capital():
    on_kasa, on_peru, on_dot, on_end = [0.8, 0.1, 0.05, 0.05], [0.1, 0.8, 0.05, 0.05], [0.1, 0.1, 0.7, 0.1], \
        [0.1, 0.1, 0.1, 0.7]
    # the model's first word "Doggy" is aligned to "peru"
    hyp = Hypothesis("Doggy house .", ["▁Dog", "gy", "▁house", "▁.", "</s>"], [-0.1] * 5, -0.5, -0.1,
                     np.array([on_peru, on_peru, on_kasa, on_dot, on_end]), ["▁kasa", "▁peru", "▁.", "</s>"])
    done = glossary(peru="dog").apply(Translation("kasa peru .", hyp.source_tokens, [hyp])).best
    assert done.text == "Dog house ."
    # past the first word, the term stays in small letters
    hyp = Hypothesis("The doggy .", ["▁The", "▁dog", "gy", "▁.", "</s>"], [-0.1] * 5, -0.5, -0.1,
                     np.array([on_kasa, on_peru, on_peru, on_dot, on_end]), ["▁kasa", "▁peru", "▁.", "</s>"])
    assert glossary(peru="dog").apply(Translation("kasa peru .", hyp.source_tokens, [hyp])).best.text == "The dog ."


def test_exact_case_matching_and_leaving_a_dropped_word_dropped():
    g = Glossary([Entry("libia", "Libyan")], exact_case=True)
    assert [o.text for o in g.find("Libia y la rebelión libia, LIBIA")] == ["libia"]
    alpha = np.array([[0.7, 0.2, 0.05, 0.05], [0.6, 0.3, 0.05, 0.05], [0.1, 0.1, 0.7, 0.1], [0.1, 0.1, 0.1, 0.7]])
    hyp = Hypothesis("the dog .", ["▁the", "▁dog", "▁.", "</s>"], [-0.1] * 4, -0.4, -0.1, alpha,
                     ["▁peru", "▁kasa", "▁.", "</s>"])
    kept = Glossary([Entry("kasa", "house")], insert_dropped=False).apply(Translation("peru kasa .",
                                                                                      hyp.source_tokens, [hyp]))
    assert kept.best is hyp                       # no word aligned to "kasa": nothing written in
