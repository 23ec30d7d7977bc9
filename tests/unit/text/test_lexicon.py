"""The lexicon of words a model never learnt (service/text/lexicon.py, model/data/lexicon.py):
which words of a sentence it translates, its file, the forms read from Apertium's dictionary,
and, where Apertium is installed, a lexicon built from it."""

from __future__ import annotations

import gzip
import json
import shutil

import numpy as np
import pytest

from attnmt.bench.lexicon import fit_lexicon, rare_known
from attnmt.bench.names import fit_names
from attnmt.model.data import lexicon as built
from attnmt.model.export.measured import write_names
from attnmt.service.cli import main
from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import SearchOptions
from attnmt.service.server.settings import BUNDLED_TRANSFORMER
from attnmt.service.text.lexicon import Lexicon, agreement, read_genders, read_lexicon, write_genders, write_lexicon
from attnmt.service.text.translator import Hypothesis, Translation, Translator


def test_words_in_small_letters_as_whole_tokens_each_once():
    lexicon = Lexicon({"libia": "Libyan", "perdedores": "losers", "ascii": "ascii"})
    assert lexicon.find("Libia tiene perdedores; la rebelión libia, (perdedores) y ASCII/ansi ascii/ANSI") == [
        "perdedores", "libia"]                   # "Libia" is the country's name; "ascii/ANSI" a token of its own


def test_the_translation_replaces_the_aligned_words_and_a_dropped_word_stays_dropped():
    alpha = np.array([[0.8, 0.1, 0.05, 0.05], [0.1, 0.8, 0.05, 0.05], [0.1, 0.1, 0.7, 0.1], [0.1, 0.1, 0.1, 0.7]])
    hyp = Hypothesis("its perdestors .", ["▁its", "▁perdestors", "▁.", "</s>"], [-0.1] * 4, -0.4, -0.1, alpha,
                     ["▁sus", "▁perdedores", "▁.", "</s>"])
    done = Lexicon({"perdedores": "losers"}).apply(Translation("sus perdedores .", hyp.source_tokens, [hyp])).best
    assert done.text == "its losers ." and done.glossary == []          # not a request glossary's term
    dropped = Hypothesis("its .", ["▁its", "▁.", "</s>"], [-0.1] * 3, -0.3, -0.1, alpha[[0, 2, 3]],
                         ["▁sus", "▁perdedores", "▁.", "</s>"])
    assert Lexicon({"perdedores": "losers"}).apply(Translation("sus perdedores .", dropped.source_tokens,
                                                               [dropped])).best is dropped


def test_the_file_reads_back_and_is_reproducible(tmp_path):
    entries = {"roedores": "rodents", "birmana": "Burmese", "semáforo": "traffic light", "obese": "obeso"}
    forms = {"obese": ("obeso", "obesa", "obesos", "obesas")}
    write_lexicon(tmp_path / "a.tsv.gz", entries, forms)
    write_lexicon(tmp_path / "b.tsv.gz", dict(reversed(entries.items())), forms)
    assert read_lexicon(tmp_path / "a.tsv.gz") == (entries, forms)
    assert (tmp_path / "a.tsv.gz").read_bytes() == (tmp_path / "b.tsv.gz").read_bytes()
    write_lexicon(tmp_path / "c.tsv.gz", {"gato": "cat"})            # a lexicon without forms reads as before
    assert read_lexicon(tmp_path / "c.tsv.gz") == ({"gato": "cat"}, {})
    with gzip.open(tmp_path / "d.tsv.gz", "wt", encoding="utf-8") as f:   # forms that are not four: ignored
        f.write("obese\tobeso\tobeso obesa\nhappy\tfeliz\tfeliz feliz felices felices\n")
    assert read_lexicon(tmp_path / "d.tsv.gz") == ({"obese": "obeso", "happy": "feliz"},
                                                   {"happy": ("feliz", "feliz", "felices", "felices")})
    write_genders(tmp_path / "g.tsv.gz", {"lujo": ("m", ""), "conquista": ("f", "vblex")})
    assert read_genders(tmp_path / "g.tsv.gz") == {"lujo": ("m", ""), "conquista": ("f", "vblex")}


