"""The OpenAPI 3.1 document of the HTTP front, served at /openapi.json and rendered at /docs.

The native API's schemas are generated from the proto's descriptors as protobuf's JSON
mapping writes messages (https://protobuf.dev/programming-guides/json/): lowerCamelCase
names, enums by name, 64-bit integers as decimal strings, maps as objects. Descriptions
are the comments of `translator.proto`, read from the descriptor set `make stubs` writes
beside the stubs (service/stubs/translator.binpb). LibreTranslate's routes have schemas
written by hand from its clients (docs/http.md).
"""

from __future__ import annotations

import copy
import textwrap
from importlib import resources

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.text.files import EXTENSIONS as FILE_EXTENSIONS

# path, RPC, request message in the body (None: none), response message, error statuses
NATIVE_ROUTES = [
    ("/v1/translate", "Translate", pb.TranslateRequest, pb.TranslateResponse, "400 403 404 408 413 429 500 503 504"),
    ("/v1/align", "Align", pb.AlignRequest, pb.AlignResponse, "400 403 404 408 413 429 500 503 504"),
    ("/v1/models", "ListModels", None, pb.ListModelsResponse, "400 403 429 500 503 504"),
    ("/v1/models/{name}", "GetModel", None, pb.ModelInfo, "400 403 404 429 500 503 504"),
]

_F = FieldDescriptor
_SCALARS = {
    _F.TYPE_STRING: {"type": "string"},
    _F.TYPE_BYTES: {"type": "string", "contentEncoding": "base64"},
    _F.TYPE_BOOL: {"type": "boolean"},
    _F.TYPE_FLOAT: {"type": "number", "format": "float"},
    _F.TYPE_DOUBLE: {"type": "number", "format": "double"},
    **dict.fromkeys((_F.TYPE_INT32, _F.TYPE_SINT32, _F.TYPE_SFIXED32), {"type": "integer", "format": "int32"}),
    **dict.fromkeys((_F.TYPE_UINT32, _F.TYPE_FIXED32), {"type": "integer", "minimum": 0}),
    # JSON numbers lose precision past 2^53, so the mapping writes 64-bit integers as strings
    **dict.fromkeys((_F.TYPE_INT64, _F.TYPE_SINT64, _F.TYPE_SFIXED64, _F.TYPE_UINT64, _F.TYPE_FIXED64),
                    {"type": "string", "pattern": "^-?[0-9]+$"}),
}


# The limits the server holds requests to (ModelInfo.limits names them), as in the defaults
# of service/server/settings.py; the served document states the server's own
DEFAULT_LIMITS = {"max_sentences_per_request": 64, "max_beam_size": 16}


def constraints(limits: dict[str, int]) -> dict[str, dict]:
    """What the core checks of a field by itself (service/inference/search.py's ranges, the
    core's counts), by the field's full name; rules between fields (n_best within beam_size)
    and after tokenization are in the descriptions and answered 400."""
    beam = {"minimum": 0, "maximum": limits["max_beam_size"]}
    unit = {"exclusiveMinimum": 0, "maximum": 1}
    return {
        "attnmt.v1.TranslateRequest.sentences": {"minItems": 1, "maxItems": limits["max_sentences_per_request"]},
        "attnmt.v1.DecodingOptions.beam_size": beam, "attnmt.v1.DecodingOptions.n_best": beam,
        "attnmt.v1.DecodingOptions.length_penalty": {"minimum": 0, "maximum": 5},
        "attnmt.v1.DecodingOptions.max_length_ratio": {"exclusiveMinimum": 0, "maximum": 10},
        "attnmt.v1.DecodingOptions.max_length_extra": {"minimum": 0, "maximum": 1000},
        "attnmt.v1.DecodingOptions.alignment_threshold": unit, "attnmt.v1.AlignRequest.alignment_threshold": unit,
        "attnmt.v1.AlignRequest.source": {"minLength": 1}, "attnmt.v1.AlignRequest.target": {"minLength": 1},
    }


