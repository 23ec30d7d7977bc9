"""Translate through a real server: the answers the offline engine gives, blank and
control characters, and any text answered or clearly refused."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnmt.service.inference.search import SearchOptions
from attnmt.service.stubs import translator_pb2 as pb
from conftest import LONG, SHORT


@pytest.mark.parametrize("beam", [1, 3])
def test_translate_matches_the_offline_engine(stub, translator, beam):
    offline = translator.translate([SHORT, LONG], SearchOptions(beam_size=beam, n_best=beam))
    response = stub.Translate(pb.TranslateRequest(sentences=[SHORT, LONG], options=pb.DecodingOptions(
        beam_size=beam, n_best=beam, alignment=pb.ALIGNMENT_SOFT)))
    assert response.model == "tiny"
    for want, got in zip(offline, response.translations):
        assert got.text == want.best.text
        assert list(got.source_tokens) == want.source_tokens
        assert len(got.hypotheses) == beam
        for w, g in zip(want.hypotheses, got.hypotheses):
            assert list(g.target_tokens) == w.target_tokens
            assert g.score == pytest.approx(w.score, abs=1e-5)
            rows = np.array([list(r.weights) for r in g.alignment.rows])
            assert np.abs(rows - w.alignment).max() < 1e-5
            assert g.alignment.pharaoh == " ".join(f"{i}-{j}" for i, j in w.hard_alignment())


def test_empty_whitespace_and_control_characters_are_handled(stub):
    response = stub.Translate(pb.TranslateRequest(sentences=["", "   \t ", "peru\x00 vidas\x07 kasa .", SHORT]))
    empty, blank, control, plain = response.translations
    assert empty.text == "" and not empty.hypotheses
    assert blank.text == "" and not blank.hypotheses
    assert control.text == plain.text                  # control characters act as spaces


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(max_size=120), min_size=1, max_size=3))
def test_any_text_gets_a_translation_or_a_clear_refusal(stub, texts):
    try:
        response = stub.Translate(pb.TranslateRequest(sentences=texts, options=pb.DecodingOptions(
            alignment=pb.ALIGNMENT_WORDS)), timeout=30)
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e.details()
        return
    assert len(response.translations) == len(texts)
    for t in response.translations:
        for h in t.hypotheses:
            assert len(h.alignment.rows) == len(h.target_words)
