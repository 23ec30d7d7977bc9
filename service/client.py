"""A Python client for attnmt servers.

    from attnmt.service.client import Client
    with Client("localhost:50051") as client:
        t = client.translate(["Y dijo Dios: Sea la luz."], beam_size=5)[0]
        print(t.best.text, t.best.hard_alignment())

Results are the same `Translation`/`Hypothesis` objects the offline translator
returns (soft alignment over pieces, words and hard links derived from it).
"""

from __future__ import annotations

import random
import time
from typing import Callable, Iterable, Iterator, TypeVar

import grpc
import numpy as np
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from attnmt.service.inference.search import SearchOptions
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from attnmt.service.text.documents import Document, SentenceResult
from attnmt.service.text.glossary import Match as GlossaryMatch
from attnmt.service.text.quality import FEATURES as QUALITY_FEATURES
from attnmt.service.text.quality import Quality, WordQuality
from attnmt.service.text.translator import Hypothesis, Translation


def quality_from_pb(h: pb.Hypothesis) -> Quality | None:
    if not h.HasField("quality"):
        return None
    q = h.quality
    return Quality(q.score, h.suspect, {name: getattr(q, name) for name in QUALITY_FEATURES},
                   tuple(WordQuality(w.mean_log_prob, w.min_log_prob, w.pieces) for w in q.words))


def _hypothesis(h: pb.Hypothesis, source_tokens: list[str]) -> Hypothesis:
    rows = [list(r.weights) for r in h.alignment.rows]
    alignment = np.array(rows, dtype=np.float32) if rows else np.zeros((0, len(source_tokens)), dtype=np.float32)
    glossary = [GlossaryMatch(m.entry, m.source, m.target, m.source_start, m.source_end, m.target_start,
                              m.target_end, m.changed) for m in h.glossary_applied]
    return Hypothesis(text=h.text, target_tokens=list(h.target_tokens), token_log_probs=list(h.token_log_probs),
                      log_prob=h.log_prob, score=h.score, alignment=alignment, source_tokens=source_tokens,
                      glossary=glossary, computed_quality=quality_from_pb(h))


def glossary_pb(glossary: Iterable[tuple[str, str]] | dict[str, str] | None) -> list[pb.GlossaryEntry]:
    """GlossaryEntry messages from (source, target) pairs or a {source: target} dict."""
    pairs = glossary.items() if isinstance(glossary, dict) else (glossary or ())
    return [pb.GlossaryEntry(source=s, target=t) for s, t in pairs]


def translation_from_pb(source: str, t: pb.Translation) -> Translation:
    tokens = list(t.source_tokens)
    return Translation(source, tokens, [_hypothesis(h, tokens) for h in t.hypotheses])


def document_from_pb(source: str, t: pb.Translation) -> Document:
    """An entry sent with `format` or `split_sentences`: a document (one sentence when it
    was plain and not split), every word with its character offsets."""
    def spans(values) -> list[tuple[int, int]]:
        return [(s.start, s.end) for s in values]

    def sentence(source_span, target_span, message: pb.Translation) -> SentenceResult:
        translation = translation_from_pb(source[source_span[0]:source_span[1]], message)
        return SentenceResult(source_span, target_span, translation, spans(message.source_word_spans),
                              [spans(h.target_word_spans) for h in message.hypotheses])
    if t.sentences:
        return Document(source, t.text, [sentence((s.source.start, s.source.end), (s.target.start, s.target.end),
                                                  s.translation) for s in t.sentences])
    if not t.hypotheses:
        return Document(source, t.text, [])
    return Document(source, t.text, [sentence((0, len(source)), (0, len(t.text)), t)])


FORMATS = {"plain": pb.TEXT_FORMAT_PLAIN, "html": pb.TEXT_FORMAT_HTML}


ALIGNMENTS = {"none": pb.ALIGNMENT_NONE, "soft": pb.ALIGNMENT_SOFT, "words": pb.ALIGNMENT_WORDS,
              "hard": pb.ALIGNMENT_HARD}


def _alignment(alignment: str) -> str:
    """`alignment`, if it is one of ALIGNMENTS' names; ValueError naming them if not."""
    if alignment not in ALIGNMENTS:
        raise ValueError(f"alignment must be one of {', '.join(map(repr, ALIGNMENTS))}, not {alignment!r}")
    return alignment


def _wire_alignment(alignment: str) -> str:
    """What a call asks the server for: piece-level α ("soft") for any alignment the caller
    wants, since words and hard links derive from it here; "none" for none."""
    return "none" if _alignment(alignment) == "none" else "soft"