def proto_comments() -> dict[str, str]:
    """Proto full name -> its comment (an enum value's as `<enum>.<VALUE>`, the file's as "");
    empty when the descriptor set is missing: the document then has no proto descriptions."""
    try:
        data = (resources.files("attnmt.service.stubs") / "translator.binpb").read_bytes()
    except FileNotFoundError:
        return {}
    file = next(f for f in descriptor_pb2.FileDescriptorSet.FromString(data).file if f.name == pb.DESCRIPTOR.name)
    at = {tuple(loc.path): textwrap.dedent(loc.leading_comments or loc.trailing_comments).strip()
          for loc in file.source_code_info.location}
    found = {"": at.get((12,), "")}   # the file's header comment sits on `syntax` (field 12)

    # paths are field numbers of descriptor.proto: file 4 messages, 5 enums, 6 services;
    # message 2 fields, 3 nested messages, 4 nested enums; enum 2 values; service 2 methods
    def enum(e, path, scope):
        found[f"{scope}.{e.name}"] = at.get(path, "")
        for i, value in enumerate(e.value):
            found[f"{scope}.{e.name}.{value.name}"] = at.get((*path, 2, i), "")

    def message(m, path, scope):
        name = f"{scope}.{m.name}"
        found[name] = at.get(path, "")
        for i, field in enumerate(m.field):
            found[f"{name}.{field.name}"] = at.get((*path, 2, i), "")
        for i, nested in enumerate(m.nested_type):
            message(nested, (*path, 3, i), name)
        for i, e in enumerate(m.enum_type):
            enum(e, (*path, 4, i), name)

    for i, m in enumerate(file.message_type):
        message(m, (4, i), file.package)
    for i, e in enumerate(file.enum_type):
        enum(e, (5, i), file.package)
    for i, service in enumerate(file.service):
        for j, method in enumerate(service.method):
            found[f"{file.package}.{service.name}.{method.name}"] = at.get((6, i, 2, j), "")
    return {name: text for name, text in found.items() if text}


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _name(d: Descriptor | EnumDescriptor) -> str:
    return d.full_name.removeprefix(pb.DESCRIPTOR.package + ".")   # attnmt.v1.Alignment.Level -> Alignment.Level


def _described(schema: dict, *notes: str) -> dict:
    text = "\n\n".join(n for n in notes if n)
    return {**schema, "description": text} if text else schema


def _element(f: FieldDescriptor) -> FieldDescriptor:
    """What each entry of a field holds: the field itself, or for a map its `value` field."""
    entry = f.message_type
    return entry.fields_by_name["value"] if entry is not None and entry.GetOptions().map_entry else f


def _value(f: FieldDescriptor) -> Descriptor | EnumDescriptor | None:
    """The message or enum a field holds (for a map, its values'), None for a scalar."""
    return _element(f).message_type or _element(f).enum_type


def _field(f: FieldDescriptor, comments: dict[str, str], limits: dict[str, dict]) -> dict:
    one = _ref(_name(_value(f))) if _value(f) else _SCALARS[_element(f).type]
    if _element(f) is not f:
        schema = {"type": "object", "additionalProperties": one}   # a map: its keys are strings in JSON
    else:
        schema = {"type": "array", "items": one} if f.is_repeated else dict(one)
    schema.update(limits.get(f.full_name, {}))
    # protobuf's JSON mapping reads null as the field's default, for every field
    schema = {"anyOf": [schema, {"type": "null"}]} if "$ref" in schema else {**schema, "type": [schema["type"], "null"]}
    oneof, note = f.containing_oneof, ""
    if oneof is not None and oneof.name == f"_{f.name}" and len(oneof.fields) == 1:
        note = "Optional: leave it out for the default."   # proto3 `optional`, a synthetic oneof
    elif oneof is not None:
        note = f"One of {', '.join(f'`{g.json_name}`' for g in oneof.fields)}: set at most one."
    return _described(schema, comments.get(f.full_name, ""), note)


def _enum(e: EnumDescriptor, comments: dict[str, str]) -> dict:
    said = {v.name: comments.get(f"{e.full_name}.{v.name}", "") for v in e.values}
    values = "\n".join(f"- `{name}`: {text}" if text else f"- `{name}`" for name, text in said.items())
    # by name, as the mapping writes them; a number is read too
    return _described({"anyOf": [{"type": "string", "enum": list(said)}, {"type": "integer", "format": "int32"}]},
                      comments.get(e.full_name, ""),
                      values if any(said.values()) else "")


