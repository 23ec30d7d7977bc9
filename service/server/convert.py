"""protobuf <-> domain: request options to SearchOptions and glossaries, translations,
alignments and documents to messages."""

from __future__ import annotations

import functools
import json
import math

from attnmt.service.errors import InvalidInput, quoted
from attnmt.service.inference.search import SearchOptions
from attnmt.service.modeldir.links import DEFAULT_RULE
from attnmt.service.modeldir.links import format_pharaoh as pharaoh
from attnmt.service.modeldir.manifest import Manifest
from attnmt.service.server.routing import Route
from attnmt.service.server.settings import Settings
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.text.documents import Document, SentenceResult
from attnmt.service.text.glossary import Entry as GlossaryEntry
from attnmt.service.text.glossary import Glossary
from attnmt.service.text.glossary import Match as GlossaryMatch
from attnmt.service.text.quality import Quality
from attnmt.service.text.translator import Hypothesis, Translation

NONE, SOFT, WORDS, HARD = pb.ALIGNMENT_NONE, pb.ALIGNMENT_SOFT, pb.ALIGNMENT_WORDS, pb.ALIGNMENT_HARD


def keep_names(options: pb.DecodingOptions) -> bool | None:
    """The request's keep_names; None (unset): the model's default, on when it has a known-words list."""
    return options.keep_names if options.HasField("keep_names") else None


def use_lexicon(options: pb.DecodingOptions) -> bool | None:
    """The request's use_lexicon; None (unset): the model's default, on when it has a lexicon."""
    return options.use_lexicon if options.HasField("use_lexicon") else None


def split_above_words(options: pb.DecodingOptions) -> int | None:
    """The request's split_above_words; None (unset): the model's own (clauses.py)."""
    return options.split_above_words if options.HasField("split_above_words") else None


def search_options(options: pb.DecodingOptions, settings: Settings, field: str = "options") -> SearchOptions:
    """Validated SearchOptions; unset fields take the server defaults."""
    values = {"beam_size": options.beam_size or settings.default_beam_size, "n_best": options.n_best or 1,
              "max_target_tokens": settings.max_target_tokens, "early_exit": options.early_exit,
              "set_phrases": use_lexicon(options) is not False}
    for name in ("length_penalty", "max_length_ratio", "max_length_extra"):
        if options.HasField(name):
            value = getattr(options, name)
            if isinstance(value, float) and not math.isfinite(value):
                raise InvalidInput(f"{field}.{name} must be a finite number")
            values[name] = value
    try:        # the ranges are SearchOptions.validate's, with the server's max_beam_size
        return SearchOptions(**values).validate(settings.max_beam_size)
    except InvalidInput as e:
        raise InvalidInput(f"{field}.{e}") from None


def alignment_threshold(message, field: str = "options.alignment_threshold") -> float | None:
    if not message.HasField("alignment_threshold"):
        return None
    value = message.alignment_threshold
    if not (0.0 < value <= 1.0):
        raise InvalidInput(f"{field} must be in (0, 1], got {value:g}")
    return value


def alignment_kind(kind: int, default: int = NONE) -> int:
    if kind == pb.ALIGNMENT_KIND_UNSPECIFIED:
        return default
    if kind not in (NONE, SOFT, WORDS, HARD):
        raise InvalidInput(f"alignment: unknown AlignmentKind {kind}")
    return kind


def quality_pb(quality: Quality, message: pb.Quality | None = None) -> pb.Quality:
    """The quality as a message; `message`, when given, is filled in place (a field of the answer)."""
    message = pb.Quality() if message is None else message
    message.SetInParent()
    f = quality.features
    message.score, message.mean_log_prob, message.uncovered = quality.score, f["mean_log_prob"], f["uncovered"]
    message.wass_to_unif, message.min_word_log_prob = f["wass_to_unif"], f["min_word_log_prob"]
    message.mean_word_min_log_prob, message.length_ratio = f["mean_word_min_log_prob"], f["length_ratio"]
    add = message.words.add
    for w in quality.words:
        add(mean_log_prob=w.mean_log_prob, min_log_prob=w.min_log_prob, pieces=w.pieces)
    return message


