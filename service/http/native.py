"""The native JSON API: the proto's RPCs through protobuf's JSON mapping
(lowerCamelCase names out, both spellings in, enums by name), answered by the
same core as gRPC (service/server/core.py), and `POST /v1/translate_file` (a multipart form
in, the translated file out: service/server/files.py). Errors: `{"error": {"code":
"INVALID_ARGUMENT", "message": ...}}` with the HTTP status google.rpc maps the code to.
"""

from __future__ import annotations

import asyncio
import re

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from attnmt.service.errors import clipped, quoted
from attnmt.service.http import body, jsonpb
from attnmt.service.http.download import attachment
from attnmt.service.http.errors import JSONResponse
from attnmt.service.stubs import translator_pb2 as pb

# A reply's JSON is written on the event loop up to this size (protobuf bytes), beyond it on a
# worker thread: 3.3 MB of JSON (16 sentences of 120 words, n_best 16, hard links) took about
# 0.1 s, during which the loop answered nothing, health checks included (AMD EPYC, 2026-11-29).
JSON_ON_LOOP_BYTES = 256 * 1024


def message_json(message) -> dict:
    # every field present, defaults included: a JSON client reads `suspect: false`, not a missing key
    return jsonpb.to_dict(message)


async def parse_body(request: Request, message_class, front) -> object:
    """The request body as a proto message, or CallEnded(INVALID_ARGUMENT) naming what is wrong."""
    raw = await front.read_body(request)
    if not raw.strip():
        return message_class()
    what = f"a valid {message_class.DESCRIPTOR.full_name} in JSON"
    values = body.json_value(raw, what)
    if not isinstance(values, dict):
        raise body.invalid(f"the body is not {what}: a JSON object is expected, not {type(values).__name__}")
    body.within_depth(values, what)
    strict_fields(values, message_class.DESCRIPTOR)
    try:
        return json_format.ParseDict(values, message_class())
    except json_format.ParseError as e:         # its message quotes the value it read, whole
        raise body.invalid(f"the body is not {what}: {clipped(str(e))}") from None


_FLOATS = (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE)
_INTEGERS = {FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT32,
             FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64,
             FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED32,
             FieldDescriptor.TYPE_SFIXED64}
# numbers written as strings, as the proto3 JSON mapping allows them
_INTEGER_TEXT = re.compile(r"-?[0-9]+")
_FLOAT_TEXT = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|NaN|-?Infinity")


def strict_fields(values: dict, descriptor, path: str = "") -> None:
    """What json_format takes and the proto3 JSON mapping does not: `true` for a number or an
    enum (Python's bool is an int), `2.5` for an integer or an enum (truncated), a number written
    as a string Python reads and the mapping does not (`"1_0"`, read as 10, `"٣"`), an array for
    an object (read as an empty one), and a key holding NUL (protobuf's lookup stops at it, so
    `"sentences\u0000x"` was read as `sentences`): 400 naming the field."""
    for key, value in values.items():
        if "\0" in key:
            raise body.invalid(f"{path}{quoted(key)} is not a field: a field name holds no NUL")
        field = descriptor.fields_by_camelcase_name.get(key) or descriptor.fields_by_name.get(key)
        if field is None or field.type == FieldDescriptor.TYPE_BOOL:
            continue
        name = f"{path}{field.name}"
        if field.message_type is not None and not field.is_repeated and \
                value is not None and not isinstance(value, dict):
            raise body.invalid(f"{name} must be an object, not {type(value).__name__}")
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, bool):
                raise body.invalid(f"{name} must not be a boolean")
            if isinstance(item, float) and field.type not in _FLOATS and not item.is_integer():
                raise body.invalid(f"{name} must be a whole number, not {item!r}")
            if isinstance(item, str) and (field.type in _INTEGERS and not _INTEGER_TEXT.fullmatch(item) or
                                          field.type in _FLOATS and not _FLOAT_TEXT.fullmatch(item)):
                raise body.invalid(f"{name} must be a number, not {quoted(item)}")
            if isinstance(item, dict) and field.message_type is not None and \
                    not field.message_type.GetOptions().map_entry:
                strict_fields(item, field.message_type, name + ".")


def routes(front) -> list[Route]:
    """The /v1 routes, /healthz and /readyz; `front` is the HttpFront (service/http/front.py)."""
    core = front.core

    def rpc(method_name: str, message_class, http_method: str, answer, refuse_when_full: bool = False):
        async def endpoint(request: Request) -> Response:
            # a CallEnded raised here is answered by service/http/errors.py
            front.check_key(request, key=None)
            if http_method == "POST":
                message = await parse_body(request, message_class, front)
            else:
                message = message_class(**request.path_params)
            if refuse_when_full:
                front.refuse_if_full(message)
            reply = await front.call(method_name, message, request, answer)
            def respond() -> Response:
                return JSONResponse(message_json(reply))
            return respond() if reply.ByteSize() <= JSON_ON_LOOP_BYTES else await asyncio.to_thread(respond)
        return endpoint

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        ready = front.ready()
        return JSONResponse({"status": "SERVING" if ready else "NOT_SERVING"}, 200 if ready else 503)

    async def translate_file(request: Request) -> Response:
        """A multipart form: `file`, and `model` or `source_language` / `target_language` (either
        spelling, as the JSON mapping reads them). The answer is the translated file itself."""
        front.check_key(request, key=None)
        raw = await front.read_body(request, file=True)
        if not body.is_multipart(request):
            raise body.invalid("send the file as a multipart/form-data body with the field `file`")
        form = await body.form(request, raw)

        def text(name: str, camel: str = "") -> str:
            value = form.get(name) or (form.get(camel) if camel else None) or ""
            if not isinstance(value, str):
                raise body.invalid(f"{name} must be a text field, not a file")
            return value
        upload = form.get("file")
        if not isinstance(upload, UploadFile) or not upload.filename:
            raise body.invalid("file is missing: send the file in the form field `file`, with its name")
        model, source, target = text("model"), text("source_language", "sourceLanguage"), \
            text("target_language", "targetLanguage")
        done = await front.translate_file(request, upload, model, source, target)
        return Response(done.data, media_type=done.media_type, headers={
            "Content-Disposition": attachment(done.name), "Content-Language": done.target_language,
            "X-Model": done.model, "X-Source-Language": done.source_language,
            "X-Untranslated-Entries": str(done.untranslated), "X-Content-Type-Options": "nosniff"})

    async def list_models(message: pb.ListModelsRequest, **_) -> pb.ListModelsResponse:
        return core.list_models()

    async def get_model(message: pb.GetModelRequest, **_) -> pb.ModelInfo:
        return core.get_model(message.name)

    return [
        Route("/v1/translate", rpc("Translate", pb.TranslateRequest, "POST", core.translate, True), methods=["POST"]),
        Route("/v1/align", rpc("Align", pb.AlignRequest, "POST", core.align, True), methods=["POST"]),
        Route("/v1/translate_file", translate_file, methods=["POST"]),
        Route("/v1/models", rpc("ListModels", pb.ListModelsRequest, "GET", list_models), methods=["GET"]),
        Route("/v1/models/{name}", rpc("GetModel", pb.GetModelRequest, "GET", get_model), methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
    ]
