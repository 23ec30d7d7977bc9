"""The Tatoeba corpus (model/data/tatoeba.py): both of manythings' formats, a zip or a text file
from a path or a file:// URL, the sha256 check, the dev slice held out by English sentence and the
test sentences removed. Made-up sentences; no network, nothing of ../shared."""

import json
import zipfile

from attnmt.model.data import decontaminate as dc
from attnmt.model.data import tatoeba as tt

OLD_FORMAT = "Go.\tVe.\nGo.\tVete.\nHello!\t¡Hola!\nI see.\tYa veo.\n"
NEW_FORMAT = ("Go.\tVe.\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272 (CM) & #4986655 (cueyayotl)\n"
              "Hi.\tHola.\tCC-BY 2.0 (France) Attribution: tatoeba.org #538123 (CM) & #431736 (Leono)\n")


def test_both_formats_read_spanish_as_source_with_tatoeba_numbers_when_given():
    assert tt.read_pairs(OLD_FORMAT)[0] == ("tatoeba/line1", "Ve.", "Go.")
    assert tt.read_pairs(NEW_FORMAT) == [("tatoeba#2877272#4986655", "Ve.", "Go."),
                                         ("tatoeba#538123#431736", "Hola.", "Hi.")]


def test_a_file_url_to_a_newer_zip_is_read_and_said_to_differ(tmp_path, capsys):
    archive = tmp_path / "spa-eng.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("spa.txt", NEW_FORMAT)
        z.writestr("_about.txt", "Attribution: www.manythings.org/anki and tatoeba.org\n")
    out = tmp_path / "tatoeba"

    result = tt.extract_tatoeba(out, archive.as_uri(), exclude=[], dev_english=1)

    assert f"not {tt.PINNED_SHA256}" in capsys.readouterr().err
    source = json.loads((out / "source.json").read_text())
    assert source["matches"] is False and source["file"] == "spa-eng.zip"
    assert (out / "cache/downloads/spa-eng.zip").exists()              # downloaded once, kept
    assert result["train"] + result["dev"] == 2
    card = (out / "DATA_CARD.md").read_text(encoding="utf-8")
    assert "Tatoeba (tatoeba.org) and manythings.org/anki" in card and "CC-BY 2.0 FR" in card
    assert "a newer file" in card


def test_the_pinned_file_is_recognised(tmp_path, monkeypatch, capsys):
    spa = tmp_path / "spa.txt"
    spa.write_text(OLD_FORMAT, encoding="utf-8")
    monkeypatch.setattr(tt, "PINNED_SHA256", tt.upstream.sha256(spa))
    _, facts = tt.read_text(spa)
    assert facts["matches"] and capsys.readouterr().err == ""


def test_the_difference_is_reported_on_stderr(tmp_path, capsys):
    spa = tmp_path / "spa.txt"
    spa.write_text(OLD_FORMAT, encoding="utf-8")
    _, facts = tt.read_text(spa)
    err = capsys.readouterr().err
    assert not facts["matches"] and tt.PINNED_SHA256 in err and "newer upstream release" in err


def test_dev_is_held_out_by_english_sentence_and_test_sentences_leave():
    rows = [("1", "Ve.", "Go."), ("2", "Vete.", "Go."), ("3", "Vaya.", "Go."),      # one English, three Spanish
            ("4", "Vete.", "Leave."),                                                 # a dev Spanish, other English
            ("5", "¡Hola!", "Hello!"), ("6", "Hola.", "Hi."),
            ("7", "Gracias.", "Thanks."), ("8", "¿Qué hora es?", "What time is it?")]
    held = dc.HeldOut()
    held.add("tatoeba-test", "es", ["que hora es"])                                  # accents differ: kept
    held.add("tatoeba-test", "en", ["thanks"])
    go = None
    for seed in range(50):                                                           # a seed that draws "Go."
        splits, counts = tt.build_corpus(rows, held, dev_english=1, seed=seed)
        if {en for _, _, en in splits["dev"]} == {"Go."}:
            go = splits, counts
            break
    assert go is not None
    splits, counts = go
    assert sorted(es for _, es, _ in splits["dev"]) == ["Vaya.", "Ve.", "Vete."]       # every pair of "Go."
    train = {row[0] for row in splits["train"]}
    assert train == {"5", "6", "8"}                                                  # 4 shares a dev Spanish
    assert counts["decontaminated"] == {"tatoeba-test": 1, "own dev": 1}


def test_filters_and_duplicates_are_counted():
    rows = [("1", "No.", "No."), ("2", "Ve.", "Go."), ("3", "Ve.", "Go."),
            ("4", "Sí.", "Yes, I think that this long answer is so much longer.")]
    splits, counts = tt.build_corpus(rows, dc.HeldOut(), dev_english=0)
    assert counts["dropped"] == {"untranslated": 1, "duplicate": 1, "length_ratio": 1}
    assert splits["train"] == [("2", "Ve.", "Go.")] and splits["dev"] == []
