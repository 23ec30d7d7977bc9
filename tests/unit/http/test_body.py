"""A request's body as service/http/body.py reads it: the declared size, and how deep a body
read as a proto message may nest."""

from __future__ import annotations

import asyncio

import pytest
from starlette.requests import Request

from attnmt.service.http import body
from attnmt.service.http.errors import CallEnded


def request(content: bytes, headers: list[tuple[bytes, bytes]]) -> Request:
    async def receive():
        return {"type": "http.request", "body": content, "more_body": False}
    return Request({"type": "http", "method": "POST", "path": "/", "headers": headers}, receive)


@pytest.mark.parametrize("declared", [b"\xb2", b"1\xb2", b"+5", b" 5"])
def test_a_content_length_that_is_not_ascii_digits_is_not_believed(declared):
    """"²".isdigit() is true and int("²") raises: such a length is left to the body's own size."""
    got = asyncio.run(body.read(request(b"{}", [(b"content-length", declared)]), limit=10, timeout=1))
    assert got == b"{}"


def test_a_declared_length_over_the_limit_is_413():
    with pytest.raises(CallEnded) as e:
        asyncio.run(body.read(request(b"{}", [(b"content-length", b"11")]), limit=10, timeout=1))
    assert e.value.http_status == 413


def nested(depth: int) -> dict:
    """A body whose `options` makes it `depth` levels deep, the body's object counted."""
    value: list = []
    for _ in range(depth - 2):
        value = [value]
    return {"sentences": ["x"], "options": value}


def test_nesting_is_bounded_and_walked_without_recursion():
    body.within_depth(nested(body.MAX_DEPTH))
    for depth in (body.MAX_DEPTH + 1, 100_000):          # past Python's recursion limit
        with pytest.raises(CallEnded) as e:
            body.within_depth(nested(depth))
        assert e.value.http_status == 400 and "'options'" in e.value.message and len(e.value.message) < 120
    with pytest.raises(CallEnded):
        body.within_depth({"glossary": [{"source": nested(body.MAX_DEPTH)["options"]}]})
