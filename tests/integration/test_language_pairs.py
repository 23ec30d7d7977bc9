"""Routing by language pair on a real `attnmt serve` of three models in different directions,
over gRPC and the native HTTP API alike: `source_language` / `target_language` choose the model,
`auto` detects the source among the languages served for the target, a model and a pair must
agree, a pair nobody serves is INVALID_ARGUMENT (400) naming the pairs served, and a v1 request
without the fields is answered as before. The three models are the tiny one relabelled (their
translations are alike: the `model` and pair of each answer tell them apart)."""

from __future__ import annotations

import grpc
import httpx
import pytest

from attnmt.service.stubs import translator_pb2 as pb
from conftest import SHORT, RunningServer, error_of

SPANISH = "¿Dónde está la estación de tren más cercana?"
ENGLISH = "Where is the nearest train station, please?"
SERVED = "served pairs: es->en, en->es, xx->en"        # the default model's pair first


@pytest.fixture(scope="module")
def server(paired_models):
    """tiny-es-en (the default), tiny-en-es and tiny (xx->en): "en" sorts before "es"."""
    with RunningServer(paired_models, {"ATTNMT_DEFAULT_BEAM_SIZE": "1"}) as running:
        yield running


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.http, timeout=60) as client:
        yield client


def routed(reply) -> tuple[str, str, str]:
    return reply.model, reply.source_language, reply.target_language


@pytest.mark.parametrize("source, target, expected", [
    ("es", "en", ("tiny-es-en", "es", "en")),
    ("en", "es", ("tiny-en-es", "en", "es")),
    ("xx", "en", ("tiny", "xx", "en")),
    ("en", "", ("tiny-en-es", "en", "es")),      # a source alone: its one target
    ("", "es", ("tiny-en-es", "en", "es")),      # a target alone: its one source
    ("es", "", ("tiny-es-en", "es", "en")),
])
def test_the_pair_chooses_the_model(stub, http, source, target, expected):
    reply = stub.Translate(pb.TranslateRequest(sentences=[SHORT], source_language=source, target_language=target))
    assert routed(reply) == expected and not reply.HasField("detected_language")
    r = http.post("/v1/translate", json={"sentences": [SHORT], "sourceLanguage": source, "targetLanguage": target})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["model"], body["sourceLanguage"], body["targetLanguage"]) == expected
    assert "detectedLanguage" not in body
    assert body["translations"][0]["text"] == reply.translations[0].text


def test_auto_detects_among_the_sources_served_for_the_target(stub, http):
    # into en: es and xx are served; the Spanish is Spanish
    reply = stub.Translate(pb.TranslateRequest(sentences=[SPANISH], source_language="auto", target_language="en"))
    assert routed(reply) == ("tiny-es-en", "es", "en")
    assert reply.detected_language.language == "es" and reply.detected_language.confidence > 0.5
    # no target: every served source is a candidate, and the English goes to en's one target
    r = http.post("/v1/translate", json={"sentences": [ENGLISH], "source_language": "auto"})
    body = r.json()
    assert r.status_code == 200 and (body["model"], body["sourceLanguage"], body["targetLanguage"]) == \
        ("tiny-en-es", "en", "es")
    assert body["detectedLanguage"]["language"] == "en" and 0.5 < body["detectedLanguage"]["confidence"] <= 1
    # English into en: only es and xx could answer; the likeliest of them, and the confidence says it is unlikely
    reply = stub.Translate(pb.TranslateRequest(sentences=[ENGLISH], source_language="auto", target_language="en"))
    assert reply.source_language == "es" and reply.detected_language.confidence < 0.2
    # one source served into es: that one, however the text reads
    reply = stub.Translate(pb.TranslateRequest(sentences=[SHORT], source_language="auto", target_language="es"))
    assert routed(reply) == ("tiny-en-es", "en", "es") and reply.detected_language.language == "en"


