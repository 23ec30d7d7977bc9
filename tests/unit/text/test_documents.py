"""Whole documents: split into sentences (Spanish abbreviations, ¿…? ¡…!), translated
in one batch, reassembled with the original whitespace and line breaks; every word
with its character offsets in the text as sent and as returned."""

from __future__ import annotations

import subprocess
import sys

import grpc
import pytest

from attnmt.service.client import Client
from attnmt.service.errors import InvalidInput
from attnmt.service.inference.search import SearchOptions
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.text.documents import read, sentence_spans, translate_documents
from attnmt.service.text.offsets import word_spans
from attnmt.service.text.translator import letterless
from conftest import RunningServer

GREEDY = SearchOptions(beam_size=1)


def sentences(text: str, split: bool = True, line_breaks: bool = True) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text, set(), "es", split, line_breaks)]


def test_the_splitter_knows_spanish_abbreviations_and_inverted_marks():
    assert sentences("El Sr. García llegó ayer. ¿Qué? ¡No! Vino con la Dra. Pérez.") == [
        "El Sr. García llegó ayer.", "¿Qué?", "¡No!", "Vino con la Dra. Pérez."]
    assert sentences("Ver el art. 5 de la Ley. Sí.") == ["Ver el art. 5 de la Ley.", "Sí."]


def test_a_cut_with_no_space_after_it_is_not_a_sentence_end():
    """sentencex cuts after a `.` inside a token: a printf range or precision would reach the
    model in two halves (and come back as `%s.%s`)."""
    assert sentences("Rango %s..%s no válido en la lista. Inténtelo de nuevo.") == [
        "Rango %s..%s no válido en la lista.", "Inténtelo de nuevo."]
    assert sentences("esperar 1..SEGUNDOS entre descargas") == ["esperar 1..SEGUNDOS entre descargas"]
    assert sentences("imprime %.*s aquí. Hecho.") == ["imprime %.*s aquí.", "Hecho."]


def test_line_breaks_end_sentences_in_plain_text_only_when_asked():
    text = "  Capítulo uno\nEn el principio.  Y dijo Dios.\n\n"
    assert sentences(text) == ["Capítulo uno", "En el principio.", "Y dijo Dios."]
    assert sentences(text, line_breaks=False) == ["Capítulo uno\nEn el principio.", "Y dijo Dios."]
    assert sentences(text, split=False) == ["Capítulo uno", "En el principio.  Y dijo Dios."]


def test_columns_laid_out_with_spaces_or_tabs_are_translated_apart():
    text = "  -a, --all         do not ignore entries\n      --block-size=SIZE\tscale sizes by SIZE One  two"
    assert sentences(text) == ["-a, --all", "do not ignore entries", "--block-size=SIZE",
                               "scale sizes by SIZE One  two"]
    assert sentences("Una frase con un espacio doble, y  otro.") == ["Una frase con un espacio doble, y  otro."]
    assert sentences("Un programa;  imprime datos.") == ["Un programa;", "imprime datos."]


def test_word_spans_survive_normalisation_and_unknown_pieces():
    text = "  Y   dijo\u00a0Dios:\tﬁn ☃ luz.  "
    words = ["Y", "dijo", "Dios:", "fin", "<unk>", "luz.", "</s>"]
    spans = word_spans(text, words)
    assert [text[a:b] for a, b in spans] == ["Y", "dijo", "Dios:", "ﬁn", "", "luz.", ""]
    assert spans[-1] == (len(text), len(text))


@pytest.fixture(scope="module")
def offline(translator):
    return translator


def test_a_document_comes_back_with_its_layout_and_each_sentence_as_alone(offline):
    text = "kasa vidas peru .  gato amas luna .\n\n  sola havas arbo blanka .\n"
    (document,) = translate_documents(offline, [text], html=False, split=True, options=GREEDY)
    alone = offline.translate(["kasa vidas peru .", "gato amas luna .", "sola havas arbo blanka ."], GREEDY)
    assert [s.translation.best.text for s in document.sentences] == [t.best.text for t in alone]
    # What lies between the sentences is the source's own whitespace, line breaks included.
    assert document.text == "{}  {}\n\n  {}\n".format(*(t.best.text for t in alone))
    for s in document.sentences:
        assert text[s.source[0]:s.source[1]] == s.translation.source
        assert document.text[s.target[0]:s.target[1]] == s.translation.best.text
        best = s.translation.best
        assert [text[a:b] for a, b in s.source_word_spans] == best.source_words[:-1] + [""]
        assert [document.text[a:b] for a, b in s.target_word_spans[0]] == best.target_words[:-1] + [""]


