"""uvicorn's HTTP/1.1 protocol (httptools) with a deadline for a request's head, and its own
refusals in the JSON the API documents.

Hand-written because uvicorn has no setting for it: `timeout_keep_alive` runs only between
requests, is not armed on a new connection at all, and any byte cancels it, so a client that
opens a connection and sends nothing, or sends a header byte a second, holds a connection (and
a file descriptor) for ever. Here a request's whole head must arrive within `head_timeout`
seconds: counted from the connection's opening for its first request, and from the first byte
of each later one (the keep-alive timer covers the wait before it). A connection that sent
nothing is closed; one that sent part of a head gets 408 first, as HTTP asks. The body has its
own deadline where the routes read it (service/http/body.py).

The connection limit is counted here too (`http_max_connections`): uvicorn's
`limit_concurrency` counts the connection asking among the open ones, so a limit of 3
refused the third connection, not the fourth. Here a request is refused when the open
connections, its own included, are more than the limit, or the requests in flight already
number the limit.

The hooks are uvicorn's: `on_message_begin` and `on_headers_complete` are httptools' parser
callbacks; `_start_asgi_task` is where uvicorn starts the app for a request (or its plain-text
503, which is never asked for here: `limit_concurrency` is unset); `send_400_response` answers a
request httptools cannot parse.
"""

from __future__ import annotations

import asyncio

import grpc
import orjson
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from attnmt.service.http.errors import JSONResponse, error_body

AT_CAPACITY_RETRY_AFTER = "1"       # seconds: connections come and go within one


class HeadDeadlineProtocol(HttpToolsProtocol):
    """HttpToolsProtocol, closing a connection whose request head takes over `head_timeout` seconds."""

    def __init__(self, *args, head_timeout: float, max_connections: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.head_timeout = head_timeout
        self.max_connections = max_connections
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_started = False

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_too_slow)

    def connection_lost(self, exc) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_started = True
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout, self._head_too_slow)

    def on_headers_complete(self) -> None:
        self._stop_head_timer()
        super().on_headers_complete()

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self._head_started = False

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False      # a request is being answered: close once it is
            return
        if self._head_started:
            self._write_error(408, grpc.StatusCode.DEADLINE_EXCEEDED,
                              f"the request's head took over {self.head_timeout:g} s")
        self.transport.close()

    def _start_asgi_task(self, cycle, app) -> None:
        # self.connections holds this one; self.tasks not yet this request's
        if len(self.connections) > self.max_connections or len(self.tasks) >= self.max_connections:
            self.logger.warning("HTTP: over http_max_connections (%d): a request is answered 503",
                                self.max_connections)
            app = at_capacity
        super()._start_asgi_task(cycle, app)

    def send_400_response(self, msg: str) -> None:
        self._write_error(400, grpc.StatusCode.INVALID_ARGUMENT, msg)
        self.transport.close()

    def _write_error(self, status: int, code: grpc.StatusCode, message: str) -> None:
        """An answer written by the protocol itself (no request reached the app), then the close."""
        body = orjson.dumps(error_body("", code, status, message))
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [b"content-type: application/json\r\n", b"content-length: %d\r\n" % len(body),
                 b"connection: close\r\n\r\n", body]
        self.transport.write(b"".join(head))


async def at_capacity(scope, receive, send) -> None:
    """503 while the server holds `http_max_connections` connections or requests; this connection
    is closed after it, which frees one."""
    message = "the server is at its limit of HTTP connections (http_max_connections); retry shortly"
    response = JSONResponse(error_body(scope["path"], grpc.StatusCode.UNAVAILABLE, 503, message), 503,
                            headers={"Retry-After": AT_CAPACITY_RETRY_AFTER, "Connection": "close"})
    await response(scope, receive, send)
