"""Requests the server refuses, and how: INVALID_ARGUMENT naming the limit, messages or
answers too large to send, bytes that do not parse, methods that do not exist. The server
keeps serving after each."""

from __future__ import annotations

import grpc
import pytest

from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from conftest import SHORT, RunningServer, error_of


@pytest.mark.parametrize("request_kwargs, field", [
    (dict(sentences=[]), "sentences is empty"),
    (dict(sentences=["a ."] * 65), "max_sentences_per_request"),
    (dict(sentences=["kasa " * 500]), "max_chars_per_sentence"),
    (dict(sentences=["kasa" * 450]), "max_tokens_per_sentence"),         # one very long word
    (dict(sentences=["a ."], options=pb.DecodingOptions(beam_size=99)), "max_beam_size"),
    (dict(sentences=["a ."], options=pb.DecodingOptions(beam_size=2, n_best=3)), "n_best"),
    (dict(sentences=["a ."], options=pb.DecodingOptions(alignment_threshold=1.5)), "alignment_threshold"),
    (dict(sentences=["a ."], options=pb.DecodingOptions(max_length_ratio=-1)), "max_length_ratio"),
    (dict(sentences=["a ."], options=pb.DecodingOptions(length_penalty=float("nan"))), "length_penalty"),
])
def test_bad_input_is_invalid_argument_naming_the_limit(stub, request_kwargs, field):
    error = error_of(lambda: stub.Translate(pb.TranslateRequest(**request_kwargs)))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in error.details()
    assert stub.Translate(pb.TranslateRequest(sentences=[SHORT])).translations[0].text   # still serving


def server_model(server) -> str:
    """The model directory `server` loaded, read from its log."""
    return next(line.split(" from ")[1].split(" on ")[0] for line in server.log if "loaded model" in line)


def test_oversize_message_is_resource_exhausted(server):
    with RunningServer([server_model(server)], {"ATTNMT_MAX_MESSAGE_BYTES": "2048"}) as small:
        with grpc.insecure_channel(small.address) as channel:
            error = error_of(lambda: pb_grpc.TranslatorStub(channel).Translate(
                pb.TranslateRequest(sentences=["kasa vidas peru ."] * 200)))
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_response_that_could_not_be_sent_is_refused_before_decoding(tiny_model):
    env = {"ATTNMT_MAX_MESSAGE_BYTES": "20000", "ATTNMT_DEFAULT_BEAM_SIZE": "1"}
    with RunningServer([tiny_model], env) as server, grpc.insecure_channel(server.address) as channel:
        s = pb_grpc.TranslatorStub(channel)
        soft = pb.DecodingOptions(beam_size=16, n_best=16, alignment=pb.ALIGNMENT_SOFT)
        error = error_of(lambda: s.Translate(pb.TranslateRequest(sentences=[SHORT] * 8, options=soft)))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "max_message_bytes (20000)" in error.details()
        assert server.metric("attnmt_sentences_total", model="tiny") == 0          # the warm-up is no call
        # links only: no up-front bound, but the finished response is still measured before it is sent
        hard = pb.DecodingOptions(beam_size=16, n_best=16, alignment=pb.ALIGNMENT_HARD)
        error = error_of(lambda: s.Translate(pb.TranslateRequest(sentences=[SHORT] * 8, options=hard)))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "over max_message_bytes" in error.details()
        small = pb.DecodingOptions(beam_size=2, n_best=2, alignment=pb.ALIGNMENT_HARD)
        assert len(s.Translate(pb.TranslateRequest(sentences=[SHORT] * 2, options=small)).translations) == 2


@pytest.mark.parametrize("method, payload", [
    ("Translate", b"\x0a\x02\xff\xfe"),          # sentences[0] is not UTF-8
    ("Translate", b"\xff\xff\xff"),              # not a protobuf at all
    ("Align", b"\x0a\x01"),                      # truncated
    ("GetModel", b"\x0a\x02\xc3\x28"),
])
def test_bytes_that_do_not_parse_get_invalid_argument(server, method, payload):
    """Issue 7 #11: they used to end UNKNOWN with a Python exception class in the message."""
    with grpc.insecure_channel(server.address) as channel:
        call = channel.unary_unary(f"/attnmt.v1.Translator/{method}")
        with pytest.raises(grpc.RpcError) as error:
            call(payload, timeout=10)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "is not a valid attnmt.v1." in error.value.details()
        # and the server keeps serving
        assert pb_grpc.TranslatorStub(channel).Translate(pb.TranslateRequest(sentences=[SHORT])).translations


def test_unknown_methods_are_answered_and_counted(server):
    with grpc.insecure_channel(server.address) as channel:
        for method in ("/attnmt.v1.Translator/Nope", "/some.Other/Thing"):
            with pytest.raises(grpc.RpcError) as error:
                channel.unary_unary(method)(b"", timeout=10)
            assert error.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert server.metric("grpc_server_handled_total", grpc_method="unknown", grpc_code="UNIMPLEMENTED") == 2
    assert server.metric("grpc_server_started_total", grpc_service="attnmt.v1.Translator", grpc_method="unknown") == 1
