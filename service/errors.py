"""Domain exceptions, each carrying its status: `code`, a google.rpc canonical code name
(google/rpc/code.proto), the same whichever transport answers. Each transport turns it
into its own status in one place (gRPC: `service/server/status.py`; HTTP:
`service/http/errors.py`); nothing here knows either."""

from __future__ import annotations

import logging
import secrets

log = logging.getLogger(__name__)


class AttnmtError(Exception):
    """Base class."""
    code = "INTERNAL"


class ConfigError(Exception):
    """Invalid configuration (settings, glossary files, model directories at start-up); the
    message names the field. Not an AttnmtError: no request ever ends with it."""


class ModelLoadError(AttnmtError):
    """A model directory is missing a file, corrupt, or of another schema."""
    code = "INTERNAL"


class ModelNotFound(AttnmtError):
    """A request named a model this server does not serve."""
    code = "NOT_FOUND"


class InvalidInput(AttnmtError):
    """A request field is out of its allowed range; the message names the field and limit."""
    code = "INVALID_ARGUMENT"


class Overloaded(AttnmtError):
    """The admission queue is full; retry after `retry_after` seconds."""
    code = "RESOURCE_EXHAUSTED"

    def __init__(self, message: str, retry_after: float):
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(AttnmtError):
    """The server is draining or not ready."""
    code = "UNAVAILABLE"


class DeadlineExceeded(AttnmtError):
    """The request's deadline passed before its sentences were done."""
    code = "DEADLINE_EXCEEDED"


class DecodeFailed(AttnmtError):
    """A decoder step failed; only the sentences in that step are affected."""
    code = "INTERNAL"


class ResponseTooLarge(AttnmtError):
    """The finished response exceeds max_message_bytes (it would fail in transport)."""
    code = "RESOURCE_EXHAUSTED"


class StreamIdle(AttnmtError):
    """A stream sent nothing for stream_idle_timeout_seconds while nothing was in flight."""
    code = "DEADLINE_EXCEEDED"


def quoted(value: str, limit: int = 64) -> str:
    """A client's value as an error message quotes it: repr'd, and cut to `limit` characters so
    that a message never repeats a whole body or header back (nor, over gRPC, outgrows the
    status's trailer: a 20,000-character model name would end the call RESOURCE_EXHAUSTED)."""
    return repr(value) if len(value) <= limit else f"{value[:limit]!r}... ({len(value)} characters)"


def clipped(message: str, limit: int = 300) -> str:
    """A message another library wrote, quoting what it read (protobuf's json_format quotes the
    value whole), or a client's value quoted as it is, cut to `limit` characters."""
    return message if len(message) <= limit else f"{message[:limit]}... ({len(message)} characters)"


def code_of(error: BaseException) -> str:
    """The status of `error`: a domain error's own; INTERNAL for anything else (a bug, not the
    caller's doing)."""
    return error.code if isinstance(error, AttnmtError) else "INTERNAL"


def public_message(error: BaseException) -> str:
    """What the caller reads. A domain error's message says what went wrong and is the
    caller's to read; INTERNAL ones add a request id, logged here with the error (a
    step's failure was logged with its traceback, model and batch where it happened);
    a non-domain exception is a bug, and only its type and that id leave the server."""
    if code_of(error) != "INTERNAL":
        return str(error)
    request_id = secrets.token_hex(8)
    if isinstance(error, AttnmtError):
        log.error("internal error, request %s: %s", request_id, error)
        return f"{error} (request {request_id})"
    log.error("internal error, request %s: %s", request_id, type(error).__name__, exc_info=error)
    return f"internal error (request {request_id}): {type(error).__name__}"
