"""`attnmt fit-names`: a model's known-words list (service/text/names.py) from its training
source, and what keeping the other names as written changes on the dev sets.

The counts that put a word in the list, and which words are names, were chosen on the dev sets
of the default Spanish→English Transformer (beam 5; docs/benchmarks.md, "Names kept as
written"): a capitalised word seen fewer than 20 times whose lower-case form was seen fewer than
5 times. A capitalised word seen fewer than 1, 5 or 50 times, or the lower-case form ignored,
gained less on newstest2012 (+0.18 to +0.29 BLEU against +0.30); keeping words with digits and
words inside longer tokens cost the help prose 0.32 BLEU (cells "F3", "CR+LF"), and leaving out
camelCase and all-capital words as well cost the software messages 0.03–0.04 and gained nothing.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Callable

import sacrebleu

from attnmt.corpus.splits import read_split
from attnmt.model.export.measured import write_names
from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import SearchOptions
from attnmt.service.modeldir.manifest import sha256_of
from attnmt.service.text.names import Names, build_known, write_known
from attnmt.service.text.translator import Translation, Translator

FILE = "known_words.txt.gz"
CAPITALISED_MIN = 20
LOWERCASE_MIN = 5


def dev_scores(translator: Translator, data_dirs: list[Path], split: str, beam: int, off: dict,
               steps: dict[str, Callable[[Translation], Translation]]) -> dict:
    """BLEU and chrF of `split` of each data directory translated with `off` (the translate
    arguments that leave a step out, under "without") and with each of `steps` run over those
    translations (under its label, with how many translations it changed): one search a set."""
    m = translator.engine.manifest
    dev = {}
    for data_dir in data_dirs:
        pairs = read_split(Path(data_dir), split, m.source_language, m.target_language)
        refs = [t for _, t in pairs]
        plain = translator.translate([s for s, _ in pairs], SearchOptions(beam_size=beam), **off)
        scores: dict = {"sentences": len(pairs)}
        for label, apply in (("without", None), *steps.items()):
            done = plain if apply is None else [apply(t) for t in plain]
            hyps = [t.best.text if t.hypotheses else "" for t in done]
            scores[label] = {"bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2),
                             "chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2)}
            if apply is not None:
                scores[label]["changed"] = int(sum(a.hypotheses and a.best.text != b.best.text
                                                   for a, b in zip(plain, done)))
        dev[f"{Path(data_dir).name}/{split}"] = scores
    return dev


def dev_change(translator: Translator, data_dirs: list[Path], split: str, beam: int, off: dict,
               apply: Callable[[Translation], Translation]) -> dict:
    """BLEU and chrF of `split` of each data directory without and with `apply`, and how many
    translations it changed."""
    dev = dev_scores(translator, data_dirs, split, beam, off, {"with": apply})
    return {name: {"sentences": d["sentences"], "changed": d["with"].pop("changed"), "without": d["without"],
                   "with": d["with"]} for name, d in dev.items()}


def fit_names(model_dir: Path, corpus: Path, data_dirs: list[Path], split: str = "dev", beam: int = 5,
              capitalised_min: int = CAPITALISED_MIN, lowercase_min: int = LOWERCASE_MIN,
              write: bool = True) -> dict:
    """Build the list from `corpus` (the training source, one sentence a line), measure BLEU and
    chrF on `split` of each data directory with and without it, and with `write` put both in
    the model directory."""
    with open(corpus, encoding="utf-8") as f:
        known = build_known(f, capitalised_min, lowercase_min)
    names = Names(frozenset(known))
    translator = Translator(Engine(model_dir), max_tokens=100_000)
    dev = dev_change(translator, data_dirs, split, beam, {"keep_names": False}, names.apply)
    spec = {"file": FILE, "capitalised_min": capitalised_min, "lowercase_min": lowercase_min,
            "words": len(known), "corpus": {"file": Path(corpus).name, "sha256": sha256_of(Path(corpus))},
            "beam": beam, "dev": dev, "date": dt.date.today().isoformat()}
    if write:
        write_known(Path(model_dir) / FILE, known)
        write_names(model_dir, spec)
    return spec
