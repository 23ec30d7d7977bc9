"""The models a server holds: ListModels and GetModel describe them; a name it does not
hold is NOT_FOUND."""

from __future__ import annotations

import json

import grpc

from attnmt.service.modeldir.manifest import SCHEMA_VERSION
from attnmt.service.stubs import translator_pb2 as pb
from conftest import error_of


def test_list_and_get_model(stub):
    models = stub.ListModels(pb.ListModelsRequest()).models
    assert [m.name for m in models] == ["tiny"]
    info = stub.GetModel(pb.GetModelRequest())
    assert info.is_default and info.source_language == "xx" and info.target_language == "en"
    assert info.provider == "CPUExecutionProvider"
    assert info.limits["max_sentences_per_request"] == 64
    assert f'"schema_version": {SCHEMA_VERSION}' in info.manifest_json
    dimensions = json.loads(info.manifest_json)["dimensions"]
    assert info.architecture == "RNNsearch" and info.dimensions["decoder_hidden"] == dimensions["decoder_hidden"]
    assert "dropout" not in info.dimensions and "attention" not in info.dimensions     # whole numbers only


def test_unknown_model_is_not_found(stub):
    error = error_of(lambda: stub.Translate(pb.TranslateRequest(sentences=["a"], model="nope")))
    assert error.code() == grpc.StatusCode.NOT_FOUND and "tiny" in error.details()
    assert error_of(lambda: stub.GetModel(pb.GetModelRequest(name="nope"))).code() == grpc.StatusCode.NOT_FOUND
