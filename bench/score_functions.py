"""`attnmt bench score-functions`: RNNsearch's score functions a(s_{i−1}, h_j) side by side.

The models were trained at an equal budget and differ only in the score: additive (Bahdanau), general,
dot, scaled dot (dot/√d). Each is run by the serving engine, and the table gives:

- sacreBLEU BLEU and chrF, greedy and beam 5, on each data directory's test split (`attnmt evaluate`'s
  scoring), the whole split or N sentences evenly spaced;
- AER on the hand-aligned gold set's test split, with its bootstrap 95 % CI, for the servable hard-link
  rule chosen on the gold dev split (`attnmt evaluate-alignment --write-manifest`'s choice);
- greedy sentences/s at 64 rows a step on Bible test sentences through `Translator.translate` (what
  `attnmt translate` runs), the models alternated within each round, the best round kept.

All four score Bahdanau's query, the previous decoder state s_{i−1}, not Luong et al.'s (2015) h_t, the
state after the step: the labels say so, lest "general" or "dot" be read as Luong's attention.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import sacrebleu

from attnmt.bench.evaluate import score
from attnmt.bench.evaluate_alignment import evaluate_alignment
from attnmt.bench.loadtest import machine, spread
from attnmt.corpus.splits import read_split
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.search import SearchOptions
from attnmt.service.modeldir.manifest import load_manifest
from attnmt.service.text.translator import Translator

LABELS = {"bahdanau": "additive (Bahdanau), query s_{i−1}",
          "general": "general, query s_{i−1}",
          "dot": "dot, query s_{i−1}",
          "scaled_dot": "scaled dot (dot/√d), query s_{i−1}"}
FIELD = 'score_function (dimensions["attention"])'
BEAM = 5
SPEED_ROWS = 64


def score_function(model_dir: Path) -> str:
    """The model's score function, from its manifest; a ValueError naming the directory and the
    field for a model that is not an RNNsearch or does not say."""
    m = load_manifest(model_dir, verify=False)
    if m.architecture != "RNNsearch":
        raise ValueError(f"{model_dir}: a {m.architecture}, not an RNNsearch: its manifest has no {FIELD} to "
                         "compare")
    if m.score_function not in LABELS:
        raise ValueError(f"{model_dir}: the manifest's {FIELD} is {m.score_function!r}, not one of "
                         f"{', '.join(LABELS)}")
    return m.score_function


def _quality(translator: Translator, test_sets: dict[str, list[tuple[str, str]]]) -> tuple[dict, dict]:
    """Each test set's BLEU and chrF, greedy and beam; and how peaked the greedy outputs' α is on
    the first set."""
    out, peak = {}, {}
    for name, pairs in test_sets.items():
        sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
        out[name] = {}
        for label, options in (("greedy", SearchOptions()), (f"beam{BEAM}", SearchOptions(beam_size=BEAM))):
            translations = translator.translate(sources, options)
            out[name][label] = score([t.best.text for t in translations], refs)
            if not peak:
                peak = {"test_set": name, **alpha_peak([t.best.alignment for t in translations])}
    return out, peak


def alpha_peak(alignments: list[np.ndarray]) -> dict:
    """Over every target piece: the mean of its largest α, and the mean entropy of its α row over
    log(source length) (1: uniform over the source, 0: on one piece). A score function whose α
    stays near uniform shows here before it shows in AER."""
    rows = [a / a.sum(axis=1, keepdims=True) for a in (np.asarray(a, dtype=np.float64) for a in alignments)
            if a.size and a.shape[1] > 1]
    largest = np.concatenate([a.max(axis=1) for a in rows])
    entropy = np.concatenate([-(a * np.log(np.clip(a, 1e-12, None))).sum(axis=1) / np.log(a.shape[1])
                              for a in rows])
    return {"mean_largest_alpha": round(float(largest.mean()), 3),
            "mean_normalised_entropy": round(float(entropy.mean()), 3), "target_pieces": int(largest.size)}


def _alignment(model_dir: Path, gold: Path, samples: int, seed: int) -> dict | None:
    """The hard-link rule chosen on the gold dev split, its dev AER and its test AER with the CI;
    None when the dev split has no pair aligned by hand."""
    chosen = evaluate_alignment(model_dir, gold, ("dev", "test"), "dev", None, samples, seed).get("hard_links")
    if chosen is None:
        return None
    rule = chosen["rule"] + (f" {chosen['threshold']:g}" if chosen["threshold"] is not None else "")
    return {"rule": rule, "row": chosen["row"], "dev_aer": chosen["dev_aer"], "dev_pairs": chosen["dev_pairs"],
            "test_aer": chosen["test_aer"], "test_aer_ci": chosen["test_aer_ci"], "test_pairs": chosen["test_pairs"]}


def _speed(translators: list[Translator], texts: list[str], repeats: int) -> list[dict]:
    """Greedy sentences/s of each translator on `texts`, alternated within each round; the best round."""
    for translator in translators:
        translator.translate(texts[:8], SearchOptions(), max_rows=SPEED_ROWS)          # warm-up
    seconds: list[list[float]] = [[] for _ in translators]
    pieces = [0] * len(translators)
    for _ in range(repeats):
        for i, (translator, timings) in enumerate(zip(translators, seconds)):
            start = time.perf_counter()
            out = translator.translate(texts, SearchOptions(), max_rows=SPEED_ROWS)
            timings.append(time.perf_counter() - start)
            pieces[i] = sum(len(t.best.target_tokens) for t in out)
    # a model that writes longer outputs takes more steps for the same sentences: the pieces a
    # second (decoder steps of one row) compare the score functions' cost per step
    return [{"sentences_per_s": round(len(texts) / min(t), 1), "target_pieces_per_s": round(n / min(t)),
             "target_pieces": n, "seconds": [round(s, 3) for s in t]} for t, n in zip(seconds, pieces)]


def _gold_missing(gold: Path | None) -> str | None:
    """Why the AER is not measured, or None."""
    if gold is None:
        return "no gold set given"
    missing = [split for split in ("dev", "test") if not (Path(gold) / f"{split}.tsv").exists()]
    return f"no {' or '.join(f'{s}.tsv' for s in missing)} in {gold}" if missing else None


def bench_score_functions(models: list[Path], data_dirs: list[Path], gold: Path | None, sentences: int | None = None,
                          speed_sentences: int = 512, repeats: int = 3, threads: int = 0, samples: int = 1000,
                          seed: int = 25) -> dict:
    """One entry per model directory, in the order given; `gold` None (or without dev.tsv and
    test.tsv) leaves AER unmeasured. Speed is measured on the first data directory's test split."""
    scores = [score_function(model_dir) for model_dir in models]                 # refuse before any work
    translators = [Translator(Engine(model_dir, EngineOptions(intra_op_threads=threads)), max_tokens=100_000)
                   for model_dir in models]
    m = translators[0].engine.manifest
    splits = {Path(d).name: read_split(Path(d), "test", m.source_language, m.target_language) for d in data_dirs}
    test_sets = {name: spread(pairs, sentences) for name, pairs in splits.items()}
    speed_texts = spread([s for s, _ in splits[Path(data_dirs[0]).name]], speed_sentences)
    gold_skipped = _gold_missing(gold)

    report: dict = {
        "machine": {**machine(), "intra_op_threads": threads or "ONNX Runtime's default (one per core)"},
        "query": "s_{i−1}, the previous decoder state (Bahdanau et al. 2015), not Luong et al.'s h_t",
        "test_sets": {name: {"data": str(d), "sentences": len(test_sets[name]), "of": len(splits[name]),
                             "chosen": "whole split" if sentences is None or sentences >= len(splits[name])
                             else "evenly spaced"} for name, d in zip(splits, data_dirs)},
        "beam": BEAM, "sacrebleu": f"sacreBLEU {sacrebleu.__version__} defaults (13a, exp smoothing), detokenised",
        "gold": {"path": str(gold) if gold else None, "skipped": gold_skipped} if gold_skipped else
                {"path": str(gold), "rule_chosen_on": "dev", "samples": samples, "seed": seed},
        "speed": {"data": str(data_dirs[0]), "sentences": len(speed_texts), "search": "greedy",
                  "rows_per_step": SPEED_ROWS, "repeats": repeats, "kept": "best round, models alternated"},
        "models": []}
    for model_dir, name, translator in zip(models, scores, translators):
        report["models"].append({
            "model": str(model_dir), "name": translator.engine.manifest.name, "score_function": name,
            "label": LABELS[name], **dict(zip(("quality", "alpha"), _quality(translator, test_sets))),
            "alignment": None if gold_skipped else _alignment(model_dir, gold, samples, seed)})
    for entry, speed in zip(report["models"], _speed(translators, speed_texts, repeats)):
        entry["speed"] = speed
    return report


