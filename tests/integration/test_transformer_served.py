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
