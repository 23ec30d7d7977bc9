"""The hard-link rule chosen by measurement: a model directory whose manifest
names a rule (`hard_links`) gets its links made by that rule, a request's threshold still
overrides it, and `GetModel` reports the rule, its AER and a Transformer's α heads."""

from __future__ import annotations

import json
import shutil

import grpc
import numpy as np
import pytest

from attnmt.service.modeldir.links import source_argmax, target_argmax, threshold_links
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from conftest import SHORT, RunningServer

SENTENCES = [SHORT, "kasa granda amas libo nova .", "la hundo manĝas la panon ."]


@pytest.fixture(scope="module")
def measured(tiny_model, tmp_path_factory):
    """The tiny RNNsearch again, named `tiny-measured`, its manifest naming source-argmax."""
    copy = tmp_path_factory.mktemp("measured") / "tiny-measured"
    shutil.copytree(tiny_model, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest.update(name="tiny-measured", hard_links={"rule": "source-argmax", "threshold": None,
                                                      "dev_aer": 0.376, "test_aer": 0.357})
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


@pytest.fixture(scope="module")
def stub(tiny_model, measured, tiny_transformer):
    with RunningServer([tiny_model, measured, tiny_transformer]) as server:
        with grpc.insecure_channel(server.address) as channel:
            yield pb_grpc.TranslatorStub(channel)


def _links_and_rows(stub, model: str, threshold: float | None = None):
    options = pb.DecodingOptions(beam_size=1, alignment=pb.ALIGNMENT_WORDS)
    if threshold is not None:
        options.alignment_threshold = threshold
    reply = stub.Translate(pb.TranslateRequest(sentences=SENTENCES, model=model, options=options))
    for translation in reply.translations:
        hyp = translation.hypotheses[0]
        rows = np.array([list(r.weights) for r in hyp.alignment.rows])
        assert translation.source_words[-1] == hyp.target_words[-1] == "</s>"
        yield {(link.source, link.target) for link in hyp.alignment.links}, rows[:-1, :-1]   # </s> out


def test_each_model_makes_links_by_its_own_rule(stub):
    plain = list(_links_and_rows(stub, "tiny"))
    chosen = list(_links_and_rows(stub, "tiny-measured"))
    for (links, alpha), (measured_links, measured_alpha) in zip(plain, chosen):
        np.testing.assert_allclose(alpha, measured_alpha, atol=1e-6)    # the same model, the same α
        assert links == target_argmax(alpha)
        assert measured_links == source_argmax(alpha)
    assert any(a != b for (a, _), (b, _) in zip(plain, chosen))       # the sentences tell the rules apart


def test_a_requests_threshold_overrides_the_models_rule(stub):
    for links, alpha in _links_and_rows(stub, "tiny-measured", threshold=0.2):
        assert links == threshold_links(alpha, 0.2)


def test_get_model_reports_the_rule_its_aer_and_the_transformers_heads(stub):
    measured = stub.GetModel(pb.GetModelRequest(name="tiny-measured")).alignment
    assert measured.rule == "source-argmax" and not measured.HasField("threshold")
    assert measured.dev_aer == pytest.approx(0.376) and measured.test_aer == pytest.approx(0.357)
    assert not measured.HasField("layer") and list(measured.heads) == []
    plain = stub.GetModel(pb.GetModelRequest(name="tiny")).alignment
    assert plain.rule == "target-argmax" and not plain.HasField("dev_aer")
    transformer = stub.GetModel(pb.GetModelRequest(name="tiny-transformer")).alignment
    assert transformer.layer == 0 and list(transformer.heads) == [1]       # the fixture's α: head 1, last layer
