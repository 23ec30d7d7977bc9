"""Batching never changes an answer: a sentence decoded alone and among concurrent requests,
with step-level or request-level batching, gets the same translation."""

from __future__ import annotations

import concurrent.futures

import grpc
import numpy as np
import pytest

from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from conftest import LONG, SHORT, RunningServer


def test_same_answer_alone_and_among_concurrent_requests(stub):
    options = pb.DecodingOptions(beam_size=2, alignment=pb.ALIGNMENT_SOFT)
    alone = stub.Translate(pb.TranslateRequest(sentences=[SHORT], options=options)).translations[0]
    crowd = [LONG, "gato .", LONG + " " + LONG, SHORT, "sola amas luna granda ."] * 4
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda s: stub.Translate(pb.TranslateRequest(sentences=[s], options=options)), crowd))
    for sentence, answer in zip(crowd, answers):
        if sentence == SHORT:
            got = answer.translations[0].hypotheses[0]
            assert got.text == alone.text
            assert got.score == pytest.approx(alone.hypotheses[0].score, abs=1e-5)
            a = np.array([list(r.weights) for r in got.alignment.rows])
            b = np.array([list(r.weights) for r in alone.hypotheses[0].alignment.rows])
            assert np.abs(a - b).max() < 1e-5


def test_request_level_batching_gives_the_same_answers(tiny_model, stub):
    crowd = [LONG, "gato .", SHORT, "sola amas luna granda ."]
    want = [t.text for t in stub.Translate(pb.TranslateRequest(sentences=crowd)).translations]
    with RunningServer([tiny_model], {"ATTNMT_BATCHING": "request", "ATTNMT_DEFAULT_BEAM_SIZE": "1"}) as server:
        with grpc.insecure_channel(server.address) as channel:
            s = pb_grpc.TranslatorStub(channel)
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                got = list(pool.map(lambda x: s.Translate(pb.TranslateRequest(sentences=[x])).translations[0].text,
                                    crowd))
    assert got == want
