"""The school corpus: a .qm and an .rcc written byte by byte as Qt lays them out, a Tux Paint
stamps directory, every filter's reason counted, held-out sentences removed and the card
written. No network, no apt."""

import json
import struct
import zlib
from pathlib import Path

import pytest

from attnmt.model.data import school as sc
from attnmt.model.data.gettext import leak_key


def qm_bytes(messages: list[tuple[str, str, list[str]]]) -> bytes:
    """A .qm as lrelease writes it: magic, a language section, the message records (translations
    UTF-16BE, then source text and context UTF-8, then End); a message with "" source has none."""
    records = bytearray()
    for context, source, translations in messages:
        for translation in translations:
            text = translation.encode("utf-16-be")
            records += b"\x03" + struct.pack(">I", len(text)) + text
        for tag, text in ((0x06, source), (0x07, context)):
            if text:
                records += bytes([tag]) + struct.pack(">I", len(text.encode())) + text.encode()
        records += b"\x01"
    return (sc.QM_MAGIC + b"\xa7" + struct.pack(">I", 2) + b"es"
            + b"\x69" + struct.pack(">I", len(records)) + bytes(records))


def rcc_bytes(files: dict[str, bytes]) -> bytes:
    """A version-3 .rcc: a tree of 22-byte nodes (a directory's children consecutive), zlib payloads
    each after a 4-byte plain size, and UTF-16BE names."""
    root: dict = {}
    for path, data in files.items():
        *folders, name = path.strip("/").split("/")
        node = root
        for folder in folders:
            node = node.setdefault(folder, {})
        node[name] = data
    nodes: list[bytes] = [b""]
    payloads, names = bytearray(), bytearray()
    queue = [(0, "", root)]
    while queue:
        index, name, entry = queue.pop(0)
        offset = len(names)
        names += struct.pack(">HI", len(name), 0) + name.encode("utf-16-be")
        if isinstance(entry, dict):
            first = len(nodes)
            nodes += [b""] * len(entry)
            nodes[index] = struct.pack(">IHII", offset, 0x02, len(entry), first) + bytes(8)
            queue += [(first + k, child, value) for k, (child, value) in enumerate(sorted(entry.items()))]
        else:
            body = struct.pack(">I", len(entry)) + zlib.compress(entry)
            nodes[index] = struct.pack(">IHHHI", offset, 0x01, 0, 0, len(payloads)) + bytes(8)
            payloads += struct.pack(">I", len(body)) + body
    tree = b"".join(nodes)
    return (b"qres" + struct.pack(">IIIII", 3, 24, 24 + len(tree), 24 + len(tree) + len(payloads), 0)
            + tree + payloads + names)


def write_gcompris(root: Path, messages: list[tuple[str, str, list[str]]], words: dict[str, tuple[str, str]],
                   english_plurals: list[tuple[str, str, list[str]]] = ()) -> None:
    translations = root / sc.GCOMPRIS_ROOT / "translations"
    translations.mkdir(parents=True)
    (translations / "gcompris_es.qm").write_bytes(qm_bytes(messages))
    (translations / "gcompris_en.qm").write_bytes(qm_bytes(list(english_plurals)))
    bundle = root / sc.GCOMPRIS_ROOT / "rcc/lang.rcc"
    bundle.parent.mkdir(parents=True)
    bundle.write_bytes(rcc_bytes({sc.LANG_WORDS.format(lang): json.dumps(
        {voice: pair[i] for voice, pair in words.items()}).encode() for i, lang in enumerate(("es", "en"))}))


def write_stamps(root: Path, stamps: dict[str, str]) -> None:
    for name, text in stamps.items():
        path = root / sc.STAMPS / f"{name}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def write_copyright(root: Path, package: str, text: str) -> None:
    path = root / "usr/share/doc" / package / "copyright"
    path.parent.mkdir(parents=True)
    path.write_text("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n" + text,
                    encoding="utf-8")


def test_read_qm_keeps_utf8_sources_contexts_and_plural_forms(tmp_path):
    path = tmp_path / "gcompris_es.qm"
    path.write_bytes(qm_bytes([("Sudoku", "5×5 grids, Easy.", ["Cuadrículas de 5×5, fácil."]),
                               ("tutorial4", "", ["0 a 255 con"]),                 # no source text: skipped
                               ("Clockgame", "%n hour(s)", ["%n hora", "%n horas"])]))
    assert sc.read_qm(path) == [("Sudoku", "5×5 grids, Easy.", ["Cuadrículas de 5×5, fácil."]),
                                ("Clockgame", "%n hour(s)", ["%n hora", "%n horas"])]
    path.write_bytes(b"not a qm file at all")
    with pytest.raises(ValueError):
        sc.read_qm(path)


