"""Quality estimation (service/text/quality.py), its fit and its measurement (bench/quality_fit.py), and
the quality every hypothesis and every Align response carries over gRPC."""

from __future__ import annotations

import json
import shutil

import grpc
import numpy as np
import pytest

from attnmt.bench.quality_fit import (
    auroc,
    bench_quality,
    fit_logistic,
    fit_quality,
    format_quality,
    public_direction,
    ranks,
    sentence_chrf,
    spearman,
    suspect_threshold,
)
from attnmt.service.cli import main
from attnmt.service.client import Client
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from attnmt.service.text.quality import DEFAULT_SUSPECT_BELOW, FEATURES, QualityModel, features
from conftest import RunningServer, synthetic_corpus

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


def test_word_groups_given_by_the_caller_change_nothing():
    from attnmt.service.text.alignment import word_groups
    rng = np.random.default_rng(0)
    log_probs = rng.uniform(-3, 0, len(TARGET)).tolist()
    alpha = rng.dirichlet(np.ones(len(SOURCE)), size=len(TARGET)).astype(np.float32)
    groups = (word_groups(SOURCE), word_groups(TARGET))
    assert features(log_probs, alpha, SOURCE, TARGET, groups=groups) == features(log_probs, alpha, SOURCE, TARGET)
    assert QualityModel().assess(log_probs, alpha, SOURCE, TARGET, groups) == \
        QualityModel().assess(log_probs, alpha, SOURCE, TARGET)


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


def test_a_sample_weight_counts_as_that_many_copies_of_the_row():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(60, 2))
    y = 1 / (1 + np.exp(-(x[:, 0] - 0.5 * x[:, 1])))
    twice = fit_logistic(np.vstack([x, x[:20]]), np.r_[y, y[:20]])
    weighted = fit_logistic(np.vstack([x, x[:20]]), np.r_[y, y[:20]], sample_weight=np.ones(80))
    assert weighted["weights"] == pytest.approx(twice["weights"])       # all alike: as without weights
    # the first 20 rows counted twice (the standardisation still sees every row once)
    weight = np.r_[np.full(20, 2.0), np.ones(40), np.zeros(20)]
    by_weight = fit_logistic(np.vstack([x, x[:20]]), np.r_[y, y[:20]], sample_weight=weight)
    assert by_weight["weights"] == pytest.approx(twice["weights"], rel=1e-6)
    assert fit_logistic(x, y, sample_weight=np.r_[np.full(20, 5.0), np.ones(40)])["weights"] != pytest.approx(
        fit_logistic(x, y)["weights"])


def test_every_domain_weighs_alike_in_the_translation_fit():
    from attnmt.bench.quality_fit import domain_weights, fit_translation
    assert domain_weights(np.array([0, 0, 0, 1])).tolist() == [1 / 3, 1 / 3, 1 / 3, 1.0]
    rng = np.random.default_rng(4)
    x = rng.normal(size=(1100, len(FEATURES)))
    seq, other = FEATURES.index("mean_log_prob"), FEATURES.index("uncovered")
    # chrF follows Seq-Logprob in both domains and the uncovered share too in the small one
    chrf = 100 / (1 + np.exp(-(2 * x[:, seq] - np.r_[np.zeros(1000), 3 * x[1000:, other]])))
    domains = np.r_[np.zeros(1000, int), np.ones(100, int)]
    pooled, alike = fit_translation(x, chrf), fit_translation(x, chrf, domains)
    assert alike["selected"] == "combined" and alike["weights"][other] < 3 * pooled["weights"][other] < 0

    # Held out, ρ is taken within each domain: a feature that only tells the domains apart (one
    # with better chrF than the other) ranks nothing inside either, as on a test set.
    from attnmt.bench.quality_fit import held_out_spearman
    halves = np.arange(1000) // 500
    domain_only = np.c_[halves + 0.01 * rng.normal(size=1000), rng.normal(size=(1000, 1))]
    chrf = np.where(halves == 1, 70.0, 30.0) + rng.normal(scale=5, size=1000)
    assert held_out_spearman(domain_only, chrf) > 0.5
    assert abs(held_out_spearman(domain_only, chrf, domains=halves)) < 0.1


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


def test_suspect_threshold_flags_at_most_a_tenth_of_the_good_translations_of_each_domain():
    rng = np.random.default_rng(2)
    # A large domain whose good translations score high and a small one whose good ones score low
    # (its model is less sure of itself there): pooled, the large one would decide alone.
    large = np.r_[rng.uniform(0.6, 1.0, 900), rng.uniform(0.2, 0.7, 100)]
    small = np.r_[rng.uniform(0.4, 0.8, 40), rng.uniform(0.1, 0.5, 10)]
    score = np.r_[large, small]
    chrf = np.r_[np.full(900, 80.0), np.full(100, 20.0), np.full(40, 70.0), np.full(10, 20.0)]
    domains = np.r_[np.zeros(1000, int), np.ones(50, int)]
    good = chrf > 60

    def good_flagged(threshold):
        flagged = score < threshold
        return np.mean([flagged[good & (domains == d)].mean() for d in (0, 1)])

    threshold, dev = suspect_threshold(score, chrf, domains)
    assert good_flagged(threshold) <= 0.10
    assert good_flagged(score[score >= threshold].min() + 1e-6) > 0.10     # one more translation would be too many
    assert dev["over_chrf_60"] == pytest.approx(good_flagged(threshold), abs=1e-4)
    flagged = score < threshold
    assert dev["under_chrf_30"] == pytest.approx(np.mean([flagged[~good & (domains == d)].mean() for d in (0, 1)]),
                                                 abs=1e-4)
    pooled, _ = suspect_threshold(score, chrf)
    assert pooled > threshold                                             # the small domain's good ones count
    # Without a single good translation: the best F1 for the worst 10 %, not everything flagged.
    mediocre = rng.uniform(0.0, 1.0, 200)
    bad_only, _ = suspect_threshold(mediocre, 50 * mediocre)
    assert 0 < (mediocre < bad_only).mean() < 0.5


