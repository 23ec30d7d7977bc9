"""Long sentences translated in parts (service/text/clauses.py): where a sentence is cut, and how
the parts' translations make one, pieces, α, placeholders, glossary matches and quality included."""

from __future__ import annotations

import re

import numpy as np
import pytest

from attnmt.service.text.clauses import MIN_WORDS, cut, join
from attnmt.service.text.glossary import Match
from attnmt.service.text.translator import Hypothesis, Translation

LONG = ("La caída en la actividad económica ha generado, hasta noviembre, un aumento constante del desempleo en el "
        "estado, según el Instituto Nacional de Estadística y Geografía la tasa de desocupación estatal durante los "
        "tres primeros trimestres del año se observó un crecimiento acelerado, ya que mientras de enero a marzo 55 "
        "mil 053 sinaloenses estaban desocupados, con una tasa de 4.53 por ciento.")


def test_a_sentence_within_the_limit_or_without_a_limit_stays_whole():
    assert cut("Uno, dos, tres.", 30) == ["Uno, dos, tres."]
    assert cut(LONG, 0) == [LONG]
    assert cut(LONG, 80) == [LONG]


def test_a_long_sentence_is_cut_after_punctuation_nearest_the_middle_until_each_part_fits():
    parts = cut(LONG, 30)
    assert " ".join(parts) == LONG
    assert [len(p.split()) for p in parts] == [18, 25, 20]
    assert all(p.rstrip(".").endswith((",", ";", ":")) for p in parts[:-1])
    halves = cut(LONG, 50)
    assert len(halves) == 2 and " ".join(halves) == LONG


def test_whitespace_is_collapsed_in_the_parts():
    spaced = LONG.replace(" ", "  ").replace("generado,", "generado,\n")
    assert " ".join(cut(spaced, 30)) == LONG


def test_no_part_is_shorter_than_min_words():
    words = ["palabra"] * 40
    words[1] += ","            # a cut here would leave two words
    words[20] += ","
    text = " ".join(words)
    parts = cut(text, 30)
    assert [len(p.split()) for p in parts] == [21, 19]
    assert all(len(p.split()) >= MIN_WORDS for p in parts)
    assert cut(" ".join(["a,"] * 3 + ["b"] * 40), 30) == [" ".join(["a,"] * 3 + ["b"] * 40)]   # only too-short cuts


@pytest.mark.parametrize("opening, closing", [("(", ")"), ("¿", "?"), ("¡", "!"), ("«", "»"), ("[", "]")])
def test_no_cut_inside_brackets_or_a_spanish_question(opening, closing):
    inside = " ".join(["uno,"] + ["dos"] * 20 + ["tres,"] + ["cuatro"] * 20)
    text = f"Antes de todo {opening}{inside}{closing} y después nada más."
    assert cut(text, 20) == [text]
    after = f"{text[:-1]}, y luego " + " ".join(["cinco"] * 10) + "."
    parts = cut(after, 20)                     # outside the brackets, the comma after them
    assert len(parts) == 2 and parts[0].endswith(f"{closing} y después nada más,")


def test_no_cut_inside_a_placeholder():
    pattern = re.compile(r"\{[^{}]*\}")
    text = " ".join(["uno"] * 20) + " {0, number, integer} " + " ".join(["dos"] * 20)
    assert cut(text, 20, pattern) == [text]
    assert len(cut(text.replace(" {0, number, integer} ", " cero, "), 20, pattern)) == 2


# --- joining ---------------------------------------------------------------------

def hypothesis(text: str, targets: list[str], sources: list[str], alpha: list[list[float]], log_probs=None,
               **fields) -> Hypothesis:
    log_probs = log_probs or [-0.5] * len(targets)
    return Hypothesis(text, targets, log_probs, sum(log_probs), sum(log_probs) / len(targets),
                      np.array(alpha, dtype=np.float32), sources, **fields)


FIRST = hypothesis("The fall,", ["▁The", "▁fall", ",", "</s>"], ["▁La", "▁caída", ",", "</s>"],
                   [[0.9, 0.05, 0.0, 0.05], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.8, 0.2], [0.0, 0.0, 0.0, 1.0]])
SECOND = hypothesis("And it grew.", ["▁And", "▁it", "▁grew", ".", "</s>"], ["▁y", "▁creció", ".", "</s>"],
                    [[1.0, 0.0, 0.0, 0.0], [0.0, 0.6, 0.0, 0.4], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0],
                     [0.0, 0.0, 0.0, 1.0]])


