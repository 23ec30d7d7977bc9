"""A decoder step that fails inside ONNX Runtime fails only the requests in it: INTERNAL for
them, and the same model and the others keep serving."""

from __future__ import annotations

import grpc
import numpy as np

from attnmt.service.inference.engine import Engine
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from conftest import SHORT, RunningServer, error_of, markov_model


def test_failing_step_fails_only_its_requests(tiny_model, tmp_path):
    vocab = Engine(tiny_model).manifest.vocab_size
    table = np.log(np.full((16, vocab), 1.0 / vocab, dtype=np.float32))
    table[:, 3] = 0.0                                     # </s> at once: short outputs
    broken = markov_model(tmp_path, tiny_model, table, vocab=vocab)   # tokens >= 16 crash the step
    with RunningServer([tiny_model, broken]) as server, grpc.insecure_channel(server.address) as channel:
        s = pb_grpc.TranslatorStub(channel)
        error = error_of(lambda: s.Align(pb.AlignRequest(source="kasa .", target="house sees the dog .",
                                                        model="markov")))
        assert error.code() == grpc.StatusCode.INTERNAL and "decoder step failed" in error.details()
        assert server.metric("attnmt_step_failures_total") == 1
        # the same model and the other one still serve
        assert s.Translate(pb.TranslateRequest(sentences=["kasa ."], model="markov")).translations[0]
        assert s.Translate(pb.TranslateRequest(sentences=[SHORT], model="tiny")).translations[0].text