def _aer_cells(alignment: dict | None) -> list[str]:
    if alignment is None:
        return ["not measured", "—"]
    low, high = alignment["test_aer_ci"]
    return [f"{100 * alignment['test_aer']:.1f} [{100 * low:.1f}, {100 * high:.1f}]",
            f"{alignment['rule']} (dev {100 * alignment['dev_aer']:.1f})"]


def format_score_functions(report: dict) -> str:
    """The Markdown table, a row per model, and the line that says where and on what it was measured."""
    beam, sets = report["beam"], list(report["test_sets"])
    header = (["score function a(s_{i−1}, h_j)", "model"]
              + [f"{name} {search} BLEU / chrF" for name in sets for search in ("greedy", f"beam {beam}")]
              + ["gold test AER % [95 % CI]", "hard-link rule (dev AER %)", "greedy sentences/s",
                 "greedy target pieces/s", f"mean largest α ({sets[0]} greedy)"])
    lines = ["| " + " | ".join(header) + " |", "|---|---|" + "---:|" * (2 * len(sets)) + "---:|---|---:|---:|---:|"]
    for entry in report["models"]:
        quality = [f"{q[search]['bleu']:.1f} / {q[search]['chrf']:.1f}"
                   for q in (entry["quality"][name] for name in sets) for search in ("greedy", f"beam{beam}")]
        lines.append("| " + " | ".join([entry["label"], entry["name"], *quality, *_aer_cells(entry["alignment"]),
                                        f"{entry['speed']['sentences_per_s']:.1f}",
                                        f"{entry['speed']['target_pieces_per_s']:,}",
                                        f"{entry['alpha']['mean_largest_alpha']:.3f}"]) + " |")
    counts = ", ".join(f"{name} {t['sentences']}" + (" (whole split)" if t["chosen"] == "whole split"
                                                      else f" of {t['of']} (evenly spaced)")
                       for name, t in report["test_sets"].items())
    gold = report["gold"]
    if "skipped" in gold:
        aer = f"AER not measured ({gold['skipped']})"
    else:
        pairs = next((e["alignment"] for e in report["models"] if e["alignment"]), None)
        aer = (f"AER on {Path(gold['path']).name} test" + (f" ({pairs['test_pairs']} pairs)" if pairs else "")
               + f", rule chosen on dev, bootstrap CI over pairs ({gold['samples']} resamples)")
    host, speed = report["machine"], report["speed"]
    lines += ["", f"Measured {host['date']} on {host['cpu']} ({host['cores']} cores), ONNX Runtime "
                  f"{host['onnxruntime']}, intra-op threads {host['intra_op_threads']}. Every score reads the "
                  f"query {report['query']}. Test sentences: {counts}; {report['sacrebleu']}. {aer}. Speed: "
                  f"{speed['sentences']} {Path(speed['data']).name} test sentences, greedy, {speed['rows_per_step']} "
                  f"rows a step, models alternated, best of {speed['repeats']} "
                  f"round{'s' if speed['repeats'] != 1 else ''}."]
    return "\n".join(lines)