def test_the_parts_make_one_hypothesis_with_alpha_in_blocks_and_one_end_of_sentence():
    text = "La caída, y creció."
    done = join(text, ["La caída,", "y creció."], [Translation("La caída,", FIRST.source_tokens, [FIRST]),
                                                      Translation("y creció.", SECOND.source_tokens, [SECOND])], 1.0)
    hyp = done.best
    assert done.source == text and done.source_tokens == ["▁La", "▁caída", ",", "▁y", "▁creció", ".", "</s>"]
    assert hyp.text == "The fall, and it grew."              # the second part sent in small letters
    assert hyp.target_tokens == ["▁The", "▁fall", ",", "▁and", "▁it", "▁grew", ".", "</s>"]
    assert hyp.alignment.shape == (8, 7)
    np.testing.assert_allclose(hyp.alignment.sum(axis=1), 1.0, atol=1e-6)
    # the first part's rows over its own pieces, their mass on its end of sentence on the sentence's
    np.testing.assert_allclose(hyp.alignment[0], [0.9, 0.05, 0.0, 0, 0, 0, 0.05])
    np.testing.assert_allclose(hyp.alignment[2], [0.0, 0.0, 0.8, 0, 0, 0, 0.2])
    np.testing.assert_allclose(hyp.alignment[4], [0, 0, 0, 0.0, 0.6, 0.0, 0.4])
    np.testing.assert_allclose(hyp.alignment[7], [0, 0, 0, 0, 0, 0, 1.0])
    assert hyp.token_log_probs == [-0.5] * 8                # the first part's end of sentence left out
    assert hyp.log_prob == pytest.approx(-4.0) and hyp.score == pytest.approx(-4.0 / 8)
    assert hyp.source_words == ["La", "caída,", "y", "creció.", "</s>"] and hyp.target_words[2] == "and"
    assert hyp.hard_alignment() and hyp.word_alignment.shape == (6, 5)


@pytest.mark.parametrize("written, part, expected", [
    ("And it grew.", "y creció.", "and it grew."),
    ("NATO grew.", "la OTAN creció.", "NATO grew."),        # a word in capitals is no sentence's start
    ("I grew.", "yo crecí.", "I grew."),
    ("I'm growing.", "yo crezco.", "I'm growing."),
    ("It grew.", "Creció.", "It grew."),                     # sent with a capital: as written
    ("42 grew.", "42 crecieron.", "42 grew."),
])
def test_a_later_part_sent_in_small_letters_starts_so(written, part, expected):
    words = written.split()
    second = hypothesis(written, ["▁" + w for w in words] + ["</s>"], ["▁x", "</s>"],
                        [[0.5, 0.5]] * (len(words) + 1))
    done = join("La caída, " + part, ["La caída,", part],
                [Translation("", FIRST.source_tokens, [FIRST]), Translation(part, second.source_tokens, [second])],
                1.0)
    assert done.best.text == "The fall, " + expected
    assert done.best.target_tokens[3] == "▁" + expected.split()[0]


def test_placeholders_and_glossary_matches_move_to_their_places():
    second = hypothesis("And %s grew.", ["▁And", "▁%s", "▁grew", ".", "</s>"], ["▁y", "▁%s", "▁creció", ".", "</s>"],
                        [[1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 1, 0], [0, 0, 0, 0, 1]],
                        placeholder_targets=frozenset({1}), placeholder_sources=frozenset({1}),
                        glossary=[Match(0, "creció", "grew", 2, 3, 2, 3, True)])
    first = hypothesis("The fall,", FIRST.target_tokens, FIRST.source_tokens, FIRST.alignment.tolist(),
                       glossary=[Match(1, "caída", "fall", 1, 2, 1, 2, False)])
    hyp = join("La caída, y %s creció.", ["La caída,", "y %s creció."],
               [Translation("", first.source_tokens, [first]), Translation("", second.source_tokens, [second])],
               1.0).best
    assert hyp.placeholder_targets == {4} and hyp.target_tokens[4] == "▁%s"
    assert hyp.placeholder_sources == {4} and hyp.source_tokens[4] == "▁%s"
    assert [(m.source_start, m.source_end, m.target_start, m.target_end) for m in hyp.glossary] == [
        (1, 2, 1, 2), (4, 5, 4, 5)]
    assert [hyp.source_words[m.source_start] for m in hyp.glossary] == ["caída,", "creció."]
    assert [hyp.target_words[m.target_start] for m in hyp.glossary] == ["fall,", "grew."]


class Mean:
    """A quality model that reports the mean log-probability of what it is given."""

    def assess(self, log_probs, alignment, sources, targets, groups=None):
        return round(float(np.mean(log_probs)), 3)


def test_quality_describes_the_models_own_parts_joined():
    own = hypothesis("The fal,", ["▁The", "▁fal", ",", "</s>"], FIRST.source_tokens, FIRST.alignment.tolist(),
                     log_probs=[-0.1, -3.0, -0.1, -0.1], quality_model=Mean())
    served = hypothesis("The fall,", FIRST.target_tokens, FIRST.source_tokens, FIRST.alignment.tolist(),
                        log_probs=[-0.1, 0.0, -0.1, -0.1], quality_model=Mean(), rewritten_from=own)
    second = hypothesis("And it grew.", SECOND.target_tokens, SECOND.source_tokens, SECOND.alignment.tolist(),
                        log_probs=[-1.0] * 5, quality_model=Mean())
    hyp = join("La caída, y creció.", ["La caída,", "y creció."],
               [Translation("", own.source_tokens, [served]), Translation("", second.source_tokens, [second])],
               1.0).best
    assert hyp.text == "The fall, and it grew."
    assert hyp.quality == round(np.mean([-0.1, -3.0, -0.1, -1.0, -1.0, -1.0, -1.0, -1.0]), 3)   # the model's "fal"