def glossary_match_pb(match: GlossaryMatch) -> pb.GlossaryMatch:
    return pb.GlossaryMatch(entry=match.entry, source=match.source, target=match.target,
                            source_start=match.source_start, source_end=match.source_end,
                            target_start=match.target_start, target_end=match.target_end, changed=match.changed)


def glossary(entries, name: str, named: dict[str, Glossary], max_entries: int, field: str = "") -> Glossary | None:
    """The request's glossary (its own entries, then the named glossary's); None when it has none."""
    if not entries and not name:
        return None
    if len(entries) > max_entries:
        raise InvalidInput(f"{field}glossary has {len(entries)} entries, over the limit of {max_entries} "
                           "(max_glossary_entries); store a large glossary on the server (glossary_name)")
    stored = named.get(name) if name else None
    if name and stored is None:
        raise InvalidInput(f"{field}glossary_name: no glossary {quoted(name)} on this server"
                           + (f"; stored: {', '.join(sorted(named))}" if named else ""))
    if not entries:
        return stored
    return request_glossary(tuple((e.source, e.target) for e in entries), stored, f"{field}glossary")


@functools.lru_cache(maxsize=64)
def request_glossary(pairs: tuple[tuple[str, str], ...], stored: Glossary | None, field: str) -> Glossary:
    """The request's entries, then the stored glossary's; cached, so a stream that sends the
    same glossary with every message compiles it once."""
    return Glossary([GlossaryEntry(s, t) for s, t in pairs] + (stored.entries if stored is not None else []), field)


def hypothesis_pb(hyp: Hypothesis, kind: int, threshold: float | None,
                  message: pb.Hypothesis | None = None) -> pb.Hypothesis:
    """The hypothesis as a message; `message`, when given, is filled in place.

    Every message here is filled in place (add(), a field assigned), never built and then
    copied in: this runs for every hypothesis the server returns, on the event loop's thread."""
    message = pb.Hypothesis() if message is None else message
    message.SetInParent()
    message.text, message.score, message.log_prob = hyp.text, hyp.score, hyp.log_prob
    message.target_tokens.extend(hyp.target_tokens)
    message.token_log_probs.extend(hyp.token_log_probs)
    for m in hyp.glossary:
        message.glossary_applied.append(glossary_match_pb(m))
    if hyp.quality is not None:
        quality_pb(hyp.quality, message.quality)
        message.suspect = hyp.quality.suspect
    if kind == NONE:
        return message
    message.target_words.extend(hyp.target_words)
    links = hyp.hard_alignment(threshold)
    alignment = message.alignment
    alignment.SetInParent()                     # present even with no links and no rows
    for i, j in links:
        alignment.links.add(source=i, target=j)
    alignment.pharaoh = pharaoh(links)
    alignment.level = pb.Alignment.LEVEL_PIECES if kind == SOFT else pb.Alignment.LEVEL_WORDS
    if kind in (SOFT, WORDS):
        for row in (hyp.alignment if kind == SOFT else hyp.word_alignment).tolist():
            alignment.rows.add(weights=row)
    return message


def translation_pb(translation: Translation, kind: int, threshold: float | None,
                   message: pb.Translation | None = None) -> pb.Translation:
    """The translation as a message; `message`, when given, is filled in place (an element of
    the answer's `translations`)."""
    message = pb.Translation() if message is None else message
    message.SetInParent()
    message.source_tokens.extend(translation.source_tokens)
    if translation.hypotheses:
        message.text = translation.best.text
        if kind != NONE:
            message.source_words.extend(translation.best.source_words)
        for h in translation.hypotheses:
            hypothesis_pb(h, kind, threshold, message.hypotheses.add())
    return message