def test_a_model_and_a_pair_must_agree(stub, http):
    agreeing = stub.Translate(pb.TranslateRequest(sentences=[SHORT], model="tiny-en-es", source_language="en",
                                                  target_language="es"))
    assert routed(agreeing) == ("tiny-en-es", "en", "es")
    half = stub.Translate(pb.TranslateRequest(sentences=[SHORT], model="tiny", target_language="en"))
    assert routed(half) == ("tiny", "xx", "en")
    error = error_of(lambda: stub.Translate(pb.TranslateRequest(sentences=[SHORT], model="tiny-en-es",
                                                                source_language="es", target_language="en")))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "model 'tiny-en-es' translates en->es, not es->en" in error.details()
    r = http.post("/v1/translate", json={"sentences": [SHORT], "model": "tiny-en-es", "targetLanguage": "en"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_ARGUMENT"
    assert "model 'tiny-en-es' translates en->es, not into en" in r.json()["error"]["message"]


@pytest.mark.parametrize("source, target, words", [
    ("es", "fr", f"no model translates es->fr; {SERVED}"),
    ("de", "en", f"no model translates de->en; {SERVED}"),
    ("en", "en", f"no model translates en->en; {SERVED}"),
    ("de", "", f"no model translates from de; {SERVED}"),
    ("", "fr", f"no model translates into fr; {SERVED}"),
    ("auto", "fr", f"no model translates into fr; {SERVED}"),
    ("", "en", "en is translated from es, xx: set source_language"),
])
def test_a_pair_not_served_names_the_pairs_served(stub, http, source, target, words):
    error = error_of(lambda: stub.Translate(pb.TranslateRequest(sentences=[SHORT], source_language=source,
                                                                target_language=target)))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and words in error.details()
    r = http.post("/v1/translate", json={"sentences": [SHORT], "sourceLanguage": source, "targetLanguage": target})
    assert r.status_code == 400 and r.json()["error"] == {"code": "INVALID_ARGUMENT", "message": error.details()}


def test_a_v1_request_is_answered_as_before(stub, http):
    default = stub.Translate(pb.TranslateRequest(sentences=[SHORT]))
    assert routed(default) == ("tiny-es-en", "es", "en")
    by_name = stub.Translate(pb.TranslateRequest(sentences=[SHORT], model="tiny"))
    assert routed(by_name) == ("tiny", "xx", "en")
    assert by_name.translations[0].text == default.translations[0].text       # one network, three labels
    missing = error_of(lambda: stub.Translate(pb.TranslateRequest(sentences=[SHORT], model="nope")))
    assert missing.code() == grpc.StatusCode.NOT_FOUND
    r = http.post("/v1/translate", json={"sentences": [SHORT], "model": "tiny"})
    assert r.status_code == 200 and r.json()["model"] == "tiny"
    assert http.post("/v1/translate", json={"sentences": [SHORT], "model": "nope"}).status_code == 404


def test_the_fields_are_checked_like_the_others(http):
    r = http.post("/v1/translate", json={"sentences": [SHORT], "sourceLanguage": 5})
    assert r.status_code == 400 and "sourceLanguage" in r.json()["error"]["message"]
    r = http.post("/v1/align", json={"source": SHORT, "target": "the dog sees the house .", "target_language": ["en"]})
    assert r.status_code == 400 and "target_language" in r.json()["error"]["message"]
    schemas = http.get("/openapi.json").json()["components"]["schemas"]
    for message in ("TranslateRequest", "AlignRequest"):
        properties = schemas[message]["properties"]
        assert properties["targetLanguage"]["type"] == ["string", "null"]
        assert '"auto"' in schemas[message]["properties"]["sourceLanguage"]["description"]
    assert "detectedLanguage" in schemas["TranslateResponse"]["properties"]


def test_align_by_pair(stub, http):
    reply = stub.Align(pb.AlignRequest(source=SHORT, target="the dog sees the house .", source_language="en",
                                       target_language="es"))
    assert routed(reply) == ("tiny-en-es", "en", "es") and reply.hypothesis.text == "the dog sees the house ."
    r = http.post("/v1/align", json={"source": SPANISH, "target": "the dog .", "sourceLanguage": "auto",
                                     "targetLanguage": "en"})
    body = r.json()
    assert r.status_code == 200 and body["model"] == "tiny-es-en" and body["detectedLanguage"]["language"] == "es"
    error = error_of(lambda: stub.Align(pb.AlignRequest(source=SHORT, target="the dog .", source_language="es",
                                                        target_language="fr")))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and SERVED in error.details()


def test_a_stream_takes_the_first_messages_pair(stub):
    requests = [pb.StreamRequest(id="first", sentence=SHORT, source_language="en", target_language="es"),
                pb.StreamRequest(id="inherits", sentence=SHORT),
                pb.StreamRequest(id="by-name", sentence=SHORT, model="tiny"),
                pb.StreamRequest(id="auto", sentence=SPANISH, source_language="auto", target_language="en"),
                pb.StreamRequest(id="unserved", sentence=SHORT, source_language="es", target_language="fr")]
    answers = {r.id: r for r in stub.TranslateStream(iter(requests))}
    assert routed(answers["first"]) == routed(answers["inherits"]) == ("tiny-en-es", "en", "es")
    assert routed(answers["by-name"]) == ("tiny", "xx", "en")
    assert routed(answers["auto"]) == ("tiny-es-en", "es", "en")
    assert answers["auto"].detected_language.language == "es"
    assert not answers["first"].HasField("detected_language") and answers["first"].translation.text
    error = answers["unserved"].error
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and SERVED in error.message
    assert not answers["unserved"].HasField("translation")


def test_libretranslates_routes_read_the_same_table(http):
    """The web page's default stays the default model's pair, Spanish to English, though "en" sorts first."""
    settings = http.get("/frontend/settings").json()
    assert settings["language"] == {"source": {"code": "es", "name": "Spanish"},
                                    "target": {"code": "en", "name": "English"}}
    languages = {lang["code"]: lang["targets"] for lang in http.get("/languages").json()}
    assert languages == {"en": ["es"], "es": ["en"], "xx": ["en"]}
    r = http.post("/translate", json={"q": SHORT, "source": "en", "target": "es"})
    assert r.status_code == 200 and r.json()["translatedText"]
    r = http.post("/translate", json={"q": SHORT, "source": "es", "target": "fr"})
    assert r.status_code == 400 and r.json() == {"error": "fr is not supported"}
