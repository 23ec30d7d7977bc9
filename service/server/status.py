"""Domain exceptions -> gRPC status codes, in one place.

A call that fails ends with `abort`; a TranslateStream item that fails is answered
in-band with `error_pb`. Both take the code from `STATUS_OF`, so an exception means
the same code whichever way it reaches the caller.
"""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from attnmt.service.errors import (
    AttnmtError,
    DeadlineExceeded,
    DecodeFailed,
    InvalidInput,
    ModelLoadError,
    ModelNotFound,
    Overloaded,
    ResponseTooLarge,
    StreamIdle,
    Unavailable,
)
from attnmt.service.stubs import translator_pb2 as pb

STATUS_OF: dict[type[Exception], grpc.StatusCode] = {
    InvalidInput: grpc.StatusCode.INVALID_ARGUMENT,
    ModelNotFound: grpc.StatusCode.NOT_FOUND,
    Overloaded: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Unavailable: grpc.StatusCode.UNAVAILABLE,
    DeadlineExceeded: grpc.StatusCode.DEADLINE_EXCEEDED,
    DecodeFailed: grpc.StatusCode.INTERNAL,
    ResponseTooLarge: grpc.StatusCode.RESOURCE_EXHAUSTED,
    StreamIdle: grpc.StatusCode.DEADLINE_EXCEEDED,
    ModelLoadError: grpc.StatusCode.INTERNAL,
}


def status_of(error: Exception) -> grpc.StatusCode:
    """The code for `error`; INTERNAL for anything unmapped (a bug, not the caller's doing)."""
    for kind, code in STATUS_OF.items():
        if isinstance(error, kind):
            return code
    return grpc.StatusCode.INTERNAL


async def abort(context: grpc.aio.ServicerContext, error: Exception) -> None:
    """End the RPC with the status for `error`; overload carries google.rpc.RetryInfo."""
    code = status_of(error)
    if isinstance(error, Overloaded):
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(error.retry_after * 1e9))
        detail = any_pb2.Any()
        detail.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
        status = status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message=str(error), details=[detail])
        await context.abort_with_status(rpc_status.to_status(status))
    await context.abort(code, str(error))


def error_pb(error: Exception) -> pb.Error:
    """The in-band error of one stream item; a non-domain exception is a bug and says so."""
    message = str(error) if isinstance(error, AttnmtError) else f"internal error: {type(error).__name__}: {error}"
    return pb.Error(code=status_of(error).value[0], message=message)