def test_fit_quality_writes_the_manifest_and_the_service_uses_it(tiny_model, tiny_run, tmp_path):
    model = tmp_path / "tiny-fitted"
    shutil.copytree(tiny_model, model)
    spec = fit_quality(model, tiny_run.parent / "data", split="dev", beam=1)
    written = json.loads((model / "manifest.json").read_text())["quality"]
    assert written == json.loads(json.dumps(spec))
    assert written["translation"]["features"] == list(FEATURES) and written["fitted_on"] == "data/dev"
    assert written["alignment"]["dev_accuracy"] > 0.9                      # true vs mismatched pairs, on dev
    assert written["translation"]["dev_flagged"]["over_chrf_60"] <= 0.10  # the threshold's rule, on dev
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


def _spanish(model_dir, tmp_path, quality=None):
    """A copy of the tiny xx→en model whose manifest says es→en (it takes the spa→eng test sets),
    with `quality` as its manifest's section."""
    copy = tmp_path / "tiny-es-en"
    shutil.copytree(model_dir, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**manifest, "source_language": "es", "quality": quality}))
    return copy


def _public(folder, name, pairs):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.spa").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (folder / f"{name}.eng").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")


def test_bench_quality_reports_each_test_set_with_the_flagged_shares_under_30_and_over_60(tiny_model, tiny_run,
                                                                                          tmp_path):
    # A threshold above every score: every translation is flagged, whatever its chrF.
    model = _spanish(tiny_model, tmp_path, {"translation": {"suspect_below": 1.01}})
    pairs = synthetic_corpus(30, seed=5)
    pairs[:8] = [(s, "nothing like it at all") for s, _ in pairs[:8]]   # references the output cannot match
    _public(tmp_path / "public", "made-up", pairs)
    _public(tmp_path / "public", "other", synthetic_corpus(5, seed=6))
    report = bench_quality(model, [tiny_run.parent / "data"], [str(tmp_path / "public")], ["made-up", "absent"],
                           beam=2)
    assert list(report["sets"]) == ["data/test", "made-up"] and report["notes"] == [
        f"absent: not found in {tmp_path / 'public'}"]
    made_up = report["sets"]["made-up"]
    assert made_up["sentences"] == 30 and set(made_up["signals"]) == {"combined score", *FEATURES}
    from attnmt.service.inference.engine import Engine
    from attnmt.service.inference.search import SearchOptions
    from attnmt.service.text.translator import Translator
    hyps = Translator(Engine(model)).translate([s for s, _ in pairs], SearchOptions(beam_size=2))
    chrf = sentence_chrf([t.best.text for t in hyps], [r for _, r in pairs])
    assert made_up["suspect"]["under_chrf_30"] == {"sentences": int((chrf < 30).sum()), "flagged": 1.0}
    assert made_up["suspect"]["over_chrf_60"] == {"sentences": int((chrf > 60).sum()), "flagged": 1.0}
    assert (chrf < 30).sum() >= 8 and (chrf > 60).sum() > 0
    assert made_up["suspect"]["precision_under_chrf_30"] == pytest.approx((chrf < 30).mean(), abs=1e-4)
    assert made_up["signals"]["combined score"]["spearman"] == pytest.approx(
        spearman(np.array([t.best.quality.score for t in hyps]), chrf), abs=1e-4)
    table = format_quality(report)
    assert "| data/test (40) | made-up (30) |" in table
    assert f"| made-up | {chrf.mean():.1f} | 100.0% | 100.0% of {(chrf < 30).sum()} |" in table

    # A threshold below every score: nothing flagged.
    none = bench_quality(_spanish(tiny_model, tmp_path / "none", {"translation": {"suspect_below": 0.0}}), [],
                         [str(tmp_path / "public")], ["made-up"], beam=2)
    assert list(none["sets"]) == ["made-up"]
    assert none["sets"]["made-up"]["suspect"]["under_chrf_30"]["flagged"] == 0.0
    assert none["sets"]["made-up"]["suspect"]["over_chrf_60"]["flagged"] == 0.0


def test_bench_quality_reads_public_test_sets_from_the_command_line(tiny_model, tmp_path, capsys):
    model = _spanish(tiny_model, tmp_path)
    _public(tmp_path / "public", "made-up", synthetic_corpus(12, seed=5))
    out = tmp_path / "quality.json"
    assert main(["bench", "quality", "--model", str(model), "--testsets", str(tmp_path / "public"), "--set",
                 "made-up", "--beam", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert list(report["sets"]) == ["made-up"]                           # no --data: only the test set asked for
    assert "under_chrf_30" in report["sets"]["made-up"]["suspect"] and "| made-up |" in capsys.readouterr().out
    assert main(["bench", "quality", "--model", str(tiny_model), "--testsets", str(tmp_path / "public")]) == 2
    assert "no public test sets for xx→en" in capsys.readouterr().err


def test_public_direction_names_the_test_set_suffixes():
    assert public_direction("es", "en") == "spa-eng" and public_direction("en", "es") == "eng-spa"
    with pytest.raises(ValueError, match="xx→en"):
        public_direction("xx", "en")


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
