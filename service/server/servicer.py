"""The gRPC servicer: validate, protobuf -> domain, hand to the model's
scheduler, domain -> protobuf. Domain exceptions become status codes here and
nowhere else (`STATUS_OF`)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from attnmt.service.server import convert

from attnmt.service.text import documents
from attnmt.service.server.admission import BULK, INTERACTIVE
from attnmt.service.server.cache import TranslationCache
from attnmt.service.server.settings import Settings
from attnmt.service.inference.decoding import Search, SearchOptions
from attnmt.service.errors import (AttnmtError, DeadlineExceeded, DecodeFailed, InvalidInput, ModelLoadError, ModelNotFound,
                     Overloaded, ResponseTooLarge, StreamIdle, Unavailable)
from attnmt.service.text.glossary import Glossary
from attnmt.service.text.glossary import load_all as load_glossaries
from attnmt.service.server.metrics import Metrics
from attnmt.service.server.scheduler import Job, Scheduler
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from attnmt.service.text.translator import Translation, Translator, normalise

log = logging.getLogger(__name__)

STATUS_OF: dict[type[Exception], grpc.StatusCode] = {
    InvalidInput: grpc.StatusCode.INVALID_ARGUMENT,
    ModelNotFound: grpc.StatusCode.NOT_FOUND,
    Overloaded: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Unavailable: grpc.StatusCode.UNAVAILABLE,
    DeadlineExceeded: grpc.StatusCode.DEADLINE_EXCEEDED,
    DecodeFailed: grpc.StatusCode.INTERNAL,
    ResponseTooLarge: grpc.StatusCode.RESOURCE_EXHAUSTED,
    StreamIdle: grpc.StatusCode.DEADLINE_EXCEEDED,
    ModelLoadError: grpc.StatusCode.INTERNAL,
}


def status_of(error: Exception) -> grpc.StatusCode:
    for kind, code in STATUS_OF.items():
        if isinstance(error, kind):
            return code
    return grpc.StatusCode.INTERNAL


async def abort(context: grpc.aio.ServicerContext, error: Exception) -> None:
    """End the RPC with the status for `error`; overload carries google.rpc.RetryInfo."""
    code = status_of(error)
    if isinstance(error, Overloaded):
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(error.retry_after * 1e9))
        detail = any_pb2.Any()
        detail.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
        status = status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message=str(error), details=[detail])
        await context.abort_with_status(rpc_status.to_status(status))
    await context.abort(code, str(error))


class MalformedRequest:
    """What arrives instead of a request whose bytes do not parse (corrupt wire format,
    or invalid UTF-8 in a string field, which proto3 forbids)."""

    def __init__(self, message: str):
        self.message = message


def tolerant(message_class):
    """A request deserializer that never raises: gRPC would end the call UNKNOWN with a
    Python exception class in the message; the servicer answers INVALID_ARGUMENT instead."""
    def parse(data: bytes):
        try:
            return message_class.FromString(data)
        except Exception as e:  # noqa: BLE001 - DecodeError and its relatives
            return MalformedRequest(f"the request is not a valid {message_class.DESCRIPTOR.full_name} ({e})")
    return parse


def parsed(request):
    if isinstance(request, MalformedRequest):
        raise InvalidInput(request.message)
    return request


def add_to_server(servicer: "TranslatorServicer", server) -> None:
    """The generated `add_TranslatorServicer_to_server`, with tolerant deserializers."""
    service = pb.DESCRIPTOR.services_by_name["Translator"]
    handlers = {}
    for method in service.methods:
        request_class, response_class = getattr(pb, method.input_type.name), getattr(pb, method.output_type.name)
        make = grpc.stream_stream_rpc_method_handler if method.client_streaming else grpc.unary_unary_rpc_method_handler
        handlers[method.name] = make(getattr(servicer, method.name), request_deserializer=tolerant(request_class),
                                     response_serializer=response_class.SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)


@dataclass
class ServedModel:
    translator: Translator
    scheduler: Scheduler
    cache: TranslationCache | None = None


def client_of(context: grpc.aio.ServicerContext) -> str:
    """Who is asking, for fair admission: the mTLS identity when there is one (it cannot
    be chosen by the caller), else the `x-client-id` metadata value, else the peer address."""
    names = (context.auth_context() or {}).get("x509_common_name")
    if names:
        return "tls:" + names[0].decode(errors="replace")
    for key, value in context.invocation_metadata() or ():
        if key == "x-client-id" and value:
            return "id:" + str(value)[:128]
    return "peer:" + context.peer().rsplit(":", 1)[0]


def cache_key(search: Search) -> tuple:
    """Everything that changes a finished search: source ids, hidden placeholders, options, forced target."""
    return (tuple(search.source), search.protected, search.options,
            None if search.forced is None else tuple(search.forced))


class TranslatorServicer(pb_grpc.TranslatorServicer):
    def __init__(self, models: dict[str, ServedModel], default: str, settings: Settings, metrics: Metrics):
        self.models = models
        self.default = default
        self.settings = settings
        self.metrics = metrics
        self.draining = False
        self.glossaries = load_glossaries(settings.glossaries)     # named glossaries (glossary_name)

    # --- helpers ---------------------------------------------------------

    def _model(self, name: str, sentences: int = 1) -> ServedModel:
        if self.draining:
            self.metrics.rejected.labels("draining").inc(sentences)
            raise Unavailable("server is shutting down; retry on another replica")
        served = self.models.get(name or self.default)
        if served is None:
            raise ModelNotFound(f"model {name!r} is not served here; served: {', '.join(sorted(self.models))}")
        return served

    def _check_text(self, text: str, field: str) -> str:
        if len(text) > self.settings.max_chars_per_sentence:
            raise InvalidInput(f"{field} has {len(text)} characters, over the limit of "
                               f"{self.settings.max_chars_per_sentence} (max_chars_per_sentence)")
        return text

    def _search(self, served: ServedModel, text: str, options: SearchOptions, field: str,
                target: str | None = None) -> Search | None:
        """A search for one sentence, or None when there is nothing to translate."""
        self._check_text(text, field)
        if target is None and not normalise(text):
            return None
        try:
            return served.translator.search(text, options, target=target)
        except InvalidInput as e:  # the translator says "source" or "target"; name the request field too
            raise InvalidInput(f"{field}: {e}" if target is None else str(e)) from None

    def _deadline(self, context: grpc.aio.ServicerContext) -> float | None:
        """The caller's deadline, capped at max_deadline_seconds (also for calls without one)."""
        remaining = context.time_remaining()
        cap = self.settings.max_deadline_seconds or None
        if remaining is None:
            remaining = cap
        elif cap is not None:
            remaining = min(remaining, cap)
        return None if remaining is None else time.monotonic() + remaining

    async def _run(self, served: ServedModel, searches: list[Search | None], context,
                   priority: int = INTERACTIVE) -> list:
        """Finish every search (None entries stay None): from the cache when it holds an
        identical one, else through the scheduler. On cancellation, withdraw the sentences."""
        done: list = list(searches)
        todo = []
        for i, search in enumerate(searches):
            if search is None:
                continue
            cached = served.cache.get(cache_key(search)) if served.cache is not None else None
            if cached is not None:
                done[i] = cached
            else:
                todo.append(search)
        if not todo:
            return done
        jobs: list[Job] = served.scheduler.submit(todo, self._deadline(context), client_of(context), priority)
        try:
            await asyncio.gather(*(j.future for j in jobs))
        except BaseException:             # CancelledError included: the client went away or the deadline passed
            served.scheduler.cancel(jobs)
            raise
        if served.cache is not None:
            for search in todo:
                served.cache.put(cache_key(search), search)
        return done

    def _check_response_size(self, searches: list[Search | None], kind: int) -> None:
        """Refuse before decoding what could not be sent: soft α is n_best x target x source
        floats per sentence (words: fewer, but the same order), bounded by each search's
        length limit."""
        if kind not in (convert.SOFT, convert.WORDS):
            return
        floats = sum(s.options.n_best * s.max_length * s.src_len for s in searches if s is not None)
        if 4 * floats > self.settings.max_message_bytes:
            raise InvalidInput(f"the alignment asked for could reach {4 * floats} bytes, over max_message_bytes "
                               f"({self.settings.max_message_bytes}); ask for fewer sentences, a smaller n_best, "
                               "a shorter max_length_ratio or a coarser alignment (ALIGNMENT_HARD)")

    def _rejected_input(self, error: AttnmtError, sentences: int = 1) -> None:
        """attnmt_rejected_total counts sentences, whatever the reason."""
        if isinstance(error, InvalidInput):
            self.metrics.rejected.labels("invalid_input").inc(max(sentences, 1))

    async def _documents(self, served: ServedModel, entries, text_format: int, split: bool, options: SearchOptions,
                         opts: pb.DecodingOptions, context, fields: list[str],
                         priority: int = INTERACTIVE, glossary: Glossary | None = None) -> list[pb.Translation]:
        """Entries sent with `format` or `split_sentences` (documents.py): every sentence of
        every entry in one batch; each entry answered with its word spans, and as a document
        (Translation.sentences) when it is HTML or split."""
        html = convert.text_format(text_format) == pb.TEXT_FORMAT_HTML
        kind, threshold = convert.alignment_kind(opts.alignment), convert.alignment_threshold(opts)
        translator = served.translator
        if html or split:
            # Off the event loop: html5lib is pure Python, and a 50,000-character page takes
            # it about 170 ms, which every other call on the loop would wait out.
            readings = await asyncio.to_thread(lambda: [
                documents.read(text, html, split, translator.engine.manifest.source_language,
                               translator.protector is None, self.settings.max_document_chars,
                               self.settings.max_document_sentences, fields[i])
                for i, text in enumerate(entries)])
        else:
            readings = [None] * len(entries)
        sentences = [(i, k, text) for i, (entry, reading) in enumerate(zip(entries, readings))
                     for k, text in enumerate(reading.sentences if reading else [entry])]
        if len(sentences) > self.settings.max_queue:
            raise InvalidInput(f"the request splits into {len(sentences)} sentences, more than the server queues "
                               f"at once (max_queue {self.settings.max_queue}); send fewer documents per call")
        searches = [self._search(served, text, options, fields[i] + (f", sentence {k}" if readings[i] else ""))
                    for i, k, text in sentences]
        self._check_response_size(searches, kind)
        searches = await self._run(served, searches, context, priority)
        done = iter(translator.result(text, s, opts.replace_unknown, glossary) if s else Translation(text, [])
                    for (_, _, text), s in zip(sentences, searches))
        messages = []
        for entry, reading in zip(entries, readings):
            if reading is None:
                messages.append(convert.sentence_pb(documents.single(next(done)), kind, threshold))
            else:
                document = reading.assemble([next(done) for _ in reading.spans])
                messages.append(convert.document_pb(document, kind, threshold))
        return messages

    # --- RPCs ------------------------------------------------------------

    async def Translate(self, request: pb.TranslateRequest, context) -> pb.TranslateResponse:
        try:
            request = parsed(request)
            served = self._model(request.model, len(request.sentences))
            n = len(request.sentences)
            if n == 0:
                raise InvalidInput("sentences is empty: send at least one sentence")
            if n > self.settings.max_sentences_per_request:
                raise InvalidInput(f"sentences has {n} entries, over the limit of "
                                   f"{self.settings.max_sentences_per_request} (max_sentences_per_request); "
                                   "split the request or use TranslateStream")
            options = convert.search_options(request.options, self.settings)
            kind = convert.alignment_kind(request.options.alignment)
            threshold = convert.alignment_threshold(request.options)
            glossary = convert.glossary(request.glossary, request.glossary_name, self.glossaries,
                                        self.settings.max_glossary_entries)
            if request.format or request.split_sentences:     # a plain request never comes this way
                messages = await self._documents(served, request.sentences, request.format, request.split_sentences,
                                                 options, request.options, context,
                                                 [f"sentences[{i}]" for i in range(n)], glossary=glossary)
            else:
                searches = [self._search(served, text, options, f"sentences[{i}]")
                            for i, text in enumerate(request.sentences)]
                self._check_response_size(searches, kind)
                searches = await self._run(served, searches, context)
                translator = served.translator
                translations = [translator.result(text, s, request.options.replace_unknown, glossary) if s
                                else Translation(text, []) for text, s in zip(request.sentences, searches)]
                messages = [convert.translation_pb(t, kind, threshold) for t in translations]
            m = served.translator.engine.manifest
            response = pb.TranslateResponse(translations=messages, model=m.name, model_version=m.version)
            if response.ByteSize() > self.settings.max_message_bytes:
                raise ResponseTooLarge(f"the response is {response.ByteSize()} bytes, over max_message_bytes "
                                       f"({self.settings.max_message_bytes}); ask for fewer sentences, a smaller "
                                       "n_best or a coarser alignment")
            return response
        except AttnmtError as e:
            self._rejected_input(e, len(request.sentences) if isinstance(request, pb.TranslateRequest) else 1)
            await abort(context, e)

    async def Align(self, request: pb.AlignRequest, context) -> pb.AlignResponse:
        try:
            request = parsed(request)
            served = self._model(request.model)
            kind = convert.alignment_kind(request.alignment, default=convert.WORDS)
            threshold = convert.alignment_threshold(request, "alignment_threshold")
            if not normalise(request.source) or not normalise(request.target):
                raise InvalidInput("source and target must both be non-empty")
            self._check_text(request.target, "target")         # before tokenising it
            search = self._search(served, request.source, SearchOptions(), "source", target=request.target)
            (search,) = await self._run(served, [search], context)
            translation = served.translator.result(request.source, search)
            hyp = translation.best
            return pb.AlignResponse(source_tokens=translation.source_tokens,
                                    source_words=hyp.source_words if kind != convert.NONE else [],
                                    hypothesis=convert.hypothesis_pb(hyp, kind, threshold),
                                    model=served.translator.name)
        except AttnmtError as e:
            self._rejected_input(e)
            await abort(context, e)

    async def TranslateStream(self, request_iterator, context):
        # A permit is held from reading a request until its response is queued, and the
        # queue is bounded: a client that writes fast and reads slowly stops being read.
        limit = asyncio.Semaphore(self.settings.max_stream_in_flight)
        idle = self.settings.stream_idle_timeout_seconds
        reads: set[asyncio.Future] = set()
        out: asyncio.Queue = asyncio.Queue(maxsize=self.settings.max_stream_in_flight)
        pending: set[asyncio.Task] = set()
        end = object()
        defaults: dict = {}

        async def one(request: pb.StreamRequest) -> None:
            try:
                served = self._model(request.model or defaults["model"])
                opts = request.options if request.HasField("options") else defaults["options"]
                options = convert.search_options(opts, self.settings)
                kind = convert.alignment_kind(opts.alignment)
                threshold = convert.alignment_threshold(opts)
                field = f"sentence (id {request.id!r})"
                glossary = convert.glossary(request.glossary, request.glossary_name, self.glossaries,
                                            self.settings.max_glossary_entries, f"id {request.id!r}: ")
                if request.format or request.split_sentences:     # a plain request never comes this way
                    (message,) = await self._documents(served, [request.sentence], request.format,
                                                       request.split_sentences, options, opts, context, [field], BULK,
                                                       glossary)
                    response = pb.StreamResponse(id=request.id, translation=message)
                else:
                    search = self._search(served, request.sentence, options, field)
                    (search,) = await self._run(served, [search], context, BULK)
                    translation = served.translator.result(request.sentence, search, opts.replace_unknown, glossary) \
                        if search else Translation(request.sentence, [])
                    response = pb.StreamResponse(id=request.id,
                                                 translation=convert.translation_pb(translation, kind, threshold))
            except AttnmtError as e:
                self._rejected_input(e)
                response = pb.StreamResponse(id=request.id, error=pb.Error(code=status_of(e).value[0], message=str(e)))
            except Exception as e:  # noqa: BLE001 - every id gets exactly one answer, even on a bug
                log.exception("stream item %r failed", request.id)
                response = pb.StreamResponse(id=request.id, error=pb.Error(
                    code=grpc.StatusCode.INTERNAL.value[0], message=f"internal error: {type(e).__name__}: {e}"))
            try:
                await out.put(response)     # blocks while the client reads slowly: backpressure
            finally:
                limit.release()

        async def read() -> None:
            try:
                requests = request_iterator.__aiter__()
                while True:
                    # Not asyncio.wait_for: a read of gRPC's request stream does not end when
                    # cancelled, so wait_for would wait for the next message anyway.
                    next_request = asyncio.ensure_future(requests.__anext__())
                    reads.add(next_request)
                    while not next_request.done():
                        if pending:           # work in flight: the stream is not idle
                            await asyncio.wait({next_request, *pending}, return_when=asyncio.FIRST_COMPLETED)
                            continue
                        done, _ = await asyncio.wait({next_request}, timeout=idle or None)
                        if not done:
                            raise StreamIdle(f"no request for {idle:g}s with nothing in flight "
                                             "(stream_idle_timeout_seconds); open a new stream when there is work")
                    reads.discard(next_request)
                    try:
                        request = next_request.result()
                    except StopAsyncIteration:
                        break
                    request = parsed(request)       # a malformed item ends the stream INVALID_ARGUMENT
                    if not defaults:
                        defaults.update(model=request.model, options=request.options)
                    await limit.acquire()
                    task = asyncio.create_task(one(request))
                    pending.add(task)
                    task.add_done_callback(pending.discard)
                if pending:
                    await asyncio.gather(*pending)
            finally:
                await out.put(end)

        reader = asyncio.create_task(read())
        try:
            while (item := await out.get()) is not end:
                yield item
            await reader      # re-raise a failure of the request stream
        except AttnmtError as e:
            self._rejected_input(e)
            await abort(context, e)
        finally:
            reader.cancel()
            for task in list(pending) + list(reads):
                task.cancel()

    async def ListModels(self, request, context) -> pb.ListModelsResponse:
        if isinstance(request, MalformedRequest):
            await abort(context, InvalidInput(request.message))
        return pb.ListModelsResponse(models=[convert.model_info_pb(m.translator, self.settings, name == self.default)
                                             for name, m in self.models.items()])

    async def GetModel(self, request: pb.GetModelRequest, context) -> pb.ModelInfo:
        if isinstance(request, MalformedRequest):
            await abort(context, InvalidInput(request.message))
        served = self.models.get(request.name or self.default)
        if served is None:
            await abort(context, ModelNotFound(f"model {request.name!r} is not served here; "
                                               f"served: {', '.join(sorted(self.models))}"))
        return convert.model_info_pb(served.translator, self.settings, (request.name or self.default) == self.default)
