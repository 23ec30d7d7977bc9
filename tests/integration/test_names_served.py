"""Names the model never learnt, kept as written, on a real `attnmt serve` of the bundled models:
on by default for a model with a known-words list (gRPC, LibreTranslate's API), off on request,
and the same as offline."""

from __future__ import annotations

import grpc
import httpx
import pytest

from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import SearchOptions
from attnmt.service.server.settings import BUNDLED_TRANSFORMER
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as rpc
from attnmt.service.text.translator import Translator

pytestmark = pytest.mark.skipif(not (BUNDLED_TRANSFORMER / "manifest.json").exists(), reason="no bundled model")
# "ğ" is no piece of the default model's vocabulary: left to itself, the model writes "⁇" for it.
SENTENCE = "El presidente Recep Tayyip Erdoğan habló por teléfono con Trump."


@pytest.fixture(scope="module")
def stub(bundled_server):
    with grpc.insecure_channel(bundled_server.address) as channel:
        yield rpc.TranslatorStub(channel)


def test_every_bundled_model_says_it_keeps_names(stub):
    assert [m.keeps_names for m in stub.ListModels(pb.ListModelsRequest()).models] == [True, True, True]


def test_a_name_comes_back_as_written_unless_the_request_turns_it_off(stub):
    kept = stub.Translate(pb.TranslateRequest(sentences=[SENTENCE])).translations[0]
    plain = stub.Translate(pb.TranslateRequest(sentences=[SENTENCE], options=pb.DecodingOptions(
        keep_names=False))).translations[0]
    assert "Erdoğan" in kept.text and "Tayyip" in kept.text, kept.text
    assert "Erdoğan" not in plain.text, plain.text
    assert not kept.hypotheses[0].glossary_applied             # not a glossary's term
    offline = Translator(Engine(BUNDLED_TRANSFORMER))
    assert plain.text == offline.translate([SENTENCE], SearchOptions(beam_size=5), keep_names=False)[0].best.text
    assert kept.text == offline.translate([SENTENCE], SearchOptions(beam_size=5))[0].best.text


def test_a_request_glossary_still_wins_over_a_kept_name(stub):
    reply = stub.Translate(pb.TranslateRequest(sentences=[SENTENCE],
                                               glossary=[pb.GlossaryEntry(source="Erdoğan", target="Erdogan")]))
    hyp = reply.translations[0].hypotheses[0]
    assert "Erdogan" in hyp.text and "Erdoğan" not in hyp.text, hyp.text
    assert [(m.source, m.target) for m in hyp.glossary_applied] == [("Erdoğan", "Erdogan")]


def test_http_clients_get_the_name_and_can_turn_it_off(bundled_server):
    with httpx.Client(base_url=bundled_server.http, timeout=60) as client:
        lt = client.post("/translate", json={"q": SENTENCE, "source": "es", "target": "en"})
        native = client.post("/v1/translate", json={"sentences": [SENTENCE], "options": {"keep_names": False}})
        info = client.get("/v1/models/transformer-es-en")
    assert lt.status_code == 200 and "Erdoğan" in lt.json()["translatedText"], lt.text
    assert native.status_code == 200 and "Erdoğan" not in native.json()["translations"][0]["text"], native.text
    assert info.json()["keepsNames"] is True
