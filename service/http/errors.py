"""Every error the HTTP front answers, in one place: a domain exception from the core
(service/errors.py), a route's own CallEnded, Starlette's HTTPException (unknown path, method
not allowed, a form that does not parse) and our bugs all become the JSON body the route
documents (service/http/openapi.py), with the same status whichever layer noticed.

A status is a google.rpc code (a domain exception carries its own: the one gRPC sends for it)
and the HTTP status google.rpc maps that code to (`HTTP_STATUS_OF`). Two body shapes:
LibreTranslate's routes answer `{"error": "..."}` as LibreTranslate does; every other path
answers the native API's `{"error": {"code": "INVALID_ARGUMENT", "message": ...}}`.
"""

from __future__ import annotations

import logging
import math
import secrets
from http import HTTPStatus

import grpc
import orjson
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from attnmt.service.errors import AttnmtError, Overloaded, clipped, code_of, public_message

log = logging.getLogger("attnmt")

# LibreTranslate's paths, the ones this server does not serve included: its clients get
# their 404 in the shape they read
LIBRETRANSLATE_PATHS = frozenset({"/translate", "/detect", "/languages", "/frontend/settings", "/health",
                                  "/translate_file", "/suggest"})

# Starlette's and uvicorn's statuses as the gRPC code a native error body names
CODE_OF_STATUS = {400: grpc.StatusCode.INVALID_ARGUMENT, 403: grpc.StatusCode.PERMISSION_DENIED,
                  404: grpc.StatusCode.NOT_FOUND, 405: grpc.StatusCode.UNIMPLEMENTED,
                  408: grpc.StatusCode.DEADLINE_EXCEEDED, 413: grpc.StatusCode.RESOURCE_EXHAUSTED,
                  416: grpc.StatusCode.OUT_OF_RANGE,
                  429: grpc.StatusCode.RESOURCE_EXHAUSTED, 500: grpc.StatusCode.INTERNAL,
                  503: grpc.StatusCode.UNAVAILABLE}

PHRASES = {s.value: s.phrase for s in HTTPStatus}


# google.rpc.Code -> HTTP, as google/rpc/code.proto gives it
HTTP_STATUS_OF: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.CANCELLED: 499,       # the client went away; nobody reads the answer
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}


