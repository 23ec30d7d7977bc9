"""The names corpus (model/data/names.py): iD's translation files paired by key path, CLDR's
emoji names, sentence case for Title Case English, and the cleaning counts. Made-up files."""

import json

import pytest

from attnmt.model.data import decontaminate as dc
from attnmt.model.data import names


@pytest.mark.parametrize("spanish, english, expected", [
    ("Heladería", "Ice Cream Shop", "Ice cream shop"),
    ("Sin lactosa", "Lactose-Free", "Lactose-free"),
    ("Cajero automático", "ATM Machine", "ATM machine"),
    ("Visa Electron", "Visa Electron", "Visa Electron"),             # a capital in the Spanish: a proper name
    ("Gasolina (90 octanos)", "Gasoline (90 Octane)", "Gasoline (90 octane)"),
])
def test_title_case_english_is_put_in_sentence_case(spanish, english, expected):
    assert names.sentence_case(spanish, english) == expected


def test_id_schema_pairs_by_key_path(tmp_path):
    translations = tmp_path / "dist/translations"
    translations.mkdir(parents=True)
    es = {"es": {"presets": {"presets": {"amenity/atm": {"name": "Cajero automático", "terms": ["cajero"]}},
                             "fields": {"access": {"options": {"no": {"title": "Prohibido"}}}}}}}
    en = {"en": {"presets": {"presets": {"amenity/atm": {"name": "ATM", "terms": ["cash"]}},
                             "fields": {"access": {"options": {"no": {"title": "Prohibited"}, "yes": "Allowed"}}}}}}
    (translations / "es.json").write_text(json.dumps(es), encoding="utf-8")
    (translations / "en.json").write_text(json.dumps(en), encoding="utf-8")
    assert list(names.id_schema_pairs(tmp_path)) == [
        ("id-tagging-schema/presets/presets/amenity/atm/name", "Cajero automático", "ATM"),
        ("id-tagging-schema/presets/fields/access/options/no/title", "Prohibido", "Prohibited")]


def test_cldr_pairs_the_tts_names(tmp_path):
    for locale, name in (("es", "semáforo"), ("en", "vertical traffic light")):
        path = tmp_path / "annotations" / locale / "annotations.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"annotations": {"annotations": {"🚦": {"default": ["x"], "tts": [name]}}}}),
                        encoding="utf-8")
    assert list(names.cldr_pairs(tmp_path)) == [("cldr-annotations/U1F6A6", "semáforo", "vertical traffic light")]


def test_cleaning_keeps_names_the_same_in_both_languages_and_counts_per_source():
    held = dc.HeldOut()
    held.add("everyday", "en", ["Pharmacy."])
    sources = {"a": [("a/1", "Hotel", "Hotel"), ("a/2", "Farmacia", "Pharmacy"), ("a/3", "Baño", "Restroom"),
                     ("a/4", "…", "…")],
               "b": [("b/1", "Baño", "Restroom"), ("b/2", "Estación de tren", "Train Station")]}
    rows, counts = names.build_corpus(sources, held)
    assert [r[1:] for r in rows] == [("Hotel", "Hotel"), ("Baño", "Restroom"), ("Estación de tren", "Train station")]
    assert counts["sources"]["a"]["decontaminated"] == {"everyday": 1}
    assert counts["sources"]["a"]["dropped"] == {"letterless": 1} and counts["sources"]["a"]["same_in_both"] == 1
    assert counts["sources"]["b"]["dropped"] == {"duplicate": 1} and counts["sources"]["b"]["sentence_cased"] == 1
