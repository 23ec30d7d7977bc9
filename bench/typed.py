"""`attnmt bench typed`: short sentences as people type them into a box, against the same
sentences as written.

Parallel corpora are written text, closed by a mark and opened by a capital; a translation box
gets "hola", "buenos dias" and "where is the station". From a split's pairs of `max_words` source
words or fewer, the variants of model/data/variants.py (the ones training can learn from):
- written: the pairs as they are;
- unpunctuated: those whose two sides end in a mark, without it (and without Spanish's opening
  "¿" "¡"), both sides;
- lower-cased: the unpunctuated ones with the source's first letter lower-cased, the reference kept;
- unaccented: the written ones with the source's accents and opening marks dropped, the reference
  kept (only where some source has accents to drop: Spanish).
Each model translates every variant (beam 5 by default, its lexicon and names as served) and gets
corpus BLEU and chrF against that variant's references. No torch: the served engine.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attnmt.bench.loadtest import machine
from attnmt.corpus.splits import read_split
from attnmt.model.data.variants import lowercased, unaccented, unpunctuated
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.search import SearchOptions
from attnmt.service.modeldir.manifest import load_manifest
from attnmt.service.text.translator import Translator


def variants(pairs: list[tuple[str, str]], max_words: int) -> dict[str, list[tuple[str, str]]]:
    """(source, reference) pairs of each variant, from the pairs of `max_words` source words or fewer."""
    short = [(s, t) for s, t in pairs if 0 < len(s.split()) <= max_words]
    bare = [p for p in (unpunctuated(s, t) for s, t in short) if p is not None]
    out = {"written": short,
           "unpunctuated": bare,
           "lower-cased": [(lowercased(s) or s, t) for s, t in bare],
           "unaccented": [(u, t) for u, t in ((unaccented(s), t) for s, t in short) if u is not None]}
    return {name: rows for name, rows in out.items() if rows}


def bench_typed(models: list[Path], data: Path, split: str = "dev", max_words: int = 4, beam: int = 5) -> dict:
    import sacrebleu
    first = load_manifest(models[0], verify=False)
    pairs = read_split(data, split, first.source_language, first.target_language)
    sets = variants(pairs, max_words)
    report: dict = {"machine": machine(), "data": str(data), "split": split, "max_words": max_words, "beam": beam,
                    "sentences": {name: len(rows) for name, rows in sets.items()}, "models": {}}
    for model in models:
        m = load_manifest(model, verify=False)
        if (m.source_language, m.target_language) != (first.source_language, first.target_language):
            raise ValueError(f"{model} translates {m.source_language}→{m.target_language}, "
                             f"{models[0]} {first.source_language}→{first.target_language}")
        translator = Translator(Engine(model, EngineOptions()), max_tokens=10_000)
        scores = {}
        for name, rows in sets.items():
            hyps = [t.best.text for t in translator.translate([s for s, _ in rows], SearchOptions(beam_size=beam))]
            refs = [[t for _, t in rows]]
            scores[name] = {"bleu": round(sacrebleu.corpus_bleu(hyps, refs).score, 2),
                            "chrf": round(sacrebleu.corpus_chrf(hyps, refs).score, 2)}
        report["models"][str(model)] = {"name": m.name, "version": m.version, "scores": scores}
    return report


def format_typed(report: dict) -> str:
    models = report["models"]
    labels = [v["name"] if Path(k).name == v["name"] else f"{v['name']} ({k})" for k, v in models.items()]
    head = "| variant | sentences | " + " | ".join(labels) + " |"
    lines = [f"{report['data']} {report['split']}, sources of {report['max_words']} words or fewer, beam "
             f"{report['beam']}, BLEU / chrF", "", head, "|---|---:|" + "---:|" * len(models)]
    for name, count in report["sentences"].items():
        cells = [f"{v['scores'][name]['bleu']:.2f} / {v['scores'][name]['chrf']:.2f}" for v in models.values()]
        lines.append(f"| {name} | {count} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cmd_bench_typed(args: argparse.Namespace) -> int:
    import sys

    from attnmt.bench.reports import show
    try:
        report = bench_typed(args.model, args.data, args.split, args.max_words, args.beam)
    except (FileNotFoundError, ValueError) as e:       # no such split; models of different directions
        print(f"attnmt bench typed: {e}", file=sys.stderr)
        return 2
    show(report, format_typed(report), args.json)
    return 0
