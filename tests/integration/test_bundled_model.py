"""The models `make serve` serves: present, intact, better than the rule-based baseline, and the
default chosen by its rule (the Transformer replaces the RNNsearch only when it is better on
the Bible and software test sets and not worse on the everyday one)."""

import json
import subprocess

import pytest

from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import SearchOptions
from attnmt.service.modeldir.manifest import load_manifest
from attnmt.service.server.settings import (
    BUNDLED_MODEL,
    BUNDLED_MODELS,
    BUNDLED_TRANSFORMER,
    SERVED_BY_DEFAULT,
    Settings,
)
from attnmt.service.text.translator import Translator
from conftest import REPO

pytestmark = pytest.mark.skipif(not all((m / "manifest.json").exists() for m in BUNDLED_MODELS),
                                reason="no bundled models")
ARCHITECTURES = {BUNDLED_MODEL: "RNNsearch", BUNDLED_TRANSFORMER: "Transformer"}
MiB = 1024 * 1024


@pytest.fixture(scope="module", params=BUNDLED_MODELS, ids=lambda m: m.name)
def bundled(request):
    return Translator(Engine(request.param))      # verifies every checksum


def test_manifest_describes_a_spanish_english_model(bundled):
    m = bundled.engine.manifest
    assert (m.source_language, m.target_language, m.name) == ("es", "en", bundled.engine.model_dir.name)
    assert m.architecture == ARCHITECTURES[bundled.engine.model_dir]
    if m.architecture == "RNNsearch":
        assert m.dimensions["attention"] == "bahdanau"
    assert sum(f.bytes for f in m.files.values() if f.serving) < 30 * MiB
    parity = json.loads((bundled.engine.model_dir / "manifest.json").read_text())["export_parity"]
    assert (parity["log_probs"] <= 1e-4
            and parity["greedy_identical"].split("/")[0] == parity["greedy_identical"].split("/")[1])


