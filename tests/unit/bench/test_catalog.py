"""`attnmt bench catalog`: a small catalog built here (the toy language's msgids, English
msgstrs as the reference) blanked, translated whole through the real reader and writer, and
scored against its msgids translated as sentences."""

from __future__ import annotations

import json
import shutil

import polib
import pytest

from attnmt.bench.catalog import blank, compare, read_reference, targets, translate_file
from attnmt.service.cli import main
from attnmt.service.text.files.gettext import FORMAT_DIRECTIVES

PLACEHOLDER_MSGID = "kasa %s vidas ."


@pytest.fixture
def reference(tmp_path):
    """Seven entries: four scored (one with a context, one plural, one with a placeholder),
    one fuzzy, one obsolete, one the translator left empty."""
    po = polib.POFile()
    po.metadata = {"Project-Id-Version": "toy 1.0", "Language": "en", "MIME-Version": "1.0",
                   "Content-Type": "text/plain; charset=UTF-8", "Content-Transfer-Encoding": "8bit",
                   "Plural-Forms": "nplurals=2; plural=(n != 1);"}
    po.append(polib.POEntry(msgid="kasa granda vidas peru .", msgstr="the big house sees the dog .",
                            comment="shown on start", tcomment="Translators: a house", msgctxt="menu",
                            occurrences=[("main.c", "12")]))
    po.append(polib.POEntry(msgid="gato havas libo .", msgstr="the cat has the book .", msgctxt="toolbar"))
    po.append(polib.POEntry(msgid="peru amas gato .", msgid_plural="peru amas gato granda .",
                            msgstr_plural={0: "the dog loves the cat .", 1: "the dog loves the big cat ."}))
    po.append(polib.POEntry(msgid=PLACEHOLDER_MSGID, msgstr="the house %s sees .", flags=["c-format"]))
    po.append(polib.POEntry(msgid="luna vidas sola .", msgstr="the moon sees the sun .", flags=["fuzzy"]))
    po.append(polib.POEntry(msgid="arbo havas kasa .", msgstr="the tree has the house .", obsolete=True))
    po.append(polib.POEntry(msgid="mesa .", msgstr=""))
    path = tmp_path / "toy.po"
    po.save(str(path))
    return path


def lookup(po: polib.POFile) -> dict[str, str]:
    """Each msgid (and msgid_plural) to its reference translation."""
    out = {}
    for e in po:
        if e.msgid_plural:
            out[e.msgid], out[e.msgid_plural] = e.msgstr_plural[0], e.msgstr_plural[1]
        elif e.msgstr:
            out[e.msgid] = e.msgstr
    return out


def test_blank_empties_every_msgstr_and_keeps_the_rest(reference):
    po = read_reference(reference)
    empty = blank(po)
    assert len(empty) == len(po) and empty.metadata == po.metadata
    assert all(e.msgstr == "" for e in empty)
    assert empty[2].msgstr_plural == {0: "", 1: ""}
    first = empty[0]
    assert (first.comment, first.tcomment, first.msgctxt, first.occurrences) == \
        ("shown on start", "Translators: a house", "menu", [("main.c", "12")])
    assert empty[1].msgctxt == "toolbar" and empty[3].flags == ["c-format"] and empty[4].flags == ["fuzzy"]
    assert [e.msgid for e in empty if e.obsolete] == ["arbo havas kasa ."]
    assert po[0].msgstr == "the big house sees the dog ."       # the reference itself untouched


def test_a_mo_gets_its_c_format_flags_back(reference, tmp_path):
    po = polib.pofile(str(reference))
    po.append(polib.POEntry(msgid="100% kasa .", msgstr="100% house ."))      # a lone %: no format string
    mo = tmp_path / "toy.mo"
    po.save_as_mofile(str(mo))
    flagged = {e.msgid for e in read_reference(mo) if "c-format" in e.flags}
    assert flagged == {PLACEHOLDER_MSGID}


def scored_by(reference, file_translate, sentence_translate) -> dict:
    """The report of a whole-file translation through the real reader and writer, with fakes
    in place of the model."""
    ref = read_reference(reference)
    written, document, file_raw = translate_file("toy.po", str(blank(ref)).encode(),
                                                 lambda texts, html: [file_translate(t) for t in texts], "en",
                                                 FORMAT_DIRECTIVES)
    sentence_raw = [sentence_translate(t) for t in document.texts]
    report = compare(ref, written, document.texts, file_raw, sentence_raw, document.untranslated, FORMAT_DIRECTIVES)
    return {**report, "targets": targets({**report, "msgfmt": None})}


def test_both_paths_giving_the_reference_score_100_on_the_same_entries(reference):
    known = lookup(polib.pofile(str(reference)))
    right = lambda text: known.get(text, text)  # noqa: E731
    report = scored_by(reference, right, right)
    assert report["scored"] == 4
    assert report["dropped"] == {"fuzzy": 1, "obsolete": 1, "untranslated": 1}
    assert report["entries"] == 6 and report["filled"] == 6 and report["texts"] == 7
    assert (report["plural"], report["plural_filled"], report["untranslated"]) == (1, 1, 0)
    assert report["whole_file"]["bleu"] == report["sentences"]["bleu"] == 100
    assert report["difference"] == {"bleu": 0, "chrf": 0} and report["differing"] == 0
    assert report["whole_file"]["placeholders"] == {"texts": 1, "kept": 1, "share": 1.0, "invented": 0}
    assert report["targets"]["bleu_at_most_0.5_below"] and report["targets"]["plurals_filled"]


