"""Quality estimation (service/text/quality.py), its fit (bench/quality_fit.py), and
the quality every hypothesis and every Align response carries over gRPC."""

from __future__ import annotations

import json
import shutil

import grpc
import numpy as np
import pytest

from attnmt.bench.quality_fit import auroc, fit_logistic, fit_quality, ranks, spearman
from attnmt.service.client import Client
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from attnmt.service.text.quality import DEFAULT_SUSPECT_BELOW, FEATURES, QualityModel, features
from conftest import RunningServer

SOURCE = ["▁kasa", "▁granda", "▁vidas", "▁peru", "▁.", "</s>"]
TARGET = ["▁the", "▁big", "▁house", "▁sees", "▁the", "▁do", "g", "▁.", "</s>"]


# --- features ---------------------------------------------------------------------

def test_uniform_attention_is_at_distance_zero_and_covers_everything():
    alpha = np.full((len(TARGET), len(SOURCE)), 1 / len(SOURCE))
    values, words = features([-0.5] * len(TARGET), alpha, SOURCE, TARGET)
    assert values["wass_to_unif"] == pytest.approx(0.0)
    assert values["uncovered"] == 0.0
    assert values["mean_log_prob"] == pytest.approx(-0.5)
    assert [w.pieces for w in words] == [1, 1, 1, 1, 1, 2, 1, 1]           # 'do' 'g' is one word of two pieces


def test_attention_stuck_on_eos_is_far_from_uniform_and_leaves_words_uncovered():
    alpha = np.zeros((len(TARGET), len(SOURCE)))
    alpha[:, -1] = 1.0                                                     # a detached decoder: everything on </s>
    values, _ = features([-0.5] * len(TARGET), alpha, SOURCE, TARGET)
    assert values["wass_to_unif"] == pytest.approx(1 - 1 / len(SOURCE))   # total variation to uniform
    assert values["uncovered"] == 1.0


def test_word_confidence_follows_bergamot():
    log_probs = [-0.1, -0.2, -0.3, -0.4, -0.5, -2.0, -0.2, -0.1, -0.05]
    values, words = features(log_probs, np.full((9, 6), 1 / 6), SOURCE, TARGET)
    dog = words[5]
    assert (dog.mean_log_prob, dog.min_log_prob, dog.pieces) == (pytest.approx(-1.1), -2.0, 2)
    assert values["min_word_log_prob"] == pytest.approx(-1.1)              # the least confident word, </s> aside


def test_default_score_is_the_geometric_mean_probability_and_fitted_weights_are_used():
    hyp = ([-0.5] * len(TARGET), np.full((len(TARGET), len(SOURCE)), 1 / len(SOURCE)), SOURCE, TARGET)
    default = QualityModel().assess(*hyp)
    assert default.score == pytest.approx(np.exp(-0.5))
    assert default.suspect == (default.score < DEFAULT_SUSPECT_BELOW["translation"])
    spec = {"translation": {"features": ["mean_log_prob"], "mean": [-0.5], "std": [1.0], "weights": [1.0],
                            "bias": 2.0, "suspect_below": 0.9}}
    fitted = QualityModel(spec).assess(*hyp)
    assert fitted.score == pytest.approx(1 / (1 + np.exp(-2.0)))
    assert fitted.suspect                                                  # 0.88 < 0.9
    with pytest.raises(ValueError, match="unknown features"):
        QualityModel({"translation": {**spec["translation"], "features": ["bogus"]}})


# --- measuring and fitting ----------------------------------------------------------

def test_ranks_spearman_and_auroc():
    assert ranks(np.array([3.0, 1.0, 3.0, 2.0])).tolist() == [3.5, 1.0, 3.5, 2.0]
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert spearman(x, x ** 3) == pytest.approx(1.0) and spearman(x, -x) == pytest.approx(-1.0)
    bad = np.array([True, False, False, False])
    assert auroc(np.array([0.1, 0.5, 0.6, 0.7]), bad) == 1.0               # the bad one scores lowest
    assert auroc(np.array([0.9, 0.5, 0.6, 0.7]), bad) == 0.0


def test_fractional_logistic_regression_recovers_a_monotone_signal():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 2))
    y = 1 / (1 + np.exp(-(1.5 * x[:, 0] + 0.2)))                           # only the first feature matters
    spec = fit_logistic(x, y, l2=0.0)
    # weights are per standard deviation of each feature
    assert spec["weights"][0] == pytest.approx(1.5 * x[:, 0].std(), rel=1e-3) and abs(spec["weights"][1]) < 1e-3
    assert spec["bias"] == pytest.approx(0.2 + 1.5 * x[:, 0].mean(), rel=1e-3)


