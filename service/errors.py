"""Domain exceptions. The gRPC layer maps them to status codes in one place
(`service/server/status.py`, `STATUS_OF`); nothing below the server knows gRPC."""


class AttnmtError(Exception):
    """Base class."""


class ConfigError(Exception):
    """Invalid configuration (settings, glossary files, model directories at start-up); the
    message names the field. Not an AttnmtError: no request ever ends with it."""


class ModelLoadError(AttnmtError):
    """A model directory is missing a file, corrupt, or of another schema."""


class ModelNotFound(AttnmtError):
    """A request named a model this server does not serve."""


class InvalidInput(AttnmtError):
    """A request field is out of its allowed range; the message names the field and limit."""


class Overloaded(AttnmtError):
    """The admission queue is full; retry after `retry_after` seconds."""

    def __init__(self, message: str, retry_after: float):
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(AttnmtError):
    """The server is draining or not ready."""


class DeadlineExceeded(AttnmtError):
    """The request's deadline passed before its sentences were done."""


class DecodeFailed(AttnmtError):
    """A decoder step failed; only the sentences in that step are affected."""


class ResponseTooLarge(AttnmtError):
    """The finished response exceeds max_message_bytes (it would fail in transport)."""


class StreamIdle(AttnmtError):
    """A stream sent nothing for stream_idle_timeout_seconds while nothing was in flight."""
