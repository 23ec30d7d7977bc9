"""Spanish determiners agreeing with the noun after them (service/text/determiners.py): the rule
on two words, and the hypothesis written again, pieces, α and placeholders alike."""

from __future__ import annotations

import numpy as np

from attnmt.service.text.determiners import agree, determiner
from attnmt.service.text.translator import Hypothesis, Translation

GENDERS = {"lujo": ("m", ""), "oficina": ("f", ""), "régimen": ("m", ""), "cambio": ("m", "vblex"),
           "agua": ("f", ""), "área": ("f", ""), "bomba": ("f", "vblex"), "bombas": ("f", "vblex")}


def test_the_determiner_takes_the_noun_s_gender():
    assert determiner("m", "lujo", ["La"]) == (1, ["El"]) and determiner("f", "conquistas", ["los"]) == (1, ["las"])
    assert determiner("m", "sillón", ["es", "esta"]) == (1, ["este"])
    assert determiner("f", "oficina", ["del"]) == (1, ["de", "la"])
    assert determiner("f", "oficina", ["Al"]) == (1, ["A", "la"])
    assert determiner("m", "régimen", ["de", "la"]) == (2, ["del"])
    assert determiner("m", "régimen", ["a", "una"]) == (1, ["un"])
    assert determiner("m", "lujo", ["el"]) is None and determiner("f", "oficina", ["con"]) is None
    # a feminine noun in a-: "el agua", "del área"; its plural is as any other
    assert determiner("f", "agua", ["el"]) is None and determiner("f", "área", ["del"]) is None
    assert determiner("f", "hacha", ["un"]) is None and determiner("f", "aguas", ["los"]) == (1, ["las"])


def hypothesis(pieces: list[str], placeholders: frozenset[int] = frozenset()) -> Hypothesis:
    """The pieces, each aligned to a source piece of its own (α one-hot: T x T)."""
    n = len(pieces)
    text = "".join(pieces).removesuffix("</s>").replace("▁", " ").strip()
    sources = [f"▁s{i}" for i in range(n - 1)] + ["</s>"]
    return Hypothesis(text, pieces, [-0.1 * (i + 1) for i in range(n)], -1.0, -0.1, np.eye(n), sources,
                      placeholder_targets=placeholders)


def test_a_hypothesis_is_written_again_with_its_alignment_and_placeholders():
    hyp = hypothesis(["▁Salió", "▁del", "▁oficin", "a", "▁con", "▁%s", ".", "</s>"], frozenset({5}))
    done = agree(Translation("x", hyp.source_tokens, [hyp]), GENDERS).best
    assert done.text == "Salió de la oficina con %s."
    assert done.target_tokens == ["▁Salió", "▁de", "▁la", "▁oficin", "a", "▁con", "▁%s", ".", "</s>"]
    assert done.alignment.shape == (9, 8) and done.alignment[1].argmax() == done.alignment[2].argmax() == 1
    assert done.placeholder_targets == frozenset({6})                   # "%s" one piece further on
    assert done.token_log_probs[1] == done.token_log_probs[2] == hyp.token_log_probs[1]

    merged = agree(Translation("x", [], [hypothesis(["▁La", "▁caída", "▁de", "▁la", "▁régimen", "</s>"])]),
                   GENDERS).best
    assert merged.text == "La caída del régimen" and merged.alignment.shape == (5, 6)
    assert np.allclose(merged.alignment[2], [0, 0, 0.5, 0.5, 0, 0])      # "del": the mean of "de" and "la"


def test_what_the_rule_cannot_tell_is_left_as_written():
    for pieces in (["▁la", "▁cambio", "</s>"],          # a verb too: "la" may be its pronoun
                   ["▁el", "▁agua", "</s>"], ["▁del", "▁área", "</s>"],   # a stressed a-
                   ["▁la", "▁nueva", "▁lujo", "</s>"],     # not right before the noun
                   ["▁el", "▁lujo", "</s>"]):              # already agreeing
        hyp = hypothesis(pieces)
        assert agree(Translation("x", [], [hyp]), GENDERS).best is hyp
    assert agree(Translation("x", [], [hypothesis(["▁La", "▁lujo", "▁es", "▁caro", "</s>"])]), GENDERS).best.text == (
        "El lujo es caro")
    feminine = {"cambio": ("f", "vblex")}
    assert agree(Translation("x", [], [hypothesis(["▁el", "▁cambio", "</s>"])]), feminine).best.text == (
        "la cambio")                                        # "el" is no pronoun: written again
    hyp = hypothesis(["▁la", "▁%s", "</s>"], frozenset({1}))
    assert agree(Translation("x", [], [hyp]), {"%s": ("m", "")}).best is hyp
