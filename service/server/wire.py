"""Request bytes -> messages without ever raising, and the Translator's handlers
registered with those deserializers.

gRPC ends a call whose request does not parse UNKNOWN, with a Python exception
class in the message; here such a request arrives as a `MalformedRequest` and
the servicer answers INVALID_ARGUMENT like any other invalid input.
"""

from __future__ import annotations

import grpc

from attnmt.service.errors import InvalidInput
from attnmt.service.stubs import translator_pb2 as pb


class MalformedRequest:
    """What arrives instead of a request whose bytes do not parse (corrupt wire format,
    or invalid UTF-8 in a string field, which proto3 forbids)."""

    def __init__(self, message: str):
        self.message = message


def tolerant(message_class):
    """A request deserializer that never raises."""
    def parse(data: bytes):
        try:
            return message_class.FromString(data)
        except Exception as e:  # noqa: BLE001 - DecodeError and its relatives
            return MalformedRequest(f"the request is not a valid {message_class.DESCRIPTOR.full_name} ({e})")
    return parse


def parsed(request):
    """`request`, or InvalidInput when it did not parse."""
    if isinstance(request, MalformedRequest):
        raise InvalidInput(request.message)
    return request


def add_to_server(servicer, server) -> None:
    """The generated `add_TranslatorServicer_to_server`, with tolerant deserializers."""
    service = pb.DESCRIPTOR.services_by_name["Translator"]
    handlers = {}
    for method in service.methods:
        request_class, response_class = getattr(pb, method.input_type.name), getattr(pb, method.output_type.name)
        make = (grpc.stream_stream_rpc_method_handler if method.client_streaming
                else grpc.unary_stream_rpc_method_handler if method.server_streaming
                else grpc.unary_unary_rpc_method_handler)
        handlers[method.name] = make(getattr(servicer, method.name), request_deserializer=tolerant(request_class),
                                     response_serializer=response_class.SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)
