"""Fitting and measuring the quality score (service/text/quality.py) of one model.

`attnmt fit-quality --model DIR --data DATA [DATA...]` translates the dev split(s), scores
each best hypothesis against its reference with sentence chrF, and fits
score = σ(w · standardised features + b) to chrF / 100 (fractional logistic
regression, Newton steps, a small L2 penalty), then the `suspect_below`
threshold that best separates the worst 10 % of dev translations (F1). The
result goes into the model directory's manifest (`quality`), written by
model/export/measured.py, so every model carries weights fitted on its own
held-out data; never the test split.

`attnmt bench quality --model DIR --data DATA` measures on the test split:
Spearman's ρ of each signal with sentence chrF, AUROC for finding the worst
10 %, and, through forced alignment, how often the true reference scores
above another verse's reference of similar length.

Needs sacrebleu (the `train` extra); the server never imports this module.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np

from attnmt.corpus.splits import read_split
from attnmt.model.export.measured import write_quality
from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import SearchOptions
from attnmt.service.text.quality import DEFAULT_COVERAGE_THRESHOLD, FEATURES, QualityModel
from attnmt.service.text.translator import Translator

WORST = 0.10              # "bad" = the worst 10 % by sentence chrF
L2 = 1e-2


def sentence_chrf(hyps: list[str], refs: list[str]) -> np.ndarray:
    from sacrebleu.metrics import CHRF
    metric = CHRF()
    return np.array([metric.sentence_score(h, [r]).score for h, r in zip(hyps, refs)])


def translate_split(translator: Translator, pairs: list[tuple[str, str]], beam: int) -> tuple[list, np.ndarray]:
    """Best hypotheses (with quality) of the split's sources, and their sentence chrF."""
    translations = translator.translate([s for s, _ in pairs], SearchOptions(beam_size=beam))
    hyps = [t.best for t in translations]
    return hyps, sentence_chrf([h.text for h in hyps], [r for _, r in pairs])


def feature_matrix(hyps: list) -> np.ndarray:
    return np.array([[h.quality.features[name] for name in FEATURES] for h in hyps])   # N x F


def ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..N, ties averaged."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    starts = np.r_[0, np.flatnonzero(np.diff(x[order])) + 1]                 # first index of each tie group
    ends = np.r_[starts[1:], len(x)]
    r = np.empty(len(x))
    for a, b in zip(starts, ends):
        r[order[a:b]] = (a + b + 1) / 2                                        # mean of ranks a+1 .. b
    return r


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.corrcoef(ranks(np.asarray(x, float)), ranks(np.asarray(y, float)))[0, 1])


def auroc(score: np.ndarray, bad: np.ndarray) -> float:
    """P(a bad sentence scores below a good one): Mann-Whitney over ranks (ties count half)."""
    r = ranks(-np.asarray(score, float))
    n_bad, n_good = int(bad.sum()), int((~bad).sum())
    return float((r[bad].sum() - n_bad * (n_bad + 1) / 2) / (n_bad * n_good))


def worst(chrf: np.ndarray, share: float = WORST) -> np.ndarray:
    return chrf <= np.quantile(chrf, share)


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = L2, only: list[int] | None = None) -> dict:
    """σ(w · (x - mean) / std + b) ≈ y, y in [0, 1]: Newton steps (IRLS) on the cross-entropy.
    only: the feature columns allowed a weight (the others keep weight 0)."""
    mean, std = x.mean(axis=0), x.std(axis=0)
    std[std < 1e-6] = 1.0                       # a constant feature (on this split) gets no weight anyway
    z = np.hstack([(x - mean) / std, np.ones((len(x), 1))])                          # N x (F + 1)
    if only is not None:
        z[:, [k for k in range(x.shape[1]) if k not in only]] = 0.0             # no signal: the weight stays 0
    w = np.zeros(z.shape[1])
    # The bias is (almost) free; the tiny ridge keeps the Newton step defined when every
    # target is 0 or 1 (a model perfect on its dev split).
    penalty = np.diag([l2] * (z.shape[1] - 1) + [1e-9])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-z @ w))                                              # N
        gradient = z.T @ (p - y) / len(y) + penalty @ w
        hessian = (z.T * (p * (1 - p))) @ z / len(y) + penalty                        # (F + 1) x (F + 1)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return {"features": list(FEATURES), "mean": mean.tolist(), "std": std.tolist(), "weights": w[:-1].tolist(),
            "bias": float(w[-1])}


def best_threshold(score: np.ndarray, flag: np.ndarray, objective: str) -> tuple[float, float]:
    """The `suspect_below` that best flags `flag` (score < threshold): by F1 or by accuracy."""
    best, threshold = -1.0, 0.0
    for t in np.unique(score):
        flagged = score <= t
        tp = int((flagged & flag).sum())
        value = 2 * tp / (flagged.sum() + flag.sum()) if objective == "f1" else float((flagged == flag).mean())
        if value > best:
            best, threshold = value, float(t)
    # just above the best score, so that `score < suspect_below` flags what was chosen here
    return float(np.nextafter(np.float32(threshold), np.float32(1))), round(best, 4)