def test_the_lexicon_s_noun_brings_its_determiner():
    # el concurs o </s> (rows) x the conquest </s>
    alpha = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]])
    hyp = Hypothesis("el concurso", ["▁el", "▁concurs", "o", "</s>"], [-0.1] * 4, -0.4, -0.1, alpha,
                     ["▁the", "▁conquest", "</s>"])
    translation = Translation("the conquest", hyp.source_tokens, [hyp])
    assert Lexicon({"conquest": "conquista"}).apply(translation).best.text == "el conquista"
    done = Lexicon({"conquest": "conquista"}, genders={"conquista": ("f", "vblex")}).apply(translation).best
    assert done.text == "la conquista" and done.word_alignment[0].argmax() == 0
    # and where the model wrote no word of the lexicon's, the determiners before other nouns
    own = Hypothesis("un bomba", ["▁un", "▁bomba", "</s>"], [-0.1] * 3, -0.3, -0.1, alpha[[0, 1, 3]],
                     ["▁a", "▁bomb", "</s>"])
    assert Lexicon({"conquest": "conquista"}, genders={"bomba": ("f", "vblex")}).apply(
        Translation("a bomb", own.source_tokens, [own])).best.text == "una bomba"


def test_a_spanish_adjective_agrees_with_the_determiner_or_the_word_before_it():
    assert agreement("Como muestra los niños".split()) == 2
    assert agreement("su protección".split()) == 1 and agreement("la protección de la".split()) == 1
    assert agreement("el 19% de los niños de".split()) == 2            # the nearest determiner of the last three
    assert agreement("unas casas".split()) == 3 and agreement("casas".split()) == 3
    assert agreement("hay dos gatos".split()) == 2 and agreement("el perro".split()) == 0
    assert agreement([]) == 0 and agreement("con".split()) == 0        # nothing to agree with: as translated


def test_the_lexicon_writes_the_agreeing_form_and_keeps_its_alignment():
    alpha = np.array([[0.8, 0.1, 0.05, 0.05], [0.1, 0.1, 0.7, 0.1], [0.1, 0.8, 0.05, 0.05], [0.1, 0.1, 0.1, 0.7]])
    hyp = Hypothesis("los niños obes", ["▁los", "▁niños", "▁obes", "</s>"], [-0.1] * 4, -0.4, -0.1, alpha,
                     ["▁the", "▁obese", "▁children", "</s>"])
    lexicon = Lexicon({"obese": "obeso"}, {"obese": ("obeso", "obesa", "obesos", "obesas")})
    done = lexicon.apply(Translation("the obese children", hyp.source_tokens, [hyp])).best
    assert done.text == "los niños obesos"
    assert done.word_alignment[2].argmax() == 1          # still aligned to "obese"
    assert Lexicon({"obese": "obeso"}).apply(Translation("the obese children", hyp.source_tokens,
                                                         [hyp])).best.text == "los niños obeso"


def test_the_forms_asked_of_the_generator():
    paths = [("roedor<n><m>", "rodent<n>"), ("felino<adj>", "feline<adj>"), ("estudiante<n><mf>", "student<n>"),
             ("delimitar<vblex>", "delimit<vblex>"), ("Madrid<np><loc>", "Madrid<np>"), ("cola<n>", "tail<n>"),
             ("roedor<n><m>", "gnawer<n>")]
    assert built.source_units(paths, "es") == [
        "roedor<n><m><sg>", "roedor<n><m><pl>", "felino<adj><m><sg>", "felino<adj><m><pl>", "felino<adj><f><sg>",
        "felino<adj><f><pl>", "estudiante<n><mf><sg>", "estudiante<n><mf><pl>"]   # verbs, names, no gender: out
    assert built.source_units([("rodent<n>", "roedor<n><m>"), ("feline<adj>", "felino<adj>")], "en") == [
        "rodent<n><sg>", "rodent<n><pl>", "feline<adj>"]


def test_names_the_other_language_spells_otherwise_and_the_model_does_not_know():
    paths = [("Camerún<np><loc>", "Cameroon<np><loc>"), ("Madrid<np><loc>", "Madrid<np><loc>"),
             ("Túnez<np><loc>", "Tunisia<np><loc>"), ("Berna<np><loc>", "Berne<np><loc>"),
             ("Berna<np><loc>", "Bern<np><loc>"), ("Hispanoamérica<np><loc>", "Latin America<np><loc>"),
             ("camerún<n><m>", "cameroon<n>"), ("Nueva York<np><loc>", "New York<np><loc>")]
    assert built.exonyms(paths, frozenset({"Túnez"})) == {"Camerún": "Cameroon", "Hispanoamérica": "Latin America"}