def test_a_lost_placeholder_leaves_the_entry_untranslated_and_costs_the_whole_file(reference):
    known = lookup(polib.pofile(str(reference)))
    right = lambda text: known.get(text, text)  # noqa: E731
    losing = lambda text: "the house sees ." if text == PLACEHOLDER_MSGID else right(text)  # noqa: E731
    report = scored_by(reference, losing, right)
    assert report["untranslated"] == 1 and report["filled"] == 5 and report["scored"] == 4
    assert report["whole_file"]["placeholders"]["kept"] == 0 and report["sentences"]["placeholders"]["kept"] == 1
    assert report["whole_file"]["bleu"] < report["sentences"]["bleu"] == 100
    assert report["difference"]["bleu"] < -0.5 and report["differing"] == 1
    assert report["examples"][0]["msgid"] == PLACEHOLDER_MSGID and report["examples"][0]["whole_file"] == ""
    # the three entries the writer filled still agree
    assert report["filled_only"]["entries"] == 3 and report["filled_only"]["whole_file"]["bleu"] == 100
    # the file as written holds no lost placeholder (the entry is left out): the loss costs BLEU
    assert report["whole_file"]["placeholders_written"]["kept"] == report["whole_file"]["placeholders_written"]["texts"]
    assert report["targets"]["placeholders_kept"] and not report["targets"]["bleu_at_most_0.5_below"]


def test_an_invented_placeholder_is_counted(reference):
    known = lookup(polib.pofile(str(reference)))
    right = lambda text: known.get(text, text)  # noqa: E731
    inventing = lambda text: "the cat has %d books ." if text == "gato havas libo ." else right(text)  # noqa: E731
    report = scored_by(reference, inventing, right)
    assert report["whole_file"]["placeholders"] == {"texts": 1, "kept": 1, "share": 1.0, "invented": 1}
    assert report["sentences"]["placeholders"]["invented"] == 0
    assert report["untranslated"] == 1 and report["whole_file"]["placeholders_written"]["invented"] == 0
    assert report["targets"]["placeholders_kept"]        # the file as written: the writer left the entry out


def test_a_plural_form_left_empty_is_counted(reference):
    ref = read_reference(reference)
    written = polib.pofile(str(ref))
    written[2].msgstr_plural = {0: "the dog loves the cat .", 1: ""}
    texts = ["peru amas gato ."]
    report = compare(ref, str(written).encode(), texts, texts, texts, 0, FORMAT_DIRECTIVES)
    assert (report["plural"], report["plural_filled"]) == (1, 0)
    assert not targets({**report, "msgfmt": None})["plurals_filled"]


def test_bench_catalog_on_the_tiny_model(tiny_model, reference, tmp_path, capsys):
    out = tmp_path / "report.json"
    assert main(["bench", "catalog", "--catalog", str(reference), "--model", str(tiny_model), "--msgid-language",
                 "xx", "--beam", "2", "--json", str(out), "--out", str(tmp_path / "files")]) == 0
    report, table = json.loads(out.read_text()), capsys.readouterr().out
    assert report["direction"] == "xx→en" and report["beam"] == 2 and report["machine"]["cpu"]
    assert (report["entries"], report["texts"], report["scored"], report["plural"]) == (6, 7, 4, 1)
    assert report["filled"] + report["untranslated"] == 6
    for path in ("whole_file", "sentences"):
        assert 0 <= report[path]["bleu"] <= 100 and 0 <= report[path]["chrf"] <= 100
        assert report[path]["seconds"] >= 0
    assert report["difference"]["bleu"] == pytest.approx(report["whole_file"]["bleu"] - report["sentences"]["bleu"],
                                                         abs=0.01)
    translated = polib.pofile(str(tmp_path / "files" / "translated.po"))
    assert translated.metadata["Language"] == "en" and translated[0].msgctxt == "menu"
    if shutil.which("msgfmt"):
        assert report["msgfmt_reference"]["check_use_fuzzy"]["clean"] is True
        assert isinstance(report["msgfmt"]["check_use_fuzzy"]["clean"], bool)
    else:
        assert report["msgfmt"] is None and "skipped" in table
    assert "| BLEU |" in table and "| plural entries filled |" in table


def test_bench_catalog_refuses_a_model_of_another_source_language(tiny_model, reference, capsys):
    assert main(["bench", "catalog", "--catalog", str(reference), "--model", str(tiny_model)]) == 2
    assert "msgids are en" in capsys.readouterr().err


def test_bench_catalog_refuses_a_missing_catalog(tiny_model, tmp_path, capsys):
    assert main(["bench", "catalog", "--catalog", str(tmp_path / "none.po"), "--model", str(tiny_model),
                 "--msgid-language", "xx"]) == 2
    assert "no such file" in capsys.readouterr().err