def _scores(spec: dict, x: np.ndarray) -> np.ndarray:
    z = (x - np.array(spec["mean"])) / np.array(spec["std"])
    return 1.0 / (1.0 + np.exp(-(z @ np.array(spec["weights"]) + spec["bias"])))


FOLDS = 5


def held_out_spearman(x: np.ndarray, chrf: np.ndarray, only: list[int] | None = None) -> float:
    """Spearman's ρ with chrF of scores each dev sentence gets from a fit on the other folds
    (interleaved, so every fold holds both domains)."""
    y = np.clip(chrf / 100.0, 0.0, 1.0)
    fold = np.arange(len(y)) % FOLDS
    held = np.empty(len(y))
    for k in range(FOLDS):
        spec = fit_logistic(x[fold != k], y[fold != k], only=only)
        held[fold == k] = _scores(spec, x[fold == k])
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = spearman(held, chrf)
    return 0.0 if np.isnan(rho) else rho        # constant scores (or chrF) rank nothing


def fit_translation(x: np.ndarray, chrf: np.ndarray) -> dict:
    """Score ≈ chrF / 100; suspect: the best F1 for the worst 10 %.

    All features are combined only if that ranks held-out dev sentences better than
    Seq-Logprob (mean_log_prob) alone, the strongest single signal in the literature
    (Guerreiro et al. 2023): on the bundled model an in-sample fit of every feature
    ranked the test sentences slightly worse than Seq-Logprob alone."""
    alone = [FEATURES.index("mean_log_prob")]
    cv = {"combined": round(held_out_spearman(x, chrf), 4),
          "mean_log_prob": round(held_out_spearman(x, chrf, alone), 4)}
    selected = "combined" if cv["combined"] > cv["mean_log_prob"] else "mean_log_prob"
    spec = fit_logistic(x, np.clip(chrf / 100.0, 0.0, 1.0), only=None if selected == "combined" else alone)
    spec["selected"], spec["dev_held_out_spearman"] = selected, cv
    spec["suspect_below"], spec["dev_f1_worst10"] = best_threshold(_scores(spec, x), worst(chrf), "f1")
    return spec


def fit_alignment(true: np.ndarray, mismatched: np.ndarray) -> dict:
    """Score ≈ P(the target translates the source), from true and mismatched pairs;
    suspect: the best accuracy on those pairs."""
    x = np.vstack([true, mismatched])
    label = np.r_[np.ones(len(true)), np.zeros(len(mismatched))]
    spec = fit_logistic(x, label)
    spec["suspect_below"], spec["dev_accuracy"] = best_threshold(_scores(spec, x), label == 0, "accuracy")
    return spec


def _mismatched(refs: list[str]) -> list[int]:
    """For each verse, another verse whose reference is the closest in length (the next
    one in length order: never itself)."""
    order = sorted(range(len(refs)), key=lambda i: (len(refs[i]), i))
    partner = [0] * len(refs)
    for k, i in enumerate(order):
        partner[i] = order[k + 1] if k + 1 < len(order) else order[k - 1]
    return partner


def align_pairs(translator: Translator, pairs: list[tuple[str, str]]) -> tuple[list, list]:
    """Forced alignments of each source with its reference and with a mismatched reference."""
    sources, refs = [s for s, _ in pairs], [r for _, r in pairs]
    partner = _mismatched(refs)
    true = [t.best for t in translator.align(list(zip(sources, refs)))]
    false = [t.best for t in translator.align([(s, refs[j]) for s, j in zip(sources, partner)])]
    return true, false


