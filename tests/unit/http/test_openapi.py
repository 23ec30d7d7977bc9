"""The OpenAPI document (service/http/openapi.py): a valid OpenAPI 3.1 document whose
schemas are the proto's messages as protobuf's JSON mapping writes them, described by
the proto's comments, beside LibreTranslate's routes."""

import copy

import jsonschema
import pytest
from google.protobuf import json_format
from openapi_spec_validator import validate

from attnmt.service.http import openapi
from attnmt.service.stubs import translator_pb2 as pb

NATIVE_MESSAGES = [pb.TranslateRequest, pb.TranslateResponse, pb.AlignRequest, pb.AlignResponse,
                   pb.ListModelsResponse, pb.ModelInfo]


@pytest.fixture(scope="module")
def doc():
    return openapi.document("attnmt", "1.2.3")


def reachable(descriptors):
    """Every message and enum reachable from `descriptors` (map entries stand for their values)."""
    seen, todo = {}, list(descriptors)
    while todo:
        d = todo.pop()
        if d.full_name in seen:
            continue
        seen[d.full_name] = d
        for f in getattr(d, "fields", []):
            entry = f.message_type
            if entry is not None and entry.GetOptions().map_entry:
                f = entry.fields_by_name["value"]
            todo += [t for t in (f.message_type, f.enum_type) if t is not None]
    return seen


def schema_name(full_name: str) -> str:
    return full_name.removeprefix("attnmt.v1.")


def validator(doc, name: str, strict: bool = True):
    """A JSON Schema validator for components/schemas/<name>, its $refs resolved in the document.
    Strict: no properties beyond those declared, so a misspelt field name fails."""
    components = copy.deepcopy(doc["components"])
    if strict:
        for schema in components["schemas"].values():
            if "properties" in schema:
                schema["additionalProperties"] = False
    return jsonschema.Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": components})


def test_the_document_is_valid_openapi(doc):
    validate(doc)
    assert doc["openapi"].startswith("3.1")
    assert (doc["info"]["title"], doc["info"]["version"]) == ("attnmt", "1.2.3")


def test_every_message_the_native_routes_use_has_a_schema_with_its_json_names(doc):
    schemas = doc["components"]["schemas"]
    assert not set(openapi.HAND_WRITTEN_SCHEMAS) & set(openapi.proto_schemas({})), "a name taken twice"
    for full_name, d in reachable(m.DESCRIPTOR for m in NATIVE_MESSAGES).items():
        assert schema_name(full_name) in schemas, full_name
        if hasattr(d, "fields"):
            assert set(schemas[schema_name(full_name)]["properties"]) == {f.json_name for f in d.fields}


def test_the_native_routes_take_and_return_the_proto_messages(doc):
    paths = doc["paths"]
    translate = paths["/v1/translate"]["post"]
    assert translate["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/TranslateRequest")
    assert translate["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/TranslateResponse")
    assert "Retry-After" in translate["responses"]["429"]["headers"]
    assert {"400", "404", "413", "429", "503", "504"} <= set(translate["responses"])
    assert paths["/v1/align"]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/AlignRequest")
    assert paths["/v1/models/{name}"]["get"]["responses"]["200"]["content"]["application/json"]["schema"][
        "$ref"].endswith("/ModelInfo")
    assert {"/v1/models", "/healthz", "/readyz"} <= set(paths)
    assert "/metrics" not in paths
    assert "503" in paths["/readyz"]["get"]["responses"]


def test_the_protos_comments_reach_the_descriptions(doc):
    schemas = doc["components"]["schemas"]
    assert schemas["TranslateRequest"]["properties"]["sentences"]["description"].startswith(
        "Sentences to translate, one per entry.")
    assert schemas["Quality"]["description"].startswith("Quality estimation from the model's own signals")
    assert "Optional" in schemas["DecodingOptions"]["properties"]["lengthPenalty"]["description"]
    assert doc["paths"]["/v1/translate"]["post"]["description"].startswith("Translate one or more sentences.")
    assert "RNNsearch" in doc["info"]["description"]


def test_without_the_descriptor_set_the_document_is_still_valid(monkeypatch, tmp_path):
    monkeypatch.setattr(openapi.resources, "files", lambda package: tmp_path)   # no translator.binpb there
    doc = openapi.document("attnmt", "1")
    validate(doc)
    assert "description" not in doc["components"]["schemas"]["TranslateRequest"]["properties"]["sentences"]


def test_enums_are_strings_listing_their_names(doc):
    schemas = doc["components"]["schemas"]
    for enum in (pb.AlignmentKind, pb.TextFormat, pb.Alignment.Level):
        by_name, by_number = schemas[schema_name(enum.DESCRIPTOR.full_name)]["anyOf"]   # the mapping reads both
        assert by_name["type"] == "string" and by_number["type"] == "integer"
        assert by_name["enum"] == [v.name for v in enum.DESCRIPTOR.values]
    assert "`ALIGNMENT_HARD`: Hard links between words only." in schemas["AlignmentKind"]["description"]


