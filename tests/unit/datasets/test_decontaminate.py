"""Decontamination (model/data/decontaminate.py): the key that makes two sentences the same, each
side against its own side, and the kinds of held-out paths. Small made-up files; no network."""

from collections import Counter

import pytest

from attnmt.model.data import decontaminate as dc


@pytest.mark.parametrize("a, b", [
    ("¿Dónde está la estación?", "dónde está la estación"),          # opening and closing marks
    ("“Don’t go!” — he said.", "dont go he said"),                   # typographic quotes and dashes
    ("Hace\u00a0sol.", "hacesol"),                                    # a no-break space
    ("Ha\u00adce so\u200bl", "hace sol"),                             # a soft hyphen, a zero-width space
    ("ＨＯＬＡ", "hola"),                                               # full-width letters (NFKC)
    ("«Sí»,\tseñor", "sí señor"),
])
def test_punctuation_spaces_and_case_do_not_count(a, b):
    assert dc.key(a) == dc.key(b)


@pytest.mark.parametrize("a, b", [
    ("él", "el"),                # accents are letters
    ("5 €", "5 $"),              # symbols stay
    ("¿Qué hora es?", "¿Qué hora era?"),
])
def test_letters_and_symbols_count(a, b):
    assert dc.key(a) != dc.key(b)


def test_each_side_is_matched_against_its_own_side_and_a_tag_is_no_part_of_it():
    held = dc.HeldOut()
    held.add("test", "es", ["¿Qué hora es?"])
    held.add("test", "en", ["What time is it?"])
    assert held.match("qué hora es", "Anything") == "test"
    assert held.match("<bt> ¿Qué hora es?", "Anything") == "test"
    assert held.match("Otra cosa", "what time is it") == "test"
    assert held.match("What time is it?", "¿Qué hora es?") is None       # sides crossed: no match
    removed = Counter()
    assert dc.remove([("a", "Qué hora es.", "x"), ("b", "Hola", "Hello")], held, removed) == [("b", "Hola", "Hello")]
    assert removed == {"test": 1}


def test_a_letterless_held_out_line_matches_nothing():
    held = dc.HeldOut()
    held.add("test", "es", ["...", "—"])
    assert held.match("!!!", "?") is None


def write(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def test_the_kinds_of_held_out_paths(tmp_path):
    corpus = tmp_path / "corpus"                      # a corpus directory: dev and test, never train
    write(corpus / "train.es", ["Entrenamiento."])
    write(corpus / "train.en", ["Training."])
    write(corpus / "dev.es", ["Desarrollo."])
    write(corpus / "dev.en", ["Development."])
    (corpus / "test.tsv").write_text("Prueba.\tTest.\n", encoding="utf-8")
    gold = tmp_path / "gold"                          # a TSV with named columns
    (gold).mkdir()
    (gold / "dev.tsv").write_text("id\tdomain\tsource\ttarget\tlinks\nx\ty\tOro.\tGold.\t0-0\n", encoding="utf-8")
    public = tmp_path / "public"                      # public test sets beside training years
    write(public / "newstest2013.spa", ["Noticia de prueba."])
    write(public / "newstest2013.eng", ["Test news."])
    write(public / "newstest2011.spa", ["Noticia de entrenamiento."])
    write(public / "newstest2011.eng", ["Training news."])
    write(tmp_path / "other.eng", ["Only English."])  # one side
    write(tmp_path / "pair.es", ["Par."])             # a prefix with both sides
    write(tmp_path / "pair.en", ["Pair."])

    held = dc.load([corpus, gold, public, tmp_path / "other.eng", tmp_path / "pair"])

    assert set(held.es) == {dc.key(s) for s in ("Desarrollo", "Prueba", "Oro", "Noticia de prueba", "Par")}
    assert set(held.en) == {dc.key(s) for s in ("Development", "Test", "Gold", "Test news", "Only English", "Pair")}
    assert held.sets["newstest2013"] == {"es": 1, "en": 1} and "newstest2011" not in held.sets


def test_a_named_set_that_is_missing_is_refused_and_a_missing_default_is_reported(tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit, match="nothing"):
        dc.load([tmp_path / "nothing"])
    monkeypatch.setattr(dc, "DEFAULT_EXCLUDE", (tmp_path / "absent",))
    assert not dc.load(None).sets
    assert "absent not found" in capsys.readouterr().err


def test_the_repository_defaults_exist_and_hold_the_public_test_sets():
    held = dc.load(None)
    assert {"tatoeba-test-v2021-08-07", "flores200-devtest"} <= set(held.sets)
    assert held.sets["tatoeba-test-v2021-08-07"]["es"] > 16_000


def test_a_set_named_twice_is_counted_once_and_an_empty_one_is_not_described(tmp_path):
    write(tmp_path / "c/dev.es", ["Uno."])
    write(tmp_path / "c/dev.en", ["One."])
    write(tmp_path / "c/test.es", [])
    write(tmp_path / "c/test.en", [])
    held = dc.load([tmp_path / "c", tmp_path / "c"])
    assert held.sets[f"{tmp_path}/c/dev"] == {"es": 1, "en": 1}
    assert held.describe() == f"`{tmp_path}/c/dev` (es 1, en 1)"
