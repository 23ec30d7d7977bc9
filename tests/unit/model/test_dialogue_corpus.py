"""The dialogue corpus: real .mo catalogs (written with polib) read, the excluded catalogs
skipped, every filter's reason counted, held-out sentences removed and the card written.
No network, no apt."""

import json
from pathlib import Path

import polib
import pytest

from attnmt.model.data import dialogue as dc
from attnmt.model.data.gettext import leak_key


def write_mo(root: Path, domain: str, pairs: list[tuple[str, str]]) -> None:
    mo = polib.MOFile()
    mo.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Plural-Forms": "nplurals=2; plural=(n != 1);"}
    mo.extend(polib.MOEntry(msgid=msgid, msgstr=msgstr) for msgid, msgstr in pairs)
    path = root / "usr/share/games/wesnoth/locale/es/LC_MESSAGES" / f"{domain}.mo"
    path.parent.mkdir(parents=True, exist_ok=True)
    mo.save(str(path))


def write_copyright(root: Path, package: str, licence: str) -> None:
    path = root / "usr/share/doc" / package / "copyright"
    path.parent.mkdir(parents=True)
    path.write_text(f"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
                    f"Files: *\nLicense: {licence}\n", encoding="utf-8")


@pytest.mark.parametrize("source, target, reason", [
    ("¡Estamos perdidos sin nuestro rey!", "We are lost without our king!", None),
    ("Zantoff tharqan yur glit zarf!", "Zantoff tharqan yur glit zarf!", "untranslated"),
    ("", "We are lost without our king!", "empty"),
    ("We are lost without the king and his men.", "We are lost without the king and his men!", "spanish_side_english"),
    ("... 123 ...", "... 124 ...", "letterless"),
    ("¡Hola, amigo!", "Hello, my friend!", "too_few_words"),
    ("Sí, mi señor.", "Yes, my good lord.", "too_few_words"),                            # on either side
    ("Sólo me quedan $student_hp puntos", "Only $student_hp hitpoints left", "too_few_words"),   # $var is no word
    ("<b>$name</b> ataca a $enemy por la espalda", "<b>$name</b> attacks $enemy from the back", "markup"),  # 4 in 5
    ("¡Aparece [b]%s[/b] salvaje en el bosque!", "A wild [b]%s[/b] appears in the forest!", "markup"),  # BBCode
    ("Ay, necesito sanarme: me quedan $hp puntos de vida.", "Ouch! I need to heal: $hp hitpoints left.", None),
    ("Dijo que sí " + "y que no " * 40, "He said yes " + "and no " * 40, "too_long"),
    ("Vete de aquí ahora mismo, por favor, que ya es muy tarde y mañana tenemos que madrugar.",
     "Go away, now, please.", "length_ratio"),
])
def test_reject_reason(source, target, reason):
    assert dc.reject_reason(source, target) == reason


def test_words_are_letter_runs_outside_markup():
    assert dc.words("<span color='red'>¡Cuidado, extranjero!</span>") == 2
    assert dc.words("Tienes %d monedas y {0} gemas &amp; nada más") == 6
    assert dc.words("[option_prefix] [option_a] y [option_b]") == 1


def test_build_corpus_skips_excluded_catalogs_joins_lines_and_counts_every_reason(tmp_path):
    wesnoth = tmp_path / "wesnoth-1.16-data"
    write_mo(wesnoth, "wesnoth-tutorial", [
        ("You must defend the village\nuntil the end of the second turn.",
         "Debes defender la aldea\nhasta el final del segundo turno."),
        ("Where is the nearest inn, friend?", "¿Dónde está la posada más cercana, amigo?"),
        ("Save Game", "Guardar partida"),
        ("We are lost without our king!", "¡Estamos perdidos sin nuestro rey!")])
    write_mo(wesnoth, "wesnoth-units", [("The elves are the oldest of all the races.",
                                         "Los elfos son la más antigua de todas las razas.")])
    campaign = tmp_path / "wesnoth-1.16-httt"
    write_mo(campaign, "wesnoth-httt", [
        ("We are lost without our king!", "¡Estamos perdidos sin nuestro rey!"),       # the tutorial's line
        ("Then we shall ride at dawn, my lord.", "Entonces cabalgaremos al alba, mi señor.")])

    rows, counts = dc.build_corpus({"wesnoth-1.16-data": wesnoth, "wesnoth-1.16-httt": campaign},
                                   held_out={leak_key("Where is the  nearest inn, friend?")})

    assert rows == [                                      # a .mo holds its messages sorted by msgid
        ("wesnoth-1.16-data/wesnoth-tutorial", "¡Estamos perdidos sin nuestro rey!", "We are lost without our king!"),
        ("wesnoth-1.16-data/wesnoth-tutorial", "Debes defender la aldea hasta el final del segundo turno.",
         "You must defend the village until the end of the second turn."),
        ("wesnoth-1.16-httt/wesnoth-httt", "Entonces cabalgaremos al alba, mi señor.",
         "Then we shall ride at dawn, my lord.")]
    data = counts["packages"]["wesnoth-1.16-data"]
    assert data["catalogs"] == ["wesnoth-tutorial"] and data["catalogs_excluded"] == ["wesnoth-units"]
    assert data["messages"] == 4 and data["train"] == 2
    assert data["dropped"] == {"held_out": 1, "too_few_words": 1}
    assert counts["packages"]["wesnoth-1.16-httt"]["dropped"] == {"duplicate": 1}
    assert counts["dropped"] == {"held_out": 1, "too_few_words": 1, "duplicate": 1}
    assert counts["messages"] == 6 and counts["train"] == 3


