"""Fuzz every RPC: requests built by hypothesis from the proto's own
descriptors (so every field and option, including ones added later, is covered),
streams of them, and raw bytes sent as they are. Every call must end OK or with a
documented code (INVALID_ARGUMENT naming a field, NOT_FOUND, RESOURCE_EXHAUSTED),
never UNKNOWN or INTERNAL, and the server must keep serving.

One server for the module, with small limits so that hypothesis reaches them."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf.descriptor import FieldDescriptor as F
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from conftest import RunningServer

SERVICE = pb.DESCRIPTOR.services_by_name["Translator"]
DOCUMENTED = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
              grpc.StatusCode.RESOURCE_EXHAUSTED}
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow])


def field_names(descriptor, seen=None) -> set[str]:
    """Every field name reachable from a request message: what an INVALID_ARGUMENT must name."""
    seen = set() if seen is None else seen
    if descriptor.full_name in seen:
        return set()
    seen.add(descriptor.full_name)
    names = set()
    for field in descriptor.fields:
        names.add(field.name)
        if field.message_type is not None:
            names |= field_names(field.message_type, seen)
    return names


FIELDS = set().union(*(field_names(m.input_type) for m in SERVICE.methods))
WORDS = ["kasa", "granda", "vidas", "peru", "libo", "gato", "luna", ".", "%s", "{0}", "<b>", "</b>", "&amp;", "\n"]
texts = st.one_of(st.text(max_size=150), st.lists(st.sampled_from(WORDS), max_size=30).map(" ".join),
                  st.sampled_from(["", "tiny", "nope", "peru vidas kasa ."]))
# A model name is mostly one that exists (or none): otherwise NOT_FOUND hides every other check.
NAMED = {"model": st.sampled_from(["", "", "", "tiny", "nope"]), "name": st.sampled_from(["", "tiny", "nope"]) | texts,
         "glossary_name": st.sampled_from(["", "", "", "nope"])}
INTS = {F.TYPE_INT32: (-2**31, 2**31 - 1), F.TYPE_SINT32: (-2**31, 2**31 - 1), F.TYPE_UINT32: (0, 2**32 - 1),
        F.TYPE_INT64: (-2**63, 2**63 - 1), F.TYPE_UINT64: (0, 2**64 - 1)}


def scalar(field):
    if field.type == F.TYPE_STRING:
        return texts
    if field.type == F.TYPE_BYTES:
        return st.binary(max_size=64)
    if field.type == F.TYPE_BOOL:
        return st.booleans()
    if field.type in (F.TYPE_FLOAT, F.TYPE_DOUBLE):
        return st.one_of(st.floats(-5, 20), st.floats(width=32 if field.type == F.TYPE_FLOAT else 64))
    if field.type == F.TYPE_ENUM:
        return st.sampled_from([v.number for v in field.enum_type.values] + [99])   # proto3 enums are open
    if field.type in INTS:
        low, high = INTS[field.type]
        return st.one_of(st.integers(max(low, -3), 24), st.integers(max(low, -3), 2000), st.integers(low, high))
    raise NotImplementedError(f"no strategy for {field.full_name} (type {field.type})")


def messages(descriptor, depth: int = 0) -> st.SearchStrategy:
    """Any message of `descriptor`: each field absent or set to a value of its type."""
    parts = {}
    for field in descriptor.fields:
        if field.message_type is not None:
            if depth >= 3:
                continue
            value = messages(field.message_type, depth + 1)
        else:
            value = NAMED[field.name] if field.name in NAMED else scalar(field)
        if field.is_repeated:
            value = st.lists(value, max_size=6)
        parts[field.name] = st.none() | value
    cls = getattr(pb, descriptor.name)

    def build(values: dict):
        message = cls()
        for name, value in values.items():
            if value is None:
                continue
            field = descriptor.fields_by_name[name]
            if field.is_repeated:
                getattr(message, name).extend(value)
            elif field.message_type is not None:
                getattr(message, name).CopyFrom(value)
            else:
                setattr(message, name, value)
        return message
    return st.fixed_dictionaries(parts).map(build)


@pytest.fixture(scope="module")
def fuzz_server(tiny_model):
    env = {"ATTNMT_MAX_SENTENCES_PER_REQUEST": "4", "ATTNMT_MAX_CHARS_PER_SENTENCE": "120",
           "ATTNMT_MAX_TOKENS_PER_SENTENCE": "64", "ATTNMT_MAX_TARGET_TOKENS": "48", "ATTNMT_MAX_BEAM_SIZE": "4",
           "ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_MAX_BATCH_ROWS": "16", "ATTNMT_MAX_MESSAGE_BYTES": "65536",
           "ATTNMT_MAX_STREAM_IN_FLIGHT": "8"}
    with RunningServer([tiny_model], env) as server:
        yield server
        assert server.metric("grpc_server_handled_total", grpc_code="UNKNOWN") == 0
        assert server.metric("grpc_server_handled_total", grpc_code="INTERNAL") == 0


@pytest.fixture(scope="module")
def channel(fuzz_server):
    with grpc.insecure_channel(fuzz_server.address) as channel:
        yield channel
    # still serving after everything above
    with grpc.insecure_channel(fuzz_server.address) as channel:
        assert health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30).status == \
            health_pb2.HealthCheckResponse.SERVING
        answer = pb_grpc.TranslatorStub(channel).Translate(pb.TranslateRequest(sentences=["peru vidas kasa ."]),
                                                           timeout=30)
        assert answer.translations[0].text


def documented(error: grpc.RpcError, request=None) -> None:
    code = error.code()
    assert code in DOCUMENTED, f"{code.name}: {error.details()}\nrequest: {request!r}"
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        details = error.details()
        assert any(name in details for name in FIELDS) or "is not a valid attnmt.v1." in details, details


def call(channel, method: str, request) -> None:
    stub_method = getattr(pb_grpc.TranslatorStub(channel), method)
    try:
        stub_method(request, timeout=60)
    except grpc.RpcError as e:
        documented(e, request)


@FUZZ
@given(messages(pb.TranslateRequest.DESCRIPTOR))
def test_translate(channel, request):
    call(channel, "Translate", request)


@FUZZ
@given(messages(pb.AlignRequest.DESCRIPTOR))
def test_align(channel, request):
    call(channel, "Align", request)


@settings(FUZZ, max_examples=30)
@given(messages(pb.GetModelRequest.DESCRIPTOR), messages(pb.ListModelsRequest.DESCRIPTOR))
def test_models(channel, get, listing):
    call(channel, "GetModel", get)
    call(channel, "ListModels", listing)


@settings(FUZZ, max_examples=30)
@given(st.lists(messages(pb.StreamRequest.DESCRIPTOR), min_size=1, max_size=6))
def test_stream_answers_every_id_once(channel, items):
    for i, item in enumerate(items):
        item.id = str(i)                           # ids the test can count
    try:
        responses = list(pb_grpc.TranslatorStub(channel).TranslateStream(iter(items), timeout=60))
    except grpc.RpcError as e:
        documented(e, items)
        return
    assert sorted(r.id for r in responses) == sorted(str(i) for i in range(len(items)))
    for r in responses:
        if r.HasField("error"):
            code = next(c for c in grpc.StatusCode if c.value[0] == r.error.code)
            assert code in DOCUMENTED - {grpc.StatusCode.OK}, f"{code.name}: {r.error.message}"


def mutations(descriptor) -> st.SearchStrategy:
    """Raw bytes: anything at all, or a valid message with a few bytes changed."""
    def mutate(data: bytes, edits: list[tuple[int, int]]) -> bytes:
        data = bytearray(data)
        for position, value in edits:
            if data:
                data[position % len(data)] = value
        return bytes(data)
    valid = messages(descriptor).map(lambda m: m.SerializeToString())
    edits = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4)
    return st.one_of(st.binary(max_size=300), st.builds(mutate, valid, edits))


@FUZZ
@given(st.data())
def test_raw_bytes_to_every_method(channel, data):
    for method in SERVICE.methods:
        path = f"/{SERVICE.full_name}/{method.name}"
        payload = data.draw(mutations(method.input_type), label=method.name)
        try:
            if method.client_streaming:
                call_stream = channel.stream_stream(path, request_serializer=None, response_deserializer=None)
                list(call_stream(iter([payload, payload]), timeout=60))
            else:
                channel.unary_unary(path, request_serializer=None, response_deserializer=None)(payload, timeout=60)
        except grpc.RpcError as e:
            documented(e, payload)