def proto_schemas(comments: dict[str, str], limits: dict[str, int] = DEFAULT_LIMITS) -> dict[str, dict]:
    """A schema for every message and enum the native routes reach, named as in the proto."""
    checked = constraints(limits)
    schemas: dict[str, dict] = {}
    todo = [m.DESCRIPTOR for _, _, request, response, _ in NATIVE_ROUTES for m in (request, response) if m]
    while todo:
        d = todo.pop()
        if _name(d) in schemas:
            continue
        if isinstance(d, EnumDescriptor):
            schemas[_name(d)] = _enum(d, comments)
            continue
        properties = {f.json_name: _field(f, comments, checked) for f in d.fields}
        schemas[_name(d)] = _described({"type": "object", "properties": properties}, comments.get(d.full_name, ""))
        todo += [_value(f) for f in d.fields if _value(f)]
    return dict(sorted(schemas.items()))


def _json(schema: dict) -> dict:
    return {"application/json": {"schema": schema}}


def _one_or_list(item: dict, description: str) -> dict:
    # anyOf, not oneOf: an empty list of lists is also an empty list
    return {"anyOf": [item, {"type": "array", "items": item}], "description": description}


_STR = {"type": "string"}
_FILE = {"type": "string", "format": "binary"}
# what a translated file is answered as (service/text/files/: each format's media type)
_FILE_TYPES = ("text/plain", "text/html", "application/x-subrip", "text/vtt", "text/x-gettext-translation",
               "application/xliff+xml", "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
               "application/vnd.oasis.opendocument.text")
_STRINGS = {"type": "array", "items": _STR}
_LANGUAGE = {"type": "object", "required": ["code", "name"], "properties": {"code": _STR, "name": _STR}}
_TEXT = {"type": "string", "minLength": 1}
_LIBRE_REQUEST = {"type": "object", "required": ["q", "source", "target"], "properties": {
    "q": {**_one_or_list(_TEXT, "The text, or a list of texts (in JSON only)."),
          "anyOf": [_TEXT, {"type": "array", "items": _STR, "minItems": 1}]},
    "source": {"type": "string", "minLength": 1, "examples": ["es", "auto"],
               "description": "A code from /languages, or `auto`."},
    "target": {"type": "string", "minLength": 1, "examples": ["en"]},
    "format": {"type": "string", "enum": ["text", "html"], "default": "text"},
    "alternatives": {"type": "integer", "minimum": 0, "default": 0,
                     "description": "How many translations to return besides the best."},
    "api_key": {"type": ["string", "null"], "description": "Needed only where the server is configured with keys."}}}
