"""The routing rule (service/server/routing.py) on a table alone: which model answers a name,
a pair, half a pair or `auto`, and what is refused with which words."""

from __future__ import annotations

import pytest

from attnmt.service.errors import InvalidInput, ModelNotFound
from attnmt.service.server.routing import Detection, LanguagePairs, Route

# two models of es->en (the default one answers the pair), and en->es, pt->es
PAIRS = LanguagePairs({"rnn-es-en": ("es", "en"), "transformer-es-en": ("es", "en"), "en-es": ("en", "es"),
                       "pt-es": ("pt", "es")}, default="transformer-es-en")


@pytest.mark.parametrize("model, source, target, expected", [
    ("", "", "", Route("transformer-es-en", "es", "en")),
    ("rnn-es-en", "", "", Route("rnn-es-en", "es", "en")),
    ("", "es", "en", Route("transformer-es-en", "es", "en")),
    ("rnn-es-en", "es", "en", Route("rnn-es-en", "es", "en")),
    ("rnn-es-en", "", "en", Route("rnn-es-en", "es", "en")),
    ("", "en", "", Route("en-es", "en", "es")),
    ("", "", "en", Route("transformer-es-en", "es", "en")),
])
def test_a_name_a_pair_or_half_of_one(model, source, target, expected):
    assert PAIRS.route(model, source, target) == expected


def test_auto_chooses_among_the_sources_served_for_the_target():
    spanish = PAIRS.route("", "auto", "es", ["Onde fica a estação de comboios mais próxima?"])
    assert (spanish.model, spanish.source) == ("pt-es", "pt") and spanish.detected.language == "pt"
    english = PAIRS.route("", "auto", "", ["Where is the nearest train station?"])
    assert english.model == "en-es" and english.detected.confidence > 0.9
    # one candidate: that one, with the detector's (low) probability of it
    only = PAIRS.route("", "auto", "en", ["Where is the nearest train station?"])
    assert only.model == "transformer-es-en" and only.detected.confidence < 0.1
    # nothing to detect from: the default model's source among the candidates
    assert PAIRS.route("", "auto", "", ["1234"]) == Route("transformer-es-en", "es", "en", Detection("es", 0.0))


def test_auto_reads_the_words_of_markup_not_its_tags():
    # a subtitle cue in italics, as the file reader hands it over
    tagged = PAIRS.route("", "auto", "", ['<span data-t="0">Sí, claro.</span> <wbr data-cue="1"> &iquest;Vienes?'])
    plain = PAIRS.route("", "auto", "", ["Sí, claro. ¿Vienes?"])
    assert tagged == plain and tagged.source == "es"


@pytest.mark.parametrize("model, source, target, error, words", [
    ("", "es", "fr", InvalidInput, "no model translates es->fr; served pairs: es->en, en->es, pt->es"),
    ("", "fr", "", InvalidInput, "no model translates from fr; served pairs"),
    ("", "", "de", InvalidInput, "no model translates into de; served pairs"),
    ("", "auto", "de", InvalidInput, "no model translates into de; served pairs"),
    ("", "", "es", InvalidInput, "es is translated from en, pt: set source_language"),
    ("en-es", "es", "", InvalidInput, "model 'en-es' translates en->es, not from es;"),
    ("en-es", "", "en", InvalidInput, "model 'en-es' translates en->es, not into en;"),
    ("en-es", "es", "en", InvalidInput, "model 'en-es' translates en->es, not es->en;"),
    ("nope", "", "", ModelNotFound, "model 'nope' is not served here"),
])
def test_what_is_refused_names_what_is_served(model, source, target, error, words):
    with pytest.raises(error) as info:
        PAIRS.route(model, source, target)
    assert words in str(info.value)


def test_the_table_libretranslate_reads():
    assert PAIRS.default_pair == ("es", "en") and PAIRS.sources == ["en", "es", "pt"]
    assert PAIRS.targets("es") == ["en"] and PAIRS.sources_into("es") == ["en", "pt"]
    assert PAIRS.model_of[("es", "en")] == "transformer-es-en"


@pytest.mark.parametrize("tag, code", [
    ("es", "es"), ("ES", "es"), ("es-MX", "es"), ("es_ES", "es"), ("es-419", "es"), (" en-us ", "en"),
    ("zh-Hant-TW", "zh-Hant-TW"), ("fr", "fr"), ("AUTO", "auto"), ("", ""), ("e", "e"), ("es-", "es"),
])
def test_a_language_tag_is_read_as_its_served_language(tag, code):
    """BCP 47 tags are case-insensitive, and a variety of a served language is that language; a
    tag of no served language is kept as sent, for the refusal to name."""
    assert PAIRS.code(tag) == code


def test_a_pair_may_be_named_by_tags_of_any_case_or_region():
    assert PAIRS.route("", "ES", "en-GB") == Route("transformer-es-en", "es", "en")
    assert PAIRS.route("rnn-es-en", "es_MX", "EN") == Route("rnn-es-en", "es", "en")
    with pytest.raises(InvalidInput, match="no model translates fr-CA->en"):
        PAIRS.route("", "fr-CA", "en")