def test_acronyms_the_other_language_writes_otherwise_where_the_training_target_writes_them():
    paths = [("OTAN<n><acr><f>", "NATO<n><acr>"), ("ONU<n><acr><f>", "UN<n><acr>"),
             ("UVI<n><acr><f>", "ICU<n><acr>"), ("FMI<n><acr><m>", "FMI<n><acr>"), ("PNV<n><acr><m>", "PNB<n><acr>"),
             ("EEUU<np><loc><m><pl>", "U.S.<np><loc>"), ("NATO<n><acr>", "OTAN<n><acr><f>"), ("Nato<n><m>", "nato<n>"),
             ("OMS<n><acr><f>", "WHO<n><acr>"), ("OMS<n><acr><f>", "World Health Organization<np>")]
    counts = {"NATO": 40, "UN": 9, "ICU": 2, "PNB": 0, "U": 30, "S": 30, "OTAN": 7, "WHO": 12}
    # "ICU" and "PNB" the training target hardly writes; "FMI" the same in both; "OMS" two translations
    assert built.acronyms(paths, counts) == {"OTAN": ("NATO", ""), "ONU": ("UN", ""), "EEUU": ("U.S.", ""),
                                            "NATO": ("OTAN", "f")}


def test_a_sentence_in_capitals_keeps_its_acronyms_as_words():
    alpha = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]])
    hyp = Hypothesis("NATO dice", ["▁NATO", "▁dice", "</s>"], [-0.1] * 3, -0.3, -0.1, alpha, ["▁NATO", "▁says", "</s>"])
    lexicon = Lexicon({"NATO": "OTAN"})
    assert lexicon.apply(Translation("NATO says", hyp.source_tokens, [hyp])).best.text == "OTAN dice"
    assert lexicon.apply(Translation("NATO SAYS", hyp.source_tokens, [hyp]), capitals=True).best is hyp


def test_an_acronym_the_model_wrote_with_points_is_left_as_written():
    # la ONU dice </s> -> the U.N. says </s>: "UN" over "U.N" would leave "the UN. says"
    alpha = np.array([[0.8, 0.1, 0.05, 0.05], [0.1, 0.8, 0.05, 0.05], [0.1, 0.8, 0.05, 0.05],
                      [0.1, 0.8, 0.05, 0.05], [0.1, 0.8, 0.05, 0.05], [0.1, 0.1, 0.7, 0.1], [0.1, 0.1, 0.1, 0.7]])
    hyp = Hypothesis("the U.N. says", ["▁the", "▁U", ".", "N", ".", "▁says", "</s>"], [-0.1] * 7, -0.7, -0.1, alpha,
                     ["▁la", "▁ONU", "▁dice", "</s>"])
    assert Lexicon({"ONU": "UN"}).apply(Translation("la ONU dice", hyp.source_tokens, [hyp])).best.text == (
        "the U.N. says")
    copied = Hypothesis("the ONU says", ["▁the", "▁ONU", "▁says", "</s>"], [-0.1] * 4, -0.4, -0.1, alpha[[0, 1, 5, 6]],
                        ["▁la", "▁ONU", "▁dice", "</s>"])
    assert Lexicon({"ONU": "UN"}).apply(Translation("la ONU dice", copied.source_tokens, [copied])).best.text == (
        "the UN says")


def test_a_form_with_any_other_analysis_is_left_to_the_model():
    assert built.only("^roedores/roedor<n><m><pl>$")
    assert built.only("^felinos/felino<adj><m><pl>/felino<n><m><pl>$")
    assert not built.only("^cuidadas/cuidar<vblex><pp><f><pl>$")
    assert not built.only("^research/research<n><sg>/research<vblex><inf>$")
    assert not built.only("^pastoreo/*pastoreo$")


@pytest.mark.skipif(shutil.which("apertium") is None or shutil.which("lt-proc") is None,
                    reason="Apertium is not installed")
def test_apertium_translates_each_word_alone_in_its_own_case():
    assert built.translate_alone(["roedores", "birmana", "felinos", "pastoreo"], "es", "en") == [
        "rodents", "Burmese", "feline", ""]
    assert built.translate_alone(["napkin", "obese"], "en", "es") == ["servilleta", "obeso"]


@pytest.mark.skipif(shutil.which("lt-proc") is None or not (built.APERTIUM / "spa-eng.automorf.bin").exists(),
                    reason="Apertium's eng-spa is not installed")
def test_spanish_adjectives_get_their_four_forms_from_the_generator():
    words = ["obese", "happy", "green", "napkin"]
    analyses = dict(zip(words, built.analyse(words, built.APERTIUM / "eng-spa.automorf.bin")))
    forms = built.agreeing_forms({"obese": "obeso", "happy": "feliz", "green": "verde", "napkin": "servilleta"},
                                 analyses)
    # "green" is a noun too, and "napkin" only one: translated as they are
    assert forms == {"obese": ("obeso", "obesa", "obesos", "obesas"), "happy": ("feliz", "feliz", "felices", "felices")}