def _texts(texts: Iterable[str]) -> list[str]:
    """`texts` as a list. One string is refused: iterated, it would be translated a character
    at a time."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"texts must be a list of strings, not one {type(texts).__name__}: pass [text]")
    return list(texts)


def options_pb(options: SearchOptions, alignment: str = "soft", threshold: float | None = None,
               replace_unk: bool = False, keep_names: bool | None = None,
               use_lexicon: bool | None = None, split_above_words: int | None = None) -> pb.DecodingOptions:
    message = pb.DecodingOptions(beam_size=options.beam_size, n_best=options.n_best,
                                 max_length_ratio=options.max_length_ratio,
                                 max_length_extra=options.max_length_extra, alignment=ALIGNMENTS[_alignment(alignment)],
                                 replace_unknown=replace_unk, early_exit=options.early_exit)
    if options.length_penalty is not None:      # unset: the served model's own
        message.length_penalty = options.length_penalty
    if threshold is not None:
        message.alignment_threshold = threshold
    if keep_names is not None:
        message.keep_names = keep_names
    if use_lexicon is not None:
        message.use_lexicon = use_lexicon
    if split_above_words is not None:     # unset: the served model's own
        message.split_above_words = split_above_words
    return message


def _server_default(option_values: dict) -> SearchOptions:
    """The options a call sends when the caller named none: beam_size 0 unless given, so
    the server decodes with its own default_beam_size, as `attnmt translate` does."""
    return SearchOptions(**{"beam_size": 0, **option_values})


T = TypeVar("T")


def retry_delay(error: grpc.RpcError, attempt: int) -> float | None:
    """How long to wait before retrying, or None when retrying cannot help.
    RESOURCE_EXHAUSTED is retried only with the server's google.rpc.RetryInfo (without it
    the request itself is too large); UNAVAILABLE (a draining replica) with backoff."""
    code = error.code()
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        status = rpc_status.from_call(error)
        for detail in status.details if status else ():
            info = error_details_pb2.RetryInfo()
            if detail.Unpack(info):
                return info.retry_delay.ToTimedelta().total_seconds()
        return None
    if code == grpc.StatusCode.UNAVAILABLE:
        return 0.1 * 2 ** attempt
    return None


class Client:
    def __init__(self, target: str, timeout: float | None = 60.0, root_certificates: bytes | None = None,
                 private_key: bytes | None = None, certificate_chain: bytes | None = None,
                 max_message_bytes: int = 64 * 1024 * 1024, retries: int = 5, sentences_per_call: int = 64,
                 calls_in_flight: int = 4):
        options = [("grpc.max_receive_message_length", max_message_bytes),
                   ("grpc.max_send_message_length", max_message_bytes)]
        if root_certificates is not None:
            credentials = grpc.ssl_channel_credentials(root_certificates, private_key, certificate_chain)
            self.channel = grpc.secure_channel(target, credentials, options=options)
        else:
            self.channel = grpc.insecure_channel(target, options=options)
        self.stub = pb_grpc.TranslatorStub(self.channel)
        self.timeout = timeout
        self.retries = retries          # retries of an overloaded or draining server, honouring RetryInfo
        # More sentences than one call may carry (the server's max_sentences_per_request, 64 by default)
        # go as several calls, a few in flight so that the server batches them together.
        self.sentences_per_call = sentences_per_call
        self.calls_in_flight = calls_in_flight

    def _in_calls(self, texts: list[str], call: Callable[[list[str]], list]) -> list:
        """`call` on chunks of at most `sentences_per_call` texts, answers in the texts' order.
        A refusal of a later chunk carries `first_sentence`, the index in `texts` that its
        `sentences[0]` is."""
        starts = range(0, len(texts), self.sentences_per_call)
        if not starts:
            return []
        if len(starts) == 1:
            return call(texts)
        from concurrent.futures import ThreadPoolExecutor

        def call_from(start: int) -> list:
            try:
                return call(texts[start:start + self.sentences_per_call])
            except grpc.RpcError as error:
                error.first_sentence = start
                raise
        with ThreadPoolExecutor(min(self.calls_in_flight, len(starts))) as pool:
            return [answer for answers in pool.map(call_from, starts) for answer in answers]

    def _call(self, method: Callable[..., T], request) -> T:
        """One unary call, retried after RESOURCE_EXHAUSTED (as long as RetryInfo says) or
        UNAVAILABLE, each wait jittered (x0.5-1.5) so refused clients do not return together,
        all within the client's timeout."""
        give_up = None if self.timeout is None else time.monotonic() + self.timeout
        for attempt in range(self.retries + 1):
            remaining = None if give_up is None else max(give_up - time.monotonic(), 0.001)
            try:
                return method(request, timeout=remaining)
            except grpc.RpcError as error:
                delay = retry_delay(error, attempt)
                if delay is None or attempt == self.retries:
                    raise
                delay *= random.uniform(0.5, 1.5)
                if give_up is not None and time.monotonic() + delay >= give_up:
                    raise
                time.sleep(delay)
        raise AssertionError("unreachable")

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    def translate(self, texts: list[str], options: SearchOptions | None = None, *, alignment: str = "soft",
                  threshold: float | None = None, replace_unk: bool = False, keep_names: bool | None = None,
                  use_lexicon: bool | None = None, split_above_words: int | None = None, model: str = "",
                  glossary: Iterable[tuple[str, str]] | dict[str, str] | None = None,
                  glossary_name: str = "", **option_values) -> list[Translation]:
        """Translate sentences; soft alignment (the default) lets words and hard links be derived locally.
        `glossary`: (source, target) terms or {source: target}; `glossary_name`: one stored on the server.
        Each hypothesis carries `quality` and the `glossary` matches applied to it. No texts, no call: []."""
        texts = _texts(texts)
        options = options or _server_default(option_values)
        wire_options = options_pb(options, _wire_alignment(alignment), threshold, replace_unk, keep_names,
                                  use_lexicon, split_above_words)
        terms = glossary_pb(glossary)

        def call(chunk: list[str]) -> list[Translation]:
            request = pb.TranslateRequest(sentences=chunk, model=model, options=wire_options, glossary=terms,
                                          glossary_name=glossary_name)
            response = self._call(self.stub.Translate, request)
            return [translation_from_pb(s, t) for s, t in zip(chunk, response.translations)]
        return self._in_calls(texts, call)

    def translate_documents(self, texts: list[str], options: SearchOptions | None = None, *, html: bool = False,
                            split_sentences: bool = True, alignment: str = "soft", threshold: float | None = None,
                            replace_unk: bool = False, keep_names: bool | None = None,
                            use_lexicon: bool | None = None, split_above_words: int | None = None,
                            model: str = "", **option_values) -> list[Document]:
        """Translate paragraphs or documents (split_sentences) and/or HTML (html): each comes
        back whole, with its sentences, their alignments and every word's character offsets.
        No texts, no call: []."""
        texts = _texts(texts)
        options = options or _server_default(option_values)
        wire_options = options_pb(options, _wire_alignment(alignment), threshold, replace_unk, keep_names,
                                  use_lexicon, split_above_words)

        def call(chunk: list[str]) -> list[Document]:
            request = pb.TranslateRequest(sentences=chunk, model=model, split_sentences=split_sentences,
                                          format=FORMATS["html" if html else "plain"], options=wire_options)
            response = self._call(self.stub.Translate, request)
            return [document_from_pb(s, t) for s, t in zip(chunk, response.translations)]
        return self._in_calls(texts, call)

    def align(self, source: str, target: str, model: str = "") -> Translation:
        response = self._call(self.stub.Align, pb.AlignRequest(source=source, target=target, model=model,
                                                               alignment=pb.ALIGNMENT_SOFT))
        tokens = list(response.source_tokens)
        return Translation(source, tokens, [_hypothesis(response.hypothesis, tokens)])

    def stream(self, items: Iterable[tuple[str, str]], options: SearchOptions | None = None, model: str = "",
               alignment: str = "none", html: bool = False, split_sentences: bool = False,
               glossary: Iterable[tuple[str, str]] | dict[str, str] | None = None,
               glossary_name: str = "") -> Iterator[tuple[str, Translation | Document | pb.Error]]:
        """Bulk translation: (id, sentence) in, (id, Translation or Error) out as each finishes.
        With `html` or `split_sentences` each item is a document and comes back as a Document."""
        documents = html or split_sentences
        options = options or _server_default({})
        terms = glossary_pb(glossary)
        sources: dict[str, str] = {}

        def requests():
            first = True
            for key, sentence in items:
                sources[key] = sentence
                message = pb.StreamRequest(id=key, sentence=sentence, glossary=terms, glossary_name=glossary_name)
                if documents:
                    message.format = FORMATS["html" if html else "plain"]
                    message.split_sentences = split_sentences
                if first:
                    message.model = model
                    message.options.CopyFrom(options_pb(options, alignment))
                    first = False
                yield message

        for response in self.stub.TranslateStream(requests(), timeout=self.timeout):
            if response.HasField("error"):
                yield response.id, response.error
            elif documents:
                yield response.id, document_from_pb(sources.get(response.id, ""), response.translation)
            else:
                yield response.id, translation_from_pb(sources.get(response.id, ""), response.translation)

    def list_models(self) -> list[pb.ModelInfo]:
        return list(self.stub.ListModels(pb.ListModelsRequest(), timeout=self.timeout).models)

    def get_model(self, name: str = "") -> pb.ModelInfo:
        return self.stub.GetModel(pb.GetModelRequest(name=name), timeout=self.timeout)
