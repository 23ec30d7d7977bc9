"""Long sentences translated in parts (clauses.py) on a real `attnmt serve` of the bundled models:
the same translation as offline through gRPC, a stream, a document and HTTP, one alignment over the
whole sentence, and `split_above_words` 0 keeping the sentence whole."""

from __future__ import annotations

import grpc
import httpx
import numpy as np
import pytest

from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import SearchOptions
from attnmt.service.server.settings import BUNDLED_TRANSFORMER
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as rpc
from attnmt.service.text.translator import Translator

pytestmark = pytest.mark.skipif(not (BUNDLED_TRANSFORMER / "manifest.json").exists(), reason="no bundled model")

LONG = ("El ayuntamiento aprobó ayer, tras una larga sesión que duró hasta la madrugada, un presupuesto que "
        "reduce el gasto en obras públicas, aumenta las ayudas a las familias con niños pequeños y destina una "
        "parte de los ingresos del turismo a la limpieza de las playas del municipio.")     # 46 words, 3 commas


@pytest.fixture(scope="module")
def stub(bundled_server):
    with grpc.insecure_channel(bundled_server.address) as channel:
        yield rpc.TranslatorStub(channel)


@pytest.fixture(scope="module")
def offline():
    return Translator(Engine(BUNDLED_TRANSFORMER))


def test_a_long_sentence_is_translated_in_parts_as_offline_with_one_alignment(stub, offline):
    parts = offline.parts(LONG, 20)
    assert len(parts) >= 2 and " ".join(parts) == LONG
    reply = stub.Translate(pb.TranslateRequest(sentences=[LONG], model="transformer-es-en", options=pb.DecodingOptions(
        split_above_words=20, alignment=pb.ALIGNMENT_SOFT))).translations[0]
    expected = offline.translate([LONG], SearchOptions(beam_size=5), split_above=20)[0]
    hyp = reply.hypotheses[0]
    assert hyp.text == expected.best.text
    assert list(reply.source_tokens) == expected.source_tokens and list(reply.source_tokens).count("</s>") == 1
    assert list(hyp.target_tokens) == expected.best.target_tokens and hyp.target_tokens[-1] == "</s>"
    alpha = np.array([row.weights for row in hyp.alignment.rows])
    assert alpha.shape == (len(hyp.target_tokens), len(reply.source_tokens))
    np.testing.assert_allclose(alpha.sum(axis=1), 1.0, atol=1e-3)
    # each part's translation in turn: the parts' own translations, joined
    own = [t.best.text for t in offline.translate(parts, SearchOptions(beam_size=5), split_above=0)]
    assert hyp.text.lower() == " ".join(own).lower()
    assert 0.0 < hyp.quality.score <= 1.0


def test_split_above_words_0_keeps_the_sentence_whole(stub, offline):
    reply = stub.Translate(pb.TranslateRequest(sentences=[LONG], model="transformer-es-en", options=pb.DecodingOptions(
        split_above_words=0))).translations[0]
    whole = offline.translate([LONG], SearchOptions(beam_size=5), split_above=0)[0]
    assert reply.hypotheses[0].text == whole.best.text
    assert list(reply.source_tokens) == whole.source_tokens


def test_a_stream_a_document_and_http_translate_it_the_same(stub, bundled_server, offline):
    expected = offline.translate([LONG], SearchOptions(beam_size=5), split_above=20)[0].best.text
    options = pb.DecodingOptions(split_above_words=20)
    (streamed,) = list(stub.TranslateStream(iter([pb.StreamRequest(id="1", sentence=LONG, model="transformer-es-en",
                                                                   options=options)]), timeout=120))
    assert streamed.translation.hypotheses[0].text == expected
    document = stub.Translate(pb.TranslateRequest(sentences=[LONG + "\n\nBuenos días."], model="transformer-es-en",
                                                  split_sentences=True, options=options)).translations[0]
    assert document.text.startswith(expected) and len(document.sentences) == 2
    with httpx.Client(base_url=bundled_server.http, timeout=120) as client:
        native = client.post("/v1/translate", json={"sentences": [LONG], "model": "transformer-es-en",
                                                     "options": {"split_above_words": 20}})
    assert native.status_code == 200, native.text
    assert native.json()["translations"][0]["hypotheses"][0]["text"] == expected
