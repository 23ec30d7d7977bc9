"""The serving core that both transports call: gRPC (servicer.py) and HTTP (service/http/).

It validates a request and holds it to the limits, resolves which served model answers
it, turns it into searches, hands them to that model's scheduler and builds the answer.
Requests and answers are the API's own messages (proto/attnmt/v1/translator.proto): the
schema gRPC carries and the native HTTP API maps to JSON, so neither transport converts
anything but its wire format. Who is calling (`client`, for fair admission), by when
(`deadline`, time.monotonic() seconds, None for none) and how urgently (`priority`,
admission.INTERACTIVE or BULK) are plain arguments. Every refusal is a domain exception
(service/errors.py) carrying its status; each transport maps it once (server/status.py,
service/http/errors.py).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable, TypeVar

from attnmt.service.errors import (
    AttnmtError,
    DeadlineExceeded,
    InvalidInput,
    ModelNotFound,
    ResponseTooLarge,
    Unavailable,
    quoted,
)
from attnmt.service.inference.search import Search, SearchOptions
from attnmt.service.server import convert
from attnmt.service.server.admission import BULK, INTERACTIVE
from attnmt.service.server.cache import TranslationCache
from attnmt.service.server.metrics import CALL_PROTOCOL, Metrics
from attnmt.service.server.routing import LanguagePairs, Route
from attnmt.service.server.scheduler import Job, Scheduler
from attnmt.service.server.settings import Settings
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.text import documents
from attnmt.service.text.glossary import Glossary
from attnmt.service.text.glossary import load_all as load_glossaries
from attnmt.service.text.translator import Translator, normalise

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Translator"].full_name   # attnmt.v1.Translator

T = TypeVar("T")
# Work off the event loop lets the loop's thread have the GIL for a moment this often: else
# the loop waits up to the switch interval each time it wakes, several times per call.
YIELD_EVERY = 0.002
YIELD_FOR = 0.0001
# A plain request's answer (words, links, quality, protobuf) is built on the event loop while
# it is small, as two thread hops would cost the common call more than building it; past this
# many source characters times n_best it goes to a worker thread. The answer costs about 5 µs a
# character a hypothesis (16 sentences of 120 words at n_best 16, hard links: 1.2 s, during
# which the loop answered nothing, health checks included; AMD EPYC, 2026-11-29): at 4,000 it
# holds the loop for up to about 20 ms.
ANSWER_ON_LOOP_CHARS = 4_000


@dataclass
class ServedModel:
    translator: Translator
    scheduler: Scheduler
    cache: TranslationCache | None = None


def cache_key(search: Search) -> tuple:
    """Everything that changes a finished search: source ids, hidden placeholders, options, forced target."""
    return (tuple(search.source), search.protected, search.options,
            None if search.forced is None else tuple(search.forced))


class Core:
    def __init__(self, models: dict[str, ServedModel], default: str, settings: Settings, metrics: Metrics):
        self.models = models
        self.default = default
        self.settings = settings
        self.metrics = metrics
        self.draining = False          # set by the drain: new work is refused UNAVAILABLE
        self.glossaries = load_glossaries(settings.glossaries)     # named glossaries (glossary_name)
        self.pairs = LanguagePairs.of(models, default)             # which model translates which pair

    # --- the API ---------------------------------------------------------

    def resolve(self, model: str, sentences: int = 1, source: str = "", target: str = "",
                texts: Sequence[str] = ()) -> tuple[ServedModel, Route]:
        """The served model that answers a request naming `model` ("": none) and the language
        pair `source` -> `target` ("": not given; source "auto": detected from `texts`), and
        the route taken (routing.py has the rule); the one place a request is matched to a
        model. `sentences`: what a refusal counts."""
        if self.draining:
            self.metrics.rejected.labels("draining", CALL_PROTOCOL.get()).inc(sentences)
            raise Unavailable("server is shutting down; retry on another replica")
        route = self.pairs.route(model, source, target, texts)
        return self.models[route.model], route

    async def translate(self, request: pb.TranslateRequest, *, deadline: float | None, client: str,
                        priority: int = INTERACTIVE, fields: list[str] | None = None) -> pb.TranslateResponse:
        """`fields`: what an error calls each sentence (default `sentences[i]`): a file's jobs
        name the file's own texts, not their place in the job."""
        try:
            return await self._translate(request, self.capped(deadline), client, priority, fields)
        except AttnmtError as e:
            self.rejected(e, len(request.sentences))
            raise

    async def translate_item(self, item: pb.StreamRequest, first: pb.StreamRequest, *, deadline: float | None,
                             client: str, priority: int = BULK) -> pb.StreamResponse:
        """One item of a stream of sentences, answered: an item without options takes the
        stream's first item's, and one naming neither model nor language pair the first's."""
        try:
            return await self._translate_item(item, first, self.capped(deadline), client, priority)
        except AttnmtError as e:
            self.rejected(e)
            raise

    async def align(self, request: pb.AlignRequest, *, deadline: float | None, client: str,
                    priority: int = INTERACTIVE) -> pb.AlignResponse:
        try:
            return await self._align(request, self.capped(deadline), client, priority)
        except AttnmtError as e:
            self.rejected(e)
            raise

    def list_models(self) -> pb.ListModelsResponse:
        return pb.ListModelsResponse(models=[convert.model_info_pb(m.translator, self.settings, name == self.default)
                                             for name, m in self.models.items()])

    def get_model(self, name: str) -> pb.ModelInfo:
        served = self.models.get(name or self.default)
        if served is None:
            raise ModelNotFound(f"model {quoted(name)} is not served here; served: {', '.join(sorted(self.models))}")
        return convert.model_info_pb(served.translator, self.settings, (name or self.default) == self.default)

    def rejected(self, error: AttnmtError, sentences: int = 1) -> None:
        """Count a refused request in attnmt_rejected_total, by sentences, whatever the reason
        (the transports call it for requests that never reach the core: ones that do not parse)."""
        if isinstance(error, InvalidInput):
            self.metrics.rejected.labels("invalid_input", CALL_PROTOCOL.get()).inc(max(sentences, 1))

    # --- the requests ----------------------------------------------------

    async def _translate(self, request: pb.TranslateRequest, deadline: float | None, client: str,
                         priority: int, fields: list[str] | None = None) -> pb.TranslateResponse:
        served, route = self.resolve(request.model, len(request.sentences), request.source_language,
                                     request.target_language, request.sentences)
        n = len(request.sentences)
        if n == 0:
            raise InvalidInput("sentences is empty: send at least one sentence")
        if n > self.settings.max_sentences_per_request:
            raise InvalidInput(f"sentences has {n} entries, over the limit of "
                               f"{self.settings.max_sentences_per_request} (max_sentences_per_request); "
                               "split the request or use TranslateStream")
        fields = fields or [f"sentences[{i}]" for i in range(n)]
        options = convert.search_options(request.options, self.settings)
        kind = convert.alignment_kind(request.options.alignment)
        threshold = convert.alignment_threshold(request.options)
        glossary = convert.glossary(request.glossary, request.glossary_name, self.glossaries,
                                    self.settings.max_glossary_entries)
        m = served.translator.engine.manifest
        response = pb.TranslateResponse(model=m.name, model_version=m.version, **convert.route_fields(route))
        if request.format or request.split_sentences:     # a plain request never comes this way
            response.translations.extend(await self._documents(
                served, request.sentences, request.format, request.split_sentences, options, request.options,
                deadline, client, fields, priority, glossary))
        else:
            split = convert.split_above_words(request.options)
            plans = [self._plan(served, text, options, fields[i], split) for i, text in enumerate(request.sentences)]
            plans = await self._run_plans(served, plans, kind, deadline, client, priority)
            translator, keep_names = served.translator, convert.keep_names(request.options)
            use_lexicon = convert.use_lexicon(request.options)

            def answer(check) -> None:
                for text, plan in zip(request.sentences, plans):
                    check()
                    translation = translator.finish(text, plan, options, request.options.replace_unknown, glossary,
                                                 keep_names, use_lexicon)
                    convert.translation_pb(translation, kind, threshold, response.translations.add())

            work = sum(map(len, request.sentences)) * options.n_best
            await (off_loop if work > ANSWER_ON_LOOP_CHARS else _on_loop)(answer, deadline)
        if response.ByteSize() > self.settings.max_message_bytes:
            raise ResponseTooLarge(f"the response is {response.ByteSize()} bytes, over max_message_bytes "
                                   f"({self.settings.max_message_bytes}); ask for fewer sentences, a smaller "
                                   "n_best or a coarser alignment")
        return response

    async def _translate_item(self, item: pb.StreamRequest, first: pb.StreamRequest, deadline: float | None,
                              client: str, priority: int) -> pb.StreamResponse:
        named = item if item.model or item.source_language or item.target_language else first
        served, route = self.resolve(named.model, 1, named.source_language, named.target_language, [item.sentence])
        answer = pb.StreamResponse(id=item.id, model=served.translator.name, **convert.route_fields(route))
        opts = item.options if item.HasField("options") else first.options
        options = convert.search_options(opts, self.settings)
        kind = convert.alignment_kind(opts.alignment)
        threshold = convert.alignment_threshold(opts)
        field = f"sentence (id {item.id!r})"
        glossary = convert.glossary(item.glossary, item.glossary_name, self.glossaries,
                                    self.settings.max_glossary_entries, f"id {item.id!r}: ")
        if item.format or item.split_sentences:     # a plain request never comes this way
            (message,) = await self._documents(served, [item.sentence], item.format, item.split_sentences, options,
                                               opts, deadline, client, [field], priority, glossary)
            answer.translation.CopyFrom(message)
            return answer
        plan = self._plan(served, item.sentence, options, field, convert.split_above_words(opts))
        (plan,) = await self._run_plans(served, [plan], None, deadline, client, priority)
        translation = served.translator.finish(item.sentence, plan, options, opts.replace_unknown, glossary,
                                               convert.keep_names(opts), convert.use_lexicon(opts))
        convert.translation_pb(translation, kind, threshold, answer.translation)
        return answer

    async def _align(self, request: pb.AlignRequest, deadline: float | None, client: str,
                     priority: int) -> pb.AlignResponse:
        served, route = self.resolve(request.model, 1, request.source_language, request.target_language,
                                     [request.source])
        kind = convert.alignment_kind(request.alignment, default=convert.WORDS)
        threshold = convert.alignment_threshold(request, "alignment_threshold")
        if not normalise(request.source) or not normalise(request.target):
            raise InvalidInput("source and target must both be non-empty")
        self._check_text(request.target, "target")         # before tokenising it
        search = self._search(served, request.source, SearchOptions(), "source", target=request.target)
        (search,) = await self._run(served, [search], deadline, client, priority)
        translation = served.translator.result(request.source, search)
        hyp = translation.best
        return pb.AlignResponse(source_tokens=translation.source_tokens,
                                source_words=hyp.source_words if kind != convert.NONE else [],
                                hypothesis=convert.hypothesis_pb(hyp, kind, threshold),
                                model=served.translator.name, **convert.route_fields(route))

    async def _documents(self, served: ServedModel, entries, text_format: int, split: bool, options: SearchOptions,
                         opts: pb.DecodingOptions, deadline: float | None, client: str, fields: list[str],
                         priority: int, glossary: Glossary | None) -> list[pb.Translation]:
        """Entries sent with `format` or `split_sentences` (documents.py): every sentence of
        every entry in one batch; each entry answered with its word spans, and as a document
        (Translation.sentences) when it is HTML or split."""
        html = convert.text_format(text_format) == pb.TEXT_FORMAT_HTML
        kind, threshold = convert.alignment_kind(opts.alignment), convert.alignment_threshold(opts)
        translator = served.translator
        language = translator.engine.manifest.source_language
        split_words = convert.split_above_words(opts)

        # Reading, searches and the answer are CPU work that grows with the entries: off the
        # event loop, each step checking the deadline (the decoding between them is the scheduler's).
        def read(check) -> tuple[list, list, list[list[tuple[str, Search | None]]]]:
            readings = []
            for i, text in enumerate(entries):
                check()
                readings.append(documents.read(text, html, split, language, translator.protector is None,
                                               self.settings.max_document_chars,
                                               self.settings.max_document_sentences, fields[i], check)
                                if html or split else None)
            sentences = [(i, k, text) for i, (entry, reading) in enumerate(zip(entries, readings))
                         for k, text in enumerate(reading.sentences if reading else [entry])]
            if len(sentences) > self.settings.max_queue:
                raise InvalidInput(f"the request splits into {len(sentences)} sentences, more than the server "
                                   f"queues at once (max_queue {self.settings.max_queue}); send fewer documents "
                                   "per call")
            check()
            plans = [self._plan(served, text, options, fields[i] + (f", sentence {k}" if readings[i] else ""),
                                split_words) for i, k, text in sentences]
            n = sum(map(len, plans))
            if n > self.settings.max_queue:
                raise InvalidInput(f"the request splits into {n} sentences (long ones in parts), more than the "
                                   f"server queues at once (max_queue {self.settings.max_queue}); send fewer "
                                   "documents per call")
            self._check_response_size([s for plan in plans for _, s in plan], kind)
            return readings, sentences, plans

        # documents off the loop (their work grows with the markup), plain sentences on it
        run = off_loop if html or split else _on_loop
        readings, sentences, plans = await run(read, deadline)
        plans = await self._run_plans(served, plans, None, deadline, client, priority)

        keep_names, use_lexicon = convert.keep_names(opts), convert.use_lexicon(opts)

        def answer(check) -> list[pb.Translation]:
            done = iter(translator.finish(text, plan, options, opts.replace_unknown, glossary, keep_names, use_lexicon)
                        for (_, _, text), plan in zip(sentences, plans))
            messages = []
            for reading in readings:
                check()
                if reading is None:
                    messages.append(convert.sentence_pb(documents.single(next(done)), kind, threshold))
                else:
                    document = reading.assemble([next(done) for _ in reading.spans], check)
                    messages.append(convert.document_pb(document, kind, threshold))
            return messages

        return await run(answer, deadline)

    # --- limits and scheduling -------------------------------------------

    def capped(self, deadline: float | None) -> float | None:
        """The caller's deadline, capped at max_deadline_seconds from now (also for calls without one)."""
        cap = self.settings.max_deadline_seconds
        if not cap:
            return deadline
        latest = time.monotonic() + cap
        return latest if deadline is None else min(deadline, latest)

    def _check_text(self, text: str, field: str) -> str:
        if len(text) > self.settings.max_chars_per_sentence:
            raise InvalidInput(f"{field} has {len(text)} characters, over the limit of "
                               f"{self.settings.max_chars_per_sentence} (max_chars_per_sentence)")
        return text

    def _search(self, served: ServedModel, text: str, options: SearchOptions, field: str,
                target: str | None = None) -> Search | None:
        """A search for one sentence, or None when there is nothing to translate or the sentence
        is its own translation (Translator.copies: `!`, `%s`): Translator.copy answers it."""
        self._check_text(text, field)
        if target is None and served.translator.copied(text):
            return None
        try:
            return served.translator.search(text, options, target=target)
        except InvalidInput as e:  # the translator says "source" or "target"; name the request field too
            raise InvalidInput(f"{field}: {e}" if target is None else str(e)) from None

    def _plan(self, served: ServedModel, text: str, options: SearchOptions, field: str,
              split: int | None) -> list[tuple[str, Search | None]]:
        """What of a sentence is translated as a sentence, each with its search (`_search`): the
        sentence, or a long one's parts (Translator.parts, clauses.py)."""
        self._check_text(text, field)
        return [(part, self._search(served, part, options, field))
                for part in served.translator.parts(text, split)]

    async def _run_plans(self, served: ServedModel, plans: list[list[tuple[str, Search | None]]], kind: int | None,
                         deadline: float | None, client: str, priority: int) -> list[list[tuple[str, Search | None]]]:
        """`_run` over every part of every plan (after the response-size check, given `kind`)."""
        searches = [s for plan in plans for _, s in plan]
        if kind is not None:
            self._check_response_size(searches, kind)
        done = iter(await self._run(served, searches, deadline, client, priority))
        return [[(part, next(done)) for part, _ in plan] for plan in plans]

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

    async def _run(self, served: ServedModel, searches: list[Search | None], deadline: float | None, client: str,
                   priority: int) -> list:
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
        jobs: list[Job] = served.scheduler.submit(todo, deadline, client, priority)
        try:
            await asyncio.gather(*(j.future for j in jobs))
        except BaseException:             # CancelledError included: the client went away or the deadline passed
            served.scheduler.cancel(jobs)
            raise
        if served.cache is not None:
            for search in todo:
                served.cache.put(cache_key(search), search)
        return done