def test_the_repository_stays_under_its_size_cap():
    """Three bundled models (two Spanish→English, one English→Spanish), and the tracked tree under
    60 MiB, so that a clone stays quick: their weights stored as int8 (`attnmt store-weights`, every
    test set within 0.3 BLEU of the float16 weights, docs/benchmarks.md), and no checkpoint.pt
    (never served) in the repository (.gitignore)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached"], cwd=REPO, capture_output=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    paths = [REPO / p for p in listed.stdout.decode().split("\0") if p]
    assert sum(p.stat().st_size for p in paths if p.is_file()) < 60 * MiB
    assert not [p for p in paths if p.name == "checkpoint.pt" and p.parent.parent.name == "models"]
    for model in SERVED_BY_DEFAULT:
        assert load_manifest(model, verify=False).weights_storage["format"] == "int8", model.name


def test_the_default_is_the_one_the_rule_chooses():
    """Both serve by name (English→Spanish beside them); the first of `models` is the default: the
    Transformer only if its recorded beam-5 BLEU and chrF are at least the RNNsearch's on the Bible
    and software test sets and its chrF not below on the everyday set, all measured through the
    serving engine."""
    assert Settings().models[:2] == list(BUNDLED_MODELS)
    rnn, transformer = (load_manifest(m, verify=False).evaluation for m in (BUNDLED_MODEL, BUNDLED_TRANSFORMER))
    better = all(transformer[c]["beam5"][metric] >= rnn[c]["beam5"][metric]
                 for c in ("bible/test", "gettext/test") for metric in ("bleu", "chrf"))
    not_worse = transformer["everyday/test"]["beam5"]["chrf"] >= rnn["everyday/test"]["beam5"]["chrf"]
    assert BUNDLED_MODELS[0] == (BUNDLED_TRANSFORMER if better and not_worse else BUNDLED_MODEL)


def test_translates_a_verse_with_its_alignment(bundled):
    hyp = bundled.translate(["Y dijo Dios: Sea la luz."], SearchOptions(beam_size=5))[0].best
    assert "God" in hyp.text and "light" in hyp.text
    words = hyp.source_words
    links = {(words[i], hyp.target_words[j]) for i, j in hyp.hard_alignment()}
    # words are whitespace-delimited, punctuation included ('Dios:'), as Pharaoh alignments are
    assert any(src.startswith("Dios") and tgt.startswith("God") for src, tgt in links)


def test_translates_a_software_message_keeping_its_placeholders(bundled):
    if not bundled.engine.manifest.placeholders:
        pytest.skip("the bundled model was trained without placeholder sentinels (Bible only)")
    hyp = bundled.translate(["No se puede abrir el archivo «%s»: %s"])[0].best
    assert hyp.text.count("%s") == 2 and "file" in hyp.text.lower()


def test_addresses_and_emoji_come_out_as_written(bundled):
    # spelt as words they came back changed: "https://jemplo.com/path", "play.perez@emplo.org", "⁇"
    sentence = "Visita https://ejemplo.com/ruta o escribe a juan.perez@ejemplo.org, me encanta 😀."
    text = bundled.translate([sentence])[0].best.text
    for kept in ("https://ejemplo.com/ruta", "juan.perez@ejemplo.org", "😀"):
        assert text.count(kept) == 1, text


def test_a_sentence_in_capitals_is_translated_as_in_ordinary_case_and_answered_in_capitals(bundled):
    # read as written, capitals are rare pieces: "LA CASA ES GRANDE." came back "THE CAST GRANDE."
    ordinary, capitals = bundled.translate(["No se puede abrir la casa %s.", "NO SE PUEDE ABRIR LA CASA %s."])
    assert capitals.best.text == ordinary.best.text.upper().replace("%S", "%s"), capitals.best.text
    assert capitals.best.text.count("%s") == 1
    hyp = capitals.best          # its words read as its text does, on both sides
    assert " ".join(w for w in hyp.target_words if w != "</s>") == hyp.text
    assert " ".join(w for w in hyp.source_words if w != "</s>") == "NO SE PUEDE ABRIR LA CASA %s."
    assert hyp.quality == ordinary.best.quality


def test_a_headline_in_title_case_is_read_as_in_ordinary_case(bundled):
    # read as written, every capitalised word is a rare one: "The Reunion Hashrounded To Monesday"
    ordinary, title = bundled.translate(["La casa de mi padre es muy grande.",
                                         "La Casa De Mi Padre Es Muy Grande."])
    assert title.best.text == ordinary.best.text, title.best.text
    assert " ".join(w for w in title.best.source_words if w != "</s>") == "La Casa De Mi Padre Es Muy Grande."


def test_numbers_come_back_whole_and_as_english_writes_them(bundled):
    hyp = bundled.translate(["Costó 2.500.000 pesos y 1.250,50 euros en 1979, un 3,2 % más."])[0].best
    # before, "2.500,000" and "1.250,50": the Spanish marks, half converted
    assert all(n in hyp.text for n in ("2,500,000", "1,250.50", "1979", "3.2%")), hyp.text
    assert "2.500.000" in hyp.source_words


def test_a_number_sent_alone_is_written_as_english_writes_it(bundled):
    # a cell or a string with no letters is copied, not translated; its numbers as in a sentence
    alone = bundled.translate(["3,2 %", "1.234,5", "%s: 17.000", "42", "!"])
    assert [t.best.text for t in alone] == ["3.2%", "1,234.5", "%s: 17,000", "42", "!"]
    for t in alone:
        best = t.best
        assert best.alignment.shape == (len(best.target_tokens), len(t.source_tokens))
        assert (best.alignment.sum(axis=1) == 1).all() and best.log_prob == 0 and best.hard_alignment()
    assert alone[3].best.target_tokens == alone[3].source_tokens         # nothing to write otherwise


@pytest.mark.parametrize("corpus", ["bible/test", "gettext/test"])
def test_recorded_test_scores_beat_apertium(bundled, corpus):
    recorded = bundled.engine.manifest.evaluation
    # models evaluated before there were two test sets recorded the Bible's as "test"
    evaluation = recorded.get(corpus) or (recorded.get("test") if corpus == "bible/test" else None)
    if not evaluation:
        pytest.skip(f"no {corpus} evaluation recorded in the manifest")
    apertium = evaluation["apertium"]            # measured in the same run, on the same sentences
    for label in ("greedy", "beam5"):
        assert evaluation[label]["bleu"] > apertium["bleu"], label
        if corpus == "bible/test":
            assert evaluation[label]["chrf"] > apertium["chrf"], label


GREEDY_BELOW = pytest.mark.xfail(strict=True, reason="not met yet with greedy search: on the software test "
                                 "set the RNNsearch's greedy chrF is below Apertium's (beam 5's is above, and the "
                                 "Transformer's greedy is above); strict, so this fails the suite the day it passes "
                                 "and the marker must go")


@pytest.mark.parametrize("model, label", [
    (BUNDLED_MODEL, "beam5"), pytest.param(BUNDLED_MODEL, "greedy", marks=GREEDY_BELOW),
    (BUNDLED_TRANSFORMER, "beam5"), (BUNDLED_TRANSFORMER, "greedy")], ids=lambda v: getattr(v, "name", v))
def test_recorded_software_chrf_beats_apertium(model, label):
    evaluation = load_manifest(model, verify=False).evaluation.get("gettext/test")
    if not evaluation:
        pytest.skip("no gettext/test evaluation recorded in the manifest")
    assert evaluation[label]["chrf"] > evaluation["apertium"]["chrf"], label