HAND_WRITTEN_SCHEMAS = {
    "HttpError": {"type": "object", "required": ["error"], "description": "A native route's error.", "properties": {
        "error": {"type": "object", "required": ["code", "message"], "properties": {
            "code": {"type": "string", "examples": ["INVALID_ARGUMENT", "RESOURCE_EXHAUSTED"],
                     "description": "The gRPC status code's name (google.rpc.Code)."},
            "message": {"type": "string", "description": "The message a gRPC client gets."}}}}},
    "HealthStatus": {"type": "object", "required": ["status"], "properties": {"status": _STR}},
    "LibreTranslateRequest": _LIBRE_REQUEST,
    "LibreTranslateForm": {**_LIBRE_REQUEST, "properties": {**_LIBRE_REQUEST["properties"], "q": _TEXT}},
    "LibreTranslateResponse": {"type": "object", "required": ["translatedText"], "properties": {
        "translatedText": _one_or_list(_STR, "A string, or a list when `q` is a list."),
        "alternatives": _one_or_list(_STRINGS, "Only when `alternatives` > 0: a list, a list of lists for a list `q`."),
        "detectedLanguage": _one_or_list(_ref("LibreTranslateDetection"),
                                         "Only when `source` is `auto`: one per text for a list `q`.")}},
    "LibreTranslateDetection": {"type": "object", "required": ["confidence", "language"], "properties": {
        "confidence": {"type": "number", "minimum": 0, "maximum": 100}, "language": _STR}},
    "LibreTranslateDetectRequest": {"type": "object", "required": ["q"], "properties": {
        "q": {"anyOf": [_TEXT, {"type": "array", "items": _STR, "minItems": 1}],
              "description": "The text, or a list of texts (in JSON only) detected together."},
        "api_key": {"type": ["string", "null"]}}},
    "LibreTranslateDetectForm": {"type": "object", "required": ["q"], "properties": {"q": _TEXT, "api_key": _STR}},
    "LibreTranslateLanguage": {**_LANGUAGE, "properties": {**_LANGUAGE["properties"], "targets": _STRINGS}},
    "LibreTranslateSettings": {"type": "object", "properties": {
        "charLimit": {"type": "integer"}, "frontendTimeout": {"type": "integer"}, "apiKeys": {"type": "boolean"},
        "keyRequired": {"type": "boolean"}, "suggestions": {"type": "boolean"},
        "filesTranslation": {"type": "boolean"}, "supportedFilesFormat": _STRINGS,
        "language": {"type": "object", "properties": {"source": _LANGUAGE, "target": _LANGUAGE}}}},
    "LibreTranslateError": {"type": "object", "required": ["error"], "properties": {"error": _STR}},
    "LibreTranslateFileForm": {"type": "object", "required": ["file", "source", "target"], "properties": {
        "file": {**_FILE, "description": f"The file: {', '.join(FILE_EXTENSIONS)}, by its name's extension."},
        "source": {"type": "string", "minLength": 1, "examples": ["es", "auto"],
                   "description": "A code from /languages, or `auto` (detected from the file's texts)."},
        "target": {"type": "string", "minLength": 1, "examples": ["en"]},
        "api_key": {"type": "string", "description": "Needed only where the server is configured with keys."}}},
    "LibreTranslateFileResponse": {"type": "object", "required": ["translatedFileUrl"], "properties": {
        "translatedFileUrl": {"type": "string", "format": "uri", "description": "Where to fetch the translated "
                              "file, once, within file_store_expiry_seconds: /download_file/{token}."}}},
    "FileForm": {"type": "object", "required": ["file"], "properties": {
        "file": {**_FILE, "description": f"The file: {', '.join(FILE_EXTENSIONS)}, by its name's extension."},
        "model": {"type": "string", "description": "The model to translate with (else the pair's, else the "
                                                   "default model)."},
        "source_language": {"type": "string", "description": "The file's language (`auto`: detected; "
                                                             "`sourceLanguage` is read too)."},
        "target_language": {"type": "string", "description": "The language to translate into "
                                                             "(`targetLanguage` is read too)."}}},
}

_ERRORS = {   # HTTP status -> (gRPC code, what it means on the native routes, on LibreTranslate's)
    "400": ("INVALID_ARGUMENT", "The request breaks a rule or a limit (ModelInfo.limits), asks for a language "
            "pair no served model translates (or not its `model`'s), its body or a header does not parse, or a "
            "field has the wrong type.",
            "Invalid request: a missing or unsupported field, a field of the wrong type, a body that does not parse, "
            "a limit, a pair not served."),
    "403": ("PERMISSION_DENIED", "API keys are configured and the key is missing or unknown.",
            "API keys are configured and `api_key` is missing or unknown."),
    "404": ("NOT_FOUND", "The model is not served here.", ""),
    "408": ("DEADLINE_EXCEEDED", "The body took over http_body_timeout_seconds to arrive; the connection is closed.",
            "The body took over http_body_timeout_seconds to arrive; the connection is closed."),
    "413": ("RESOURCE_EXHAUSTED", "The body is over the size limit (max_message_bytes).",
            "The body is over the size limit (max_message_bytes)."),
    "429": ("RESOURCE_EXHAUSTED", "The server, or this client's share of it, is full.",
            "Slowdown: the server, or this client's share of it, is full."),
    "500": ("INTERNAL", "A failure on the server's side.", "The translation failed on the server's side."),
    "503": ("UNAVAILABLE", "The server is warming up, draining, or at its limit of connections "
            "(http_max_connections).", "The server is draining or at its limit of connections."),
    "504": ("DEADLINE_EXCEEDED", "The deadline (X-Request-Timeout or grpc-timeout, or the server's own) ran out.",
            "The deadline (X-Request-Timeout or grpc-timeout, or the server's own) ran out."),
}
_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying.",
                                "schema": {"type": "integer", "minimum": 1}}}