async def off_loop(work: Callable[[Callable[[], None]], T], deadline: float | None) -> T:
    """`work(check)` on a worker thread, so that the event loop goes on answering other
    calls (health checks among them) while it reads or writes a document. `check`
    raises DeadlineExceeded once the deadline has passed or the call has ended; `work`
    calls it between its steps. The call ends at its deadline even while the work is
    between two checks; the thread stops at the next one.

    A thread still takes the GIL from the loop for up to the switch interval at a time,
    so the work must also be short: the markup code is linear in the entry for that."""
    over = threading.Event()
    ran_since = [time.monotonic()]

    def check() -> None:
        now = time.monotonic()
        if over.is_set() or (deadline is not None and now >= deadline):
            raise DeadlineExceeded("deadline exceeded while reading or writing the documents")
        if now - ran_since[0] >= YIELD_EVERY:
            time.sleep(YIELD_FOR)           # the GIL free: the loop's thread takes it if it waits
            ran_since[0] = time.monotonic()

    timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
    try:
        return await asyncio.wait_for(asyncio.to_thread(work, check), timeout)
    except TimeoutError:
        raise DeadlineExceeded("deadline exceeded while reading or writing the documents") from None
    finally:
        over.set()


async def _on_loop(work: Callable[[Callable[[], None]], T], deadline: float | None) -> T:
    """`work(check)` right here: plain sentences, and their answer while it is small
    (ANSWER_ON_LOOP_CHARS), cheaper than two thread hops on every call."""
    def check() -> None:
        if deadline is not None and time.monotonic() >= deadline:
            raise DeadlineExceeded("deadline exceeded while the sentences were read or answered")
    return work(check)
