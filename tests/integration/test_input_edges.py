"""Unusual input on the paths least probed, through a real server on the bundled Spanish->English
Transformer: what the user typed comes back as typed (a sentinel-looking "⦃1⦄" among placeholders,
in plain text, markup, a stream and Align's target), a glossary term is written as given, and a
refusal quoting a huge field stays a short message with its own status."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import grpc
import pytest

from attnmt.service.server.settings import BUNDLED_TRANSFORMER
from attnmt.service.stubs import translator_pb2 as pb
from conftest import RunningServer, error_of

HUGE = "x" * 20_000          # past gRPC's 16 KiB trailer if a message quoted it whole


@pytest.fixture(scope="module")
def server():
    """The bundled Transformer in place of conftest's tiny model; conftest's `stub` calls it."""
    with RunningServer([BUNDLED_TRANSFORMER], {"ATTNMT_DEFAULT_BEAM_SIZE": "1"}, timeout=120) as running:
        yield running


def test_a_sentinel_the_user_typed_comes_back_as_typed(stub):
    sentences = ["Abre el archivo ⦃1⦄ ahora.", "Pulsa ⦃2⦄ y luego %s y %d.", "El valor ⦃12⦄ es malo."]
    texts = [t.text for t in stub.Translate(pb.TranslateRequest(sentences=sentences)).translations]
    for source, text in zip(sentences, texts):
        for kept in ("⦃1⦄", "⦃2⦄", "⦃12⦄", "%s", "%d"):
            assert text.count(kept) == source.count(kept), (source, text)
    html = stub.Translate(pb.TranslateRequest(sentences=["<p>Escribe ⦃1⦄ y <b>%s</b>.</p>"],
                                              format=pb.TEXT_FORMAT_HTML)).translations[0].text
    assert html.count("⦃1⦄") == 1 and "<b>%s</b>" in html, html
    (item,) = stub.TranslateStream(iter([pb.StreamRequest(id="a", sentence="⦃1⦄ y %s")]), timeout=60)
    assert item.translation.text.count("⦃1⦄") == 1 and item.translation.text.count("%s") == 1, item


def test_align_answers_its_target_as_sent(stub):
    answer = stub.Align(pb.AlignRequest(source="⦃1⦄ hola", target="⦃1⦄ hello"))
    assert answer.hypothesis.text == "⦃1⦄ hello"


def test_a_glossary_term_the_model_wrote_in_another_case_is_written_as_given(stub):
    answer = stub.Translate(pb.TranslateRequest(sentences=["Ve a la casa."],
                                                glossary=[pb.GlossaryEntry(source="casa", target="HOME")]))
    hyp = answer.translations[0].hypotheses[0]
    assert "HOME" in hyp.text.split() or "HOME." in hyp.text.split(), hyp.text
    assert answer.translations[0].text == hyp.text


@pytest.mark.parametrize("call, code", [
    (lambda s: s.Translate(pb.TranslateRequest(sentences=["Hola"], model=HUGE)), grpc.StatusCode.NOT_FOUND),
    (lambda s: s.Translate(pb.TranslateRequest(sentences=["Hola"], source_language=HUGE, target_language=HUGE)),
     grpc.StatusCode.INVALID_ARGUMENT),
    (lambda s: s.Translate(pb.TranslateRequest(sentences=["Hola"], glossary_name=HUGE)),
     grpc.StatusCode.INVALID_ARGUMENT),
    (lambda s: s.Align(pb.AlignRequest(source="Hola", target="Hello", model=HUGE)), grpc.StatusCode.NOT_FOUND),
    (lambda s: s.GetModel(pb.GetModelRequest(name=HUGE)), grpc.StatusCode.NOT_FOUND),
])
def test_a_refusal_quoting_a_huge_field_is_short_and_keeps_its_status(stub, call, code):
    error = error_of(lambda: call(stub))
    assert error.code() == code, error.details()
    assert len(error.details()) < 1_000 and "(20000 characters)" in error.details()


def test_over_http_a_refusal_quoting_a_huge_field_is_short_too(server):
    request = urllib.request.Request(f"{server.http}/v1/translate", method="POST",
                                     data=json.dumps({"sentences": ["Hola"], "model": HUGE}).encode(),
                                     headers={"content-type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=30)
    assert info.value.code == 404
    assert len(json.loads(info.value.read())["error"]["message"]) < 1_000