def test_a_piece_without_letters_is_its_own_translation():
    """`!`, `...`, `42`, a placeholder: a model writes words around them (`!` -> `¡!`)."""
    from attnmt.model.data.placeholders import PLACEHOLDER
    for text in ("!", "?", "...", ":", "-", "42", "1.", "¡!", "(%d)", "%s:", "{name}", "<b>%s</b>"):
        assert letterless(text, PLACEHOLDER), text
    for text in ("Hola", "¿Qué?", "a", "ñ!", "日本", "%s archivos"):
        assert not letterless(text, PLACEHOLDER), text
    assert not letterless("%s") and not letterless("{name}")     # a model without placeholders: `s` is a letter


def test_letterless_pieces_are_copied_with_a_well_formed_alignment(offline):
    alone = offline.translate(["!", "...", "42", "peru vidas kasa .", ""], GREEDY)
    assert [t.best.text for t in alone[:3]] == ["!", "...", "42"]
    assert alone[3].best.text == "the dog sees the house ."
    for copied in alone[:3]:
        best = copied.best
        assert best.target_tokens == copied.source_tokens and best.target_tokens[-1] == "</s>"
        assert best.alignment.shape == (len(best.target_tokens), len(copied.source_tokens))
        assert (best.alignment.sum(axis=1) == 1).all() and best.log_prob == 0 and best.quality is None
        assert best.target_words == best.source_words and best.hard_alignment()
    text = "peru vidas kasa .\n!\n  ...\n42\n"
    (document,) = translate_documents(offline, [text], html=False, split=True, options=GREEDY)
    assert document.text == "the dog sees the house .\n!\n  ...\n42\n"
    for s in document.sentences:        # the toy vocabulary has no `!` or digits: their piece is <unk>
        best = s.translation.best
        assert document.text[s.target[0]:s.target[1]] == best.text
        for (a, b), word in zip(s.target_word_spans[0], best.target_words):
            assert s.target[0] <= a <= b <= s.target[1] and document.text[a:b] in (word, "")
        for (a, b), word in zip(s.source_word_spans, best.source_words):
            assert s.source[0] <= a <= b <= s.source[1] and text[a:b] in (word, "")


def test_document_limits_name_the_setting():
    with pytest.raises(InvalidInput, match="max_document_chars"):
        read("a. " * 100, False, True, "es", max_chars=50)
    with pytest.raises(InvalidInput, match="max_document_sentences"):
        read("Uno. Dos. Tres.", False, True, "es", max_sentences=2)


# --- over gRPC ------------------------------------------------------------------

DOCUMENT = "kasa granda vidas peru .  gato amas luna .\n\nsola havas arbo blanka .\n"


def test_split_sentences_over_grpc(stub, translator):
    response = stub.Translate(pb.TranslateRequest(sentences=[DOCUMENT, "peru vidas kasa ."], split_sentences=True,
                                                  options=pb.DecodingOptions(beam_size=1,
                                                                             alignment=pb.ALIGNMENT_WORDS)))
    document, short = response.translations
    alone = translator.translate(["kasa granda vidas peru .", "gato amas luna .", "sola havas arbo blanka ."],
                                 GREEDY)
    assert document.text == "{}  {}\n\n{}\n".format(*(t.best.text for t in alone))
    assert not document.hypotheses and len(document.sentences) == 3
    for sentence, want in zip(document.sentences, alone):
        assert DOCUMENT[sentence.source.start:sentence.source.end] == want.source
        assert document.text[sentence.target.start:sentence.target.end] == want.best.text
        t = sentence.translation
        hyp = t.hypotheses[0]
        assert [DOCUMENT[s.start:s.end] for s in t.source_word_spans] == list(t.source_words[:-1]) + [""]
        assert [document.text[s.start:s.end] for s in hyp.target_word_spans] == list(hyp.target_words[:-1]) + [""]
        assert hyp.alignment.pharaoh
    assert short.text == "the dog sees the house ." and len(short.sentences) == 1


