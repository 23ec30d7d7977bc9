"""The third domain's corpora on small inputs written here: the Gale–Church aligner, the
filters, the held-out removal, the help-page readers, back-translation (with a stand-in
for Apertium) and the CLDR phrases. No network, no apt."""

from collections import Counter
from pathlib import Path

import pytest

from attnmt.model.data import backtranslation as bt
from attnmt.model.data import filters as cf
from attnmt.model.data import prose as pc
from attnmt.model.data.sentence_align import align_sentences, gale_church, match_cost

# --- Gale–Church ---------------------------------------------------------------------------

def kinds(source_lengths, target_lengths, ratio=1.0):
    return [b.kind for b in gale_church(source_lengths, target_lengths, ratio)]


def test_equal_lengths_align_one_to_one():
    assert kinds([40, 80, 25], [42, 77, 27]) == [(1, 1), (1, 1), (1, 1)]


def test_a_sentence_split_in_two_is_a_two_to_one_bead():
    # The Spanish says in two sentences what the English says in one, and the other way round.
    assert kinds([60, 55, 30], [118, 31]) == [(2, 1), (1, 1)]
    assert kinds([30, 118], [31, 60, 55]) == [(1, 1), (1, 2)]


def test_beads_cover_both_sides_once_in_order():
    import random
    rng = random.Random(7)
    for _ in range(50):
        source = [rng.randrange(5, 200) for _ in range(rng.randrange(0, 7))]
        target = [rng.randrange(5, 200) for _ in range(rng.randrange(0, 7))]
        beads = gale_church(source, target)
        assert [(b.s0, b.t0) for b in beads[1:]] == [(b.s1, b.t1) for b in beads[:-1]]
        assert (beads[-1].s1, beads[-1].t1) == (len(source), len(target)) if beads else not source and not target


def test_a_sentence_without_counterpart_is_dropped():
    assert kinds([50], []) == [(1, 0)] and kinds([], [40]) == [(0, 1)]
    # A short extra sentence is merged with its neighbour rather than deleted: a 1-0 bead costs its
    # prior (0.0099) and a length mismatch as large as the whole sentence.
    assert kinds([80, 12, 90], [82, 88]) == [(2, 1), (1, 1)]
    assert align_sentences(["Uno.", "Dos."], []) == []


def test_the_ratio_calibrates_expected_lengths():
    # English about 0.86 of the Spanish: with that ratio, 100 ↔ 86 is a perfect match.
    assert match_cost(100, 86, ratio=0.86) < match_cost(100, 86, ratio=1.0)
    assert match_cost(0, 0) == 0.0
    assert match_cost(50, 50) < match_cost(50, 150)


def test_align_sentences_joins_merged_beads_and_drops_the_rest():
    source = ["Abra el menú.", "Elija Guardar y escriba un nombre para el documento nuevo.", "Pulse Aceptar."]
    target = ["Open the menu.", "Choose Save and type a name for the new document.", "Click OK."]
    assert align_sentences(source, target) == list(zip(source, target))
    merged = align_sentences(["Abra el menú de archivo ahora mismo.", "Elija Guardar como, por favor."],
                             ["Open the File menu right now and choose Save As, please."])
    assert merged == [("Abra el menú de archivo ahora mismo. Elija Guardar como, por favor.",
                       "Open the File menu right now and choose Save As, please.")]
    assert align_sentences(["Hola."], ["A much longer English sentence here."]) == [
        ("Hola.", "A much longer English sentence here.")]          # one sentence a side: no search


# --- filters and held-out sets --------------------------------------------------------------

@pytest.mark.parametrize("source, target, reason", [
    ("Pulse Aceptar para cerrar el diálogo.", "Click OK to close the dialog.", None),
    ("Click OK to close the dialog.", "Click OK to close the dialog.", "untranslated"),
    ("click ok", "Click OK", "untranslated"),                                  # case-folded
    ("Click OK to close the dialog and return to the document.", "Press OK to close the dialog.",
     "spanish_side_english"),                                                # a PO fallback, reworded
    ("1.2.3", "1.2.3 ", "letterless"),
    ("", "Something", "empty"),
    ("Sí.", "Yes, it is the case that this is very much longer than the source.", "length_ratio"),
    ("Sí.", "Yes.", None),                                                    # short pairs escape the ratio
    ("a" * 301, "b", "too_long"),
])
def test_reject_reason(source, target, reason):
    assert cf.reject_reason(source, target) == reason


def test_looks_english_needs_english_function_words_to_outnumber_spanish_ones():
    assert cf.looks_english("Select the cell and press Enter to confirm the value.")
    assert not cf.looks_english("Seleccione la celda y pulse Intro para confirmar el valor.")
    assert not cf.looks_english("LibreOffice Calc")                 # names are not evidence
    assert not cf.looks_english("El archivo de la hoja se abre con Open the file en inglés.")


