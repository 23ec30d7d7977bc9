"""`attnmt evaluate-alignment`: AER, precision and recall of a model's word
alignments on the hand-aligned gold set (tests/data/gold-alignments/), for every
way the server makes links and every rule read from the same α, beside any links
file (a statistical aligner's), with bootstrap 95 % intervals.

The model aligns each gold pair by forced decoding of its reference through
`Translator.search(target=...)` and `Translator.result`, the path of the Align
RPC, so the served rows measure what the server returns. Readings of α, all at
the server's word level (sum over a word's source pieces, mean over its target
pieces, `</s>` dropped):

- `attention`: the α of the step that predicts each target piece (what is served);
- `shift-att`: Shift-Att (Chen et al. 2020, "Accurate word alignment induction from
  neural machine translation"): target piece k read at step k+1, the step whose
  decoder input is piece k; the last piece's row is the step that predicts `</s>`;
- `shift+2`: piece k read at step k+2. RNNsearch's step i scores the source with
  s_{i-1} (Bahdanau's query) and only then feeds its input y_{i-1} to the GRU, so
  the first query that has read piece k is s_{k+1}, at step k+2. Forced decoding
  stops after `</s>`, so the last piece falls back to the `</s>` step;
- `shift-1`: piece k read at step k-1 (the first piece at step 0). The served α
  tends to look one source word ahead ("The" → "gobierno"); this reads it back.

A word's rows are the mean of its pieces' rows (as the server aggregates). The
readings start from the served rows: for a model exported with
`--alignment-shift-att` (manifest `alignment.shift_att`), `attention` is already
Shift-Att and the others are shifted from there.
Each reading gives its target-side and source-side argmax, their intersection,
union and grow-diag(-final)(-and) (attnmt.service.modeldir.links), and a threshold
tuned on dev. The served rows call the server's own functions (`hard_alignment`):
argmax per target word (the default), α >= threshold, and argmax per target
piece mapped to words (`level="pieces"`).

The gold set is read in the model's direction: a model translating the reverse of what
its languages.txt declares (an English→Spanish model on the Spanish→English set) gets
every pair reversed, and the links files given for the gold pairs, which are in the gold
file's own direction, reversed with them (attnmt.corpus.word_links.gold_reversed).
"""

from __future__ import annotations

import json
import time
import unicodedata
from pathlib import Path

import numpy as np

from attnmt.bench.aer import aer_ratio, diagonal, pair_counts, score_with_intervals, scores
from attnmt.bench.loadtest import describe, machine
from attnmt.corpus.word_links import GoldPair, Links, gold_reversed, read_gold, read_links, reversed_links
from attnmt.service.inference.engine import Engine
from attnmt.service.modeldir.links import DEFAULT_RULE, RULES, rules_from_alpha, threshold_links
from attnmt.service.modeldir.manifest import load_manifest
from attnmt.service.text.alignment import EOS_TOKEN, shifted_rows, word_groups
from attnmt.service.text.translator import Hypothesis, Translator

GOLD = Path(__file__).resolve().parent.parent / "tests" / "data" / "gold-alignments"
READINGS = {"attention": 0, "shift-1": -1, "shift-att": 1, "shift+2": 2}   # reading: steps after piece k's own
SERVED_DEFAULT = "served: argmax per target word (default)"
SERVED_MANIFEST = "served: the manifest's rule (hard_links)"
THRESHOLDS = tuple(round(t, 2) for t in np.arange(0.05, 1.0, 0.05))


def word_map(server_words: list[str], text: str) -> list[int]:
    """Each server word's index among `text.split()` (the gold's words). They are the
    same words unless tokenisation changed the text; then by character position."""
    gold = text.split()
    if len(server_words) == len(gold):
        return list(range(len(gold)))
    key = lambda w: unicodedata.normalize("NFKC", w).replace("\u2581", "")           # noqa: E731
    gold_ends = np.cumsum([len(key(w)) for w in gold])
    starts = np.cumsum([0] + [len(key(w)) for w in server_words[:-1]])
    scale = gold_ends[-1] / max(1, starts[-1] + len(key(server_words[-1])))           # lengths may differ a little
    return [min(len(gold) - 1, int(np.searchsorted(gold_ends, s * scale, side="right"))) for s in starts]