def test_read_rcc_finds_a_file_by_its_path(tmp_path):
    path = tmp_path / "lang.rcc"
    path.write_bytes(rcc_bytes({"/gcompris/src/lang/content-es.json": b'{"cat.ogg": "gato"}',
                                "/gcompris/src/lang/content-en.json": b'{"cat.ogg": "cat"}',
                                "/gcompris/src/other.qml": b"Item {}"}))
    assert sc.read_rcc(path, "/gcompris/src/lang/content-es.json") == b'{"cat.ogg": "gato"}'
    assert sc.read_rcc(path, "gcompris/src/other.qml") == b"Item {}"
    with pytest.raises(KeyError):
        sc.read_rcc(path, "/gcompris/src/lang/content-fr.json")


@pytest.mark.parametrize("source, target, reason", [
    ("Arrastra las frutas a la cesta.", "Drag the fruits into the basket.", None),
    ("Un violín.", "A violin.", None),                                        # short: vocabulary, kept
    ("hueso", "bone", None),
    ("Portugal", "Portugal", "untranslated"),
    ("", "A wrapped gift.", "empty"),
    ("Drag the fruits into the basket with the mouse.", "Drag the fruits into the basket!", "spanish_side_english"),
    ("%1/%2", "%1/%2", "letterless"),
    ("El|perro|ladra.", "The|dog|barks.", "word_list"),
    ("azul;boca;casa;cena", "blue;best;good;area", "word_list"),
    ("El motor de ajedrez es p4wn &lt;https://github.com/p4wn&gt;.",      # entities' ";" are no list
     "The chess engine is p4wn &lt;https://github.com/p4wn&gt;.", None),
    ("<b>Motor</b>", "<b>Engine</b>", "markup"),
    ("Nivel %1", "Level %1", "markup"),
    ("Cuenta " + "las manzanas y las peras " * 15, "Count " + "the apples and the pears " * 15, "too_long"),
    ("Mayúsculas y minúsculas mezcladas", "Mixed Case", "length_ratio"),
])
def test_reject_reason(source, target, reason):
    assert sc.reject_reason(source, target) == reason


def test_short_pairs_are_vocabulary():
    assert sc.kind("Un violín.", "A violin.") == "vocabulary"
    assert sc.kind("Un racimo de uvas.", "A bunch of grapes.") == "sentences"             # four words a side
    assert sc.kind("Selecciona un tercio de la tarta.", "Select one-third of the pie.") == "sentences"


def test_build_corpus_reads_both_packages_filters_and_counts_every_reason(tmp_path):
    gcompris = tmp_path / "gcompris-qt-data"
    write_gcompris(gcompris, [
        ("money", "Tux just bought some items in your shop.\nHe gives you %1, please give back his change.",
         ["Tux acaba de comprar algunos artículos en tu tienda.\nTe ha dado %1. Por favor, dale el cambio."]),
        ("board5_0", "Portugal", ["Portugal"]),                                  # untranslated
        ("ChangeLog", "New activity Baby Tangram", ["Nueva actividad Tangram para bebés"]),   # excluded
        ("Dataset", "How many apples are there in the basket?", ["¿Cuántas manzanas hay en la cesta?"]),
        ("share", "Then split %n pieces of candy equally between them.",
         ["Ahora reparte %n caramelo entre ellos.", "Ahora reparte %n caramelos entre ellos."])],
        words={"bone.ogg": ("hueso", "bone"), "boy.ogg": ("niño", "boy")},
        english_plurals=[("share", "Then split %n pieces of candy equally between them.",
                          ["Then split %n candy between them.", "Then split %n candies between them."])])
    tuxpaint = tmp_path / "tuxpaint-stamps-default"
    write_stamps(tuxpaint, {"food/fruit/grapes": "A bunch of grapes.\nde.utf8=Eine Weintraube.\n"
                                                 "es.utf8=Un racimo de uvas.\n",
                            "people/boy": "boy\nes.utf8=niño\n",                     # GCompris' word again
                            "seasonal/present": "A wrapped gift.\nfr.utf8=Un cadeau.\n"})   # no Spanish

    rows, counts = sc.build_corpus({"gcompris-qt-data": gcompris, "tuxpaint-stamps-default": tuxpaint},
                                   held_out={leak_key("¿Cuántas manzanas  hay en la cesta?")})

    assert rows == [
        ("gcompris-qt-data/money", "Tux acaba de comprar algunos artículos en tu tienda.",
         "Tux just bought some items in your shop."),
        ("gcompris-qt-data/money", "Te ha dado %1. Por favor, dale el cambio.",
         "He gives you %1, please give back his change."),
        ("gcompris-qt-data/share", "Ahora reparte %n caramelo entre ellos.", "Then split %n candy between them."),
        ("gcompris-qt-data/share", "Ahora reparte %n caramelos entre ellos.", "Then split %n candies between them."),
        ("gcompris-qt-data/lang.rcc", "hueso", "bone"),
        ("gcompris-qt-data/lang.rcc", "niño", "boy"),
        ("tuxpaint-stamps-default/food/fruit/grapes", "Un racimo de uvas.", "A bunch of grapes.")]
    facts = counts["packages"]["gcompris-qt-data"]
    assert facts["contexts_excluded"] == ["ChangeLog"]
    assert facts["pairs"] == 8 and facts["train"] == 6
    assert facts["dropped"] == {"untranslated": 1, "held_out": 1}
    assert facts["sentences"] == 4 and facts["vocabulary"] == 2
    assert counts["packages"]["tuxpaint-stamps-default"]["dropped"] == {"duplicate": 1, "empty": 1}
    assert counts["dropped"] == {"untranslated": 1, "held_out": 1, "duplicate": 1, "empty": 1}
    assert counts["pairs"] == 11 and counts["train"] == 7
    assert counts["sentences"] == 5 and counts["vocabulary"] == 2