def test_filter_pairs_normalises_and_counts_reasons():
    dropped = Counter()
    kept = cf.filter_pairs([("Hola  mundo. ", "Hello world."), ("x", "x"), ("123", "123")], dropped)
    assert kept == [("Hola mundo.", "Hello world.")]
    assert dropped == {"letterless": 1, "untranslated": 1}


def test_held_out_keys_read_tsv_and_split_files_and_refuse_a_missing_set(tmp_path):
    everyday = tmp_path / "everyday"
    everyday.mkdir()
    (everyday / "dev.tsv").write_text("¿Dónde está la estación?\tWhere is the station?\n", encoding="utf-8")
    bible = tmp_path / "bible"
    bible.mkdir()
    for split in ("dev", "test"):
        (bible / f"{split}.es").write_text(f"Verso de {split}.\n", encoding="utf-8")
        (bible / f"{split}.en").write_text(f"Verse of {split}.\n", encoding="utf-8")
    keys = cf.held_out_keys([everyday, bible])
    assert {"¿dónde está la estación?", "where is the station?", "verso de test.", "verse of dev."} <= keys
    with pytest.raises(SystemExit):
        cf.held_out_keys([tmp_path / "missing"])


def test_remove_leaks_keeps_test_and_dev_apart_from_train():
    per_split = {
        "test": [("t", "Pulse Aceptar.", "Click OK."), ("t", "Pulse Aceptar.", "Press OK.")],
        "dev": [("d", "Pulse Aceptar.", "Click OK."), ("d", "Abra el menú.", "Open the menu.")],
        "train": [("a", "Abra el menú.", "Open the menu."), ("a", "Cierre la ventana.", "Close the window."),
                  ("a", "Cierre la ventana.", "Close the window."), ("a", "Hace sol.", "It is sunny."),
                  ("a", "Otra frase.", "Click OK.")],
    }
    splits, removed = pc.remove_leaks(per_split, held_out={"hace sol."})
    assert [s for _, s, _ in splits["test"]] == ["Pulse Aceptar."]          # unique sources
    assert [s for _, s, _ in splits["dev"]] == ["Abra el menú."]
    assert [s for _, s, _ in splits["train"]] == ["Cierre la ventana."]
    assert removed == {"duplicates": 2, "dev_in_own_test": 1, "train_in_own_dev_test": 2,
                       "train_in_held_out_sets": 1}


def test_pages_are_split_whole_and_reproducibly():
    pages = [f"libreoffice/text/swriter/page{i}.html" for i in range(2000)]
    splits = Counter(pc.split_of(p) for p in pages)
    assert 40 < splits["test"] < 130 and 40 < splits["dev"] < 130
    assert [pc.split_of(p) for p in pages[:50]] == [pc.split_of(p) for p in pages[:50]]


# --- the help pages ------------------------------------------------------------------------

PAGE = """<html><body><div id="DisplayArea">
<h1 id="hd_id1">{title}</h1>
<p id="par_id2" class="paragraph">{go} <span class="switchinline"><span hidden="true" class="MAC">{mac}</span>
<span hidden="true" id="default1">{menu}</span></span>.</p>
<div class="bascode"><p id="par_id3">Sub Main</p></div>
<p id="par_id4">{only}</p>
</div></body></html>"""


def write_help(root: Path, lang: str, **text) -> None:
    page = root / "usr/share/libreoffice/help" / lang / "text/swriter/guide.html"
    page.parent.mkdir(parents=True)
    page.write_text(PAGE.format(**text), encoding="utf-8")


def test_libreoffice_pages_pair_by_id_without_mac_variants_or_code(tmp_path):
    write_help(tmp_path / "es", "es", title="Guardar un documento", go="Vaya a", mac="LibreOffice ▸ Preferencias",
               menu="Herramientas ▸ Opciones", only="Solo en español")
    write_help(tmp_path / "en", "en-US", title="Saving a document", go="Choose", mac="LibreOffice - Preferences",
               menu="Tools - Options", only="Only in English")
    pairs = list(pc.libreoffice_paragraphs(tmp_path / "es", tmp_path / "en"))
    assert pairs[:2] == [("libreoffice/text/swriter/guide.html", "Guardar un documento", "Saving a document"),
                         ("libreoffice/text/swriter/guide.html", "Vaya a Herramientas ▸ Opciones.",
                          "Choose Tools - Options.")]
    assert all("Sub Main" not in es for _, es, _ in pairs)


MALLARD = """<page xmlns="http://projectmallard.org/1.0/" id="p"><info><desc>{desc}</desc>
<credit><name>Someone</name></credit></info><title>{title}</title>{body}</page>"""


def test_gnome_pages_pair_only_when_the_block_sequence_agrees(tmp_path):
    for lang, desc, title, body in (
            ("C", "Connect to the Internet.", "Connect", "<p>Open the <gui>menu</gui>.</p>"),
            ("es", "Conectarse a Internet.", "Conectar", "<p>Abra el <gui>menú</gui>.</p>")):
        for page, extra in (("same", ""), ("differs", "<p>One more.</p>" if lang == "C" else "")):
            path = tmp_path / "usr/share/help" / lang / "gnome-help" / f"{page}.page"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(MALLARD.format(desc=desc, title=title, body=body + extra), encoding="utf-8")
    stats = Counter()
    pairs = list(pc.gnome_paragraphs(tmp_path, stats))
    assert pairs == [("gnome/gnome-help/same", "Conectarse a Internet.", "Connect to the Internet."),
                     ("gnome/gnome-help/same", "Conectar", "Connect"),
                     ("gnome/gnome-help/same", "Abra el menú.", "Open the menu.")]
    assert stats == {"gnome_pages_paired": 1, "gnome_pages_structure_differs": 1}