def _spans(spans) -> list[pb.Span]:
    return [pb.Span(start=a, end=b) for a, b in spans]


def sentence_pb(sentence: SentenceResult, kind: int, threshold: float | None) -> pb.Translation:
    """A translation with the character offsets of its words (documents.SentenceResult)."""
    message = translation_pb(sentence.translation, kind, threshold)
    if kind != NONE and sentence.translation.hypotheses:
        message.source_word_spans.extend(_spans(sentence.source_word_spans))
        for hyp, spans in zip(message.hypotheses, sentence.target_word_spans):
            hyp.target_word_spans.extend(_spans(spans))
    return message


def document_pb(document: Document, kind: int, threshold: float | None) -> pb.Translation:
    return pb.Translation(text=document.text, sentences=[
        pb.SentenceTranslation(source=pb.Span(start=s.source[0], end=s.source[1]),
                               target=pb.Span(start=s.target[0], end=s.target[1]),
                               translation=sentence_pb(s, kind, threshold)) for s in document.sentences])


def text_format(value: int) -> int:
    if value not in (pb.TEXT_FORMAT_UNSPECIFIED, pb.TEXT_FORMAT_PLAIN, pb.TEXT_FORMAT_HTML):
        raise InvalidInput(f"format: unknown TextFormat {value}")
    return value


def route_fields(route: Route) -> dict:
    """The answer's fields for the route a request took: its pair, and what `auto` detected."""
    fields = {"source_language": route.source, "target_language": route.target}
    if route.detected is not None:
        fields["detected_language"] = pb.DetectedLanguage(language=route.detected.language,
                                                          confidence=route.detected.confidence)
    return fields


def model_info_pb(translator, settings: Settings, is_default: bool) -> pb.ModelInfo:
    engine = translator.engine
    m = engine.manifest
    evaluation = {}
    for split, report in (m.evaluation or {}).items():
        for label, scores in report.items():
            if isinstance(scores, dict):
                for metric, value in scores.items():
                    if isinstance(value, (int, float)):
                        evaluation[f"{split}.{label}.{metric}"] = float(value)
    limits = {name: int(getattr(settings, name)) for name in (
        "max_sentences_per_request", "max_chars_per_sentence", "max_tokens_per_sentence", "max_message_bytes",
        "max_beam_size", "default_beam_size", "max_batch_rows", "max_queue", "max_document_chars",
        "max_document_sentences", "max_glossary_entries")}
    dimensions = {key: value for key, value in m.dimensions.items()
                  if isinstance(value, int) and not isinstance(value, bool)}
    return pb.ModelInfo(name=m.name, version=m.version, architecture=m.architecture,
                        source_language=m.source_language, target_language=m.target_language,
                        vocab_size=m.vocab_size, provider=engine.provider, is_default=is_default,
                        evaluation=evaluation, limits=limits, dimensions=dimensions,
                        alignment=alignment_defaults_pb(m), keeps_names=m.names is not None,
                        has_lexicon=m.lexicon is not None,
                        manifest_json=json.dumps(m.model_dump(mode="json"), ensure_ascii=False))


def alignment_defaults_pb(m: Manifest) -> pb.AlignmentDefaults:
    """The manifest's hard-link rule with its measured AER, and a Transformer's α heads."""
    chosen = m.hard_links or {}
    message = pb.AlignmentDefaults(rule=chosen.get("rule", DEFAULT_RULE))
    for name in ("threshold", "dev_aer", "test_aer"):
        if chosen.get(name) is not None:
            setattr(message, name, chosen[name])
    if m.alignment is not None:
        message.layer = int(m.alignment["layer"]) % max(1, int(m.dimensions.get("decoder_layers", 1)))
        message.heads.extend(int(h) for h in m.alignment["heads"])
        message.shift_att = bool(m.alignment.get("shift_att", False))
    return message
