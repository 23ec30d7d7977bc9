"""`attnmt fit-length-penalty`, `attnmt fit-first-word` and `attnmt fit-split`: the length penalty a
model's requests get when they name none, which lines have their first word read in small letters
(`decoding.first_word`, service/text/case.py `first_small`) and past how many words a sentence is
translated in parts (`decoding.split_above_words`, service/text/clauses.py), each chosen on its dev
sets and written into its manifest (`decoding`).

A hypothesis is scored by log P / length^α. Each candidate α translates the dev split of every
data directory (beam 5 by default, the model's lexicon and names as served). Kept: the α with
the highest mean chrF over the dev sets, each set weighing the same, among those that lose no dev
set more than 0.3 BLEU against α 1.0 (the rule the project holds int8 to). chrF counts what a
too-short translation leaves out, which is what α trades; left alone it keeps rewarding longer
output (English→Spanish: its mean rose up to α 2.0 while Tatoeba lost 0.5 BLEU), hence the guard.
English→Spanish translations ran about a tenth shorter than their references on news at α 1.0
(docs/benchmarks.md, "Length penalty").
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from statistics import mean
from typing import Callable

import sacrebleu

from attnmt.corpus.splits import read_split
from attnmt.model.export.measured import update_manifest
from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import DEFAULT_LENGTH_PENALTY, SearchOptions
from attnmt.service.text.case import FIRST_WORD_RULES, first_small
from attnmt.service.text.translator import Translator, normalise

MAX_BLEU_LOSS = 0.3
RULE = (f"the highest mean chrF over the dev sets among the values that lose no dev set more than {MAX_BLEU_LOSS} "
        f"BLEU against {DEFAULT_LENGTH_PENALTY}")
SPLIT_CANDIDATES = [20, 25, 30, 40, 50]
SPLIT_RULE = ("the highest mean chrF over the dev sets among the values that lose no dev set more than "
              f"{MAX_BLEU_LOSS} BLEU against 0 (never)")
FIRST_WORD_RULE = (f"the highest mean chrF over the dev sets among the rules that lose no dev set more than "
                   f"{MAX_BLEU_LOSS} BLEU against never")


def choose(dev: dict[str, dict], values: list, baseline=DEFAULT_LENGTH_PENALTY) -> tuple:
    """The value RULE keeps against `baseline`, and each value's mean chrF; `dev` holds each set's
    scores by str(value). Where every value loses a set more than the rule allows, the first."""
    mean_chrf = {value: round(mean(d[str(value)]["chrf"] for d in dev.values()), 3) for value in values}
    base = str(baseline)
    allowed = [v for v in values if all(d[str(v)]["bleu"] >= d[base]["bleu"] - MAX_BLEU_LOSS for d in dev.values())]
    allowed = allowed or values[:1]
    return max(allowed, key=lambda v: (mean_chrf[v], v == baseline)), mean_chrf


def fit_length_penalty(model_dir: Path, data_dirs: list[Path], values: list[float], split: str = "dev",
                       beam: int = 5, limit: int | None = None, write: bool = True,
                       log: Callable[[str], None] = lambda message: None) -> dict:
    """BLEU, chrF and length ratio of `split` of each data directory at each length penalty in
    `values` (at most `limit` sentences of each); with `write`, the chosen one into the manifest."""
    values = sorted(set(values) | {DEFAULT_LENGTH_PENALTY})      # the baseline the guard compares with
    translator = Translator(Engine(model_dir), max_tokens=100_000)
    m = translator.engine.manifest
    dev: dict[str, dict] = {}
    for data_dir in data_dirs:
        pairs = read_split(Path(data_dir), split, m.source_language, m.target_language)[:limit]
        refs = [[t for _, t in pairs]]
        scores = {}
        for value in values:
            hyps = [t.best.text if t.hypotheses else "" for t in
                    translator.translate([s for s, _ in pairs], SearchOptions(beam_size=beam, length_penalty=value))]
            bleu, chrf = sacrebleu.corpus_bleu(hyps, refs), sacrebleu.corpus_chrf(hyps, refs)
            scores[str(value)] = {"bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2),
                                  "length_ratio": round(bleu.sys_len / max(bleu.ref_len, 1), 3)}
            log(f"{Path(data_dir).name}/{split} length_penalty {value}: {scores[str(value)]}")
        dev[f"{Path(data_dir).name}/{split}"] = {"sentences": len(pairs), **scores}
    chosen, mean_chrf = choose(dev, values)
    spec = {"length_penalty": chosen, "chosen_on": split, "rule": RULE, "candidates": values,
            "mean_chrf": {str(v): c for v, c in mean_chrf.items()}, "beam": beam, "limit": limit, "dev": dev,
            "date": dt.date.today().isoformat()}
    if write:
        update_manifest(model_dir, decoding=spec)
    return spec


def fit_first_word(model_dir: Path, data_dirs: list[Path], split: str = "dev", beam: int = 5,
                   limit: int | None = None, write: bool = True,
                   log: Callable[[str], None] = lambda message: None) -> dict:
    """BLEU and chrF of `split` of each data directory with each first-word rule (FIRST_WORD_RULES),
    kept by FIRST_WORD_RULE; with `write`, the chosen rule into the manifest. Each set is
    translated once as sent; a rule's lines are translated again with their first word small."""
    translator = Translator(Engine(model_dir), max_tokens=100_000)
    m = translator.engine.manifest
    if translator.names is None:
        raise SystemExit(f"attnmt fit-first-word: {model_dir} has no known-words list (attnmt fit-names first)")
    known = translator.names.known
    pattern = translator.protector.pattern if translator.protector else None
    options = SearchOptions(beam_size=beam)
    dev: dict[str, dict] = {}
    for data_dir in data_dirs:
        pairs = read_split(Path(data_dir), split, m.source_language, m.target_language)[:limit]
        sources, refs = [s for s, _ in pairs], [[t for _, t in pairs]]
        translator.first_word = "never"
        as_sent = [t.best.text if t.hypotheses else "" for t in translator.translate(sources, options)]
        scores = {}
        for rule in FIRST_WORD_RULES:
            translator.first_word = rule
            lines = [i for i, s in enumerate(sources) if first_small(normalise(s), known, rule, pattern)]
            hyps = list(as_sent)
            for i, t in zip(lines, translator.translate([sources[i] for i in lines], options)):
                hyps[i] = t.best.text if t.hypotheses else ""
            scores[rule] = {"bleu": round(sacrebleu.corpus_bleu(hyps, refs).score, 2),
                            "chrf": round(sacrebleu.corpus_chrf(hyps, refs).score, 2), "lines": len(lines)}
            log(f"{Path(data_dir).name}/{split} first_word {rule}: {scores[rule]}")
        dev[f"{Path(data_dir).name}/{split}"] = {"sentences": len(pairs), **scores}
    chosen, mean_chrf = choose(dev, list(FIRST_WORD_RULES), baseline="never")
    spec = {"first_word": chosen, "first_word_chosen": {
        "on": split, "rule": FIRST_WORD_RULE,
        "mean_chrf": mean_chrf, "beam": beam, "limit": limit, "dev": dev, "date": dt.date.today().isoformat()}}
    if write:
        update_manifest(model_dir, decoding=spec)
    return spec


