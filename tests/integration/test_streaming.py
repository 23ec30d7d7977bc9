"""TranslateStream: each sentence answered with its id, a malformed item ending the stream,
and a client that does not read holding the server back from reading more."""

from __future__ import annotations

import threading
import time

import grpc
import pytest

from attnmt.service.client import Client
from attnmt.service.inference.search import SearchOptions
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from conftest import LONG, LONG_SENTENCE, SHORT, RunningServer


def test_stream_answers_each_sentence_with_its_id(server):
    sentences = {f"s{i}": s for i, s in enumerate([SHORT, LONG, "gato .", "", "kasa" * 450, SHORT])}
    received = server.metric("grpc_server_msg_received_total", grpc_method="TranslateStream")
    sent = server.metric("grpc_server_msg_sent_total", grpc_method="TranslateStream")
    with Client(server.address) as client:
        results = dict(client.stream(sentences.items(), SearchOptions(beam_size=2)))
    assert server.metric("grpc_server_msg_received_total", grpc_method="TranslateStream") == received + 6
    assert server.metric("grpc_server_msg_sent_total", grpc_method="TranslateStream") == sent + 6
    assert server.metric("grpc_server_handled_total", grpc_method="TranslateStream", grpc_type="bidi_stream",
                         grpc_code="OK") >= 1
    assert set(results) == set(sentences)
    assert isinstance(results["s4"], pb.Error) and results["s4"].code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert results["s0"].best.text == results["s5"].best.text == "the dog sees the house ."
    assert results["s3"].hypotheses == []


def test_a_malformed_stream_item_ends_the_stream_invalid_argument(server):
    with grpc.insecure_channel(server.address) as channel:
        call = channel.stream_stream("/attnmt.v1.Translator/TranslateStream")
        good = pb.StreamRequest(id="a", sentence=SHORT).SerializeToString()
        with pytest.raises(grpc.RpcError) as error:
            list(call(iter([good, b"\x12\x02\xff\xfe"]), timeout=10))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_stream_client_that_does_not_read_stops_being_read(tiny_model):
    """Issue 7 #3: responses waiting to be sent hold their permits, so the server stops
    reading requests instead of buffering without bound."""
    env = {"ATTNMT_MAX_STREAM_IN_FLIGHT": "4", "ATTNMT_DEFAULT_BEAM_SIZE": "1"}
    with RunningServer([tiny_model], env) as server, grpc.insecure_channel(server.address) as channel:
        sent = threading.Event()
        count = {"n": 0}

        def requests():
            soft = pb.DecodingOptions(alignment=pb.ALIGNMENT_SOFT)      # large responses: ~15 kB each
            for i in range(1000):
                count["n"] += 1
                yield pb.StreamRequest(id=str(i), sentence=LONG_SENTENCE, options=soft)
            sent.set()
        responses = pb_grpc.TranslatorStub(channel).TranslateStream(requests(), timeout=60)
        received = lambda: server.metric("grpc_server_msg_received_total", grpc_method="TranslateStream")  # noqa: E731
        before, give_up = -1.0, time.monotonic() + 20
        while time.monotonic() < give_up:            # wait until the server stops reading
            time.sleep(0.5)
            now = received()
            if now == before:
                break
            before = now
        # never read a response: the server stopped reading long before the end
        # (what it did read is its bound plus what the transport's flow-control windows hold)
        assert received() < 500
        answered = sum(1 for _ in responses)          # now read everything: all 1000 come back
        assert answered == 1000 and sent.is_set()
