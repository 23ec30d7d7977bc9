"""The native JSON API: the proto's RPCs through protobuf's JSON mapping
(lowerCamelCase names out, both spellings in, enums by name), answered by the
same servicer as gRPC. Errors: `{"error": {"code": "INVALID_ARGUMENT", "message": ...}}`
with the HTTP status google.rpc maps the code to.
"""

from __future__ import annotations

import grpc
import orjson
from google.protobuf import json_format
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from attnmt.service.http import jsonpb
from attnmt.service.http.context import CallEnded
from attnmt.service.stubs import translator_pb2 as pb


class JSONResponse(Response):
    """JSON written by orjson: a reply with word alignments is mostly floats, which the standard
    library's encoder wrote at 1.1 ms a verse (orjson: 0.04 ms; the same bytes)."""
    media_type = "application/json"

    def render(self, content) -> bytes:
        return orjson.dumps(content)


def message_json(message) -> dict:
    # every field present, defaults included: a JSON client reads `suspect: false`, not a missing key
    return jsonpb.to_dict(message)


def error_response(error: CallEnded, retry_after_default: float) -> Response:
    body = {"error": {"code": error.code.name, "message": error.message}}
    return JSONResponse(body, error.http_status, headers=error.retry_after_header(retry_after_default))


async def parse_body(request: Request, message_class, front) -> object:
    """The request body as a proto message, or CallEnded(INVALID_ARGUMENT) naming what is wrong."""
    body = await front.read_body(request)
    if not body.strip():
        return message_class()
    try:
        return json_format.Parse(body, message_class())
    except json_format.ParseError as e:
        raise CallEnded(grpc.StatusCode.INVALID_ARGUMENT,
                        f"the body is not a valid {message_class.DESCRIPTOR.full_name} in JSON: {e}") from None


def routes(front) -> list[Route]:
    """The /v1 routes, /healthz and /readyz; `front` is the HttpFront (service/http/app.py)."""
    retry = front.settings.retry_after_seconds

    def rpc(method_name: str, message_class, http_method: str, refuse_when_full: bool = False):
        async def endpoint(request: Request) -> Response:
            try:
                front.check_key(request, key=None)
                if http_method == "POST":
                    message = await parse_body(request, message_class, front)
                else:
                    message = message_class(**request.path_params)
                if refuse_when_full:
                    front.refuse_if_full(message)
                reply = await front.call(method_name, message, request)
                return JSONResponse(message_json(reply))
            except CallEnded as e:
                return error_response(e, retry)
        return endpoint

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        ready = front.ready()
        return JSONResponse({"status": "SERVING" if ready else "NOT_SERVING"}, 200 if ready else 503)

    return [
        Route("/v1/translate", rpc("Translate", pb.TranslateRequest, "POST", True), methods=["POST"]),
        Route("/v1/align", rpc("Align", pb.AlignRequest, "POST", True), methods=["POST"]),
        Route("/v1/models", rpc("ListModels", pb.ListModelsRequest, "GET"), methods=["GET"]),
        Route("/v1/models/{name}", rpc("GetModel", pb.GetModelRequest, "GET"), methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
    ]
