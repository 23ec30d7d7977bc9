"""A request's body, read and parsed in one place for every route: the size limit first, then
JSON or a form. Whatever a client sends, the route gets a value or a CallEnded naming what is
wrong (400, 413); no parser's own exception reaches it.

JSON is read by orjson, stricter than the standard library where a route would otherwise fail
later: text that is not UTF-8, a lone surrogate (`"\\ud800"`, which no protobuf string and no
UTF-8 encoder takes), a number past float64's range (`1e400`) and nesting past 1,024 levels are
all refused as not JSON, with where they are. A body read as a proto message may nest no more
than MAX_DEPTH levels (`within_depth`): the schema is a few levels deep, and protobuf's parser
recurses into whatever it is given.
"""

from __future__ import annotations

import asyncio
import re
import urllib.parse

import grpc
import orjson
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request

from attnmt.service.errors import quoted
from attnmt.service.http.errors import CallEnded, invalid

# arrays and objects inside one another in a body, the body's own object counted: the proto's
# messages nest 3 deep (TranslateRequest.glossary[].source), protobuf's parser recurses per level
MAX_DEPTH = 32
CONTENT_LENGTH = re.compile(r"[0-9]{1,20}")      # ASCII digits: str.isdigit() also takes "²"


async def read(request: Request, limit: int, timeout: float, setting: str = "max_message_bytes") -> bytes:
    """The whole body, or CallEnded: 413 past `limit` bytes (by Content-Length before reading;
    the message names `setting`, the limit's), 408 when it takes over `timeout` seconds to
    arrive (the connection is then closed)."""
    declared = request.headers.get("content-length", "")
    if CONTENT_LENGTH.fullmatch(declared) and int(declared) > limit:
        raise CallEnded(grpc.StatusCode.RESOURCE_EXHAUSTED, f"the body is {declared} bytes, over "
                        f"{setting} ({limit})", http_status=413)
    chunks, size = [], 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                chunks.append(chunk)
                size += len(chunk)
                if size > limit:
                    raise CallEnded(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                    f"the body is over {setting} ({limit})", http_status=413)
    except TimeoutError:
        raise CallEnded(grpc.StatusCode.DEADLINE_EXCEEDED, f"the body took over {timeout:g} s to arrive "
                        "(http_body_timeout_seconds)", http_status=408) from None
    return b"".join(chunks)


def json_value(body: bytes, what: str = "JSON") -> object:
    """The JSON value of `body`, or CallEnded(400) saying `the body is not <what>` and why."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise invalid(f"the body is not {what}: {e}") from None


def within_depth(values: dict, what: str = "JSON") -> None:
    """CallEnded(400) naming the field of `values`, a body's object, that nests arrays and
    objects more than MAX_DEPTH levels deep counting the body's own; walked without recursion."""
    for name, value in values.items():
        stack = [(value, 2)] if isinstance(value, (list, dict)) else []
        while stack:
            item, depth = stack.pop()
            if depth > MAX_DEPTH:
                raise invalid(f"the body is not {what}: {quoted(name)} nests arrays and objects over "
                              f"{MAX_DEPTH} levels deep")
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)
                         if isinstance(v, (list, dict)))


def is_json(request: Request) -> bool:
    """The request says its body is JSON (`application/json`, `application/*+json`)."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower().endswith("json")


def is_multipart(request: Request) -> bool:
    return request.headers.get("content-type", "").split(";")[0].strip().lower() == "multipart/form-data"


def urlencoded_utf8(encoded: bytes, what: str) -> None:
    """CallEnded (400) for a query string or url-encoded form whose bytes or %-escapes are not
    UTF-8: Starlette reads them with U+FFFD in place of each bad byte, and "%ff%fe" would be
    translated as "��" rather than refused."""
    try:
        urllib.parse.unquote_to_bytes(encoded.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError as e:
        byte = e.object[e.start]
        raise invalid(f"{what} is not UTF-8: it holds the byte 0x{byte:02x} (%{byte:02X}), which begins no "
                      "UTF-8 character there") from None


async def form(request: Request, body: bytes) -> FormData:
    """The url-encoded or multipart form in a body read already (so the size limit applied first)."""
    if not is_multipart(request):
        urlencoded_utf8(body, "the form")
    async def replay():
        return {"type": "http.request", "body": body, "more_body": False}
    try:
        return await Request(request.scope, replay).form()
    except HTTPException as e:           # Starlette's words for a multipart body that does not parse
        raise invalid(f"the form does not parse: {e.detail}") from None
