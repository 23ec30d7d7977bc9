"""Which served model answers a request: by its name, or by the language pair it asks for.

Every model translates one pair (manifest `source_language` -> `target_language`, ISO 639-1
codes). `LanguagePairs` is the table of what is served, the default model first for its pair;
`LanguagePairs.route` is the rule every front end shares (core.resolve for gRPC and the native
HTTP API; LibreTranslate's routes read the same table):

- a model name alone: that model; nothing at all: the default model;
- a source and a target: the model of that pair; a source alone: the one pair served from it;
  a target alone: the one pair served into it;
- source `auto`: the text's language, detected (service/text/language.py) among the sources
  served for the target (every served source when no target is given);
- a name and a pair: the pair must be that model's.

A pair no model translates, an ambiguous half pair, and a name and pair that disagree are
InvalidInput, the message naming what is served.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attnmt.service.errors import InvalidInput, ModelNotFound, clipped, quoted
from attnmt.service.text import language

AUTO = "auto"


@dataclass(frozen=True)
class Detection:
    """The source language `auto` chose and the detector's probability of it (0 to 1)."""
    language: str
    confidence: float


@dataclass(frozen=True)
class Route:
    """Where a request goes: the served model's name, its pair, and what `auto` detected."""
    model: str
    source: str
    target: str
    detected: Detection | None = None


class LanguagePairs:
    """Which served model translates which pair (the default model first for its pair)."""

    def __init__(self, pair_of: dict[str, tuple[str, str]], default: str):
        """`pair_of`: every served model's name -> its (source, target)."""
        self.pair_of = pair_of
        self.default = default
        self.model_of: dict[tuple[str, str], str] = {}
        for name in [default] + [n for n in pair_of if n != default]:
            self.model_of.setdefault(pair_of[name], name)
        self.sources = sorted({s for s, _ in self.model_of})
        self.codes = sorted({code for pair in self.model_of for code in pair})

    @classmethod
    def of(cls, models: dict, default: str) -> LanguagePairs:
        """The table of the core's served models (name -> ServedModel)."""
        manifests = {name: served.translator.engine.manifest for name, served in models.items()}
        return cls({name: (m.source_language, m.target_language) for name, m in manifests.items()}, default)

    @property
    def default_pair(self) -> tuple[str, str]:
        return self.pair_of[self.default]

    def name(self, code: str) -> str:
        """A code's English name ("es" -> "Spanish"); the code itself when the detector does not know it."""
        return language.LANGUAGES.get(code, code)

    def targets(self, code: str) -> list[str]:
        return sorted(t for s, t in self.model_of if s == code)

    def sources_into(self, code: str) -> list[str]:
        return sorted(s for s, t in self.model_of if t == code)

    def served(self) -> str:
        """The pairs served, for messages: "es->en, en->es" (the default model's first)."""
        return ", ".join(f"{s}->{t}" for s, t in self.model_of)

    def code(self, tag: str) -> str:
        """A client's language tag as this table spells it. Tags are case-insensitive (BCP 47) and
        clients write "EN", "es_MX" or "es-419": a tag whose primary language is served is that
        language, one model translating all its varieties. A tag of no served language comes back
        as sent, for the message that refuses it."""
        if tag in self.codes or tag in ("", AUTO):
            return tag
        lowered = tag.strip().lower().replace("_", "-")
        if lowered in self.codes or lowered == AUTO:
            return lowered
        primary = lowered.split("-", 1)[0]
        return primary if primary in self.codes else tag

    # --- the rule ----------------------------------------------------------

    def route(self, model: str, source: str = "", target: str = "", texts: Sequence[str] = ()) -> Route:
        """The model that answers a request naming `model` ("": none) and the pair `source` ->
        `target` ("": not given; source `auto`: detected from `texts`, read together), each a
        language tag as `code` reads it."""
        source, target = self.code(source), self.code(target)
        if model:
            if model not in self.pair_of:
                raise ModelNotFound(f"model {quoted(model)} is not served here; "
                                    f"served: {', '.join(sorted(self.pair_of))}")
            s, t = self.pair_of[model]
            if source not in ("", AUTO, s) or target not in ("", t):
                # what the request asked, as it asked it ("not es->es" named a pair nobody sent)
                asked = (f"{_said(source)}->{_said(target)}" if source not in ("", AUTO) and target else
                         f"from {_said(source)}" if source not in ("", AUTO) else f"into {_said(target)}")
                raise InvalidInput(f"model {quoted(model)} translates {s}->{t}, not {asked}; "
                                   "leave out model or the language pair, or send one that agrees")
            return Route(model, s, t, self._detect([s], texts) if source == AUTO else None)
        if not source and not target:
            return Route(self.default, *self.default_pair)
        detected = None
        if source == AUTO:
            candidates = self.sources_into(target) if target else self.sources
            if not candidates:
                raise self._unserved(f"into {_said(target)}")
            detected = self._detect(candidates, texts)
            source = detected.language
        if not target:
            target = self._only(source, self.targets(source), "into", "target_language")
        elif not source:
            source = self._only(target, self.sources_into(target), "from", "source_language")
        name = self.model_of.get((source, target))
        if name is None:
            raise self._unserved(f"{_said(source)}->{_said(target)}")
        return Route(name, source, target, detected)

    def _unserved(self, what: str) -> InvalidInput:
        return InvalidInput(f"no model translates {what}; served pairs: {self.served()}")

    def _only(self, code: str, codes: list[str], direction: str, field: str) -> str:
        """The other half of a half pair: `codes`, what `code` is translated `direction` ("into":
        its targets, "from": its sources), must be exactly one."""
        if len(codes) == 1:
            return codes[0]
        if not codes:
            raise self._unserved(f"{'from' if direction == 'into' else 'into'} {_said(code)}")
        raise InvalidInput(f"{code} is translated {direction} {', '.join(codes)}: set {field}")

    def _detect(self, candidates: list[str], texts: Sequence[str]) -> Detection:
        """The likeliest of `candidates` for the texts read together, with its probability. With
        nothing to tell them apart (no letters the detector knows), the default model's source
        when it is a candidate, else the first."""
        probability = dict(language.detect(" ".join(texts), top=len(language.LANGUAGES)))
        best = max(candidates, key=lambda code: (probability.get(code, 0.0), code == self.default_pair[0]))
        return Detection(best, probability.get(best, 0.0))


def _said(tag: str) -> str:
    """A language tag as a refusal quotes it: as sent, cut short (a message never repeats a
    whole field back, and over gRPC must fit the status's trailer)."""
    return clipped(tag, 64)
