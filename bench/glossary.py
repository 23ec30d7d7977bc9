"""`attnmt bench glossary`: how a glossary file fares on a test split.

For each entry: its occurrences in the sources, how many of them the model
translates with the target term on its own, how many the glossary honours
(the target term is in the translation and each of its words is hard-aligned,
argmax of word-level α, to the source occurrence), and how often the reference
uses the term. BLEU and chrF without and with the glossary, over the whole split
and over the sentences that hold a term. For comparison, the simplest
alternative that needs no alignment: writing the target term into the source
before translating, hoping the model copies it ("source substitution").

Needs sacrebleu (the `train` extra); the server never imports this module.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from attnmt.corpus.splits import read_split
from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import SearchOptions
from attnmt.service.text.glossary import Glossary, Match, load
from attnmt.service.text.translator import Hypothesis, Translator, normalise


def _count(term: str, text: str) -> int:
    return len(re.findall(rf"(?<!\w){re.escape(term)}(?!\w)", text, re.IGNORECASE))


def honoured(hyp: Hypothesis, match: Match) -> bool:
    """The target term is in the text and every one of its words is aligned into the occurrence."""
    words = hyp.target_words[match.target_start:match.target_end]
    # the glossary's own rule (each target word's argmax source word), whatever the model serves
    links = dict((t, s) for s, t in hyp.hard_alignment(rule="target-argmax"))
    aligned = all(match.source_start <= links.get(t, -1) < match.source_end
                  for t in range(match.target_start, match.target_end))
    spelled = re.sub(r"[^\w\s]", "", " ".join(words)).casefold() == re.sub(r"[^\w\s]", "", match.target).casefold()
    return aligned and spelled and _count(match.target, hyp.text) > 0


def substituted(glossary: Glossary, text: str) -> str:
    """The source with each occurrence's target term written in its place."""
    words = normalise(text).split()
    for occ in reversed(glossary.find(text)):
        words[occ.start:occ.end] = [glossary.target_for(occ)]
    return " ".join(words)


def bench_glossary(model_dir: Path, data_dir: Path, glossary_file: Path, split: str = "test",
                   beam: int = 5) -> dict:
    import sacrebleu

    engine = Engine(model_dir)
    m = engine.manifest
    translator = Translator(engine, max_tokens=100_000)
    glossary = load(glossary_file)
    pairs = read_split(data_dir, split, m.source_language, m.target_language)
    sources, refs = [s for s, _ in pairs], [r for _, r in pairs]
    options = SearchOptions(beam_size=beam)
    plain = translator.translate(sources, options)
    with_glossary = [glossary.apply(t) for t in plain]
    substitution = translator.translate([substituted(glossary, s) for s in sources], options)

    entries = [{"source": e.source, "target": e.target, "occurrences": 0, "model_alone": 0, "honoured": 0,
                "substitution": 0, "reference": 0} for e in glossary.entries]
    affected = []
    for i, source in enumerate(sources):
        occurrences = glossary.find(source)
        if not occurrences:
            continue
        affected.append(i)
        best = with_glossary[i].best
        for entry in {o.entry for o in occurrences}:
            n = sum(o.entry == entry for o in occurrences)
            target = glossary.entries[entry].target
            row = entries[entry]
            row["occurrences"] += n
            row["model_alone"] += min(n, _count(target, plain[i].best.text))
            row["substitution"] += min(n, _count(target, substitution[i].best.text))
            row["reference"] += min(n, _count(target, refs[i]))
            row["honoured"] += sum(honoured(best, match) for match in best.glossary if match.entry == entry)

    def scores(hyps: list[str], indices: list[int]) -> dict:
        h, r = [hyps[i] for i in indices], [refs[i] for i in indices]
        return {"bleu": round(sacrebleu.corpus_bleu(h, [r]).score, 2),
                "chrf": round(sacrebleu.corpus_chrf(h, [r]).score, 2)}

    everything = list(range(len(sources)))
    runs = {"no glossary": [t.best.text for t in plain],
            "source substitution": [t.best.text for t in substitution],
            "glossary (attention-guided replacement)": [t.best.text for t in with_glossary]}
    total = sum(e["occurrences"] for e in entries)
    return {"model": str(model_dir), "data": f"{Path(data_dir).name}/{split}", "glossary": str(glossary_file),
            "beam": beam, "sentences": len(sources), "sentences_with_terms": len(affected), "occurrences": total,
            "entries": entries,
            "wrong_without": sum(e["model_alone"] < e["occurrences"] for e in entries if e["occurrences"]),
            "multi_word": sum(len(e["source"].split()) > 1 for e in entries),
            "honoured": sum(e["honoured"] for e in entries) / max(total, 1),
            "term_present": {name: sum(e[key] for e in entries) / max(total, 1) for name, key in
                             (("no glossary", "model_alone"), ("source substitution", "substitution"),
                              ("glossary (attention-guided replacement)", "honoured"))},
            "scores": {name: {"all": scores(hyps, everything), "with_terms": scores(hyps, affected)}
                       for name, hyps in runs.items()},
            "date": dt.date.today().isoformat()}


def format_glossary(report: dict) -> str:
    lines = [f"Glossary {report['glossary']} on {report['data']} with {report['model']} (beam {report['beam']}, "
             f"{report['date']}): {len(report['entries'])} entries, {report['multi_word']} of several words, "
             f"{report['wrong_without']} the model gets wrong alone; {report['occurrences']} occurrences in "
             f"{report['sentences_with_terms']} of {report['sentences']} sentences.", "",
             "| source | target | occurrences | model alone | source substitution | honoured | reference uses it |",
             "|---|---|---|---|---|---|---|"]
    for e in report["entries"]:
        lines.append(f"| {e['source']} | {e['target']} | {e['occurrences']} | {e['model_alone']} | "
                     f"{e['substitution']} | {e['honoured']} | {e['reference']} |")
    lines += ["", "| mechanism | term present (and aligned) | BLEU | chrF | BLEU, sentences with terms | "
                  "chrF, sentences with terms |", "|---|---|---|---|---|---|"]
    for name, s in report["scores"].items():
        lines.append(f"| {name} | {report['term_present'][name]:.1%} | {s['all']['bleu']} | {s['all']['chrf']} | "
                     f"{s['with_terms']['bleu']} | {s['with_terms']['chrf']} |")
    return "\n".join(lines)
