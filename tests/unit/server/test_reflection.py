"""Server reflection answers under grpc.reflection.v1 (what grpcurl 1.8.8+ and
newer tools ask first) and v1alpha (what grpcio-reflection serves), with the
same content."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2

from attnmt.service.server.reflection import V1, V1ALPHA


def ask(address: str, service: str, request: reflection_pb2.ServerReflectionRequest):
    """One request on the reflection stream of `service` (the messages are the same in both versions)."""
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_stream(f"/{service}/ServerReflectionInfo",
                                     request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                                     response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)
        (answer,) = list(call(iter([request]), timeout=30))
    assert not answer.HasField("error_response"), answer.error_response
    return answer


@pytest.mark.parametrize("service", [V1, V1ALPHA])
def test_reflection_lists_and_describes_the_translator(server, service):
    listed = ask(server.address, service, reflection_pb2.ServerReflectionRequest(list_services=""))
    names = {s.name for s in listed.list_services_response.service}
    assert {"attnmt.v1.Translator", "grpc.health.v1.Health", V1, V1ALPHA} <= names

    files = ask(server.address, service,
                reflection_pb2.ServerReflectionRequest(file_containing_symbol="attnmt.v1.Translator"))
    protos = [descriptor_pb2.FileDescriptorProto.FromString(b)
              for b in files.file_descriptor_response.file_descriptor_proto]
    services = {f"{p.package}.{s.name}": [m.name for m in s.method] for p in protos for s in p.service}
    assert "Translate" in services["attnmt.v1.Translator"]


def test_reflection_describes_itself_under_v1(server):
    files = ask(server.address, V1, reflection_pb2.ServerReflectionRequest(file_containing_symbol=V1))
    (proto,) = [descriptor_pb2.FileDescriptorProto.FromString(b)
                for b in files.file_descriptor_response.file_descriptor_proto]
    assert proto.package == "grpc.reflection.v1" and proto.name == "grpc/reflection/v1/reflection.proto"
    (method,) = proto.service[0].method
    assert method.input_type == ".grpc.reflection.v1.ServerReflectionRequest"
