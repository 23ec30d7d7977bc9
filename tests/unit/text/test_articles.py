"""English's indefinite article agreeing with the word after it (service/text/articles.py): the
rule by spelling, a hypothesis' text and pieces written again, and the bundled Spanish→English
model's translations with a glossary term after an article."""

from __future__ import annotations

import numpy as np
import pytest

from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import SearchOptions
from attnmt.service.server.settings import BUNDLED_EN_ES, BUNDLED_TRANSFORMER
from attnmt.service.text.articles import agree, article
from attnmt.service.text.glossary import Entry, Glossary
from attnmt.service.text.translator import Hypothesis, Translation, Translator


@pytest.mark.parametrize("word, expected", [
    ("agreement", "an"), ("interview", "an"), ("extreme", "an"), ("ice", "an"), ("officer", "an"),
    ("participation", "a"), ("list", "a"), ("deal", "a"), ("Arab", "an"), ("Autolog", "an"),
    ("hour", "an"), ("honest", "an"), ("heir", "an"), ("historic", "a"), ("house", "a"),
    ("European", "a"), ("euro", "a"), ("one", "a"), ("once", "a"),
    ("user", "a"), ("usual", "a"), ("unit", "a"), ("union", "a"), ("utility", "a"), ("uranium", "a"),
    ("umbrella", "an"), ("urgent", "an"), ("ulcer", "an"), ("unstable", "an"),
    # what the spelling does not say: left as the model wrote it
    ("unusual", None), ("uneven", None), ("Uber", None), ("Uruguayan", None), ("FBI", None), ("NASA", None),
    ("URL", None), ("iPhone", None), ("x", None), ("Xbox", None), ("year", None), ("of", None), ("is", None),
])
def test_the_article_by_the_words_spelling(word, expected):
    assert article(word) == expected


def hypothesis(pieces: list[str], text: str, placeholders: frozenset[int] = frozenset()) -> Hypothesis:
    alpha = np.full((len(pieces), 3), 1 / 3)                  # T x S
    return Hypothesis(text, pieces, [-0.5] * len(pieces), -1.0, -0.2, alpha, ["▁un", "▁trato", "</s>"],
                      placeholder_targets=placeholders)


def test_the_article_is_written_again_in_the_text_and_the_pieces_and_nothing_else_changes():
    hyp = hypothesis(["▁A", "▁interview", "▁with", "▁a", "▁extreme", "▁and", "▁an", "▁list", ".", "</s>"],
                     "A interview with a extreme and an list.")
    done = agree(Translation("...", ["▁un", "▁trato", "</s>"], [hyp])).best
    assert done.text == "An interview with an extreme and a list."
    assert done.target_tokens == ["▁An", "▁interview", "▁with", "▁an", "▁extreme", "▁and", "▁a", "▁list", ".", "</s>"]
    assert done.target_words[:4] == ["An", "interview", "with", "an"]
    assert done.alignment is hyp.alignment and done.token_log_probs == hyp.token_log_probs
    assert done.rewritten_from is hyp and done.groups == hyp.groups


def test_what_is_no_article_or_no_word_is_left_as_written():
    cases = [
        hypothesis(["▁The", "▁point", "▁A", "▁is", "▁a", "▁vertex", "</s>"], "The point A is a vertex"),
        hypothesis(["▁Vitamin", "▁A", "▁improves", "</s>"], "Vitamin A improves"),     # a letter after a word
        hypothesis(["▁read", "▁-a", "▁array", "</s>"], "read -a array"),                   # an option
        hypothesis(["▁add", "▁a", "▁%s", "▁entry", "</s>"], "add a %s entry", frozenset({2})),  # a placeholder
        hypothesis(["▁a", "▁FBI", "▁agent", "</s>"], "a FBI agent"),                        # spelling does not say
        hypothesis(["▁It", "▁is", "▁a", "</s>"], "It is a"),                               # no word after it
    ]
    for hyp in cases:
        assert agree(Translation("...", ["▁un", "▁trato", "</s>"], [hyp])).best is hyp
    # text and pieces that do not count the same articles (a placeholder's text holding " a "): both kept
    odd = hypothesis(["▁see", "▁{a b}", "▁a", "▁apple", "</s>"], "see {a b} a apple", frozenset({1}))
    assert agree(Translation("...", ["▁un", "▁trato", "</s>"], [odd])).best is odd


@pytest.mark.skipif(not (BUNDLED_TRANSFORMER / "manifest.json").exists(), reason="no bundled model")
def test_the_spanish_to_english_model_agrees_its_articles_with_a_glossary_term_and_forced_targets_stay():
    translator = Translator(Engine(BUNDLED_TRANSFORMER))
    glossary = Glossary([Entry("trato", "agreement")])
    plain, with_term = (translator.translate(["Firmaron un trato."], SearchOptions(beam_size=5), glossary=g)[0].best
                        for g in (None, glossary))
    assert plain.text == "They signed a deal."
    assert with_term.text == "They signed an agreement."                    # the glossary wrote "a agreement"
    assert "▁an" in with_term.target_tokens and with_term.glossary[0].target == "agreement"
    forced = translator.align([("Firmaron un trato.", "They signed a agreement.")])[0].best
    assert forced.text == "They signed a agreement."                        # the caller's text, as given


@pytest.mark.skipif(not (BUNDLED_EN_ES / "manifest.json").exists(), reason="no bundled model")
def test_a_model_whose_target_is_not_english_has_no_article_rule():
    assert Translator(Engine(BUNDLED_EN_ES)).articles is None