def test_menu_arrows_do_not_end_a_sentence():
    assert pc.split_sentences("Vaya a Herramientas ▸ Opciones. Pulse Aceptar.", "es") == [
        "Vaya a Herramientas ▸ Opciones.", "Pulse Aceptar."]


def test_build_corpus_counts_every_stage():
    paragraphs = [("libreoffice/a.html", "Abra el archivo. Guarde los cambios.", "Open the file. Save the changes."),
                  ("libreoffice/a.html", "Same text", "Same text"),
                  ("libreoffice/b.html", "Hace sol.", "It is sunny.")]
    splits, counts = pc.build_corpus(paragraphs, held_out={"hace sol."})
    assert counts["paragraph_pairs"] == 3 and counts["paragraphs_dropped"] == {"untranslated": 1}
    assert counts["sentences"]["aligned_pairs"] == 3
    assert sum(counts[s] for s in ("train", "dev", "test")) == sum(len(v) for v in splits.values())


# --- back-translation ----------------------------------------------------------------------

def test_synthetic_sources_drop_unknown_common_words_and_read_like_spanish():
    assert bt.synthetic_source("Quién es la visita ?", "Who is the caller?") == ("¿Quién es la visita?", None)
    assert bt.synthetic_source("llegó tarde .", "He arrived late.") == ("Llegó tarde.", None)
    assert bt.synthetic_source("*Smith llegó", "Smith came") == ("Smith llegó", None)       # a name
    assert bt.synthetic_source("Ella *choked", "She choked") == (None, "apertium_unknown_word")
    assert bt.synthetic_source("El #ir", "The going") == (None, "apertium_failure")


def test_fortunes_lose_attributions_and_offensive_entries(tmp_path):
    path = tmp_path / "usr/share/games/fortunes/food"
    path.parent.mkdir(parents=True)
    path.write_text("Never eat more than you can lift.\n\t\t-- Miss Piggy\n%\nThis one is about sex, so it goes.\n"
                    "%\nA cook plans dinner. The guests arrive late.\n%\n", encoding="utf-8")
    assert [s for _, s in bt.fortunes(tmp_path, "food")] == [
        "Never eat more than you can lift.", "A cook plans dinner.", "The guests arrive late."]


def test_build_pairs_tags_the_synthetic_side_and_removes_held_out_sentences():
    english = [("wordnet/noun", "The cat sat on the mat."), ("wordnet/noun", "The cat sat on the mat."),
               ("fortunes/food", "Where is the nearest train station?"), ("wordnet/verb", "Too short"),
               ("fortunes/food", "She choked with emotion.")]
    fake = {"The cat sat on the mat.": "El gato se sentó en la estera.", "She choked with emotion.": "Ella *choked."}
    rows, counts = bt.build_pairs(english, held_out={"where is the nearest train station?"},
                                  translate=lambda sentences: [fake[s] for s in sentences])
    assert rows == [("wordnet/noun", "<bt> El gato se sentó en la estera.", "The cat sat on the mat.")]
    assert counts["english_dropped"] == {"duplicate": 1, "held_out": 1, "length": 1}
    assert counts["pairs_dropped"] == {"apertium_unknown_word": 1}


def test_wordnet_examples_become_sentences(tmp_path):
    data = tmp_path / "usr/share/wordnet"
    data.mkdir(parents=True)
    (data / "data.verb").write_text(
        "  1 This software and database is being provided\n"
        '00002724 29 v 01 choke 0 | breathe with great difficulty; "she choked with emotion when she spoke"; '
        '"a good man"\n', encoding="utf-8")
    for name in ("data.noun", "data.adj", "data.adv"):
        (data / name).write_text("", encoding="utf-8")
    assert list(bt.wordnet_examples(tmp_path)) == [("wordnet/verb", "She choked with emotion when she spoke."),
                                                   ("wordnet/verb", "A good man")]


# --- CLDR ---------------------------------------------------------------------------------

def test_cldr_patterns_pair_plural_categories(tmp_path):
    pytest.importorskip("babel")
    import random

    from attnmt.model.data import cldr as cldr_corpus
    es, en = cldr_corpus._locales()
    rows = cldr_corpus.filled_patterns(es, en, random.Random(1))
    assert ("relative", "dentro de 1 día", "in 1 day") in rows
    assert any(kind == "relative" and s.startswith("hace ") and t.endswith(" days ago") for kind, s, t in rows)
    assert ("weekday", "lunes", "Monday") in cldr_corpus.names(es, en)
