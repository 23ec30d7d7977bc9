"""Who is calling over HTTP, the deadline headers, and domain exceptions as HTTP statuses."""

from __future__ import annotations

import ipaddress

import grpc
import pytest

from attnmt.service.errors import InvalidInput, ModelNotFound, Overloaded, Unavailable
from attnmt.service.http.caller import Caller
from attnmt.service.http.errors import HTTP_STATUS_OF, CallEnded, ended
from attnmt.service.http.front import timeout_of

PROXY = [ipaddress.ip_network("10.0.0.0/8")]


def who(peer, headers, key=None, trusted=()):
    return Caller(peer, headers, key, list(trusted)).client


def test_the_key_then_the_client_id_then_the_address():
    assert who(("192.0.2.1", 5000), {"x-client-id": "weblate"}, key="mastodon") == "id:key:mastodon"
    assert who(("192.0.2.1", 5000), {"x-client-id": "weblate"}) == "id:weblate"
    assert who(("192.0.2.1", 5000), {}) == "peer:ipv4:192.0.2.1"
    assert who(("2001:db8::1", 5000), {}) == "peer:ipv6:[2001:db8::1]"


def test_x_forwarded_for_only_from_a_trusted_proxy():
    spoofed = {"x-forwarded-for": "203.0.113.7"}
    assert who(("192.0.2.1", 5000), spoofed) == "peer:ipv4:192.0.2.1"                  # nobody trusted
    assert who(("192.0.2.1", 5000), spoofed, trusted=PROXY) == "peer:ipv4:192.0.2.1"   # not from a proxy
    assert who(("10.1.2.3", 5000), spoofed, trusted=PROXY) == "peer:ipv4:203.0.113.7"
    # the nearest hop that is not a trusted proxy: what the client wrote before it is not believed
    chain = {"x-forwarded-for": "198.51.100.9, 203.0.113.7, 10.9.9.9"}
    assert who(("10.1.2.3", 5000), chain, trusted=PROXY) == "peer:ipv4:203.0.113.7"


@pytest.mark.parametrize("headers, seconds", [
    ({}, None), ({"x-request-timeout": "2.5"}, 2.5), ({"grpc-timeout": "500m"}, 0.5), ({"grpc-timeout": "3S"}, 3.0),
    ({"grpc-timeout": "2M"}, 120.0), ({"x-request-timeout": "1", "grpc-timeout": "9S"}, 1.0),
])
def test_deadline_headers(headers, seconds):
    assert timeout_of(headers) == seconds


@pytest.mark.parametrize("headers", [{"x-request-timeout": "soon"}, {"x-request-timeout": "0"},
                                     {"x-request-timeout": "inf"}, {"grpc-timeout": "5"}, {"grpc-timeout": "5s"},
                                     {"grpc-timeout": "-5S"}, {"grpc-timeout": "123456789S"},
                                     {"grpc-timeout": "\xb2S"}, {"grpc-timeout": "+5S"}, {"grpc-timeout": "0S"},
                                     {"grpc-timeout": "5S\n"}])
def test_bad_deadlines_name_the_header(headers):
    with pytest.raises(CallEnded) as e:
        timeout_of(headers)
    assert e.value.http_status == 400 and next(iter(headers)) in e.value.message.lower()


def test_the_status_map_and_retry_after():
    assert [HTTP_STATUS_OF[c] for c in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                                        grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED,
                                        grpc.StatusCode.UNAVAILABLE)] == [400, 404, 429, 504, 503]
    assert CallEnded(grpc.StatusCode.INTERNAL, "x").http_status == 500          # unmapped: a bug
    assert CallEnded(grpc.StatusCode.RESOURCE_EXHAUSTED, "x", 0.25).retry_after_header(1) == {"Retry-After": "1"}
    assert CallEnded(grpc.StatusCode.UNAVAILABLE, "x").retry_after_header(2.5) == {"Retry-After": "3"}
    assert CallEnded(grpc.StatusCode.RESOURCE_EXHAUSTED, "big", http_status=413).retry_after_header(1) == {}


def test_a_domain_exception_ends_an_http_call_with_the_code_grpc_sends_for_it():
    assert [ended(e).http_status for e in (InvalidInput("x"), ModelNotFound("x"), Unavailable("x"))] == [400, 404, 503]
    refusal = ended(Overloaded("queue full", 2.5))
    assert (refusal.code, refusal.http_status, refusal.retry_after_header(1)) == \
        (grpc.StatusCode.RESOURCE_EXHAUSTED, 429, {"Retry-After": "3"})
    bug = ended(KeyError("secret"))
    assert bug.http_status == 500 and "secret" not in bug.message and "request" in bug.message