def _errors(statuses: str, libre: bool) -> dict:
    responses = {}
    for status in statuses.split():
        code, native, libre_text = _ERRORS[status]
        body = {"error": libre_text} if libre else {"error": {"code": code, "message": native}}
        responses[status] = {"description": libre_text if libre else f"{code}: {native}", "content": {
            "application/json": {"schema": _ref("LibreTranslateError" if libre else "HttpError"), "example": body}}}
        if status in ("429", "503"):
            responses[status]["headers"] = _RETRY_AFTER
    return responses


def _native(path: str, rpc: str, request, response, statuses: str, comments: dict[str, str]) -> dict:
    parameters = [{"name": "name", "in": "path", "required": True, "schema": _STR}] if "{name}" in path else []
    operation = {
        "tags": ["native"], "operationId": rpc[0].lower() + rpc[1:], "summary": rpc,
        "description": comments.get(f"{pb.DESCRIPTOR.package}.Translator.{rpc}", ""),
        "parameters": parameters + [{"$ref": "#/components/parameters/XRequestTimeout"},
                                    {"$ref": "#/components/parameters/XClientId"}],
        "security": [{}, {"bearer": []}, {"apiKey": []}],   # {}: no key needed unless keys are configured
        "responses": {"200": {"description": "OK", "content": _json(_ref(_name(response.DESCRIPTOR)))},
                      **_errors(statuses, libre=False)},
    }
    if request is not None:
        operation["requestBody"] = {"required": True, "content": _json(_ref(_name(request.DESCRIPTOR)))}
    return {"post" if request is not None else "get": operation}


def _libre(summary: str, response: dict, request: str = "", form: str = "", statuses: str = "") -> dict:
    operation = {"tags": ["LibreTranslate"], "summary": summary,
                 "responses": {"200": {"description": "OK", "content": _json(response)}}}
    if not request:
        return {"get": operation}
    operation["description"] = ("The fields come from a JSON body, else from form fields (url-encoded or multipart) "
                                "and the query string.")
    operation["requestBody"] = {"required": True, "content": {
        **_json(_ref(request)), "application/x-www-form-urlencoded": {"schema": _ref(form or request)},
        "multipart/form-data": {"schema": _ref(form or request)}}}
    operation["parameters"] = [{"$ref": "#/components/parameters/XRequestTimeout"},
                               {"$ref": "#/components/parameters/XClientId"}]
    operation["responses"].update(_errors(statuses, libre=True))
    return {"post": operation}


def _translated_file() -> dict:
    return {"description": "The translated file, named in Content-Disposition (`guide.po` -> `guide_en.po`).",
            "content": {t: {"schema": _FILE} for t in _FILE_TYPES}}


def _file_route(tags: list[str], summary: str, form: str, ok: dict, statuses: str, libre: bool) -> dict:
    """A route taking a file in a multipart form: .txt, .html, .srt, .vtt, .po, .pot, .xlf,
    .docx, .odt (service/text/files/), translated with its formatting kept."""
    return {"post": {
        "tags": tags, "summary": summary, **({} if libre else {"operationId": "translateFile"}),
        "description": f"The file ({', '.join(FILE_EXTENSIONS)}) translated with its formatting kept: plain text "
                       "line for line, HTML as in `TEXT_FORMAT_HTML`, subtitles cue for cue with their timings, "
                       "gettext catalogs entry for entry (untranslated entries filled and flagged fuzzy), Word "
                       "(.docx) and OpenDocument (.odt) documents paragraph for paragraph with their runs' "
                       "formatting, links, tabs and images where the alignment puts them. At most "
                       "max_file_bytes; another format, bytes that do not decode or a file its parser refuses: 400.",
        "parameters": [{"$ref": "#/components/parameters/XRequestTimeout"},
                       {"$ref": "#/components/parameters/XClientId"}],
        **({} if libre else {"security": [{}, {"bearer": []}, {"apiKey": []}]}),
        "requestBody": {"required": True, "content": {"multipart/form-data": {"schema": _ref(form)}}},
        "responses": {**ok, **_errors(statuses, libre)}}}