def test_features_are_combined_only_when_that_ranks_held_out_sentences_better():
    from attnmt.bench.quality_fit import fit_translation
    rng = np.random.default_rng(1)
    n = 500
    x = rng.normal(size=(n, len(FEATURES)))
    seq = FEATURES.index("mean_log_prob")
    # chrF follows Seq-Logprob alone; the other features are noise a full fit would chase
    noise_only = fit_translation(x, 100 / (1 + np.exp(-2 * x[:, seq])))
    assert noise_only["selected"] == "mean_log_prob"
    assert all(w == 0 for k, w in enumerate(noise_only["weights"]) if k != seq) and noise_only["weights"][seq] > 0
    # chrF follows two features: combining them ranks held-out sentences better
    other = FEATURES.index("uncovered")
    both = fit_translation(x, 100 / (1 + np.exp(-(x[:, seq] - 1.5 * x[:, other]))))
    assert both["selected"] == "combined" and both["weights"][other] < 0
    assert both["dev_held_out_spearman"]["combined"] > both["dev_held_out_spearman"]["mean_log_prob"]


def test_fit_quality_writes_the_manifest_and_the_service_uses_it(tiny_model, tiny_run, tmp_path):
    model = tmp_path / "tiny-fitted"
    shutil.copytree(tiny_model, model)
    spec = fit_quality(model, tiny_run.parent / "data", split="dev", beam=1)
    written = json.loads((model / "manifest.json").read_text())["quality"]
    assert written == json.loads(json.dumps(spec))
    assert written["translation"]["features"] == list(FEATURES) and written["fitted_on"] == "data/dev"
    assert written["alignment"]["dev_accuracy"] > 0.9                      # true vs mismatched pairs, on dev
    from attnmt.service.inference.engine import Engine
    from attnmt.service.text.translator import Translator
    translator = Translator(Engine(model))                                 # the manifest still loads
    assert translator.quality.fitted and translator.greedy_quality.fitted and translator.alignment_quality.fitted
    assert translator.greedy_quality.suspect_below == pytest.approx(written["translation_greedy"]["suspect_below"])
    assert translator.quality.suspect_below == pytest.approx(written["translation"]["suspect_below"])


def test_fit_quality_fits_on_every_data_directory_it_is_given(tiny_model, tiny_run, tmp_path):
    """A model that serves two domains is fitted on both dev sets; the mismatched
    references of the alignment fit stay within each directory."""
    from conftest import write_corpus
    model = tmp_path / "tiny-fitted"
    shutil.copytree(tiny_model, model)
    second = write_corpus(tmp_path / "second", {"train": 1, "test": 1, "dev": 25})   # other sentences than data/dev
    one = fit_quality(model, tiny_run.parent / "data", split="dev", beam=1, write=False)
    both = fit_quality(model, [tiny_run.parent / "data", second], split="dev", beam=1)
    assert both["fitted_on"] == "data/dev + second/dev"
    assert both["sentences"] == one["sentences"] + 25
    assert both["translation"] != one["translation"]            # the second set's translations count
    assert json.loads((model / "manifest.json").read_text())["quality"]["fitted_on"] == "data/dev + second/dev"


# --- over gRPC ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def quality_server(tiny_model):
    with RunningServer([tiny_model], {"ATTNMT_DEFAULT_BEAM_SIZE": "1"}) as running:
        yield running


def test_every_hypothesis_carries_quality(quality_server):
    with grpc.insecure_channel(quality_server.address) as channel:
        stub = pb_grpc.TranslatorStub(channel)
        for kind in (pb.ALIGNMENT_NONE, pb.ALIGNMENT_WORDS):
            response = stub.Translate(pb.TranslateRequest(
                sentences=["kasa granda vidas peru .", "gato havas libo ."],
                options=pb.DecodingOptions(beam_size=3, n_best=2, alignment=kind)))
            for translation in response.translations:
                for hyp in translation.hypotheses:
                    q = hyp.quality
                    assert hyp.HasField("quality") and 0 <= q.score <= 1
                    assert q.mean_log_prob == pytest.approx(np.mean(hyp.token_log_probs), abs=1e-5)
                    assert 0 <= q.uncovered <= 1 and 0 <= q.wass_to_unif < 1
                    assert sum(w.pieces for w in q.words) == len(hyp.target_tokens)
                    assert hyp.suspect == (q.score < DEFAULT_SUSPECT_BELOW["translation"])   # no fitted weights
        (answer,) = [t for _, t in Client(quality_server.address).stream([("a", "peru vidas kasa .")])]
        assert 0 <= answer.best.quality.score <= 1


def test_align_scores_a_mismatched_target_lower(quality_server):
    with Client(quality_server.address) as client:
        source = "kasa granda vidas peru ."
        (translation,) = client.translate([source])
        true = client.align(source, translation.best.text).best.quality
        wrong = client.align(source, "the white moon has the red cat .").best.quality
    assert 0 <= wrong.score < true.score <= 1
    assert not true.suspect
    assert true.features["mean_log_prob"] > wrong.features["mean_log_prob"]
