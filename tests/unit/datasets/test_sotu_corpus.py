"""The State of the Union corpus (model/data/sotu.py): addresses split into sentences, held-out
English removed before translation, the synthetic Spanish tagged. A stand-in translator."""

import json

from attnmt.model.data import decontaminate as dc
from attnmt.model.data import sotu


def test_addresses_split_into_sentences_since_a_year(tmp_path):
    (tmp_path / "data").mkdir()
    for year in (1790, 1990):
        (tmp_path / "data" / f"{year}_someone_n.json").write_text(json.dumps(
            {"year": year, "name": "Someone", "party": "none",
             "text": "Our schools must be the best. The economy is strong tonight."}), encoding="utf-8")
    assert [i for i, _ in sotu.sentences(tmp_path)] == ["sotu/1790/Someone"] * 2 + ["sotu/1990/Someone"] * 2
    assert list(sotu.sentences(tmp_path, since=1945)) == [("sotu/1990/Someone", "Our schools must be the best."),
                                                          ("sotu/1990/Someone", "The economy is strong tonight.")]


def test_held_out_english_is_not_translated_and_the_spanish_is_tagged():
    held = dc.HeldOut()
    held.add("news-dev", "en", ["the economy is strong tonight"])
    held.add("news-dev", "es", ["La nación está en paz."])
    english = [("sotu/1990/A", "Our schools must be the best."), ("sotu/1990/A", "The economy is strong tonight."),
               ("sotu/1990/A", "Our schools must be the best."), ("sotu/1990/A", "Yes."),
               ("sotu/1990/A", "The nation is at peace.")]
    asked = []

    def translate(sentences):
        asked.extend(sentences)
        return {"Our schools must be the best.": "Nuestras escuelas tienen que ser el mejor.",
                "The nation is at peace.": "La nación está en paz."}.__getitem__, sentences

    rows, counts = sotu.build_pairs(english, held, translate=lambda s: list(map(*translate(s))))
    assert asked == ["Our schools must be the best.", "The nation is at peace."]
    assert rows == [("sotu/1990/A", "<bt> Nuestras escuelas tienen que ser el mejor.", "Our schools must be the best.")]
    assert counts["english_dropped"] == {"duplicate": 1, "length": 1}
    assert counts["decontaminated"] == {"news-dev": 2}
