"""HTTP beside gRPC in one process: a Starlette app on uvicorn, run in the event loop
grpc.aio already runs, calling the same core (service/server/core.py), schedulers, overload
gate and metrics. An HTTP call is an ordinary caller of the decode worker, not a second server.

Why Starlette and uvicorn: a well-kept ASGI toolkit and server that can run inside an
existing loop (`uvicorn.Server.serve`); the schemas are the proto's, so FastAPI's
pydantic models would only be a second copy of them (docs/http.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import logging
import socket
import ssl
import time
from importlib import resources
from typing import Awaitable, Callable

import grpc
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from attnmt.service.errors import AttnmtError, ConfigError
from attnmt.service.http import body, errors, libretranslate, native
from attnmt.service.http.caller import Caller, key_name, timeout_of
from attnmt.service.http.errors import CallEnded, ended
from attnmt.service.http.protocol import HeadDeadlineProtocol
from attnmt.service.server import rpc_record
from attnmt.service.server.core import SERVICE_NAME
from attnmt.service.server.files import translate_file
from attnmt.service.server.filestore import FileStore
from attnmt.service.server.metrics import CALL_PROTOCOL
from attnmt.service.stubs import translator_pb2 as pb

log = logging.getLogger("attnmt")

# The web page runs only its own files: model output is shown as text, never as markup, and an
# injected script could neither run nor send anything anywhere.
PAGE_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
               "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
DOCS_POLICY = PAGE_POLICY


# what a multipart body may hold besides its file: the other fields, boundaries, part headers
FORM_ROOM = 64 * 1024

# a method of the core: (request message, *, deadline, client) -> its answer
Answer = Callable[..., Awaitable]


async def until_disconnected(receive) -> None:
    """Return when the client has gone away (the body must have been read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def until_answered(work: Awaitable, receive):
    """The answer `work` gives; when the client disconnects first, `work` is cancelled (the core
    withdraws its sentences from the batch) and the call ends CANCELLED. A domain exception
    becomes CallEnded (errors.ended)."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(until_disconnected(receive))
    try:
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        gone.cancel()
    if task.done():
        try:
            return task.result()
        except AttnmtError as e:
            raise ended(e) from None
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, AttnmtError):
        pass
    raise CallEnded(grpc.StatusCode.CANCELLED, "the client disconnected")


class _EmbeddedUvicorn(uvicorn.Server):
    """uvicorn without its signal handlers: `attnmt serve` owns SIGTERM and drains both protocols."""

    @contextlib.contextmanager
    def capture_signals(self):
        yield


def read_api_keys(path) -> dict[str, str]:
    """key -> name from a keys file: `KEY` or `KEY NAME` per line, # comments."""
    keys = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ConfigError(f"api_keys: cannot read {path}: {e.strerror}") from e
    for line in lines:
        fields = line.split("#", 1)[0].split()
        if fields:
            keys[fields[0]] = fields[1] if len(fields) > 1 else key_name(fields[0])
    if not keys:
        raise ConfigError(f"api_keys: {path} holds no key")
    return keys


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so a failure is a ConfigError (uvicorn would exit the process)."""
    host = host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: without it a response's header and body writes wait out the
    # client's delayed ACK (measured: 44 ms for /healthz through httpx, 1.4 ms with it)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ConfigError(f"http_port: cannot listen on {host}:{port} ({e.strerror})") from e
    return sock


class Metered:
    """ASGI middleware: http_server_* metrics by route template, and the count of calls in flight
    (the drain waits for it)."""

    def __init__(self, app, front: HttpFront):
        self.app, self.front = app, front

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        metrics = self.front.metrics
        status = [500]

        async def send_status(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)
        start = time.perf_counter()
        CALL_PROTOCOL.set("http")          # this request's task only: the sentences it sends count as http
        self.front.in_flight += 1
        metrics.http_active.inc()
        try:
            await self.app(scope, receive, send_status)
        finally:
            self.front.in_flight -= 1
            metrics.http_active.dec()
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            metrics.http_requests.labels(scope["method"], template, str(status[0])).inc()
            metrics.http_duration.labels(scope["method"], template).observe(time.perf_counter() - start)


class HttpFront:
    """The HTTP listener of one `attnmt serve` (service/server/app.py's Server runs it)."""

    def __init__(self):
        self.in_flight = 0
        self.port = 0
        self._uvicorn: _EmbeddedUvicorn | None = None
        self._task: asyncio.Task | None = None

    # --- what the routes use ----------------------------------------------

    def check_key(self, request: Request, key: str | None) -> None:
        """403 unless keys are off or the call brings a known one (`key`: one sent in the body
        or form, as LibreTranslate's clients do; else `Authorization: Bearer` or `X-Api-Key`)."""
        if key is None:
            auth = request.headers.get("authorization", "")
            key = auth[7:].strip() if auth.lower().startswith("bearer ") else request.headers.get("x-api-key")
        if self.api_keys is None:
            return
        name = self.api_keys.get(key or "")
        if name is None:
            raise CallEnded(grpc.StatusCode.PERMISSION_DENIED,
                            "an API key is required (api_key, Authorization: Bearer or X-Api-Key)" if not key
                            else "the API key is not valid")
        request.state.key_name = name

    async def call(self, method_name: str, message, request: Request, answer: Answer):
        """`answer(message, deadline=..., client=...)`, a method of the core, for an HTTP request,
        recorded like a gRPC call of `method_name` (traces, the request log) when the server
        records calls. A domain exception becomes CallEnded here (errors.ended)."""
        caller = Caller(request.client, request.headers, getattr(request.state, "key_name", None),
                        self.trusted_proxies)
        timeout = timeout_of(request.headers)
        deadline = None if timeout is None else time.monotonic() + timeout
        work = answer(message, deadline=deadline, client=caller.client)
        if not self.sinks:
            return await until_answered(work, request.receive)
        metadata = tuple((k, v) for k, v in request.headers.items() if k not in ("authorization", "x-api-key"))
        record = rpc_record.begin(f"/{SERVICE_NAME}/{method_name}", metadata, message, protocol="http")
        code, details, error = "OK", "", None
        try:
            return await until_answered(work, request.receive)
        except CallEnded as e:
            code, details = e.code.name, e.message
            raise
        except asyncio.CancelledError:
            code, details = "CANCELLED", "the server stopped the call"
            raise
        except BaseException as e:
            code, details, error = "INTERNAL", str(e), e
            raise
        finally:
            rpc_record.finish(record, self.sinks, code, details, error)

    async def read_body(self, request: Request, file: bool = False) -> bytes:
        """The request's body within the limits of size and time (service/http/body.py); `file`:
        a body bringing a file, up to max_file_bytes and room for the form around it."""
        s = self.settings
        if file:
            return await body.read(request, s.max_file_bytes + FORM_ROOM, s.http_body_timeout_seconds,
                                   "max_file_bytes and 64 KiB for the form")
        return await body.read(request, s.max_message_bytes, s.http_body_timeout_seconds)

    async def translate_file(self, request: Request, upload, model: str, source: str, target: str):
        """An uploaded file through the core's file path (service/server/files.py), one call of
        TranslateFile as `call` records it; for both transports' file routes."""
        data = await upload.read()
        await upload.close()
        message = pb.TranslateRequest(model=model, source_language=source, target_language=target)
        self.refuse_if_full(message)

        async def answer(message, *, deadline, client):
            return await translate_file(self.core, upload.filename, data, model=model, source=source,
                                        target=target, deadline=deadline, client=client)
        return await self.call("TranslateFile", message, request, answer)

    def refuse_if_full(self, message) -> None:
        """The overload gate, as gRPC's interceptor applies it: refuse before any work when no
        model can take one more sentence."""
        if self.server.queues_full():
            raise ended(self.server.refusal(message))

    def ready(self) -> bool:
        return self.server.serving

    # --- lifecycle --------------------------------------------------------

    def app(self) -> Starlette:
        s = self.settings

        from attnmt.service.http.openapi import document
        limits = {"max_sentences_per_request": s.max_sentences_per_request, "max_beam_size": s.max_beam_size}
        api = JSONResponse(document("attnmt", self.server.version, limits))     # built once: ~7 ms, 39 KB

        async def openapi(request: Request) -> Response:
            return api

        static = resources.files("attnmt.service.http") / "static"

        def page(name: str, policy: str):
            async def endpoint(request: Request) -> Response:
                return Response((static / name).read_bytes(), media_type="text/html; charset=utf-8",
                                headers={"Content-Security-Policy": policy, "X-Content-Type-Options": "nosniff",
                                         "Referrer-Policy": "no-referrer"})
            return endpoint

        routes = native.routes(self) + libretranslate.routes(self) + [
            Route("/openapi.json", openapi, methods=["GET"]),
            Route("/docs", page("docs.html", DOCS_POLICY), methods=["GET"]),
            Route("/", page("index.html", PAGE_POLICY), methods=["GET"]),
            Mount("/static", StaticFiles(packages=[("attnmt.service.http", "static")]), name="static"),
        ]
        # Crashes inside CORS: a 500 reaches a browser with its CORS headers; PlainErrors outside
        # it: CORS's own refusal of a preflight is plain text
        middleware = [Middleware(Metered, front=self),
                      Middleware(errors.PlainErrors),
                      Middleware(CORSMiddleware, allow_origins=s.cors_allow_origins, allow_methods=["GET", "POST"],
                                 allow_headers=["Authorization", "Content-Type", "X-Api-Key", "X-Client-Id",
                                                "X-Request-Timeout"], expose_headers=["Retry-After"]),
                      Middleware(errors.Crashes)]
        return Starlette(routes=routes, middleware=middleware,
                         exception_handlers=errors.exception_handlers(s.retry_after_seconds))

    async def start(self, server) -> None:
        """Listen and serve; `server` is service/server/app.py's Server (core, metrics, gate)."""
        self.server, self.settings, self.metrics = server, server.settings, server.metrics
        self.core = server.core
        self.sinks = server.record_sinks
        s = self.settings
        self.api_keys = read_api_keys(s.api_keys) if s.api_keys else None
        # LibreTranslate's /translate_file answers a URL: the translated files wait here for it
        self.file_store = FileStore(s.file_store_dir, s.file_store_max_bytes, s.file_store_expiry_seconds)
        self.trusted_proxies = [ipaddress.ip_network(n, strict=False) for n in s.trusted_proxies]
        sock = listen(s.http_host, s.http_port)
        self.port = sock.getsockname()[1]
        tls = {}
        if s.tls_cert is not None:
            tls = dict(ssl_certfile=str(s.tls_cert), ssl_keyfile=str(s.tls_key))
            if s.tls_client_ca is not None:
                tls.update(ssl_ca_certs=str(s.tls_client_ca), ssl_cert_reqs=ssl.CERT_REQUIRED)
        # proxy_headers off: uvicorn would believe X-Forwarded-For from 127.0.0.1 by default; who a
        # caller is comes from Caller and `trusted_proxies` alone
        # http_max_connections is counted by the protocol, not by uvicorn's limit_concurrency, which
        # counts the new connection against the limit too: past it a request is answered 503
        # (protocol.at_capacity) and its connection closed
        protocol = functools.partial(HeadDeadlineProtocol, head_timeout=s.http_head_timeout_seconds,
                                     max_connections=s.http_max_connections)
        config = uvicorn.Config(self.app(), lifespan="off", log_config=None, access_log=False, server_header=False,
                                proxy_headers=False, http=protocol, timeout_keep_alive=s.http_keep_alive_seconds,
                                timeout_graceful_shutdown=max(s.grace_period_seconds, 1), ws="none", **tls)
        # uvicorn's own lines ("Started server process") are INFO under the name uvicorn.error;
        # the server logs its own start, so only uvicorn's warnings and errors are kept
        logging.getLogger("uvicorn.error").setLevel(max(logging.WARNING, log.getEffectiveLevel()))
        self._uvicorn = _EmbeddedUvicorn(config)
        self._task = asyncio.ensure_future(self._uvicorn.serve(sockets=[sock]))
        while not self._uvicorn.started:
            if self._task.done():
                self._task.result()            # raises what stopped it
                raise ConfigError(f"http: the HTTP server on port {self.port} stopped while starting")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        """Close the listener and the idle connections; the drain has already waited for calls in flight."""
        if self._uvicorn is None:
            return
        self._uvicorn.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self.file_store.close()