_ABOUT = """

## Over HTTP

The native routes (`/v1/...`) are the gRPC service's RPCs through protobuf's JSON mapping: field
names in lowerCamelCase (the proto's own names are accepted in requests too), enums by name,
64-bit integers as strings. A request's deadline is `X-Request-Timeout` (seconds) or
`grpc-timeout` (gRPC's form: `500m`, `5S`). The LibreTranslate routes answer LibreTranslate's
clients (Mastodon, Weblate, browser extensions) as it would."""


def document(title: str, version: str, limits: dict[str, int] = DEFAULT_LIMITS) -> dict:
    """The OpenAPI 3.1 document of the native routes, the health routes and LibreTranslate's;
    `limits` the server's (max_sentences_per_request, max_beam_size) where the schemas state them."""
    comments = proto_comments()
    libre_schemas = copy.deepcopy(HAND_WRITTEN_SCHEMAS)
    for name in ("LibreTranslateRequest", "LibreTranslateForm"):
        libre_schemas[name]["properties"]["alternatives"]["maximum"] = limits["max_beam_size"] - 1
    health = {"description": "OK", "content": _json(_ref("HealthStatus"))}
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version, "description": comments.get("", "") + _ABOUT},
        "tags": [{"name": "native", "description": "The gRPC service's RPCs in JSON."},
                 {"name": "health", "description": "For load balancers and orchestrators."},
                 {"name": "LibreTranslate", "description": "LibreTranslate's API, as its clients use it."}],
        "paths": {
            **{path: _native(path, rpc, request, response, statuses, comments)
               for path, rpc, request, response, statuses in NATIVE_ROUTES},
            "/v1/translate_file": _file_route(
                ["native"], "Translate a file", "FileForm", {"200": _translated_file()},
                "400 403 404 408 413 429 500 503 504", libre=False),
            "/healthz": {"get": {"tags": ["health"], "summary": "200 while the process serves",
                                 "responses": {"200": health}}},
            "/readyz": {"get": {"tags": ["health"], "summary": "200 when serving, 503 while warming up or draining",
                                "responses": {"200": health, "503": {**health, "description": "Not serving"}}}},
            "/translate": _libre("Translate", _ref("LibreTranslateResponse"), "LibreTranslateRequest",
                                 "LibreTranslateForm", "400 403 408 413 429 500 503 504"),
            "/languages": _libre("Languages and their targets",
                                 {"type": "array", "items": _ref("LibreTranslateLanguage")}),
            "/detect": _libre("Detect the language (candidates, best first)", {
                "type": "array", "items": _ref("LibreTranslateDetection")}, "LibreTranslateDetectRequest",
                "LibreTranslateDetectForm", "400 403 408 413 500"),
            "/translate_file": _file_route(
                ["LibreTranslate"], "Translate a file, kept for download", "LibreTranslateFileForm",
                {"200": {"description": "OK", "content": _json(_ref("LibreTranslateFileResponse"))}},
                "400 403 408 413 429 500 503 504", libre=True),
            "/download_file/{token}": {"get": {
                "tags": ["LibreTranslate"], "summary": "Fetch a translated file (once: it is deleted)",
                "parameters": [{"name": "token", "in": "path", "required": True, "schema": _STR}],
                "responses": {"200": _translated_file(), **_errors("404", libre=True)}}},
            "/frontend/settings": _libre("Settings for web front ends", _ref("LibreTranslateSettings")),
            "/health": _libre("Health", _ref("HealthStatus")),
        },
        "components": {
            "schemas": {**proto_schemas(comments, limits), **libre_schemas},
            "parameters": {
                "XRequestTimeout": {"name": "X-Request-Timeout", "in": "header",
                                    "schema": {"type": "number", "exclusiveMinimum": 0},
                                    "description": "The deadline in seconds (or gRPC's grpc-timeout header); "
                                                   "capped by the server's."},
                "XClientId": {"name": "X-Client-Id", "in": "header", "schema": _STR,
                              "description": "Who is calling, for fair shares (an API key takes precedence)."}},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"},
                                "apiKey": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}},
        },
    }