def test_the_first_hypothesis_joins_the_parts_best_and_a_part_with_one_keeps_it():
    other = hypothesis("The drop,", ["▁The", "▁drop", ",", "</s>"], FIRST.source_tokens, FIRST.alignment.tolist())
    done = join("La caída, y creció.", ["La caída,", "y creció."],
                [Translation("", FIRST.source_tokens, [FIRST, other]), Translation("", SECOND.source_tokens, [SECOND])],
                1.0)
    assert [h.text for h in done.hypotheses] == ["The fall, and it grew.", "The drop, and it grew."]


def test_the_next_hypotheses_change_the_part_that_gives_up_least():
    def alternative(of: Hypothesis, text: str, targets: list[str], each: float) -> Hypothesis:
        return hypothesis(text, targets, of.source_tokens, of.alignment[:len(targets)].tolist(),
                          log_probs=[each] * len(targets))

    firsts = [FIRST, alternative(FIRST, "The drop,", ["▁The", "▁drop", ",", "</s>"], -0.8),
              alternative(FIRST, "A fall,", ["▁A", "▁fall", ",", "</s>"], -0.9)]
    seconds = [SECOND, alternative(SECOND, "And it rose.", ["▁And", "▁it", "▁rose", ".", "</s>"], -0.6)]
    assert [h.score for h in firsts] == sorted((h.score for h in firsts), reverse=True)
    done = join("La caída, y creció.", ["La caída,", "y creció."],
                [Translation("", FIRST.source_tokens, firsts), Translation("", SECOND.source_tokens, seconds)], 1.0)
    # given up against each part's best: rose 0.1, drop 0.3, drop and rose 0.4, "A fall" 0.4
    assert [h.text for h in done.hypotheses] == ["The fall, and it grew.", "The fall, and it rose.",
                                                 "The drop, and it grew."]


def test_alternatives_that_write_the_same_words_come_once():
    again = hypothesis("And it grew.", ["▁And", "▁it", "▁gr", "ew", ".", "</s>"], SECOND.source_tokens,
                       SECOND.alignment.tolist() + [[0.0, 0.0, 0.0, 1.0]], log_probs=[-0.6] * 6)
    other = hypothesis("The drop,", ["▁The", "▁drop", ",", "</s>"], FIRST.source_tokens, FIRST.alignment.tolist(),
                       log_probs=[-0.8] * 4)
    done = join("La caída, y creció.", ["La caída,", "y creció."],
                [Translation("", FIRST.source_tokens, [FIRST, other]),
                 Translation("", SECOND.source_tokens, [SECOND, again])], 1.0)
    assert [h.text for h in done.hypotheses] == ["The fall, and it grew.", "The drop, and it grew."]
    small = hypothesis("and it grew.", SECOND.target_tokens, SECOND.source_tokens, SECOND.alignment.tolist(),
                       log_probs=[-0.6] * 5)
    done = join("La caída, y creció.", ["La caída,", "y creció."],
                [Translation("", FIRST.source_tokens, [FIRST, other]),
                 Translation("", SECOND.source_tokens, [SECOND, small])], 1.0)
    assert [h.text for h in done.hypotheses] == ["The fall, and it grew.", "The drop, and it grew."]


def test_one_part_is_its_own_translation():
    alone = Translation("La caída,", FIRST.source_tokens, [FIRST])
    assert join("La caída,", ["La caída,"], [alone], 1.0) is alone


def test_a_real_model_translates_each_part_and_copies_one_without_letters(translator):
    from attnmt.service.inference.search import SearchOptions
    sentence = "kasa granda vidas peru , 1 2 3 4 , kasa granda vidas peru ."
    parts = translator.parts(sentence, 6)
    assert parts == ["kasa granda vidas peru ,", "1 2 3 4 ,", "kasa granda vidas peru ."]
    whole = translator.translate(parts, SearchOptions(beam_size=2, n_best=2), split_above=0)
    done = translator.translate([sentence], SearchOptions(beam_size=2, n_best=2), split_above=6)[0]
    assert done.best.text == " ".join(t.best.text for t in whole)
    assert "1 2 3 4 ," in done.best.text                 # copied as it is
    for hyp in done.hypotheses:
        assert hyp.alignment.shape == (len(hyp.target_tokens), len(done.source_tokens))
        assert hyp.target_tokens.count("</s>") == 1 and hyp.quality is not None
    assert translator.translate([sentence], SearchOptions(), split_above=0)[0].source_tokens.count("</s>") == 1
