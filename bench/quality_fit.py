"""Fitting and measuring the quality score (service/text/quality.py) of one model.

`attnmt fit-quality --model DIR --data DATA [DATA...]` translates the dev split(s), scores
each best hypothesis against its reference with sentence chrF, and fits
score = σ(w · standardised features + b) to chrF / 100 (fractional logistic
regression, Newton steps, a small L2 penalty; every data directory weighs alike),
then the `suspect_below` threshold: the highest that flags at most 10 % of the dev
translations above chrF 60, averaged over the data directories, so that as many as
possible under chrF 30 are flagged. The result goes into the model directory's
manifest (`quality`), written by model/export/measured.py, so every model carries
weights fitted on its own held-out data; never the test split.

`attnmt bench quality --model DIR --data DATA [--testsets DIR --set NAME]` measures
on test splits and public test sets (found as `attnmt evaluate-public` finds them),
each on its own: Spearman's ρ of each signal with sentence chrF, AUROC for finding
the worst 10 %, the share of translations under chrF 30 and over chrF 60 that are
flagged `suspect`, and, through forced alignments, how often the true reference
scores above another sentence's reference of similar length.

Needs sacrebleu (the `train` extra); the server never imports this module.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np

from attnmt.bench.public import LANGUAGES, find_testsets
from attnmt.corpus.splits import read_parallel, read_split
from attnmt.model.export.measured import write_quality
from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import SearchOptions
from attnmt.service.text.quality import DEFAULT_COVERAGE_THRESHOLD, FEATURES, QualityModel
from attnmt.service.text.translator import Translator

WORST = 0.10              # "bad" = the worst 10 % by sentence chrF (AUROC)
L2 = 1e-2
BAD_CHRF, GOOD_CHRF = 30.0, 60.0   # sentence chrF under which `suspect` should be set, over which not
MAX_GOOD_FLAGGED = 0.10            # `suspect_below`: at most this share of dev translations over GOOD_CHRF flagged


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


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = L2, only: list[int] | None = None,
                 sample_weight: np.ndarray | None = None) -> dict:
    """σ(w · (x - mean) / std + b) ≈ y, y in [0, 1]: Newton steps (IRLS) on the cross-entropy.
    only: the feature columns allowed a weight (the others keep weight 0); sample_weight: what
    each row counts for in the cross-entropy (None: alike)."""
    mean, std = x.mean(axis=0), x.std(axis=0)
    std[std < 1e-6] = 1.0                       # a constant feature (on this split) gets no weight anyway
    z = np.hstack([(x - mean) / std, np.ones((len(x), 1))])                          # N x (F + 1)
    if only is not None:
        z[:, [k for k in range(x.shape[1]) if k not in only]] = 0.0             # no signal: the weight stays 0
    r = np.full(len(y), 1.0 / len(y)) if sample_weight is None else sample_weight / sample_weight.sum()   # N
    w = np.zeros(z.shape[1])
    # The bias is (almost) free; the tiny ridge keeps the Newton step defined when every
    # target is 0 or 1 (a model perfect on its dev split).
    penalty = np.diag([l2] * (z.shape[1] - 1) + [1e-9])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-z @ w))                                              # N
        gradient = z.T @ (r * (p - y)) + penalty @ w
        hessian = (z.T * (r * p * (1 - p))) @ z + penalty                             # (F + 1) x (F + 1)
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
    return _just_above(threshold), round(best, 4)


def _just_above(score: float) -> float:
    """The `suspect_below` that flags `score` and every lower one (`score < suspect_below`)."""
    return float(np.nextafter(np.float32(score), np.float32(1)))


def flagged_share(flagged: np.ndarray, where: np.ndarray, domains: np.ndarray) -> float:
    """The share of `where` that is flagged, averaged over the domains that have any of `where`."""
    shares = [flagged[where & (domains == d)].mean() for d in np.unique(domains) if (where & (domains == d)).any()]
    return float(np.mean(shares)) if shares else 0.0


def suspect_threshold(score: np.ndarray, chrf: np.ndarray, domains: np.ndarray | None = None) -> tuple[float, dict]:
    """`suspect_below`: the highest threshold that flags at most MAX_GOOD_FLAGGED of the
    translations over GOOD_CHRF, each domain (data directory) weighted alike, so as many under
    BAD_CHRF as that allows; the shares it flags on dev. Without translations over GOOD_CHRF, the
    best F1 for the worst 10 %."""
    domains = np.zeros(len(score), dtype=int) if domains is None else np.asarray(domains)
    good = chrf > GOOD_CHRF
    if not good.any():
        threshold = best_threshold(score, worst(chrf), "f1")[0]
    else:
        candidates = np.unique(score)                                              # ascending
        # flagged share of each domain's good translations at each candidate (score <= t): D x C
        shares = np.array([np.searchsorted(np.sort(score[good & (domains == d)]), candidates, side="right")
                           / (good & (domains == d)).sum() for d in np.unique(domains[good])])
        allowed = candidates[shares.mean(axis=0) <= MAX_GOOD_FLAGGED]             # a prefix: shares only grow
        # none allowed: even the lowest score is too many good ones: flag nothing
        threshold = _just_above(allowed[-1]) if allowed.size else float(candidates[0])
    flagged = score < threshold
    return threshold, {f"under_chrf_{BAD_CHRF:g}": round(flagged_share(flagged, chrf < BAD_CHRF, domains), 4),
                       f"over_chrf_{GOOD_CHRF:g}": round(flagged_share(flagged, good, domains), 4)}


def _scores(spec: dict, x: np.ndarray) -> np.ndarray:
    z = (x - np.array(spec["mean"])) / np.array(spec["std"])
    return 1.0 / (1.0 + np.exp(-(z @ np.array(spec["weights"]) + spec["bias"])))


FOLDS = 5


def domain_weights(domains: np.ndarray) -> np.ndarray:
    """Per sentence, 1 / the size of its domain: every data directory counts alike in a fit."""
    _, index, counts = np.unique(domains, return_inverse=True, return_counts=True)
    return 1.0 / counts[index]


def held_out_spearman(x: np.ndarray, chrf: np.ndarray, only: list[int] | None = None,
                      domains: np.ndarray | None = None) -> float:
    """Spearman's ρ with chrF of scores each dev sentence gets from a fit on the other folds
    (interleaved, so every fold holds every domain). With `domains`, the fits weigh them alike
    and ρ is taken within each domain, then averaged: a test set is one domain, and ranking
    the domains against one another (messages above news) would not help there."""
    y = np.clip(chrf / 100.0, 0.0, 1.0)
    domains = np.zeros(len(y), dtype=int) if domains is None else np.asarray(domains)
    weight = domain_weights(domains)
    fold = np.arange(len(y)) % FOLDS
    held = np.empty(len(y))
    for k in range(FOLDS):
        spec = fit_logistic(x[fold != k], y[fold != k], only=only, sample_weight=weight[fold != k])
        held[fold == k] = _scores(spec, x[fold == k])
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.array([spearman(held[domains == d], chrf[domains == d]) for d in np.unique(domains)])
    return float(np.nan_to_num(rho).mean())     # constant scores (or chrF) rank nothing: 0


def fit_translation(x: np.ndarray, chrf: np.ndarray, domains: np.ndarray | None = None) -> dict:
    """Score ≈ chrF / 100; suspect: `suspect_threshold`. `domains`: the data directory of each dev
    sentence (None: one), each weighing alike in the fit, in the held-out ranking and in the
    threshold, so that a large dev split (news) does not decide for a small one (everyday).

    All features are combined only if that ranks held-out dev sentences better than
    Seq-Logprob (mean_log_prob) alone, the strongest single signal in the literature
    (Guerreiro et al. 2023): on the bundled model an in-sample fit of every feature
    ranked the test sentences slightly worse than Seq-Logprob alone."""
    alone = [FEATURES.index("mean_log_prob")]
    cv = {"combined": round(held_out_spearman(x, chrf, domains=domains), 4),
          "mean_log_prob": round(held_out_spearman(x, chrf, alone, domains), 4)}
    selected = "combined" if cv["combined"] > cv["mean_log_prob"] else "mean_log_prob"
    spec = fit_logistic(x, np.clip(chrf / 100.0, 0.0, 1.0), only=None if selected == "combined" else alone,
                        sample_weight=None if domains is None else domain_weights(domains))
    spec["selected"], spec["dev_held_out_spearman"] = selected, cv
    spec["suspect_below"], spec["dev_flagged"] = suspect_threshold(_scores(spec, x), chrf, domains)
    spec["suspect_rule"] = (f"the highest threshold flagging at most {MAX_GOOD_FLAGGED * 100:g} % of dev translations "
                            f"over chrF {GOOD_CHRF:g}, averaged over the data directories")
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
    hyps, greedy, true, false, chrf, greedy_chrf, sizes, domains = [], [], [], [], [], [], {}, []
    for k, data_dir in enumerate(data_dirs):
        pairs = read_split(data_dir, split, m.source_language, m.target_language)
        sizes[f"{data_dir.name}/{split}"] = len(pairs)
        domains += [k] * len(pairs)
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
            "translation": fit_translation(feature_matrix(hyps), chrf, np.array(domains)),
            "translation_greedy": fit_translation(feature_matrix(greedy), greedy_chrf, np.array(domains)),
            "alignment": fit_alignment(feature_matrix(true), feature_matrix(false)),
            "fitted_on": " + ".join(sizes), "sentences": sum(sizes.values()), "beam": beam,
            "translation_target": "sentence chrF / 100 (sacreBLEU defaults)",
            "alignment_target": "1 for the reference, 0 for the reference of the sentence closest in length "
                                "in the same data directory",
            "date": dt.date.today().isoformat()}
    if write:
        write_quality(model_dir, spec)
    return spec


HIGHER_IS_BETTER = ("mean_log_prob", "min_word_log_prob", "mean_word_min_log_prob")


def _share(flagged: np.ndarray, where: np.ndarray) -> float | None:
    return round(float(flagged[where].mean()), 4) if where.any() else None


def quality_on(translator: Translator, pairs: list[tuple[str, str]], beam: int) -> dict:
    """One test set: each signal's Spearman ρ with sentence chrF and AUROC for the worst 10 %,
    the translations `suspect` flags, and the Align mismatch test."""
    hyps, chrf = translate_split(translator, pairs, beam)
    x, bad = feature_matrix(hyps), worst(chrf)
    # Each signal oriented so that higher means better.
    signals = {"combined score": np.array([h.quality.score for h in hyps])}
    for k, name in enumerate(FEATURES):
        signals[name] = x[:, k] if name in HIGHER_IS_BETTER else -x[:, k]
    with np.errstate(invalid="ignore", divide="ignore"):      # a constant signal ranks nothing: nan
        rows = {name: {"spearman": round(spearman(s, chrf), 4), "auroc_worst10": round(auroc(s, bad), 4)}
                for name, s in signals.items()}
    suspect = np.array([h.quality.suspect for h in hyps])
    low, high = chrf < BAD_CHRF, chrf > GOOD_CHRF
    flags = {"flagged": round(float(suspect.mean()), 4),
             "precision_worst10": round(float((suspect & bad).sum() / max(suspect.sum(), 1)), 4),
             "recall_worst10": round(float((suspect & bad).sum() / bad.sum()), 4),
             f"under_chrf_{BAD_CHRF:g}": {"sentences": int(low.sum()), "flagged": _share(suspect, low)},
             f"over_chrf_{GOOD_CHRF:g}": {"sentences": int(high.sum()), "flagged": _share(suspect, high)},
             f"precision_under_chrf_{BAD_CHRF:g}": round(float((suspect & low).sum() / max(suspect.sum(), 1)), 4)}
    true, false = align_pairs(translator, pairs)
    true_q, false_q = [h.quality for h in true], [h.quality for h in false]
    align = {
        "combined score": float(np.mean([f.score < t.score for t, f in zip(true_q, false_q)])),
        "mean_log_prob": float(np.mean([f.features["mean_log_prob"] < t.features["mean_log_prob"]
                                        for t, f in zip(true_q, false_q)])),
        "suspect_true": float(np.mean([t.suspect for t in true_q])),
        "suspect_mismatched": float(np.mean([f.suspect for f in false_q])),
    }
    return {"sentences": len(pairs), "mean_chrf": round(float(chrf.mean()), 2), "signals": rows, "suspect": flags,
            "align_mismatch": {k: round(v, 4) for k, v in align.items()}}


def public_direction(source_language: str, target_language: str) -> str:
    """The public test sets' file suffixes for a model's languages, e.g. es→en: "spa-eng"."""
    suffixes = {code: suffix for suffix, code in LANGUAGES.items()}
    if source_language not in suffixes or target_language not in suffixes:
        raise ValueError(f"no public test sets for {source_language}→{target_language} "
                         f"(their suffixes are known for {', '.join(sorted(suffixes))})")
    return f"{suffixes[source_language]}-{suffixes[target_language]}"


def bench_quality(model_dir: Path, data_dirs: list[Path] = (), testsets: list[str] = (),
                  names: list[str] | None = None, split: str = "test", beam: int = 5, log=print) -> dict:
    """`quality_on` each data directory's `split` (test) and each public test set in `testsets`
    (folders of NAME.spa/NAME.eng or addresses, read as `attnmt evaluate-public` reads them;
    with `names`, only those)."""
    engine = Engine(model_dir)
    m = engine.manifest
    translator = Translator(engine, max_tokens=100_000)
    sets = {f"{Path(d).name}/{split}": read_split(Path(d), split, m.source_language, m.target_language)
            for d in data_dirs}
    notes: list[str] = []
    if testsets:
        found, notes = find_testsets(list(testsets), public_direction(m.source_language, m.target_language),
                                     names, log=log)
        sets.update({t.name: list(read_parallel(t.source, t.reference)) for t in found})
    return {"model": str(model_dir), "beam": beam,
            "fitted": translator.quality.spec.get("fitted_on", "nothing (defaults: exp(mean_log_prob))"),
            "suspect_below": (translator.greedy_quality if beam == 1 else translator.quality).suspect_below,
            "sets": {name: quality_on(translator, pairs, beam) for name, pairs in sets.items()},
            "notes": notes, "date": dt.date.today().isoformat()}


def _percent(share: float | None) -> str:
    return "–" if share is None else f"{share:.1%}"


def format_quality(report: dict) -> str:
    sets = report["sets"]
    low, high = f"under_chrf_{BAD_CHRF:g}", f"over_chrf_{GOOD_CHRF:g}"
    lines = [f"Quality estimation, {report['model']} (beam {report['beam']}; weights fitted on {report['fitted']}; "
             f"suspect below {report['suspect_below']:.3f}; {report['date']})", "",
             "Spearman ρ with sentence chrF / AUROC for the worst 10 % (each signal oriented: higher = better):", "",
             "| signal | " + " | ".join(f"{name} ({s['sentences']:,})" for name, s in sets.items()) + " |",
             "|---|" + "---:|" * len(sets)]
    for signal in next(iter(sets.values()))["signals"] if sets else ():
        lines.append(f"| {signal} | " + " | ".join(f"{s['signals'][signal]['spearman']:.3f} / "
                                                   f"{s['signals'][signal]['auroc_worst10']:.3f}"
                                                   for s in sets.values()) + " |")
    lines += ["", "`suspect`:", "",
              f"| test set | mean chrF | flagged | under chrF {BAD_CHRF:g} flagged | over chrF {GOOD_CHRF:g} flagged "
              f"| flagged that are under chrF {BAD_CHRF:g} | precision / recall, worst 10 % |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for name, s in sets.items():
        f = s["suspect"]
        lines.append(f"| {name} | {s['mean_chrf']:.1f} | {f['flagged']:.1%} | {_percent(f[low]['flagged'])} of "
                     f"{f[low]['sentences']} | {_percent(f[high]['flagged'])} of {f[high]['sentences']} | "
                     f"{f[f'precision_{low}']:.1%} | {f['precision_worst10']:.1%} / {f['recall_worst10']:.1%} |")
    lines.append("")
    for name, s in sets.items():
        a = s["align_mismatch"]
        lines.append(f"Align on {name}, true reference vs another sentence's reference of the closest length: the "
                     f"mismatched pair scores lower in {a['combined score']:.1%} (combined score; Seq-Logprob alone "
                     f"{a['mean_log_prob']:.1%}); `suspect` on {a['suspect_true']:.1%} of true and "
                     f"{a['suspect_mismatched']:.1%} of mismatched pairs.")
    lines += [f"Note: {n}" for n in report["notes"]]
    return "\n".join(lines)
