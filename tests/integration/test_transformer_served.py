"""One server, both architectures: the tiny RNNsearch and the tiny Transformer served side by
side by name through the same decode worker, each with beam search, n-best, alignment and Align;
the Transformer's position table bounds what it accepts and writes."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from conftest import SHORT, RunningServer, error_of

MEDIUM = "kasa granda amas libo nova ."      # within the tiny Transformer's 64 positions


@pytest.fixture(scope="module")
def both(tiny_model, tiny_transformer):
    with RunningServer([tiny_model, tiny_transformer], {"ATTNMT_DEFAULT_BEAM_SIZE": "1"}) as server:
        with grpc.insecure_channel(server.address) as channel:
            yield pb_grpc.TranslatorStub(channel)


def test_get_model_says_each_architecture_and_its_sizes(both):
    names = [m.name for m in both.ListModels(pb.ListModelsRequest()).models]
    assert names == ["tiny", "tiny-transformer"]
    rnn = both.GetModel(pb.GetModelRequest(name="tiny"))
    transformer = both.GetModel(pb.GetModelRequest(name="tiny-transformer"))
    assert rnn.architecture == "RNNsearch" and transformer.architecture == "Transformer"
    assert transformer.dimensions["d_model"] == 32 and transformer.dimensions["decoder_layers"] == 1
    assert transformer.dimensions["max_positions"] == 64
    assert not rnn.keeps_names and not transformer.keeps_names      # no known-words list: every word translated


@pytest.mark.parametrize("model", ["tiny", "tiny-transformer"])
def test_beam_n_best_and_alignment_for_each_architecture(both, model):
    options = pb.DecodingOptions(beam_size=4, n_best=3, alignment=pb.ALIGNMENT_WORDS)
    reply = both.Translate(pb.TranslateRequest(sentences=[SHORT, MEDIUM], model=model, options=options))
    for translation in reply.translations:
        hypotheses = translation.hypotheses
        assert len(hypotheses) == 3
        assert [h.score for h in hypotheses] == sorted((h.score for h in hypotheses), reverse=True)
        rows = hypotheses[0].alignment.rows
        assert len(rows) == len(hypotheses[0].target_words)
        assert np.allclose([sum(r.weights) for r in rows], 1, atol=1e-5)
    greedy = both.Translate(pb.TranslateRequest(sentences=[SHORT], model=model,
                                                options=pb.DecodingOptions(beam_size=1))).translations[0]
    aligned = both.Align(pb.AlignRequest(source=SHORT, target=greedy.text, model=model,
                                         alignment=pb.ALIGNMENT_SOFT))
    assert aligned.model == model and aligned.hypothesis.text == greedy.text
    assert np.allclose([sum(r.weights) for r in aligned.hypothesis.alignment.rows], 1, atol=1e-5)


def test_a_source_beyond_the_transformers_positions_is_refused(both):
    too_long = " ".join(["kasa"] * 20)          # over 64 pieces (the tiny model's table), under 256
    error = error_of(lambda: both.Translate(pb.TranslateRequest(sentences=[too_long], model="tiny-transformer")))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "max_positions" in error.details()
    # the RNNsearch has no position table: the same sentence is translated
    assert both.Translate(pb.TranslateRequest(sentences=[too_long], model="tiny")).translations[0].text


def test_the_cache_budget_holds_sentences_back_until_rows_leave(tiny_transformer):
    """A Transformer's caches (here 256 bytes a position a row) within max_cache_bytes: with room
    for about one row, the sentences of one request decode one after another instead of side by
    side, and answer as before."""
    sentences = ["kasa granda .", "peru vidas kasa .", "gato roja .", "libo nova amas ."]

    def run(env: dict[str, str]) -> tuple[list[str], float]:
        with RunningServer([tiny_transformer], {"ATTNMT_DEFAULT_BEAM_SIZE": "1", **env}) as server:
            with grpc.insecure_channel(server.address) as channel:
                reply = pb_grpc.TranslatorStub(channel).Translate(pb.TranslateRequest(sentences=sentences))
            return [t.text for t in reply.translations], server.metric("attnmt_batch_rows_count")

    free, free_steps = run({})
    held, held_steps = run({"ATTNMT_MAX_CACHE_BYTES": str(256 * 24)})
    assert held == free
    assert held_steps > free_steps            # fewer rows a step: the sentences waited for room


# --- every alignment feature, for both architectures ------------------------------------

@pytest.mark.parametrize("model", ["tiny", "tiny-transformer"])
def test_hard_links_and_pharaoh(both, model):
    hyp = both.Translate(pb.TranslateRequest(sentences=[MEDIUM], model=model, options=pb.DecodingOptions(
        alignment=pb.ALIGNMENT_HARD))).translations[0].hypotheses[0]
    links = [(link.source, link.target) for link in hyp.alignment.links]
    assert links and hyp.alignment.pharaoh == " ".join(f"{s}-{t}" for s, t in links)
    words = [i for i, w in enumerate(hyp.target_words) if w != "</s>"]
    assert sorted(t for _, t in links) == words                          # argmax: each target word once


@pytest.mark.parametrize("model", ["tiny", "tiny-transformer"])
def test_html_markup_is_placed_and_well_formed(both, model):
    text = both.Translate(pb.TranslateRequest(sentences=["<b>kasa</b> granda ."], model=model,
                                              format=pb.TEXT_FORMAT_HTML)).translations[0].text
    assert text.count("<b>") == 1 and text.count("</b>") == 1 and text.index("<b>") < text.index("</b>")


@pytest.mark.parametrize("model", ["tiny", "tiny-transformer"])
def test_a_glossary_term_is_written_over_its_aligned_words(both, model):
    hyp = both.Translate(pb.TranslateRequest(
        sentences=["kasa granda vidas peru ."], model=model, options=pb.DecodingOptions(alignment=pb.ALIGNMENT_WORDS),
        glossary=[pb.GlossaryEntry(source="peru", target="hound")])).translations[0].hypotheses[0]
    assert "hound" in hyp.text.split()
    (match,) = hyp.glossary_applied
    assert list(hyp.target_words[match.target_start:match.target_end]) == ["hound"]


@pytest.mark.parametrize("model", ["tiny", "tiny-transformer"])
def test_quality_and_placeholders(both, model):
    hyp = both.Translate(pb.TranslateRequest(sentences=["kasa %s vidas {name} ."], model=model))\
        .translations[0].hypotheses[0]
    assert 0.0 <= hyp.quality.score <= 1.0
    assert hyp.text.count("%s") <= 1 and hyp.text.count("{name}") <= 1      # never invented, never doubled


@pytest.mark.parametrize("model", ["tiny", "tiny-transformer"])
def test_documents_and_their_word_offsets(both, model):
    document = "kasa granda .  peru vidas kasa ."
    translation = both.Translate(pb.TranslateRequest(sentences=[document], model=model, split_sentences=True,
                                                     options=pb.DecodingOptions(alignment=pb.ALIGNMENT_WORDS)))\
        .translations[0]
    assert len(translation.sentences) == 2 and "  " in translation.text       # the whitespace between kept
    for span, word in zip(translation.source_word_spans, translation.source_words):
        if word != "</s>":
            assert document[span.start:span.end] == word


@pytest.mark.parametrize("model", ["tiny", "tiny-transformer"])
def test_streaming_answers_each_item(both, model):
    requests = [pb.StreamRequest(id=str(i), sentence=s, model=model) for i, s in enumerate([SHORT, MEDIUM, SHORT])]
    answers = {r.id: r.translation.text for r in both.TranslateStream(iter(requests))}
    assert set(answers) == {"0", "1", "2"} and answers["0"] == answers["2"]