def test_letterless_sentences_come_back_as_sent_over_grpc(stub):
    """Plain, split and streamed: the copy answers in the shape a translation does."""
    words = pb.DecodingOptions(alignment=pb.ALIGNMENT_WORDS)
    (bang,) = stub.Translate(pb.TranslateRequest(sentences=["!"], options=words)).translations
    (document,) = stub.Translate(pb.TranslateRequest(sentences=["peru vidas kasa .\n..."], split_sentences=True,
                                                     options=words)).translations
    assert bang.text == "!" and document.text == "the dog sees the house .\n..."
    dots = document.sentences[1]
    assert (dots.source.start, dots.source.end, dots.target.start, dots.target.end) == (18, 21, 25, 28)
    for hyp in (bang.hypotheses[0], dots.translation.hypotheses[0]):
        assert len(hyp.target_words) == 2 and hyp.alignment.pharaoh == "0-0"
        assert [list(row.weights) for row in hyp.alignment.rows] == [[1, 0], [0, 1]]
    (item,) = stub.TranslateStream(iter([pb.StreamRequest(id="1", sentence="?")]))
    assert item.translation.text == "?"


def test_plain_format_adds_word_spans_and_unspecified_stays_as_before(stub):
    text = "  kasa granda vidas peru ."
    plain, = stub.Translate(pb.TranslateRequest(sentences=[text], format=pb.TEXT_FORMAT_PLAIN,
                                                options=pb.DecodingOptions(alignment=pb.ALIGNMENT_HARD))).translations
    before, = stub.Translate(pb.TranslateRequest(sentences=[text], options=pb.DecodingOptions(
        alignment=pb.ALIGNMENT_HARD))).translations
    assert plain.text == before.text and not plain.sentences
    assert [text[s.start:s.end] for s in plain.source_word_spans] == ["kasa", "granda", "vidas", "peru", ".", ""]
    hyp = plain.hypotheses[0]
    assert [plain.text[s.start:s.end] for s in hyp.target_word_spans] == list(hyp.target_words[:-1]) + [""]
    assert not before.source_word_spans and not before.hypotheses[0].target_word_spans
    plain.ClearField("source_word_spans")
    plain.hypotheses[0].ClearField("target_word_spans")
    assert plain == before


def test_documents_stream_and_the_client_reads_them(server):
    with Client(server.address) as client:
        results = dict(client.stream([("doc", DOCUMENT), ("one", "peru vidas kasa .")], GREEDY,
                                     alignment="soft", split_sentences=True))
        (document,) = client.translate_documents([DOCUMENT], GREEDY)
    assert results["doc"].text == document.text and len(results["doc"].sentences) == 3
    assert results["one"].text == "the dog sees the house ."
    assert document.sentences[1].translation.best.text == "the cat loves the moon ."


def test_limits_are_in_model_info_and_enforced(tiny_model):
    env = {"ATTNMT_MAX_DOCUMENT_SENTENCES": "2", "ATTNMT_MAX_CHARS_PER_SENTENCE": "40",
           "ATTNMT_DEFAULT_BEAM_SIZE": "1"}
    with RunningServer([tiny_model], env) as small, grpc.insecure_channel(small.address) as channel:
        from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
        stub = pb_grpc.TranslatorStub(channel)
        limits = stub.GetModel(pb.GetModelRequest()).limits
        assert limits["max_document_sentences"] == 2 and limits["max_document_chars"] == 50_000
        for text, named in [(DOCUMENT, "max_document_sentences"),
                            ("kasa vidas peru . " + "gato amas luna " * 4 + ".", "sentence 1 has 61 characters")]:
            with pytest.raises(grpc.RpcError) as info:
                stub.Translate(pb.TranslateRequest(sentences=[text], split_sentences=True))
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and named in info.value.details()
        # 60 characters as one document of two short sentences: each sentence is within the limit.
        ok = stub.Translate(pb.TranslateRequest(sentences=["kasa vidas peru . " * 2], split_sentences=True))
        assert len(ok.translations[0].sentences) == 2


def test_cli_translates_documents_offline_and_through_a_server(server, tiny_model, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("kasa vidas peru .\n\ngato amas luna .\n", encoding="utf-8")
    run = lambda *args: subprocess.run([sys.executable, "-m", "attnmt.service.cli", "translate", *args],  # noqa: E731
                                       capture_output=True, text=True, timeout=120, check=True).stdout
    offline = run("--model", str(tiny_model), "--beam", "1", "--split-sentences", "-i", str(source))
    assert offline == "the house sees the dog .\n\nthe cat loves the moon .\n"
    online = run("--server", server.address, "--beam", "1", "--split-sentences", "-i", str(source))
    assert online == offline
    markup = run("--server", server.address, "--beam", "1", "--html", "<p>kasa vidas <b>peru</b> .</p>")
    assert markup.startswith("<p>") and "<b>" in markup and markup.rstrip().endswith("</p>")