def test_the_libretranslate_routes_are_documented(doc):
    paths = doc["paths"]
    for path, method in [("/translate", "post"), ("/languages", "get"), ("/detect", "post"),
                         ("/frontend/settings", "get"), ("/health", "get")]:
        assert "LibreTranslate" in paths[path][method]["tags"], path
    translate = paths["/translate"]["post"]
    assert {"application/json", "application/x-www-form-urlencoded"} <= set(translate["requestBody"]["content"])
    assert {"400", "403", "429", "500"} <= set(translate["responses"])
    mastodon = {"translatedText": ["Hello", "World"], "detectedLanguage": [{"confidence": 90.0, "language": "es"}] * 2}
    validator(doc, "LibreTranslateResponse").validate(mastodon)
    validator(doc, "LibreTranslateResponse").validate({"translatedText": "Hi", "alternatives": ["Hello"]})
    validator(doc, "LibreTranslateRequest").validate({"q": ["Hola"], "source": "auto", "target": "en",
                                                      "format": "html", "api_key": ""})


def a_translate_response() -> pb.TranslateResponse:
    hypothesis = pb.Hypothesis(
        text="the house", score=-0.4, log_prob=-1.2, target_tokens=["▁the", "▁house", "</s>"],
        token_log_probs=[-0.5, -0.6, -0.1], target_words=["the", "house", "</s>"],
        alignment=pb.Alignment(level=pb.Alignment.LEVEL_WORDS,
                               rows=[pb.AlignmentRow(weights=[0.9, 0.05, 0.05]),
                                     pb.AlignmentRow(weights=[0.1, 0.8, 0.1]),
                                     pb.AlignmentRow(weights=[0.0, 0.1, 0.9])],
                               links=[pb.AlignmentLink(source=0, target=0), pb.AlignmentLink(source=1, target=1)],
                               pharaoh="0-0 1-1"),
        target_word_spans=[pb.Span(start=0, end=3), pb.Span(start=4, end=9), pb.Span(start=9, end=9)],
        quality=pb.Quality(score=0.8, mean_log_prob=-0.4, words=[pb.WordQuality(mean_log_prob=-0.5, pieces=1)]),
        suspect=False,
        glossary_applied=[pb.GlossaryMatch(entry=0, source="casa", target="house", source_start=1, source_end=2,
                                           target_start=1, target_end=2, changed=True)])
    translation = pb.Translation(text="the house", source_tokens=["▁la", "▁casa", "</s>"],
                                 source_words=["la", "casa", "</s>"], hypotheses=[hypothesis],
                                 source_word_spans=[pb.Span(start=0, end=2), pb.Span(start=3, end=7)])
    document = pb.Translation(text="the house", sentences=[pb.SentenceTranslation(
        source=pb.Span(start=0, end=7), target=pb.Span(start=0, end=9), translation=translation)])
    return pb.TranslateResponse(translations=[translation, document], model="es-en", model_version="3")


@pytest.mark.parametrize("with_defaults", [False, True])
def test_a_real_translate_response_validates_against_its_schema(doc, with_defaults):
    body = json_format.MessageToDict(a_translate_response(), always_print_fields_with_no_presence=with_defaults)
    assert body["translations"][0]["hypotheses"][0]["alignment"]["level"] == "LEVEL_WORDS"
    validator(doc, "TranslateResponse").validate(body)
    body["translations"][0]["hypotheses"][0]["alignment"]["rows"][0]["weights"] = "0.9 0.05"
    with pytest.raises(jsonschema.ValidationError):
        validator(doc, "TranslateResponse").validate(body)


def test_a_request_and_model_info_with_64_bit_maps_validate(doc):
    request = pb.TranslateRequest(sentences=["Hola."], format=pb.TEXT_FORMAT_HTML, glossary=[
        pb.GlossaryEntry(source="hola", target="hello")], options=pb.DecodingOptions(
        beam_size=4, length_penalty=0.6, alignment=pb.ALIGNMENT_HARD))
    validator(doc, "TranslateRequest").validate(json_format.MessageToDict(request))
    info = pb.ModelInfo(name="es-en", vocab_size=8000, limits={"max_sentences_per_request": 64},
                        evaluation={"test.greedy.bleu": 21.3}, dimensions={"d_model": 256})
    body = json_format.MessageToDict(info)
    assert body["limits"] == {"max_sentences_per_request": "64"}   # 64-bit ints are strings in JSON
    validator(doc, "ModelInfo").validate(body)
    validator(doc, "ListModelsResponse").validate(json_format.MessageToDict(pb.ListModelsResponse(models=[info])))


def test_every_answer_a_route_gives_is_documented_and_the_checked_ranges_are_stated(doc):
    paths, schemas = doc["paths"], doc["components"]["schemas"]
    assert "400" in paths["/v1/models"]["get"]["responses"] and "400" in paths["/v1/models/{name}"]["get"]["responses"]
    assert {"408", "413", "503", "504"} <= set(paths["/translate"]["post"]["responses"])
    assert {"408", "413"} <= set(paths["/detect"]["post"]["responses"])
    assert "multipart/form-data" in paths["/translate"]["post"]["requestBody"]["content"]
    sentences = schemas["TranslateRequest"]["properties"]["sentences"]
    assert sentences["minItems"] == 1 and sentences["maxItems"] == 64
    threshold = schemas["AlignRequest"]["properties"]["alignmentThreshold"]
    assert threshold["exclusiveMinimum"] == 0 and threshold["maximum"] == 1
    assert schemas["LibreTranslateRequest"]["properties"]["q"]["anyOf"][0]["minLength"] == 1
