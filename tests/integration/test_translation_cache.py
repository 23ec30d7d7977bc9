"""The translation cache (ATTNMT_CACHE_SIZE): a repeated request with the same options is
answered without decoding; other options are another entry."""

from __future__ import annotations

import grpc

from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from conftest import SHORT, RunningServer


def test_translation_cache_answers_repeats_without_decoding(tiny_model):
    with RunningServer([tiny_model], {"ATTNMT_CACHE_SIZE": "2", "ATTNMT_DEFAULT_BEAM_SIZE": "1"}) as server, \
            grpc.insecure_channel(server.address) as channel:
        s = pb_grpc.TranslatorStub(channel)
        words = pb.DecodingOptions(alignment=pb.ALIGNMENT_WORDS)
        first = s.Translate(pb.TranslateRequest(sentences=[SHORT], options=words))
        again = s.Translate(pb.TranslateRequest(sentences=[SHORT], options=words))
        assert again == first
        assert server.metric("attnmt_cache_requests_total", result="hit") == 1
        assert server.metric("attnmt_sentences_total", model="tiny") == 1        # one decode (not the warm-up)
        # another option is another answer: a miss
        s.Translate(pb.TranslateRequest(sentences=[SHORT], options=pb.DecodingOptions(beam_size=2)))
        assert server.metric("attnmt_cache_requests_total", result="miss") == 2
        assert server.metric("attnmt_cache_entries", model="tiny") == 2
