"""LibreTranslate's API, as its clients send it (Mastodon, Weblate, Discourse, browser
extensions): `POST /translate`, `POST /detect`, `POST /translate_file` and the
`GET /download_file/<token>` it answers, `GET /languages`, `GET /frontend/settings`,
`GET /health`. Read from libretranslate/app.py; the quirks kept are in docs/http.md.

Each `q` is a document: split into sentences (and read as HTML for `format: html`),
translated through the same core as every other call. Errors are LibreTranslate's
`{"error": "..."}` with 400, 403, 429 (Retry-After), 500 and 503.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import grpc
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from attnmt.service.errors import AttnmtError, InvalidInput, clipped
from attnmt.service.http import body
from attnmt.service.http.caller import timeout_of
from attnmt.service.http.download import attachment
from attnmt.service.http.errors import CallEnded, JSONResponse, invalid
from attnmt.service.server.routing import AUTO
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.text import files, language

SHORT_TEXT = 40     # characters below which LibreTranslate detects on all texts together
# percent: `auto` refuses a text as in a language no model translates into the target only when
# the detector gives that language this much; below it, the text is read as the likeliest source
# served into the target, as the native API reads `auto` (a short text's best guess is weak:
# "Hello." is 37 % Italian, 15 % English)
CONFIDENT = 50.0
NUMERAL = re.compile(r"[+-]?[0-9]{1,20}")       # ASCII digits: str.isdigit() also takes "²"


@dataclass
class Fields:
    """A LibreTranslate request's fields, from JSON, or else from the form and the query string.
    Each is read as the type the route needs, or a 400 naming it: JSON can hold any type, and a
    multipart form a file."""
    values: dict
    is_json: bool

    def text(self, name: str) -> str | None:
        """A string field; None when missing or empty, as LibreTranslate reads `if not value`."""
        value = self.values.get(name)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise invalid(f"Invalid request: {name} parameter must be a string")
        return value

    def texts(self, name: str) -> list[str] | str | None:
        """A string, or in JSON a list of strings; None when missing or empty."""
        value = self.values.get(name)
        if not value:
            return None
        if isinstance(value, str) or (self.is_json and isinstance(value, list) and
                                      all(isinstance(v, str) for v in value)):
            return value
        raise invalid(f"Invalid request: {name} must be a string or a list of strings")

    def count(self, name: str) -> int:
        """A whole number, as a JSON number or a numeral (LibreTranslate reads it with `int()`); 0 when missing."""
        value = self.values.get(name)
        if value is None or value == "":
            return 0
        if isinstance(value, str):
            if NUMERAL.fullmatch(value.strip()):
                return int(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            return value
        elif isinstance(value, float) and value.is_integer():
            return int(value)
        raise invalid(f"Invalid request: {name} parameter is not a number")

    def file(self, name: str) -> UploadFile | None:
        """A file of a multipart form; None when missing."""
        value = self.values.get(name)
        if value is None or value == "":
            return None
        if not isinstance(value, UploadFile):
            raise invalid(f"Invalid request: {name} parameter must be a file")
        return value


async def read_fields(request: Request, front, file: bool = False) -> Fields:
    """`file`: the body may bring a file (front.read_body)."""
    raw = await front.read_body(request, file)
    if body.is_json(request):
        try:
            values = body.json_value(raw or b"{}")
        except CallEnded as e:
            raise invalid("Invalid request: " + e.message) from None
        if not isinstance(values, dict):
            raise invalid("Invalid request: the JSON body must be an object")
        return Fields(values, True)
    try:
        body.urlencoded_utf8(request.scope["query_string"], "the query string")
    except CallEnded as e:
        raise invalid("Invalid request: " + e.message) from None
    values = dict(request.query_params)          # as Flask's request.values: the query string, then the form
    if raw:
        try:
            parsed = await body.form(request, raw)
        except CallEnded as e:
            raise invalid("Invalid request: " + e.message) from None
        for key, value in parsed.multi_items():
            values.setdefault(key, value)
    return Fields(values, False)


def detections(text: str, unknown: str = "en", top: int = 3) -> list[dict]:
    """LibreTranslate's detection list: confidences in percent, best first; `unknown` with
    confidence 0 when the text has no letters the detector knows (LibreTranslate answers `en`)."""
    found = language.detect(text, top)
    return [{"confidence": round(100 * p, 1), "language": code} for code, p in found] or \
        [{"confidence": 0.0, "language": unknown}]


def detection(text: str, candidates: list[str], unknown: str) -> dict:
    """`auto`'s detectedLanguage for `text`: the detector's best language when it is one of
    `candidates` (the sources served into the target) or the detector is CONFIDENT of it (a
    language no model translates, refused by the caller); else the likeliest candidate, with its
    own confidence."""
    ranked = detections(text, unknown, top=len(language.LANGUAGES))
    best = ranked[0]
    if best["language"] in candidates or best["confidence"] >= CONFIDENT or not candidates:
        return best
    confidence = {d["language"]: d["confidence"] for d in ranked}
    chosen = max(candidates, key=lambda code: confidence.get(code, 0.0))
    return {"confidence": confidence.get(chosen, 0.0), "language": chosen}


def alternatives_of(entry: pb.Translation, wanted: int) -> list[str]:
    """Up to `wanted` other translations of one document: sentence by sentence, the k-th
    hypothesis where the sentence has one, spliced into the best document's text."""
    found: list[str] = []
    for k in range(1, wanted + 1 + 4):        # a few more than asked: some repeat the best or each other
        text, changed = entry.text, False
        for sentence in sorted(entry.sentences, key=lambda s: s.target.start, reverse=True):
            hyps = sentence.translation.hypotheses
            if k < len(hyps):
                span = sentence.target
                text, changed = text[:span.start] + hyps[k].text + text[span.end:], True
        if not changed:
            break
        if text != entry.text and text not in found:
            found.append(text)
        if len(found) == wanted:
            break
    return found