def _readings(hyp: Hypothesis) -> dict[str, np.ndarray]:
    """Word-level α (target words x source words, no `</s>`) of each reading."""
    tokens = hyp.target_tokens
    assert tokens[-1] == EOS_TOKEN, "forced decoding ends with </s>"
    src_groups, tgt_groups = word_groups(hyp.source_tokens), word_groups(tokens)
    assert tgt_groups[-1] == [len(tokens) - 1] and src_groups[-1] == [len(hyp.source_tokens) - 1]
    src_starts = [g[0] for g in src_groups]
    words = tgt_groups[:-1]                                                       # target words, </s> dropped
    # alpha: target pieces (incl. </s>) x source pieces (incl. </s>); row k is the step that predicts piece k
    readings = {"attention": hyp.word_alignment[:-1, :-1]}
    for reading, shift in READINGS.items():
        if shift:                                                                 # a word's rows: its pieces', moved
            moved = np.add.reduceat(shifted_rows(hyp.alignment, shift), src_starts, axis=1)[:, :-1]   # </s> dropped
            readings[reading] = np.stack([moved[g].mean(axis=0) for g in words])
    return readings


def _served(hyp: Hypothesis, thresholds) -> dict[str, Links]:
    """The server's own hard links (word indices), including `level="pieces"` mapped to words."""
    piece_word = lambda tokens: {p: w for w, g in enumerate(word_groups(tokens)) for p in g}  # noqa: E731
    src_word, tgt_word = piece_word(hyp.source_tokens), piece_word(hyp.target_tokens)
    served = {SERVED_DEFAULT: set(hyp.hard_alignment(rule=DEFAULT_RULE)),
              "served: argmax per target piece, to words": {(src_word[i], tgt_word[j]) for i, j in
                                                          hyp.hard_alignment(level="pieces", rule=DEFAULT_RULE)}}
    if hyp.links_rule != (DEFAULT_RULE, None):            # the manifest's `hard_links`, as the server returns them
        served[SERVED_MANIFEST] = set(hyp.hard_alignment())
    for t in thresholds:
        served[f"served: α >= {t:g}"] = set(hyp.hard_alignment(t))
    return served


def model_links(model_dir: Path, pairs: list[GoldPair], thresholds=THRESHOLDS) -> tuple[list[dict[str, Links]], dict]:
    """For each pair, every rule's links in gold word indices; and how it went."""
    translator = Translator(Engine(model_dir), max_tokens=100_000)
    start = time.perf_counter()
    translations = translator.align([(p.source, p.target) for p in pairs])
    seconds = time.perf_counter() - start
    out, mismatched = [], 0
    for pair, translation in zip(pairs, translations):
        hyp = translation.best
        src_map, tgt_map = word_map(hyp.source_words[:-1], pair.source), word_map(hyp.target_words[:-1], pair.target)
        mismatched += len(src_map) != len(pair.source.split()) or len(tgt_map) != len(pair.target.split())
        links = _served(hyp, thresholds)
        for reading, alpha in _readings(hyp).items():
            for rule, found in rules_from_alpha(alpha).items():
                links[f"{reading} {rule}"] = found
            if reading != "attention":                  # the served threshold rows are attention's
                for t in thresholds:
                    links[f"{reading} α >= {t:g}"] = threshold_links(alpha, t)
        # the same links two ways: the served function, and this module's reading of α
        assert links.pop("attention target-argmax") == links[SERVED_DEFAULT]
        links = {name: {(src_map[i], tgt_map[j]) for i, j in found} for name, found in links.items()}
        links["diagonal (no model)"] = diagonal(len(pair.source.split()), len(pair.target.split()))
        out.append(links)
    return out, {"pairs": len(pairs), "seconds": round(seconds, 2), "word_count_mismatches": int(mismatched)}


