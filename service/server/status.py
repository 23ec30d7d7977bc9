"""Domain exceptions -> gRPC status codes, in one place.

A call that fails ends with `abort`; a TranslateStream item that fails is answered
in-band with `error_pb`. Both take the code from `STATUS_OF`, so an exception means
the same code whichever way it reaches the caller, and the text from `message`: an
INTERNAL answer carries a request id that the server's log gives beside the error
and its cause, and a bug's own text stays in the log.
"""

from __future__ import annotations

import logging
import secrets

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

log = logging.getLogger(__name__)

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


def message(error: Exception) -> str:
    """What the caller reads. A domain error's message says what went wrong and is the
    caller's to read; INTERNAL ones add a request id, logged here with the error (a
    step's failure was logged with its traceback, model and batch where it happened);
    a non-domain exception is a bug, and only its type and that id leave the server."""
    if status_of(error) != grpc.StatusCode.INTERNAL:
        return str(error)
    request_id = secrets.token_hex(8)
    if isinstance(error, AttnmtError):
        log.error("internal error, request %s: %s", request_id, error)
        return f"{error} (request {request_id})"
    log.error("internal error, request %s: %s", request_id, type(error).__name__, exc_info=error)
    return f"internal error (request {request_id}): {type(error).__name__}"


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
    await context.abort(code, message(error))


def error_pb(error: Exception) -> pb.Error:
    """The in-band error of one stream item."""
    return pb.Error(code=status_of(error).value[0], message=message(error))
