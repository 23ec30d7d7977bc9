"""The model `make serve` serves: present, intact, and better than the rule-based baseline."""

import json

import pytest

from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import SearchOptions
from attnmt.service.server.settings import BUNDLED_MODEL
from attnmt.service.text.translator import Translator

pytestmark = pytest.mark.skipif(not (BUNDLED_MODEL / "manifest.json").exists(), reason="no bundled model")


@pytest.fixture(scope="module")
def bundled():
    return Translator(Engine(BUNDLED_MODEL))      # verifies every checksum


def test_manifest_describes_a_spanish_english_rnnsearch(bundled):
    m = bundled.engine.manifest
    assert (m.source_language, m.target_language, m.architecture) == ("es", "en", "RNNsearch")
    assert m.dimensions["attention"] == "bahdanau"
    assert sum(f.bytes for f in m.files.values()) < 30 * 1024 * 1024
    parity = json.loads((BUNDLED_MODEL / "manifest.json").read_text())["export_parity"]
    assert (parity["log_probs"] <= 1e-4
            and parity["greedy_identical"].split("/")[0] == parity["greedy_identical"].split("/")[1])


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
                                 "set the bundled model's greedy chrF is below Apertium's (beam 5's is above); "
                                 "strict, so this fails the suite the day it passes and the marker must go")


@pytest.mark.parametrize("label", ["beam5", pytest.param("greedy", marks=GREEDY_BELOW)])
def test_recorded_software_chrf_beats_apertium(bundled, label):
    evaluation = bundled.engine.manifest.evaluation.get("gettext/test")
    if not evaluation:
        pytest.skip("no gettext/test evaluation recorded in the manifest")
    assert evaluation[label]["chrf"] > evaluation["apertium"]["chrf"], label
