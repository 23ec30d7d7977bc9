"""The alignment the server returns: the four kinds a Translate request can ask for, and
Align (forced decoding of a given target) reproducing a translation's own alignment."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from attnmt.service.stubs import translator_pb2 as pb
from conftest import LONG, error_of


def test_alignment_kinds(stub):
    def ask(kind, **extra):
        return stub.Translate(pb.TranslateRequest(sentences=["kasa granda vidas peru ."],
                                                  options=pb.DecodingOptions(alignment=kind, **extra))).translations[0]
    none = ask(pb.ALIGNMENT_NONE)
    assert none.text == "the big house sees the dog ."
    assert not none.hypotheses[0].HasField("alignment") and not none.source_words

    soft = ask(pb.ALIGNMENT_SOFT).hypotheses[0]
    assert soft.alignment.level == pb.Alignment.LEVEL_PIECES
    assert len(soft.alignment.rows) == len(soft.target_tokens)
    assert np.allclose([sum(r.weights) for r in soft.alignment.rows], 1, atol=1e-5)

    words = ask(pb.ALIGNMENT_WORDS)
    hyp = words.hypotheses[0]
    assert hyp.alignment.level == pb.Alignment.LEVEL_WORDS
    assert list(words.source_words) == ["kasa", "granda", "vidas", "peru", ".", "</s>"]
    assert list(hyp.target_words) == ["the", "big", "house", "sees", "the", "dog", ".", "</s>"]
    assert len(hyp.alignment.rows) == 8 and all(len(r.weights) == 6 for r in hyp.alignment.rows)
    assert np.allclose([sum(r.weights) for r in hyp.alignment.rows], 1, atol=1e-5)
    links = {(link.source, link.target) for link in hyp.alignment.links}
    assert (1, 1) in links and (0, 2) in links         # granda-big, kasa-house: crossed

    hard = ask(pb.ALIGNMENT_HARD, alignment_threshold=0.3).hypotheses[0]
    assert not hard.alignment.rows
    assert hard.alignment.pharaoh == " ".join(f"{link.source}-{link.target}" for link in hard.alignment.links)


def test_align_reproduces_the_translation_alignment(stub):
    translation = stub.Translate(pb.TranslateRequest(sentences=[LONG], options=pb.DecodingOptions(
        alignment=pb.ALIGNMENT_WORDS))).translations[0]
    aligned = stub.Align(pb.AlignRequest(source=LONG, target=translation.text))
    hyp, want = aligned.hypothesis, translation.hypotheses[0]
    assert list(hyp.target_tokens) == list(want.target_tokens)
    assert hyp.log_prob == pytest.approx(want.log_prob, abs=1e-4)
    got = np.array([list(r.weights) for r in hyp.alignment.rows])
    expected = np.array([list(r.weights) for r in want.alignment.rows])
    assert np.abs(got - expected).max() < 1e-5
    error = error_of(lambda: stub.Align(pb.AlignRequest(source=LONG, target="")))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
