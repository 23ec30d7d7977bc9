"""An HTTP call as the servicer sees a gRPC one: `HttpContext` stands in for
grpc.aio's ServicerContext, so validation, limits, scheduling and error messages
stay in one place (the servicer and server/status.py). What the servicer asks of
a context is small: the deadline, who is calling, and how to end the call.

The gRPC status a call ends with becomes an HTTP status here (`HTTP_STATUS_OF`,
google.rpc's own mapping), once for every HTTP route.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import math
import time

import grpc
from google.rpc import error_details_pb2, status_pb2

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
    """A call ended with a status other than OK: what `abort` raises instead of gRPC's AbortError."""

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


GRPC_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


def timeout_of(headers) -> float | None:
    """The call's deadline in seconds: `X-Request-Timeout: SECONDS`, or gRPC's own `grpc-timeout`
    (`100m`, `5S`: an integer and a unit, as in gRPC over HTTP/2); none without either."""
    value = headers.get("x-request-timeout")
    if value is not None:
        try:
            seconds = float(value)
        except ValueError:
            seconds = -1.0
        if not 0 < seconds < float("inf"):
            raise CallEnded(grpc.StatusCode.INVALID_ARGUMENT, f"X-Request-Timeout: {value!r} is not a positive "
                            "number of seconds")
        return seconds
    value = headers.get("grpc-timeout")
    if value is not None:
        digits, unit = value[:-1], value[-1:]
        if not (digits.isdigit() and len(digits) <= 8 and unit in GRPC_TIMEOUT_UNITS and int(digits) > 0):
            raise CallEnded(grpc.StatusCode.INVALID_ARGUMENT, f"grpc-timeout: {value!r} is not a timeout such as "
                            "'500m' or '5S'")
        return int(digits) * GRPC_TIMEOUT_UNITS[unit]
    return None


class Caller:
    """Who is calling over HTTP: the address (through trusted proxies) and the identity
    fairness and limits use, in the order the API key, `X-Client-Id`, the address."""

    def __init__(self, peer: tuple[str, int] | None, headers, key_name: str | None,
                 trusted_proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network]):
        host, port = peer or ("unknown", 0)
        if trusted_proxies and _within(host, trusted_proxies):
            # X-Forwarded-For: client, proxy1, proxy2; the nearest hop we do not trust is the client
            hops = [h.strip() for h in headers.get("x-forwarded-for", "").split(",") if h.strip()]
            while hops and _within(hops[-1], trusted_proxies):
                hops.pop()
            if hops:
                host, port = hops[-1], 0
        self.address = host
        family = "ipv6" if ":" in host else "ipv4"
        self.peer = f"{family}:{'[' + host + ']' if family == 'ipv6' else host}:{port}"
        client_id = headers.get("x-client-id", "")
        if key_name is not None:
            self.metadata = (("x-client-id", "key:" + key_name),)
        elif client_id:
            self.metadata = (("x-client-id", client_id),)
        else:
            self.metadata = ()


def _within(address: str, networks) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def key_name(key: str) -> str:
    """A name for an API key that has none in the keys file: never the key itself (it reaches
    logs and metrics' client labels), but stable."""
    return hashlib.sha256(key.encode()).hexdigest()[:12]


class HttpContext:
    """The parts of grpc.aio.ServicerContext the servicer uses, for one HTTP call."""

    def __init__(self, caller: Caller, timeout: float | None):
        self._caller = caller
        self._deadline = None if timeout is None else time.monotonic() + timeout

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def peer(self) -> str:
        return self._caller.peer

    def invocation_metadata(self):
        return self._caller.metadata

    def auth_context(self) -> dict:
        return {}           # no client certificate identity over HTTP (uvicorn does not expose it)

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata=()) -> None:
        raise CallEnded(code, details)

    async def abort_with_status(self, status: grpc.Status) -> None:
        """gRPC's rich status (server/status.py sends RetryInfo with overload refusals)."""
        retry_after = None
        for key, value in status.trailing_metadata or ():
            if key == "grpc-status-details-bin":
                rich = status_pb2.Status.FromString(value)
                for detail in rich.details:
                    info = error_details_pb2.RetryInfo()
                    if detail.Unpack(info):
                        retry_after = info.retry_delay.ToNanoseconds() / 1e9
        raise CallEnded(status.code, status.details, retry_after)


async def until_disconnected(receive) -> None:
    """Return when the client has gone away (the body must have been read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def call(method, message, context: HttpContext, receive):
    """Run one servicer method for an HTTP request; when the client disconnects first, cancel
    it (the servicer withdraws its sentences from the batch) and raise CallEnded(CANCELLED)."""
    task = asyncio.ensure_future(method(message, context))
    gone = asyncio.ensure_future(until_disconnected(receive))
    try:
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        gone.cancel()
    if task.done():
        return task.result()
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, CallEnded):
        pass
    raise CallEnded(grpc.StatusCode.CANCELLED, "the client disconnected")