def fit_split(model_dir: Path, data_dirs: list[Path], values: list[int] = SPLIT_CANDIDATES, split: str = "dev",
              beam: int = 5, limit: int | None = None, write: bool = True,
              log: Callable[[str], None] = lambda message: None) -> dict:
    """BLEU and chrF of `split` of each data directory with sentences of more than each of `values`
    words translated in parts (0: never), kept by SPLIT_RULE; with `write`, the chosen value into the
    manifest. Each set is translated once whole; a value's long lines are translated again in parts."""
    values = sorted(set(values) | {0})
    translator = Translator(Engine(model_dir), max_tokens=100_000)
    m = translator.engine.manifest
    options = SearchOptions(beam_size=beam)
    dev: dict[str, dict] = {}
    for data_dir in data_dirs:
        pairs = read_split(Path(data_dir), split, m.source_language, m.target_language)[:limit]
        sources, refs = [s for s, _ in pairs], [[t for _, t in pairs]]
        whole = [t.best.text if t.hypotheses else "" for t in translator.translate(sources, options, split_above=0)]
        scores = {}
        for value in values:
            lines = [i for i, s in enumerate(sources) if value and len(translator.parts(s, value)) > 1]
            hyps = list(whole)
            for i, t in zip(lines, translator.translate([sources[i] for i in lines], options, split_above=value)):
                hyps[i] = t.best.text if t.hypotheses else ""
            scores[str(value)] = {"bleu": round(sacrebleu.corpus_bleu(hyps, refs).score, 2),
                                  "chrf": round(sacrebleu.corpus_chrf(hyps, refs).score, 2), "lines": len(lines)}
            log(f"{Path(data_dir).name}/{split} split_above_words {value}: {scores[str(value)]}")
        dev[f"{Path(data_dir).name}/{split}"] = {"sentences": len(pairs), **scores}
    chosen, mean_chrf = choose(dev, values, baseline=0)
    spec = {"split_above_words": chosen, "split_chosen": {
        "on": split, "rule": SPLIT_RULE, "candidates": values, "mean_chrf": {str(v): c for v, c in mean_chrf.items()},
        "beam": beam, "limit": limit, "dev": dev, "date": dt.date.today().isoformat()}}
    if write:
        update_manifest(model_dir, decoding=spec)
    return spec