def _counts(pairs: list[GoldPair], found: list[Links]) -> np.ndarray:
    return np.array([pair_counts(f, p.sure, p.possible) for p, f in zip(pairs, found)])      # pairs x 4


def _score(pairs: list[GoldPair], found: list[Links], samples: int, seed: int) -> dict:
    counts = _counts(pairs, found)
    result = score_with_intervals(counts, samples, seed)
    result["links"] = int(counts[:, 0].sum())
    for domain in sorted({p.domain for p in pairs}):
        rows = [n for n, p in enumerate(pairs) if p.domain == domain]
        result.setdefault("domains", {})[domain] = score_with_intervals(counts[rows], samples, seed)["aer"]
    return result


def evaluate_alignment(model_dir: Path, gold_dir: Path = GOLD, splits=("dev", "test"), tune_split: str = "dev",
                       links: dict[str, str] | None = None, samples: int = 1000, seed: int = 25) -> dict:
    """links: name -> Pharaoh file, one line per gold pair; `{split}` in the path is
    replaced by the split's name, its lines in the gold file's direction (reversed with the
    pairs). Thresholds are chosen on `tune_split` (lowest AER)."""
    m = load_manifest(model_dir, verify=False)
    reverse = gold_reversed(gold_dir, m.source_language, m.target_language)
    gold = {split: read_gold(Path(gold_dir) / f"{split}.tsv", reverse) for split in splits}
    scored = {split: [p for p in rows if p.annotated] for split, rows in gold.items()}
    everything = [p for split in splits for p in scored[split]]
    report: dict = {"model": str(model_dir), "gold": str(gold_dir), "machine": machine(),
                    "bootstrap": {"samples": samples, "seed": seed, "level": 0.95, "over": "sentence pairs"},
                    "metric": "micro AER, precision, recall (Och & Ney 2003), Sure ⊆ Possible",
                    "splits": {}, "external": {}}
    if reverse:
        report["gold_reversed"] = (f"{m.target_language}→{m.source_language} gold pairs and links files read "
                                   f"{m.source_language}→{m.target_language}")
    found, report["forced_decoding"] = model_links(model_dir, everything) if everything else ([], {})
    by_pair = {id(p): f for p, f in zip(everything, found)}
    for name, pattern in (links or {}).items():
        card = Path(pattern.replace("{split}", splits[0])).parent / "links.json"
        report["external"][name] = {"path": pattern, "card": json.loads(card.read_text()) if card.exists() else None}
        for split in splits:
            path = pattern.replace("{split}", split)
            lines = [reversed_links(line) for line in read_links(path)] if reverse else read_links(path)
            if len(lines) != len(gold[split]):
                raise ValueError(f"{path}: {len(lines)} lines for {len(gold[split])} gold pairs in {split}.tsv")
            for pair, line in zip(gold[split], lines):
                if pair.annotated:
                    by_pair[id(pair)][name] = line

    tuned: dict[str, float] = {}
    for split in sorted(splits, key=lambda name: name != tune_split):          # the tuning split first
        pairs = scored[split]
        entry = report["splits"][split] = {
            "pairs": len(gold[split]), "annotated": len(pairs),
            "domains": {d: sum(p.domain == d for p in pairs) for d in sorted({p.domain for p in pairs})},
            "sure": sum(len(p.sure) for p in pairs), "possible_only": sum(len(p.possible - p.sure) for p in pairs),
            "rules": {}}
        if not pairs:
            continue
        found_by = lambda name: [by_pair[id(p)][name] for p in pairs]                          # noqa: E731, B023
        for name in [n for n in by_pair[id(pairs[0])] if " >= " not in n]:
            entry["rules"][name] = _score(pairs, found_by(name), samples, seed)
        prefixes = ["served: α"] + [f"{r} α" for r in list(READINGS)[1:]]
        entry["sweep"] = {prefix: {f"{t:g}": round(float(scores(_counts(pairs, found_by(f"{prefix} >= {t:g}")))["aer"]),
                                                   4) for t in THRESHOLDS} for prefix in prefixes}
        if split == tune_split:
            tuned = {prefix: float(min(sweep, key=sweep.get)) for prefix, sweep in entry["sweep"].items()}
        for prefix, t in tuned.items():
            name = f"{prefix} >= {t:g} (tuned on {tune_split})"
            entry["rules"][name] = _score(pairs, found_by(f"{prefix} >= {t:g}"), samples, seed)
            by_pair.update({id(p): {**by_pair[id(p)], name: by_pair[id(p)][f"{prefix} >= {t:g}"]} for p in pairs})
        if split == tune_split:
            model_rules = [n for n in entry["rules"] if n not in report["external"] and not n.startswith("diagonal")]
            report["best_on_dev"] = min(model_rules, key=lambda n: entry["rules"][n]["aer"]["value"])
        compared = [SERVED_DEFAULT] + ([report["best_on_dev"]] if "best_on_dev" in report else [])
        entry["ratios"] = {f"{rule} / {ext}": aer_ratio(_counts(pairs, found_by(rule)), _counts(pairs, found_by(ext)),
                                                        samples, seed)
                           for ext in report["external"] for rule in dict.fromkeys(compared)}
    report["splits"] = {split: report["splits"][split] for split in splits}
    report["thresholds"] = {"tuned_on": tune_split, "chosen": tuned, "grid": list(THRESHOLDS)}
    if report["splits"].get(tune_split, {}).get("rules"):
        report["hard_links"] = choose_hard_links(report, tune_split)
    return report


