"""A file through the core: read (service/text/files/), its texts split into jobs that fit the
queue, each job a Translate call of documents at BULK priority, the translations written back.

A file can hold far more sentences than one call may (max_sentences_per_request entries,
max_queue sentences waiting), so its entries go in jobs of at most
max_sentences_per_request entries and `job_sentences` sentences, one job at a time: a file
never holds more of a model's queue than one job, and interactive calls are admitted before
its sentences anyway (admission.py). A job refused because the queue is full waits the
retry delay and tries again, within the file's deadline (capped at max_deadline_seconds
from the start, for the whole file). Reading the file, counting its sentences and writing it
back take seconds for a large one: each runs off the event loop and ends at that deadline
(core.off_loop), the readers and writers checking it between their steps.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from attnmt.service.errors import AttnmtError, DeadlineExceeded, Overloaded
from attnmt.service.server.admission import BULK
from attnmt.service.server.core import off_loop
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.text import documents, files

DETECT_ON = 64          # texts `source: auto` reads to detect a file's language


@dataclass
class TranslatedFile:
    name: str                   # LibreTranslate's: `guide.po` -> `guide_en.po`
    media_type: str
    data: bytes
    model: str
    source_language: str
    target_language: str
    texts: int                  # texts the file gave the model
    untranslated: int           # entries left as they were (a .po entry whose translation lost a placeholder)


def job_sentences(settings) -> int:
    """Sentences in one job: a document's limit, and a quarter of the queue, so that other
    clients' calls still find room beside a file."""
    return max(1, min(settings.max_document_sentences, settings.max_queue // 4))


def plan(counts: list[int], max_entries: int, max_sentences: int) -> list[range]:
    """Consecutive entries grouped into jobs: at most `max_entries` entries and, unless an
    entry alone has more, `max_sentences` sentences each."""
    jobs, start, sentences = [], 0, 0
    for i, count in enumerate(counts):
        if i > start and (i - start == max_entries or sentences + count > max_sentences):
            jobs.append(range(start, i))
            start, sentences = i, 0
        sentences += count
    if start < len(counts):
        jobs.append(range(start, len(counts)))
    return jobs


async def translate_file(core, name: str, data: bytes, *, model: str = "", source: str = "", target: str = "",
                         deadline: float | None, client: str,
                         progress: Callable[[int, int], None] | None = None) -> TranslatedFile:
    """The file `name` holding `data`, translated by the model `model` or of the pair
    `source` -> `target` (core.resolve's rule); InvalidInput for a file that cannot be.
    `progress(texts done, texts)`: called before the first job and after each."""
    s = core.settings
    deadline = core.capped(deadline)
    limits = s.file_limits()
    try:
        document = await off_loop(lambda check: files.read(name, data, limits, check), deadline)
        served, route = core.resolve(model, len(document.texts), source, target, document.texts[:DETECT_ON])
        translator = served.translator
        language = translator.engine.manifest.source_language

        def count(check) -> list[int]:     # each entry's sentences, as the core will split it (its limits too)
            sentences = []
            for i, text in enumerate(document.texts):
                check()
                sentences.append(len(documents.read(text, document.html, True, language,
                                                    translator.protector is None, s.max_document_chars,
                                                    s.max_document_sentences, text_field(i), check).spans))
            return sentences
        counts = await off_loop(count, deadline)
    except AttnmtError as e:
        core.rejected(e)
        raise
    translations: list[str] = []
    text_format = pb.TEXT_FORMAT_HTML if document.html else pb.TEXT_FORMAT_PLAIN
    if progress is not None:
        progress(0, len(document.texts))
    for job in plan(counts, s.max_sentences_per_request, job_sentences(s)):
        request = pb.TranslateRequest(sentences=document.texts[job.start:job.stop], model=route.model,
                                      split_sentences=True, format=text_format,
                                      options=pb.DecodingOptions(alignment=pb.ALIGNMENT_NONE))
        reply = await _admitted(core, request, deadline, client, [text_field(i) for i in job])
        translations += [t.text for t in reply.translations]
        if progress is not None:
            progress(len(translations), len(document.texts))
    pattern = translator.sentinels.pattern if translator.sentinels is not None else None
    out = await off_loop(lambda check: document.write(translations, route.target, pattern, check), deadline)
    return TranslatedFile(files.translated_name(name, route.target), document.media_type, out, route.model,
                          route.source, route.target, len(document.texts), document.untranslated)


def text_field(i: int) -> str:
    """What an error calls the file's text `i` (an entry, a cue, a paragraph: the reader's unit)."""
    return f"the file's text {i + 1}"


async def _admitted(core, request: pb.TranslateRequest, deadline: float | None, client: str,
                    fields: list[str]) -> pb.TranslateResponse:
    """One job, retried after the retry delay while the queue is full."""
    while True:
        try:
            return await core.translate(request, deadline=deadline, client=client, priority=BULK, fields=fields)
        except Overloaded as e:
            wait = e.retry_after
            if deadline is not None and time.monotonic() + wait >= deadline:
                raise DeadlineExceeded("the deadline passed while the file waited for room in the queue") from None
            await asyncio.sleep(wait)