def test_plural_forms_are_a_pair_each(tmp_path):
    mo = polib.MOFile()
    mo.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    mo.append(polib.MOEntry(msgid="You have found one old gold coin.", msgid_plural="You have found %d old gold coins.",
                            msgstr_plural={0: "Has encontrado una vieja moneda de oro.",
                                           1: "Has encontrado %d viejas monedas de oro."}))
    path = tmp_path / "usr/share/locale/es/LC_MESSAGES/freedroidrpg-dialogs.mo"
    path.parent.mkdir(parents=True)
    mo.save(str(path))
    rows, _ = dc.build_corpus({"freedroidrpg-data": tmp_path}, held_out=set())
    assert [(s, t) for _, s, t in rows] == [
        ("Has encontrado una vieja moneda de oro.", "You have found one old gold coin."),
        ("Has encontrado %d viejas monedas de oro.", "You have found %d old gold coins.")]


def test_extract_writes_a_train_split_a_card_and_counts(tmp_path, monkeypatch):
    root = tmp_path / "cache/root/gbrainy_1%3a2.4.6-1_amd64"
    write_mo(root, "gbrainy", [("Which of the following words does not belong with the others?",
                                "¿Cuál de las siguientes palabras no pertenece al grupo?"),
                               ("How many cats are there in the picture?", "¿Cuántos gatos hay en el dibujo?")])
    write_copyright(root, "gbrainy", "GPL-2+")
    package_list = tmp_path / "packages.txt"
    package_list.write_text("# puzzles\ngbrainy\n", encoding="utf-8")
    everyday = tmp_path / "everyday"
    everyday.mkdir()
    (everyday / "test.tsv").write_text("¿Cuántos gatos hay en el dibujo?\tHow many cats are in the drawing?\n",
                                       encoding="utf-8")
    fetched = []
    monkeypatch.setattr(dc, "PACKAGE_LIST", package_list)
    monkeypatch.setattr(dc, "fetch_packages", lambda packages, cache: fetched.append((packages, cache))
                        or {"gbrainy": root})
    out = tmp_path / "out"

    assert dc.extract_dialogue(out, [everyday], cache=tmp_path / "cache") == {"train": 1, "gbrainy": 1}

    assert fetched == [(["gbrainy"], tmp_path / "cache")]
    assert (out / "train.es").read_text(encoding="utf-8") == "¿Cuál de las siguientes palabras no pertenece al grupo?\n"
    assert (out / "train.en").read_text(encoding="utf-8").splitlines() == [
        "Which of the following words does not belong with the others?"]
    assert (out / "train.ids").read_text() == "gbrainy/gbrainy\n"
    assert (out / "dev.es").read_text() == "" and (out / "dev.en").read_text() == ""
    card = (out / "DATA_CARD.md").read_text(encoding="utf-8")
    assert "dropped held_out 1; 1 kept." in card and f"`{everyday}`" in card
    assert "| gbrainy | 1:2.4.6-1 | 1 | 2 | 1 | held_out 1 |" in card
    assert "`gbrainy`: GPL-2+" in card and "accents are often missing" in card
    assert json.loads((out / "counts.json").read_text())["packages"]["gbrainy"]["train"] == 1
    assert json.loads((out / "packages.json").read_text()) == [
        {"package": "gbrainy", "version": "1:2.4.6-1", "licence": "GPL-2+"}]


def test_a_copyright_file_in_prose_is_read_for_its_gpl_grant(tmp_path):
    path = tmp_path / "usr/share/doc/wesnoth-1.16-httt/copyright"
    path.parent.mkdir(parents=True)
    path.write_text("Upstream Author: David White\n\nLicense:\n        Copyright (C) 2003 - 2007 by David White\n\n"
                    "        it under the terms of the GNU General Public License version 2\n"
                    "        or at your option any later version.\n", encoding="utf-8")
    assert dc.licence(tmp_path, "wesnoth-1.16-httt") == "GPL-2+ (stated in the copyright file's text)"
    write_copyright(tmp_path, "gbrainy", "GPL-2+")
    assert dc.licence(tmp_path, "gbrainy") == "GPL-2+"
    assert dc.licence(tmp_path, "absent") == "unknown (no copyright file)"


def test_a_missing_held_out_set_is_refused(tmp_path):
    with pytest.raises(SystemExit):
        dc.extract_dialogue(tmp_path / "out", [tmp_path / "missing"])


def test_the_committed_package_list_and_exclusions():
    from attnmt.model.data.gettext import read_package_list
    packages = read_package_list(dc.PACKAGE_LIST)
    assert {"wesnoth-1.16-data", "wesnoth-1.16-httt", "freedroidrpg-data", "widelands-data", "gbrainy"} <= set(packages)
    assert len(packages) == len(set(packages))
    assert "wesnoth-httt" not in dc.EXCLUDED_CATALOGS and "wesnoth-tutorial" not in dc.EXCLUDED_CATALOGS