def choose_hard_links(report: dict, tune_split: str = "dev") -> dict:
    """The hard-link rule a server can apply to its α (a rule of the `attention` reading, or
    the threshold tuned on `tune_split`) with the lowest AER on `tune_split`, and its AER on
    every split: what `--write-manifest` records as the manifest's `hard_links`
    (model/export/measured.py)."""
    rules = report["splits"][tune_split]["rules"]
    servable = {f"attention {rule}": (rule, None) for rule in RULES if f"attention {rule}" in rules}
    servable[SERVED_DEFAULT] = (DEFAULT_RULE, None)
    tuned = report["thresholds"]["chosen"].get("served: α")
    if tuned is not None:
        servable[f"served: α >= {tuned:g} (tuned on {tune_split})"] = ("threshold", tuned)
    best = min(servable, key=lambda name: (rules[name]["aer"]["value"], name != SERVED_DEFAULT))
    rule, threshold = servable[best]
    chosen: dict = {"rule": rule, "threshold": threshold, "row": best, "chosen_on": tune_split,
                    "gold": Path(report["gold"]).name, "measured": report["machine"].get("date")}
    if "gold_reversed" in report:
        chosen["gold_reversed"] = report["gold_reversed"]
    for split, entry in report["splits"].items():
        if best in entry["rules"]:
            aer = entry["rules"][best]["aer"]
            chosen[f"{split}_aer"] = round(aer["value"], 4)
            chosen[f"{split}_aer_ci"] = [round(aer["low"], 4), round(aer["high"], 4)]
            chosen[f"{split}_pairs"] = entry["annotated"]
    return chosen