def fit_quality(model_dir: Path, data_dirs: Path | list[Path], split: str = "dev", beam: int = 5,
                write: bool = True) -> dict:
    """Fit on `split` (dev, never test) of one or more data directories (a model that
    serves two domains is fitted on both) and, with `write`, record it as the manifest's `quality`."""
    data_dirs = [Path(data_dirs)] if isinstance(data_dirs, (str, Path)) else [Path(d) for d in data_dirs]
    engine = Engine(model_dir)
    m = engine.manifest
    translator = Translator(engine, max_tokens=100_000)
    features_only = {"coverage_threshold": DEFAULT_COVERAGE_THRESHOLD}
    translator.quality = QualityModel(features_only, "translation")
    translator.greedy_quality = QualityModel(features_only, "translation_greedy")
    translator.alignment_quality = QualityModel(features_only, "alignment")
    hyps, greedy, true, false, chrf, greedy_chrf, sizes = [], [], [], [], [], [], {}
    for data_dir in data_dirs:
        pairs = read_split(data_dir, split, m.source_language, m.target_language)
        sizes[f"{data_dir.name}/{split}"] = len(pairs)
        beam_hyps, beam_chrf = translate_split(translator, pairs, beam)
        hyps += beam_hyps
        chrf.append(beam_chrf)
        greedy_hyps, greedy_scores = translate_split(translator, pairs, 1) if beam > 1 else (beam_hyps, beam_chrf)
        greedy += greedy_hyps
        greedy_chrf.append(greedy_scores)
        matched, mismatched = align_pairs(translator, pairs)   # mismatched references from the same domain
        true += matched
        false += mismatched
    chrf, greedy_chrf = np.concatenate(chrf), np.concatenate(greedy_chrf)
    spec = {"coverage_threshold": DEFAULT_COVERAGE_THRESHOLD,
            # greedy output is more confident and worse than beam output: each search its own fit
            "translation": fit_translation(feature_matrix(hyps), chrf),
            "translation_greedy": fit_translation(feature_matrix(greedy), greedy_chrf),
            "alignment": fit_alignment(feature_matrix(true), feature_matrix(false)),
            "fitted_on": " + ".join(sizes), "sentences": sum(sizes.values()), "beam": beam,
            "translation_target": "sentence chrF / 100 (sacreBLEU defaults)",
            "alignment_target": "1 for the reference, 0 for the reference of the sentence closest in length "
                                "in the same data directory",
            "date": dt.date.today().isoformat()}
    if write:
        write_quality(model_dir, spec)
    return spec


def bench_quality(model_dir: Path, data_dir: Path, split: str = "test", beam: int = 5) -> dict:
    """Spearman and AUROC of each signal on `split` (test), and the Align mismatch test."""
    engine = Engine(model_dir)
    m = engine.manifest
    translator = Translator(engine, max_tokens=100_000)
    pairs = read_split(data_dir, split, m.source_language, m.target_language)
    hyps, chrf = translate_split(translator, pairs, beam)
    x, bad = feature_matrix(hyps), worst(chrf)
    scores = np.array([h.quality.score for h in hyps])
    # Each signal oriented so that higher means better.
    signals = {"combined score": scores}
    for k, name in enumerate(FEATURES):
        signals[name] = x[:, k] if name in ("mean_log_prob", "min_word_log_prob", "mean_word_min_log_prob") \
            else -x[:, k]
    rows = {name: {"spearman": round(spearman(s, chrf), 4), "auroc_worst10": round(auroc(s, bad), 4)}
            for name, s in signals.items()}
    suspect = np.array([h.quality.suspect for h in hyps])
    true, false = align_pairs(translator, pairs)
    true_q, false_q = [h.quality for h in true], [h.quality for h in false]
    align = {
        "combined score": float(np.mean([f.score < t.score for t, f in zip(true_q, false_q)])),
        "mean_log_prob": float(np.mean([f.features["mean_log_prob"] < t.features["mean_log_prob"]
                                        for t, f in zip(true_q, false_q)])),
        "suspect_true": float(np.mean([t.suspect for t in true_q])),
        "suspect_mismatched": float(np.mean([f.suspect for f in false_q])),
    }
    return {"model": str(model_dir), "data": f"{Path(data_dir).name}/{split}", "sentences": len(pairs), "beam": beam,
            "fitted": translator.quality.spec.get("fitted_on", "nothing (defaults: exp(mean_log_prob))"),
            "signals": rows, "suspect": {"flagged": float(suspect.mean()),
                                         "precision_worst10": float((suspect & bad).sum() / max(suspect.sum(), 1)),
                                         "recall_worst10": float((suspect & bad).sum() / bad.sum())},
            "align_mismatch": {k: round(v, 4) for k, v in align.items()}, "date": dt.date.today().isoformat()}


def format_quality(report: dict) -> str:
    lines = [f"Quality estimation, {report['model']} on {report['data']} ({report['sentences']} sentences, "
             f"beam {report['beam']}; weights fitted on {report['fitted']}; {report['date']})", "",
             "| signal (higher = better) | Spearman ρ with sentence chrF | AUROC, worst 10 % |", "|---|---|---|"]
    for name, row in report["signals"].items():
        lines.append(f"| {name} | {row['spearman']:.3f} | {row['auroc_worst10']:.3f} |")
    s, a = report["suspect"], report["align_mismatch"]
    lines += ["", f"`suspect`: {s['flagged']:.1%} of translations flagged; precision {s['precision_worst10']:.1%}, "
                  f"recall {s['recall_worst10']:.1%} for the worst 10 %.", "",
              "Align, true reference vs another verse's reference of the closest length: the mismatched pair "
              f"scores lower in {a['combined score']:.1%} of verses (combined score; Seq-Logprob alone "
              f"{a['mean_log_prob']:.1%}); `suspect` on {a['suspect_true']:.1%} of true and "
              f"{a['suspect_mismatched']:.1%} of mismatched pairs."]
    return "\n".join(lines)