@pytest.mark.skipif(shutil.which("lt-proc") is None or not (built.APERTIUM / "spa-eng.automorf.bin").exists(),
                    reason="Apertium's eng-spa is not installed")
def test_spanish_nouns_get_their_gender_from_the_analyser():
    nouns = built.spanish_nouns(["lujo", "conquistas", "cuervo", "artista", "general", "correr", "xyzzy"])
    # "artista" is of both genders, "general" an adjective of both too, "correr" a verb, "xyzzy" unknown
    assert nouns == {"lujo": ("m", ""), "conquistas": ("f", "vblex"), "cuervo": ("m", "")}


def test_rare_words_leave_the_known_list_and_names_stay(tmp_path):
    corpus = tmp_path / "train.es"
    corpus.write_text("la casa es roja .\n" * 5 + "Madrid la casa .\n" * 20, encoding="utf-8")
    known = frozenset({"la", "casa", "es", "roja", "Madrid"})
    assert rare_known(known, corpus, [5, 10, 30]) == {
        5: known,
        10: frozenset({"la", "casa", "Madrid"}),      # "roja" and "es" seen 5 times: rare below 10
        30: frozenset({"Madrid"}),                    # a name is the known-words list's to judge
    }


def test_fit_lexicon_refuses_thresholds_without_a_corpus_or_below_one(tmp_path, capsys):
    given = ["fit-lexicon", "--model", str(tmp_path), "--data", str(tmp_path)]
    assert main([*given, "--rare-below", "10"]) == 2
    assert main([*given, "--corpus", str(tmp_path / "train.es"), "--rare-below", "0", "10"]) == 2
    assert "--rare-below needs --corpus" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("apertium") is None or shutil.which("lt-proc") is None,
                    reason="Apertium is not installed")
@pytest.mark.skipif(not (BUNDLED_TRANSFORMER / "manifest.json").exists(), reason="no bundled model")
def test_fit_names_then_fit_lexicon_write_their_files_and_dev_change(tmp_path):
    model = tmp_path / "model"
    shutil.copytree(BUNDLED_TRANSFORMER, model, ignore=shutil.ignore_patterns("eval"))
    data = tmp_path / "news"
    data.mkdir()
    (data / "dev.es").write_text("El estilista ha de tener una visión global.\nLa casa es roja.\n", encoding="utf-8")
    (data / "dev.en").write_text("A stylist needs a global vision.\nThe house is red.\n", encoding="utf-8")
    corpus = tmp_path / "train.es"
    corpus.write_text("la casa es roja .\n" * 5, encoding="utf-8")
    names = fit_names(model, corpus, [data])
    assert names["words"] == 4 and names["dev"]["news/dev"]["sentences"] == 2
    # a genders table an earlier fit left (as for a Spanish target): this English one has none
    write_genders(model / "genders.tsv.gz", {"casa": ("f", "")})
    write_names(model, json.loads((model / "manifest.json").read_text())["lexicon"], "lexicon", also=["genders.tsv.gz"])
    assert "genders.tsv.gz" in json.loads((model / "manifest.json").read_text())["files"]
    spec = fit_lexicon(model, [data], tmp_path / "cache", corpus=corpus, rare_below=[1, 10])
    # with 4 known words, nearly every noun and adjective form of the dictionary is in the lexicon; below
    # 10, "casa" (seen 5 times) and "roja" too
    entries = spec["candidate_entries"]
    assert entries["1"] > 30_000 and entries["10"] > entries["1"] and spec["source"]["pair"] == "spa-eng"
    assert spec["rare_below"] in (1, 10) and spec["entries"] == entries[str(spec["rare_below"])]
    assert set(spec["mean_chrf"]) == {"1", "10"} and "0.3 BLEU" in spec["rule"]
    assert spec["corpus"]["file"] == "train.es" and len(spec["corpus"]["sha256"]) == 64
    assert spec["dev"]["news/dev"]["changed"] >= 1, spec["dev"]
    assert spec["candidates"]["10"]["news/dev"]["changed"] >= spec["candidates"]["1"]["news/dev"]["changed"]
    manifest = json.loads((model / "manifest.json").read_text())
    assert manifest["lexicon"]["file"] == "lexicon.tsv.gz" and "lexicon.tsv.gz" in manifest["files"]
    assert "genders" not in spec and "genders.tsv.gz" not in manifest["files"]
    assert not (model / "genders.tsv.gz").exists()
    translator = Translator(Engine(model))
    assert translator.lexicon.entries["estilista"] == "stylist"
    assert "stylist" in translator.translate(["El estilista ha de tener una visión global."],
                                             SearchOptions(beam_size=5))[0].best.text