class CallEnded(Exception):
    """An HTTP call ends with a status other than OK: its google.rpc code, the message, the
    HTTP status (google.rpc's for the code unless given) and, for an overload, the retry delay."""

    def __init__(self, code: grpc.StatusCode, message: str, retry_after: float | None = None,
                 http_status: int | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after
        self.http_status = http_status or HTTP_STATUS_OF.get(code, 500)

    def retry_after_header(self, default: float) -> dict[str, str]:
        """`Retry-After` (whole seconds, as HTTP requires) for refusals a client should retry."""
        if self.http_status not in (429, 503):
            return {}
        return {"Retry-After": str(max(1, math.ceil(self.retry_after or default)))}


def ended(error: Exception) -> CallEnded:
    """A domain exception (or a bug) as the end of an HTTP call: the code it carries, what
    the caller may read of it (an INTERNAL one: a request id the log gives beside it)."""
    return CallEnded(grpc.StatusCode[code_of(error)], public_message(error),
                     error.retry_after if isinstance(error, Overloaded) else None)


def invalid(message: str) -> CallEnded:
    return CallEnded(grpc.StatusCode.INVALID_ARGUMENT, message)


class JSONResponse(Response):
    """JSON written by orjson: a reply with word alignments is mostly floats, which the standard
    library's encoder wrote at 1.1 ms a verse (orjson: 0.04 ms; the same bytes)."""
    media_type = "application/json"

    def render(self, content) -> bytes:
        return orjson.dumps(content)


def is_libretranslate(path: str) -> bool:
    return path.rstrip("/") in LIBRETRANSLATE_PATHS or path.startswith("/download_file/")


def error_body(path: str, code: grpc.StatusCode, status: int, message: str) -> dict:
    """The error body `path` documents."""
    if not is_libretranslate(path):
        return {"error": {"code": code.name, "message": message}}
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and status == 429:
        message = "Slowdown: " + message              # LibreTranslate's limiter words it so
    elif status == 500:
        message = "Cannot translate text: " + message
    return {"error": message}


def call_ended_response(path: str, error: CallEnded, retry_after_default: float) -> Response:
    headers = error.retry_after_header(retry_after_default)
    if error.http_status == 408:
        headers["Connection"] = "close"          # the rest of a slow body is not waited for
    return JSONResponse(error_body(path, error.code, error.http_status, error.message), error.http_status,
                        headers=headers)


def exception_handlers(retry_after_default: float) -> dict:
    """Starlette's handlers for the errors a route or the router raises on a client's account."""

    async def call_ended(request: Request, error: CallEnded) -> Response:
        return call_ended_response(request.url.path, error, retry_after_default)

    async def domain_error(request: Request, error: AttnmtError) -> Response:
        return call_ended_response(request.url.path, ended(error), retry_after_default)

    async def http_exception(request: Request, error: HTTPException) -> Response:
        path, status = request.url.path, error.status_code
        if status == 404:
            message = f"no route {clipped(path, 200)}"
        elif status == 405:
            message = f"{request.method} is not allowed on {path} (allowed: {(error.headers or {}).get('Allow', '')})"
        else:
            message = error.detail
        code = CODE_OF_STATUS.get(status, grpc.StatusCode.INVALID_ARGUMENT if status < 500 else
                                  grpc.StatusCode.INTERNAL)
        return JSONResponse(error_body(path, code, status, message), status, headers=error.headers)

    return {CallEnded: call_ended, AttnmtError: domain_error, HTTPException: http_exception}


class Crashes:
    """ASGI middleware: an exception no handler took is our bug, not the caller's. It is answered
    500 in the route's shape, logged on one line with a request id the body also gives, and the
    connection stays usable (Starlette's own handler re-raises after answering, and uvicorn then
    drops the connection with no `Connection: close`)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def sending(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)
        try:
            await self.app(scope, receive, sending)
        except Exception as error:
            request_id = secrets.token_hex(8)
            log.error("HTTP %s %s: internal error, request %s: %s: %s", scope["method"], scope["path"], request_id,
                      type(error).__name__, error)
            log.debug("request %s", request_id, exc_info=error)
            if started:
                return          # too late for a status: uvicorn closes the connection of an unfinished answer
            message = f"internal error (request {request_id}): {type(error).__name__}"
            response = JSONResponse(error_body(scope["path"], grpc.StatusCode.INTERNAL, 500, message), 500)
            await response(scope, receive, send)


class PlainErrors:
    """ASGI middleware: an error answered by a layer that writes its own (Starlette's CORS
    preflight refusal "Disallowed CORS headers" in plain text, StaticFiles' 400 for a Range header
    that does not parse and its empty 416) becomes the route's JSON error body; the status and
    the other headers are kept. Answers that are JSON already pass untouched."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start, chunks = None, []

        async def sending(message):
            nonlocal start
            if message["type"] == "http.response.start" and message["status"] >= 400:
                media_type = Headers(raw=message.get("headers", [])).get("content-type", "").split(";")[0]
                if media_type != "application/json":
                    start = message         # held until its body has come
                    return
            elif start is not None and message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    await send_json(start, b"".join(chunks))
                return
            await send(message)

        async def send_json(start, text: bytes):
            status = start["status"]
            kept = [(k, v) for k, v in start.get("headers", [])
                    if k.lower() not in (b"content-type", b"content-length")]
            message = text.decode("utf-8", "replace").strip() or PHRASES.get(status, "error")
            content_range = Headers(raw=kept).get("content-range")
            if content_range:
                message += f" (Content-Range: {content_range})"
            code = CODE_OF_STATUS.get(status, grpc.StatusCode.INVALID_ARGUMENT if status < 500 else
                                      grpc.StatusCode.INTERNAL)
            body = orjson.dumps(error_body(scope["path"], code, status, clipped(message)))
            await send({"type": "http.response.start", "status": status, "headers": kept + [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, sending)