def test_extract_writes_a_train_split_a_card_and_counts(tmp_path, monkeypatch):
    roots = {"gcompris-qt-data": tmp_path / "cache/root/gcompris-qt-data_3.1-2_all",
             "tuxpaint-stamps-default": tmp_path / "cache/root/tuxpaint-stamps-default_2022.06.04-1_all"}
    write_gcompris(roots["gcompris-qt-data"], [
        ("Dataset", "How many apples are there in the basket?", ["¿Cuántas manzanas hay en la cesta?"]),
        ("Dataset", "Drag the fruits into the basket.", ["Arrastra las frutas a la cesta."])], words={})
    write_copyright(roots["gcompris-qt-data"], "gcompris-qt-data",
                    "Files: *\nCopyright: GCompris Developers\nLicense: GPL-3+\n\n"
                    "Files: images/*.svg\nCopyright: Timothée Giet\nLicense: CC-BY-SA-4.0\n")
    write_stamps(roots["tuxpaint-stamps-default"], {"hobbies/music/violin": "A violin.\nes.utf8=Un violín.\n"})
    write_copyright(roots["tuxpaint-stamps-default"], "tuxpaint-stamps-default",
                    "Files: *\nCopyright: Bill Kendrick\nLicense: GPL-2\n\nLicense: GPL-2\n"
                    " This package is free software; you can redistribute it under the terms of the GNU\n"
                    " General Public License, version 2, or (at your option) any later version.\n")
    everyday = tmp_path / "everyday"
    everyday.mkdir()
    (everyday / "test.tsv").write_text("¿Cuántas manzanas hay en la cesta?\tHow many apples are in the basket?\n",
                                       encoding="utf-8")
    fetched = []
    monkeypatch.setattr(sc, "fetch_packages", lambda packages, cache: fetched.append((packages, cache)) or roots)
    out = tmp_path / "out"

    assert sc.extract_school(out, [everyday], cache=tmp_path / "cache") == {
        "train": 2, "sentences": 1, "vocabulary": 1, "gcompris-qt-data": 1, "tuxpaint-stamps-default": 1}

    assert fetched == [(["gcompris-qt-data", "tuxpaint-stamps-default"], tmp_path / "cache")]
    assert (out / "train.es").read_text(encoding="utf-8").splitlines() == ["Arrastra las frutas a la cesta.",
                                                                           "Un violín."]
    assert (out / "train.en").read_text(encoding="utf-8").splitlines() == ["Drag the fruits into the basket.",
                                                                           "A violin."]
    assert (out / "train.ids").read_text().splitlines() == ["gcompris-qt-data/Dataset",
                                                            "tuxpaint-stamps-default/hobbies/music/violin"]
    assert (out / "dev.es").read_text() == "" and (out / "dev.en").read_text() == ""
    card = (out / "DATA_CARD.md").read_text(encoding="utf-8")
    assert "dropped held_out 1; 2 kept." in card and f"`{everyday}`" in card
    assert "| gcompris-qt-data | 3.1-2 | GPL-3+ | 2 | 1 | 1 | 0 | held_out 1 |" in card
    assert '`tuxpaint-stamps-default`: GPL-2 (its text adds "or any later version")' in card
    assert json.loads((out / "counts.json").read_text())["packages"]["tuxpaint-stamps-default"]["vocabulary"] == 1
    assert json.loads((out / "packages.json").read_text())[0] == {"package": "gcompris-qt-data", "version": "3.1-2",
                                                                  "licence": "GPL-3+"}


def test_the_licence_is_the_files_star_stanzas(tmp_path):
    write_copyright(tmp_path, "gcompris-qt-data", "Files: images/*\nLicense: public-domain\n\n"
                                                  "Files: *\nLicense: GPL-3+\n\nFiles: fonts/*\nLicense: OFL-1.1\n")
    assert sc.text_licence(tmp_path, "gcompris-qt-data") == "GPL-3+"
    assert sc.text_licence(tmp_path, "absent") == "unknown (no copyright file)"


def test_a_missing_held_out_set_is_refused(tmp_path):
    with pytest.raises(SystemExit):
        sc.extract_school(tmp_path / "out", [tmp_path / "missing"])