def routes(front) -> list[Route]:
    settings = front.settings
    core = front.core
    pairs = core.pairs          # the core's table (service/server/routing.py): the native API routes by it too

    def model_of(sources: set[str], target: str, detected: bool) -> str | None:
        """The model translating every one of `sources` into `target` (None: no one model
        does), or LibreTranslate's 400 for a language or pair not served."""
        for code in sources:
            if code not in pairs.codes:
                raise invalid(f"{code} ({pairs.name(code)}) was detected, and this server does not translate it"
                              if detected else f"{clipped(code, 64)} is not supported")
        if target not in pairs.codes:
            raise invalid(f"{clipped(target, 64)} is not supported")
        models = {pairs.model_of.get((code, target)) for code in sources}
        if None in models:
            code = next(c for c in sources if (c, target) not in pairs.model_of)
            raise invalid(f"{pairs.name(target)} ({target}) is not available as a target language from "
                          f"{pairs.name(code)} ({code})")
        return next(iter(models)) if len(models) == 1 else None

    def undetected(target: str) -> str:
        """The source `auto` takes for a text with no letters the detector knows ("12345"): as
        the native API routes it (routing.py), a source served into `target`, which the model
        then copies through; LibreTranslate's `en` when none is."""
        try:
            return pairs.route("", AUTO, target).source
        except AttnmtError:
            return "en"

    async def translate(request: Request) -> Response:
        # a CallEnded raised here is answered by service/http/errors.py, in LibreTranslate's shape
        fields = await read_fields(request, front)
        front.check_key(request, fields.text("api_key"))
        q, source, target = fields.texts("q"), fields.text("source"), fields.text("target")
        for name, value in (("q", q), ("source", source), ("target", target)):
            if not value:
                raise invalid(f"Invalid request: missing {name} parameter")
        source, target = pairs.code(source), pairs.code(target)
        if target not in pairs.codes:       # before `auto` detects a language it could not go into
            raise invalid(f"{clipped(target, 64)} is not supported")
        batch = isinstance(q, list)
        texts = q if batch else [q]
        if not fields.is_json:
            texts = ["\n".join(t.splitlines()) for t in texts]
        if batch and len(texts) > settings.max_sentences_per_request:
            raise invalid(f"Invalid request: request ({len(texts)}) exceeds text limit "
                          f"({settings.max_sentences_per_request})")
        chars = sum(len(t) for t in texts)
        if chars > settings.max_document_chars:
            raise invalid(f"Invalid request: request ({chars}) exceeds text limit ({settings.max_document_chars})")
        text_format = fields.text("format") or "text"
        if text_format not in ("text", "html"):
            raise invalid(f"{clipped(text_format, 64)} format is not supported")
        wanted = fields.count("alternatives")
        limit = settings.max_beam_size - 1
        if not 0 <= wanted <= limit:
            raise invalid(f"Invalid request: alternatives parameter must be <= {limit}" if wanted > limit
                          else "Invalid request: alternatives parameter must be >= 0")
        detected = None
        if source == AUTO:
            candidates = pairs.sources_into(target)
            overall = detection(" ".join(texts), candidates, undetected(target))
            detected = [detection(t, candidates, overall["language"]) if len(t) > SHORT_TEXT else overall
                        for t in texts]
            sources = {d["language"] for d in detected}
        else:
            sources = {source}
        model = model_of(sources, target, source == AUTO)
        if model is None:
            raise invalid("Invalid request: the texts are in different languages; send them one language a call")
        message = pb.TranslateRequest(
            sentences=texts, model=model, split_sentences=True,
            format=pb.TEXT_FORMAT_HTML if text_format == "html" else pb.TEXT_FORMAT_PLAIN,
            options=pb.DecodingOptions(n_best=wanted + 1 if wanted and text_format == "text" else 0,
                                       beam_size=wanted + 1 if wanted + 1 > settings.default_beam_size else 0,
                                       alignment=pb.ALIGNMENT_NONE))
        front.refuse_if_full(message)
        # the core's errors name each text as the client sent it: `q[1]`, not `sentences[1]`
        named = functools.partial(core.translate, fields=[f"q[{i}]" for i in range(len(texts))] if batch else ["q"])
        reply = await front.call("Translate", message, request, named)
        results = [t.text for t in reply.translations]
        answer = {"translatedText": results if batch else results[0]}
        if wanted:
            alternatives = [alternatives_of(t, wanted) if text_format == "text" else [] for t in reply.translations]
            answer["alternatives"] = alternatives if batch else alternatives[0]
        if detected is not None:
            answer["detectedLanguage"] = detected if batch else detected[0]
        return JSONResponse(answer)

    async def detect(request: Request) -> Response:
        fields = await read_fields(request, front)
        front.check_key(request, fields.text("api_key"))
        timeout_of(request.headers)         # answered at once, but a deadline that is not one is still a 400
        q = fields.texts("q")
        if not q:
            raise invalid("Invalid request: missing q parameter")
        # as LibreTranslate, which names only the languages it translates: ours, and another only
        # when the detector is CONFIDENT of it (a client translates from what /detect said first)
        ranked = detections(" ".join(q if isinstance(q, list) else [q]), top=len(language.LANGUAGES))
        kept = [d for d in ranked if d["language"] in pairs.codes or d["confidence"] >= CONFIDENT]
        return JSONResponse((kept or ranked)[:3])

    async def translate_file(request: Request) -> Response:
        """A file (multipart `file`, with `source`, `target`, `api_key`), translated with its
        formatting kept (service/text/files/); the answer is a URL to fetch it from, once."""
        fields = await read_fields(request, front, file=True)
        front.check_key(request, fields.text("api_key"))
        upload, source, target = fields.file("file"), fields.text("source"), fields.text("target")
        for name, value in (("file", upload), ("source", source), ("target", target)):
            if not value:
                raise invalid(f"Invalid request: missing {name} parameter")
        source, target = pairs.code(source), pairs.code(target)
        if not upload.filename:
            raise invalid("Invalid request: empty file")
        try:
            files.check_format(upload.filename)
        except InvalidInput as e:
            raise invalid(f"Invalid request: {e}") from None
        # `auto`: the core detects the file's language among the sources served into `target`
        model = model_of({source}, target, False) if source != AUTO else ""
        try:
            done = await front.translate_file(request, upload, model, source, target)
        except CallEnded as e:          # the file's own words, in LibreTranslate's
            if e.http_status == 400 and not e.message.startswith("Invalid request"):
                e.message = "Invalid request: " + e.message
            raise
        token = front.file_store.put(done.data, done.name, done.media_type)
        return JSONResponse({"translatedFileUrl": str(request.url_for("download_file", token=token))})

    async def download_file(request: Request) -> Response:
        """A translated file, once: fetched, it is deleted."""
        found = front.file_store.take(request.path_params["token"])
        if found is None:
            raise CallEnded(grpc.StatusCode.NOT_FOUND, "no such file: it was fetched already, expired "
                            f"(file_store_expiry_seconds: {settings.file_store_expiry_seconds:g}) or never was")
        stored, data = found
        return Response(data, media_type=stored.media_type,
                        headers={"Content-Disposition": attachment(stored.name),
                                 "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"})

    async def languages(request: Request) -> Response:
        return JSONResponse([{"code": code, "name": pairs.name(code), "targets": pairs.targets(code)}
                             for code in pairs.codes])

    async def frontend_settings(request: Request) -> Response:
        source, target = pairs.default_pair        # the default model's, whatever the others' codes
        keys = front.api_keys is not None
        return JSONResponse({
            "charLimit": settings.max_document_chars, "frontendTimeout": 500, "apiKeys": keys, "keyRequired": keys,
            "suggestions": False, "filesTranslation": True, "supportedFilesFormat": list(files.EXTENSIONS),
            "language": {"source": {"code": source, "name": pairs.name(source)},
                         "target": {"code": target, "name": pairs.name(target)}}})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return [Route("/translate", translate, methods=["POST"]),
            Route("/detect", detect, methods=["POST"]),
            Route("/translate_file", translate_file, methods=["POST"]),
            Route("/download_file/{token}", download_file, methods=["GET"], name="download_file"),
            Route("/languages", languages, methods=["GET"]),
            Route("/frontend/settings", frontend_settings, methods=["GET"]),
            Route("/health", health, methods=["GET"])]
