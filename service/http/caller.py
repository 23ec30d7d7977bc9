"""Who is calling over HTTP and by when: what the core asks of every call besides its
request (a client identity for fair admission, a deadline), read from the connection and
the headers."""

from __future__ import annotations

import hashlib
import ipaddress
import re

import grpc

from attnmt.service.errors import quoted
from attnmt.service.http.errors import CallEnded

GRPC_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}
# ASCII digits only: str.isdigit() also takes "²", which int() refuses
GRPC_TIMEOUT = re.compile(r"([0-9]{1,8})([HMSmun])")


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
            raise CallEnded(grpc.StatusCode.INVALID_ARGUMENT, f"X-Request-Timeout: {quoted(value)} is not a positive "
                            "number of seconds")
        return seconds
    value = headers.get("grpc-timeout")
    if value is not None:
        timeout = GRPC_TIMEOUT.fullmatch(value)
        if timeout is None or int(timeout[1]) == 0:
            raise CallEnded(grpc.StatusCode.INVALID_ARGUMENT, f"grpc-timeout: {quoted(value)} is not a timeout such "
                            "as '500m' or '5S'")
        return int(timeout[1]) * GRPC_TIMEOUT_UNITS[timeout[2]]
    return None


class Caller:
    """Who is calling over HTTP: the address (through trusted proxies) and `client`, the
    identity fairness and limits use: the API key's name, else `X-Client-Id`, else the address
    (named as gRPC names its callers, so one client is one client over both transports)."""

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
        client_id = "key:" + key_name if key_name is not None else headers.get("x-client-id", "")
        self.client = "id:" + client_id[:128] if client_id else "peer:" + self.peer.rsplit(":", 1)[0]


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
