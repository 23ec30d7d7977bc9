"""Domain exceptions -> gRPC status codes, in one place.

Each domain exception carries its status as a google.rpc code name (service/errors.py);
here it becomes grpc's `StatusCode`. A call that fails ends with `abort`; a
TranslateStream item that fails is answered in-band with `error_pb`. Both take the
code from `status_of`, so an exception means the same code whichever way it reaches
the caller, and the text from `public_message`: an INTERNAL answer carries a request
id that the server's log gives beside the error and its cause, and a bug's own text
stays in the log.
"""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from attnmt.service.errors import Overloaded, code_of, public_message
from attnmt.service.stubs import translator_pb2 as pb


def status_of(error: BaseException) -> grpc.StatusCode:
    """The code for `error`; INTERNAL for anything unmapped (a bug, not the caller's doing)."""
    return grpc.StatusCode[code_of(error)]


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
    await context.abort(code, public_message(error))


def error_pb(error: Exception) -> pb.Error:
    """The in-band error of one stream item."""
    return pb.Error(code=status_of(error).value[0], message=public_message(error))
