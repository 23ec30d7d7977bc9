"""The fast JSON conversion gives what protobuf's own json_format gives: the same keys and
values, a float32 written exactly instead of in its shortest form (both read back as the same
float32)."""

from __future__ import annotations

import math

import numpy as np
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st

from attnmt.service.http.jsonpb import floats, to_dict
from attnmt.service.stubs import translator_pb2 as pb


def reference(message) -> dict:
    return json_format.MessageToDict(message, always_print_fields_with_no_presence=True)


def as_float32(value):
    """Every float as the float32 it stands for (what a protobuf parser reads back)."""
    if isinstance(value, dict):
        return {k: as_float32(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_float32(v) for v in value]
    return np.float32(value) if isinstance(value, float) else value


def same(message) -> bool:
    return as_float32(to_dict(message)) == as_float32(reference(message))


def a_reply(weights: list[float]) -> pb.TranslateResponse:
    n = max(1, int(math.isqrt(len(weights))))
    rows = [pb.AlignmentRow(weights=weights[i:i + n]) for i in range(0, len(weights), n)]
    hyp = pb.Hypothesis(text="The house .", score=-0.25, log_prob=-1.5, target_tokens=["▁The", "▁house", "▁."],
                        token_log_probs=weights[:3], target_words=["The", "house", "."],
                        alignment=pb.Alignment(level=pb.Alignment.LEVEL_WORDS, rows=rows,
                                               links=[pb.AlignmentLink(source=0, target=1)], pharaoh="0-1"),
                        target_word_spans=[pb.Span(start=0, end=3)], suspect=True,
                        quality=pb.Quality(score=0.5, words=[pb.WordQuality(mean_log_prob=-0.1, pieces=2)]),
                        glossary_applied=[pb.GlossaryMatch(entry=1, source="casa", target="house", changed=True)])
    bare = pb.Hypothesis(text="")             # no alignment, no quality: fields with presence left out
    translation = pb.Translation(text="The house .", source_tokens=["▁La", "▁casa"], source_words=["La", "casa"],
                                 hypotheses=[hyp, bare], sentences=[pb.SentenceTranslation(
                                     source=pb.Span(start=0, end=7), target=pb.Span(start=0, end=11),
                                     translation=pb.Translation(text="The house ."))])
    return pb.TranslateResponse(translations=[translation, pb.Translation()], model="m", model_version="1")


def test_a_full_reply_is_what_json_format_gives():
    weights = np.random.default_rng(0).random(64).astype(np.float32).tolist() + [0.0, 1.0, -0.0, 1e-8, 3.4e38]
    reply = a_reply(weights)
    assert same(reply)
    assert json_format.ParseDict(to_dict(reply), pb.TranslateResponse()) == reply     # reads back exactly


def test_maps_int64_and_optional_fields():
    info = pb.ModelInfo(name="m", vocab_size=8000, is_default=True, evaluation={"test.bleu": 20.5},
                        limits={"max_beam_size": 16}, dimensions={"d_model": 256})
    assert same(info) and to_dict(info)["limits"] == {"max_beam_size": "16"}
    options = pb.DecodingOptions(beam_size=5, length_penalty=0.0, alignment=pb.ALIGNMENT_HARD)   # optional, set to 0
    assert same(options) and to_dict(options)["lengthPenalty"] == 0.0
    assert "maxLengthRatio" not in to_dict(options)


def test_special_floats():
    values = [float("nan"), float("inf"), float("-inf"), 1.5]
    reply = pb.AlignmentRow(weights=values)
    assert to_dict(reply) == reference(reply) == {"weights": ["NaN", "Infinity", "-Infinity", 1.5]}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), max_size=40))
def test_every_float32_reads_back_as_itself(values):
    row = pb.AlignmentRow(weights=values)
    assert json_format.ParseDict({"weights": floats(row.weights)}, pb.AlignmentRow()) == row
    assert same(row)


@settings(max_examples=300, deadline=None)
@given(st.floats(width=32))
def test_one_float32_field_as_json_format(value):
    message = pb.Quality(score=value)
    assert same(message) or math.isnan(value)
    assert json_format.ParseDict(to_dict(message), pb.Quality()).score == message.score or math.isnan(value)
