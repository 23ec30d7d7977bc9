"""gRPC server reflection, v1 and v1alpha.

grpcio-reflection (1.85) serves only `grpc.reflection.v1alpha`, while grpcurl
1.8.8+, Postman and other newer tools ask for `grpc.reflection.v1` first. The
two protocols are the same messages in another package, identical on the wire,
so one v1alpha servicer answers both names. The v1 file descriptor, made from
v1alpha's by renaming the package, goes into the descriptor pool, so reflection
lists and describes itself under both names.
"""

from __future__ import annotations

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

V1ALPHA = reflection.SERVICE_NAME                    # grpc.reflection.v1alpha.ServerReflection
V1 = "grpc.reflection.v1.ServerReflection"
SERVICE_NAMES = (V1, V1ALPHA)
_V1_FILE = "grpc/reflection/v1/reflection.proto"


def _v1_file() -> descriptor_pb2.FileDescriptorProto:
    """v1alpha's reflection.proto under the v1 package name."""
    old, new = f".{reflection_pb2.DESCRIPTOR.package}.", ".grpc.reflection.v1."
    proto = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(proto)
    proto.name, proto.package = _V1_FILE, "grpc.reflection.v1"
    proto.ClearField("options")
    for message in proto.message_type:
        for field in message.field:
            if field.HasField("type_name"):              # messages and enums; set on nothing else
                field.type_name = field.type_name.replace(old, new)
    for service in proto.service:
        for method in service.method:
            method.input_type = method.input_type.replace(old, new)
            method.output_type = method.output_type.replace(old, new)
    return proto


def _add_v1_file(pool: descriptor_pool.DescriptorPool) -> None:
    try:
        pool.FindFileByName(_V1_FILE)                 # a newer grpcio-reflection, or a second server
    except KeyError:
        pool.AddSerializedFile(_v1_file().SerializeToString())


def enable(server: grpc.aio.Server, service_names: tuple[str, ...]) -> None:
    """Serve reflection for `service_names` and for itself, as v1 and v1alpha."""
    _add_v1_file(descriptor_pool.Default())
    servicer = reflection.aio.ReflectionServicer(tuple(service_names) + SERVICE_NAMES)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    v1 = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(V1, {"ServerReflectionInfo": v1}),))
