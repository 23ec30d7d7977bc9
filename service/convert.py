"""protobuf <-> domain. The only module besides the servicer that knows the stubs."""

from __future__ import annotations

import json
import math

from .alignment import pharaoh
from .config import Settings
from .decoding import SearchOptions
from .errors import InvalidInput
from .stubs import translator_pb2 as pb
from .translator import Hypothesis, Translation

NONE, SOFT, WORDS, HARD = pb.ALIGNMENT_NONE, pb.ALIGNMENT_SOFT, pb.ALIGNMENT_WORDS, pb.ALIGNMENT_HARD


def search_options(options: pb.DecodingOptions, settings: Settings, field: str = "options") -> SearchOptions:
    """Validated SearchOptions; unset fields take the server defaults."""
    beam = options.beam_size or settings.default_beam_size
    if beam > settings.max_beam_size:
        raise InvalidInput(f"{field}.beam_size is {beam}, over the server's max_beam_size {settings.max_beam_size}")
    n_best = options.n_best or 1
    if n_best > beam:
        raise InvalidInput(f"{field}.n_best ({n_best}) must not exceed beam_size ({beam})")
    values = {"beam_size": beam, "n_best": n_best, "max_target_tokens": settings.max_target_tokens}
    for name in ("length_penalty", "max_length_ratio", "max_length_extra"):
        if options.HasField(name):
            value = getattr(options, name)
            if isinstance(value, float) and not math.isfinite(value):
                raise InvalidInput(f"{field}.{name} must be a finite number")
            values[name] = value
    try:
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


def _rows(matrix) -> list[pb.AlignmentRow]:
    return [pb.AlignmentRow(weights=row.tolist()) for row in matrix]


def hypothesis_pb(hyp: Hypothesis, kind: int, threshold: float | None) -> pb.Hypothesis:
    message = pb.Hypothesis(text=hyp.text, score=hyp.score, log_prob=hyp.log_prob,
                            target_tokens=hyp.target_tokens, token_log_probs=hyp.token_log_probs)
    if kind == NONE:
        return message
    message.target_words.extend(hyp.target_words)
    links = hyp.hard_alignment(threshold)
    alignment = pb.Alignment(links=[pb.AlignmentLink(source=i, target=j) for i, j in links], pharaoh=pharaoh(links))
    if kind == SOFT:
        alignment.level = pb.Alignment.LEVEL_PIECES
        alignment.rows.extend(_rows(hyp.alignment))
    elif kind == WORDS:
        alignment.level = pb.Alignment.LEVEL_WORDS
        alignment.rows.extend(_rows(hyp.word_alignment))
    else:
        alignment.level = pb.Alignment.LEVEL_WORDS
    message.alignment.CopyFrom(alignment)
    return message


def translation_pb(translation: Translation, kind: int, threshold: float | None) -> pb.Translation:
    message = pb.Translation(source_tokens=translation.source_tokens)
    if translation.hypotheses:
        message.text = translation.best.text
        if kind != NONE:
            message.source_words.extend(translation.best.source_words)
        message.hypotheses.extend(hypothesis_pb(h, kind, threshold) for h in translation.hypotheses)
    return message


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
        "max_beam_size", "default_beam_size", "max_batch_rows", "max_queue")}
    return pb.ModelInfo(name=m.name, version=m.version, architecture=m.architecture,
                        source_language=m.source_language, target_language=m.target_language,
                        vocab_size=m.vocab_size, provider=engine.provider, is_default=is_default,
                        evaluation=evaluation, limits=limits,
                        manifest_json=json.dumps(m.model_dump(mode="json"), ensure_ascii=False))
