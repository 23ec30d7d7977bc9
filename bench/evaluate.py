"""`attnmt evaluate`: sacreBLEU BLEU and chrF of an exported model on a test
split, greedy and beam, run by the serving engine (what users get), beside
Apertium's rule-based output when Apertium is installed; and alignment heatmaps
(target rows x source columns, like Figure 3 of Bahdanau et al.).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import sacrebleu

from attnmt.corpus.splits import read_split
from attnmt.model.data.placeholders import find_formats, find_options
from attnmt.model.export.measured import update_manifest
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.search import SearchOptions
from attnmt.service.plotting import plot_alignment
from attnmt.service.text.translator import Translator

APERTIUM_CODES = {"es": "spa", "en": "eng"}   # ISO 639-1 as the manifests write them → Apertium's pair names


def apertium_pair(source_language: str, target_language: str) -> str | None:
    """Apertium's name for a direction, `spa-eng` for es→en; None for a language it has no code for
    here (Apertium's column is then left out)."""
    if source_language not in APERTIUM_CODES or target_language not in APERTIUM_CODES:
        return None
    return f"{APERTIUM_CODES[source_language]}-{APERTIUM_CODES[target_language]}"


def apertium(sources: list[str], pair: str | None = "spa-eng") -> list[str] | None:
    """Apertium's translations of `sources`, a line each; None without a pair, when it is not
    installed, or when it fails."""
    if pair is None or shutil.which("apertium") is None:
        return None
    proc = subprocess.run(["apertium", "-u", pair], input="\n".join(sources) + "\n",
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    out = proc.stdout.rstrip("\n").split("\n")
    return out if len(out) == len(sources) else None


def score(hyps: list[str], refs: list[str]) -> dict:
    return {"bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2),
            "chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2)}


def paired_bootstrap(hyps: list[str], baseline: list[str], refs: list[str], samples: int = 1000) -> dict:
    """sacreBLEU's paired bootstrap resampling (Koehn 2004) of `hyps` against `baseline` on the same
    sentences: each metric's difference (hyps − baseline) and its p-value, as `sacrebleu --paired-bs`."""
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest
    if not len(hyps) == len(baseline) == len(refs):
        raise ValueError(f"paired bootstrap: {len(hyps)} hypotheses, {len(baseline)} baseline lines, "
                         f"{len(refs)} references")
    _, result = PairedTest([("baseline", baseline), ("system", hyps)], {"bleu": BLEU(), "chrf": CHRF()}, [refs],
                           test_type="bs", n_samples=samples)()
    out = {"samples": samples}
    for metric, key in zip(("bleu", "chrf"), [k for k in result if k != "System"]):
        base, system = result[key]
        out[metric] = {"difference": round(system.score - base.score, 2), "p": round(float(system.p_value), 4)}
    return out


def placeholders_kept(sources: list[str], hyps: list[str], find: Callable[[str], list[str]] = find_formats,
                      unit: str = "sentences") -> dict:
    """Of the sentences (`unit`) with placeholders (printf, brace, shell, inline tags; what
    `find` finds: `find_options` for command-line options), how many translations hold exactly
    the source's, as multisets; and how many translations of sentences without any hold one
    (`ARG1 % ARG2` written `%ARG2`)."""
    having = [(s, h) for s, h in zip(sources, hyps) if find(s)]
    kept = sum(Counter(find(s)) == Counter(find(h)) for s, h in having)
    invented = sum(bool(find(h)) for s, h in zip(sources, hyps) if not find(s))
    return {unit: len(having), "kept": kept, "share": round(kept / len(having), 4) if having else None,
            "invented": invented}


def shortlist_change(model_dir: Path, data_dir: Path, split: str = "dev") -> dict:
    """Greedy BLEU on `split` with and without the model's lexical shortlist, and the mean
    candidate count; recorded in the manifest's `shortlist` section by model/export/measured.py."""
    full = Engine(model_dir, EngineOptions(shortlist=False))
    listed = Engine(model_dir, EngineOptions(shortlist=True))
    m = full.manifest
    pairs = read_split(data_dir, split, m.source_language, m.target_language)
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    report = {"split": f"{Path(data_dir).name}/{split}"}
    for label, engine in (("full", full), ("shortlist", listed)):
        translator = Translator(engine, max_tokens=100_000)
        report[label] = score([t.best.text for t in translator.translate(sources)], refs)
    sizes = [len(listed.shortlist.candidates(full.tokenizer.encode(s) + [full.eos_id])) for s in sources]
    report["mean_candidates"] = round(sum(sizes) / len(sizes), 1)
    report["bleu_change"] = round(report["shortlist"]["bleu"] - report["full"]["bleu"], 2)
    update_manifest(model_dir, shortlist={"dev": report})
    return report


def evaluate(model_dir: Path, data_dir: Path, split: str = "test", beam: int = 5, heatmaps: int = 4,
             out: Path | None = None, write_manifest: bool = False, baseline: Path | None = None) -> dict:
    """`baseline`: another system's translations of the split, a line each (e.g. the bundled
    model's `eval/DATA/test.beam5.en`): the beam search's paired bootstrap against it goes into
    the report (`beamK.paired`), as does the one against Apertium (`apertium.paired`)."""
    engine = Engine(model_dir)
    translator = Translator(engine, max_tokens=100_000)
    m = engine.manifest
    pairs = read_split(data_dir, split, m.source_language, m.target_language)
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    out = out or model_dir / "eval" / Path(data_dir).name
    out.mkdir(parents=True, exist_ok=True)

    report: dict = {"data": str(data_dir), "split": split, "sentences": len(pairs), "date": dt.date.today().isoformat(),
                    "sacrebleu": f"sacreBLEU {sacrebleu.__version__} defaults (13a, exp smoothing), detokenised"}
    translations = {}
    runs = [("greedy", translator, SearchOptions()), (f"beam{beam}", translator, SearchOptions(beam_size=beam))]
    if engine.manifest.shortlist:            # the same model with its lexical shortlist, for comparison
        runs.append(("greedy-shortlist", Translator(Engine(model_dir, EngineOptions(shortlist=True)),
                                                    max_tokens=100_000), SearchOptions()))
    if translator.protector is not None:     # the same model with placeholder protection off, for comparison
        runs.append(("greedy-unprotected", Translator(engine, max_tokens=100_000, protect_placeholders=False),
                     SearchOptions()))
    for label, model, options in runs:
        start = time.perf_counter()
        translations[label] = model.translate(sources, options)
        seconds = time.perf_counter() - start
        hyps = [t.best.text for t in translations[label]]
        (out / f"{split}.{label}.{m.target_language}").write_text("\n".join(hyps) + "\n", encoding="utf-8")
        report[label] = {**score(hyps, refs), "seconds": round(seconds, 1),
                         "placeholders": placeholders_kept(sources, hyps),
                         "options": placeholders_kept(sources, hyps, find_options)}
    best = [t.best.text for t in translations[f"beam{beam}"]]
    if baseline is not None:
        other = Path(baseline).read_text(encoding="utf-8").rstrip("\n").split("\n")
        report[f"beam{beam}"]["paired"] = {"against": str(baseline), **paired_bootstrap(best, other, refs)}
    rule_based = apertium(sources, apertium_pair(m.source_language, m.target_language))
    if rule_based is not None:
        report["apertium"] = {**score(rule_based, refs), "placeholders": placeholders_kept(sources, rule_based),
                              "options": placeholders_kept(sources, rule_based, find_options),
                              "paired": {"against": f"beam{beam}", **paired_bootstrap(rule_based, best, refs)}}

    for n in range(min(heatmaps, len(pairs))):
        index = n * max(1, len(pairs) // max(heatmaps, 1))
        hyp = translations[f"beam{beam}"][index].best
        plot_alignment(hyp, out / f"alignment-{index}.png", title=f"{sources[index][:80]}")
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    if write_manifest:
        update_manifest(model_dir, evaluation={f"{Path(data_dir).name}/{split}": report})
    return report