def format_report(report: dict) -> str:
    """One table per split, rows in the order: external links files, served rules,
    each reading's rules, the diagonal floor."""
    out = [f"Gold set reversed: {report['gold_reversed']}.\n"] if "gold_reversed" in report else []
    for split, entry in report["splits"].items():
        domains = ", ".join(f"{n} {d}" for d, n in entry["domains"].items())
        out.append(f"Gold {split}: {entry['annotated']} of {entry['pairs']} pairs aligned by hand ({domains}); "
                   f"{entry['sure']} Sure, {entry['possible_only']} Possible-only links. AER, precision, recall in %, "
                   f"bootstrap 95 % CI ({report['bootstrap']['samples']} resamples of the pairs, "
                   f"seed {report['bootstrap']['seed']}).")
        if not entry["rules"]:
            out.append("  (no pair aligned by hand yet)\n")
            continue
        domain_names = list(entry["domains"])
        width = max(len(n) for n in entry["rules"]) + 2
        out.append(f"{'rule':<{width}}{'AER [95 % CI]':<22}{'precision':>10}{'recall':>8}"
                   + "".join(f"{d + ' AER':>14}" for d in domain_names))
        for name in sorted(entry["rules"], key=lambda n: _row_order(n, report["external"])):
            r = entry["rules"][name]
            aer = r["aer"]
            cell = f"{100 * aer['value']:.1f} [{100 * aer['low']:.1f}, {100 * aer['high']:.1f}]"
            out.append(f"{name:<{width}}{cell:<22}{100 * r['precision']['value']:>10.1f}"
                       f"{100 * r['recall']['value']:>8.1f}"
                       + "".join(f"{100 * r['domains'][d]['value']:>14.1f}" if d in r["domains"] else f"{'':>14}"
                                 for d in domain_names))
        for name, r in entry.get("ratios", {}).items():
            out.append(f"AER ratio {name}: {r['value']:.2f}× [{r['low']:.2f}, {r['high']:.2f}]")
        out.append("")
    if "best_on_dev" in report:
        out.append(f"Lowest dev AER of the model's rules: {report['best_on_dev']}.")
    if "hard_links" in report:
        chosen = report["hard_links"]
        rule = chosen["rule"] + (f" {chosen['threshold']:g}" if chosen["threshold"] is not None else "")
        out.append(f"The server's hard links (the servable rule with the lowest {chosen['chosen_on']} AER): {rule}, "
                   + ", ".join(f"{s} AER {100 * chosen[f'{s}_aer']:.1f} %" for s in report["splits"]
                               if f"{s}_aer" in chosen) + ".")
    decoding = report.get("forced_decoding") or {}
    if decoding:
        out.append(f"Forced decoding (the Align RPC's path): {decoding['pairs']} pairs in {decoding['seconds']} s; "
                   f"{decoding['word_count_mismatches']} pairs with server words other than the gold's (mapped by "
                   f"position). Machine: {describe(report['machine'])}.")
    for name, ext in report["external"].items():
        card = ext.get("card") or {}
        if card:
            # an aligner's card names no onnxruntime (`attnmt data links`: eflomal does not use it)
            where = describe({"onnxruntime": "not used", **card["machine"]}) if "machine" in card else "?"
            out.append(f"{name}: {card.get('aligner', '?')} ({ext['path']}), {card.get('pairs', '?')} pairs aligned "
                       f"in {card.get('seconds', '?')} s on {where}; settings {card.get('settings', {})}.")
    if report["thresholds"]["chosen"]:
        out.append("Thresholds tuned on " + report["thresholds"]["tuned_on"] + ": "
                   + ", ".join(f"{k} >= {v:g}" for k, v in report["thresholds"]["chosen"].items()))
    return "\n".join(out)


def _row_order(name: str, external: dict) -> tuple[int, int, str]:
    """External links files, served rules, then each reading's rules in RULES order, the diagonal last."""
    if name in external:
        return 0, 0, name
    if name.startswith("served"):
        return 1, 0, name
    for k, reading in enumerate(READINGS):
        if name.startswith(reading + " "):
            rule = name[len(reading) + 1:]
            return 2 + k, RULES.index(rule) if rule in RULES else len(RULES), name
    return 9, 0, name
