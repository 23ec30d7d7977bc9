"""Names kept as written (service/text/names.py): which words are names, their replacement
through the alignment, and the known-words file."""

from __future__ import annotations

import hashlib

import numpy as np

from attnmt.service.text.names import Names, build_known, read_known, write_known
from attnmt.service.text.translator import Hypothesis, Translation

KNOWN = Names(frozenset({"Estados", "Unidos", "geológico", "la", "en"}))


def test_capitalised_unknown_words_past_a_sentence_start_are_names():
    text = ("Recep Tayyip Erdoğan habló en Gaziantep con Estados Unidos. Ayer el Servicio Geológico, "
            "«Rossby» y (Super-G) no; la carrera Super-G sí, y Gaziantep otra vez.")
    # Recep: first word; Ayer: after '.'; Rossby: after '«'; Super-G in parentheses: after '('; Estados,
    # Unidos: known; Geológico: its lower case is known; Gaziantep once.
    assert KNOWN.find(text) == ["Tayyip", "Erdoğan", "Gaziantep", "Servicio", "Super-G"]
    assert KNOWN.find("¿Dónde vive Ana? En Lima.") == ["Ana", "Lima"]          # "En" starts a sentence
    assert KNOWN.find("sin nombres aquí") == []
    # not names: digits or underscores, and words inside a longer token
    assert KNOWN.find("la celda F3 y Estilo1, Nombre_Nuevo, ASCII/ANSI, CR+LF y (NúmeroX|NúmeroY) en Ohio") == ["Ohio"]


def mangled() -> Translation:
    # "en Gaziantep , Turquía" -> "in Gazian tp , Turkey": the model mangled the name it never saw.
    source = ["▁en", "▁Gazian", "tep", ",", "▁Turquía", "</s>"]
    target = ["▁in", "▁Gazian", "tp", ",", "▁Turkey", "</s>"]
    alpha = np.full((6, 6), 0.02, dtype=np.float32)
    for t, s in enumerate([0, 1, 2, 3, 4, 5]):
        alpha[t, s] = 0.9
    alpha /= alpha.sum(axis=1, keepdims=True)
    hyp = Hypothesis("in Gaziantp, Turkey", target, [-0.5] * 6, -3.0, -0.5, alpha, source)
    return Translation("en Gaziantep, Turquía", source, [hyp])


def test_a_name_replaces_the_words_aligned_to_it_and_is_not_a_glossary_match():
    plain = mangled()
    kept = Names(frozenset({"en", "Turquía"})).apply(plain).best
    assert kept.text == "in Gaziantep, Turkey"
    assert kept.glossary == []                                  # a request's glossary reports its own terms
    assert kept.token_log_probs[1] == 0.0                       # written in, not generated
    assert kept.alignment.shape == (len(kept.target_tokens), 6)
    assert np.allclose(kept.alignment.sum(axis=1), 1, atol=1e-5)
    assert kept.quality == plain.best.quality                   # quality describes the model's own output


def test_a_known_word_or_a_sentence_without_names_is_left_alone():
    plain = mangled()
    assert Names(frozenset({"Gaziantep", "Turquía"})).apply(plain) is plain
    assert Names(frozenset({"gaziantep", "Turquía"})).apply(plain) is plain


def test_the_known_list_counts_capitalised_and_lower_case_forms_apart(tmp_path):
    lines = ["Roma y roma"] * 4 + ["Roma", "París"] * 1 + ["la casa"] * 5
    # Roma 5, roma 4, París 1, la 5, casa 5, y 4; capitalised_min 5, lowercase_min 5
    assert build_known(lines, 5, 5) == ["Roma", "casa", "la"]
    assert build_known(lines, 6, 4) == ["casa", "la", "roma", "y"]
    first, second = tmp_path / "a.txt.gz", tmp_path / "b.txt.gz"
    write_known(first, ["casa", "Ñandú"])
    write_known(second, ["casa", "Ñandú"])
    assert read_known(first) == frozenset({"casa", "Ñandú"})
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (first, second)]
    assert digest[0] == digest[1]                               # reproducible bytes, so a stable checksum
