"""Every error the HTTP front answers, in one place: a route's CallEnded, Starlette's own
HTTPException (unknown path, method not allowed, a form that does not parse) and our bugs
all become the JSON body the route documents (service/http/openapi.py), with the same
status whichever layer noticed.

Two shapes: LibreTranslate's routes answer `{"error": "..."}` as LibreTranslate does; every
other path answers the native API's `{"error": {"code": "INVALID_ARGUMENT", "message": ...}}`.
"""

from __future__ import annotations

import logging
import secrets

import grpc
import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from attnmt.service.http.context import CallEnded

log = logging.getLogger("attnmt")

# LibreTranslate's paths, the ones this server does not serve included: its clients get
# their 404 in the shape they read
LIBRETRANSLATE_PATHS = frozenset({"/translate", "/detect", "/languages", "/frontend/settings", "/health",
                                  "/translate_file", "/suggest"})

# Starlette's and uvicorn's statuses as the gRPC code a native error body names
CODE_OF_STATUS = {400: grpc.StatusCode.INVALID_ARGUMENT, 403: grpc.StatusCode.PERMISSION_DENIED,
                  404: grpc.StatusCode.NOT_FOUND, 405: grpc.StatusCode.UNIMPLEMENTED,
                  408: grpc.StatusCode.DEADLINE_EXCEEDED, 413: grpc.StatusCode.RESOURCE_EXHAUSTED,
                  429: grpc.StatusCode.RESOURCE_EXHAUSTED, 500: grpc.StatusCode.INTERNAL,
                  503: grpc.StatusCode.UNAVAILABLE}


class JSONResponse(Response):
    """JSON written by orjson: a reply with word alignments is mostly floats, which the standard
    library's encoder wrote at 1.1 ms a verse (orjson: 0.04 ms; the same bytes)."""
    media_type = "application/json"

    def render(self, content) -> bytes:
        return orjson.dumps(content)


def is_libretranslate(path: str) -> bool:
    return path.rstrip("/") in LIBRETRANSLATE_PATHS


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

    async def http_exception(request: Request, error: HTTPException) -> Response:
        path, status = request.url.path, error.status_code
        if status == 404:
            message = f"no route {path}"
        elif status == 405:
            message = f"{request.method} is not allowed on {path} (allowed: {(error.headers or {}).get('Allow', '')})"
        else:
            message = error.detail
        code = CODE_OF_STATUS.get(status, grpc.StatusCode.INVALID_ARGUMENT if status < 500 else
                                  grpc.StatusCode.INTERNAL)
        return JSONResponse(error_body(path, code, status, message), status, headers=error.headers)

    return {CallEnded: call_ended, HTTPException: http_exception}


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
