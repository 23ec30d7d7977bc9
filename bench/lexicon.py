"""`attnmt fit-lexicon`: a model's lexicon (service/text/lexicon.py) from Apertium's bilingual
dictionary, and what translating the words it never learnt by it changes on the dev sets.

Which words it holds was chosen on newstest2012 and the Tatoeba and help-prose dev sets (beam 5,
docs/benchmarks.md, "Words the model never learnt"): nouns and adjectives only (with verbs,
Spanish→English newstest2012 lost 0.03 BLEU against the model alone, where nouns and adjectives
gained 0.11), a word the model dropped left dropped (inserting it: within ±0.05), and a word as
written in small letters only (matched in any case, the adjective "libia" turned the country
"Libia" into "Libyan").

Which words count as never learnt: with the training source (`--corpus`), each candidate of
`--rare-below` takes the forms seen fewer than that many times in it, and the fit keeps the
decoding fits' rule (bench/decoding.py): the highest mean chrF over the dev sets among the
candidates that lose no dev set more than 0.3 BLEU against the model alone. A word the model saw
a few dozen times is often still translated wrong ("of luxury" → "de luxury"), and the dictionary's
word reads better on news (newstest2012, English→Spanish, BLEU 19.26 alone, 19.38 with the words
seen fewer than 5 times, 19.99 with those seen fewer than 80; docs/benchmarks.md). Without the
corpus, the lexicon holds the words the known-words list lacks (bench/names.py).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from attnmt.bench.decoding import MAX_BLEU_LOSS, choose
from attnmt.bench.names import dev_scores
from attnmt.corpus.splits import read_split
from attnmt.model.data.backtranslation import _installed_version
from attnmt.model.data.lexicon import APERTIUM_CODE, bidix_paths, build_lexicons, set_phrases
from attnmt.model.export.measured import write_names
from attnmt.service.inference.engine import Engine
from attnmt.service.modeldir.manifest import load_manifest, sha256_of
from attnmt.service.text.lexicon import Lexicon, write_genders, write_lexicon
from attnmt.service.text.names import count_words
from attnmt.service.text.phrases import FILE as PHRASES_FILE
from attnmt.service.text.phrases import Phrases, write_phrases
from attnmt.service.text.translator import Translator

FILE = "lexicon.tsv.gz"
GENDERS_FILE = "genders.tsv.gz"
RARE_BELOW = (5, 10, 20, 40, 80, 160)
RULE = (f"the highest mean chrF over the dev sets among the thresholds that lose no dev set more than "
        f"{MAX_BLEU_LOSS} BLEU against the model without a lexicon")


def rare_known(known: frozenset[str], corpus: Path, below: list[int]) -> dict[int, frozenset[str]]:
    """For each threshold, the known-words list less the small-letter words seen fewer than that many
    times in `corpus` (names, in capitals, are the list's)."""
    with open(corpus, encoding="utf-8") as f:
        counts = count_words(f)
    return {k: frozenset(w for w in known if w != w.lower() or counts[w] >= k) for k in below}


def fit_lexicon(model_dir: Path, data_dirs: list[Path], cache: Path, split: str = "dev", beam: int = 5,
                write: bool = True, corpus: Path | None = None, rare_below: list[int] | None = None) -> dict:
    """Build the lexicon for the model's pair and known-words list (with `corpus`, one for each of
    `rare_below` and the one RULE keeps), measure BLEU and chrF on `split` of each data directory
    with and without it, and with `write` put both in the model directory."""
    translator = Translator(Engine(model_dir), max_tokens=100_000)
    m = translator.engine.manifest
    if translator.names is None:
        raise SystemExit(f"{model_dir}: the model has no known-words list; run `attnmt fit-names` first")
    src, tgt = m.source_language, m.target_language
    if src not in APERTIUM_CODE or tgt not in APERTIUM_CODE:
        raise SystemExit(f"{model_dir}: Apertium's dictionary here is Spanish–English; the model is {src}→{tgt}")
    below = sorted(set(rare_below or RARE_BELOW)) if corpus is not None else [None]
    knowns = rare_known(translator.names.known, corpus, below) if corpus is not None else {None: translator.names.known}
    # the words of the training target beside the source (train.en → train.es): a Spanish target's
    # nouns, for their determiners, and the acronyms' translations it writes
    target = Path(corpus).with_suffix(f".{tgt}") if corpus is not None else None
    if target is not None and target.is_file():
        with open(target, encoding="utf-8") as f:
            target_counts = count_words(f)
    else:
        target, target_counts = None, None
    paths = bidix_paths(src, tgt, cache)              # lt-print's reading, once for the words and the phrases
    built = build_lexicons(src, tgt, knowns, paths, target_counts)
    dev = dev_scores(translator, data_dirs, split, beam, {"use_lexicon": False},
                     {str(k): Lexicon(*lexicon).apply for k, (*lexicon, _) in built.items()})
    chosen, mean_chrf = (None, None) if corpus is None else choose(dev, below, baseline="without")
    entries, forms, genders, counts = built[chosen]
    spec = {"file": FILE, "entries": len(entries), "pos": ["n", "adj", "np"],
            "source": {"package": "apertium-eng-spa", "version": _installed_version("apertium-eng-spa"),
                       "pair": f"{APERTIUM_CODE[src]}-{APERTIUM_CODE[tgt]}", "licence": "GPL-2.0-only"},
            "counts": counts, "beam": beam,
            "dev": {name: {"sentences": d["sentences"], "changed": d[str(chosen)]["changed"],
                           "without": d["without"], "with": {k: v for k, v in d[str(chosen)].items() if k != "changed"}}
                    for name, d in dev.items()},
            "date": dt.date.today().isoformat()}
    if corpus is not None:
        spec.update({"rare_below": chosen, "corpus": {"file": Path(corpus).name, "sha256": sha256_of(Path(corpus))},
                     "rule": RULE, "mean_chrf": {str(k): v for k, v in mean_chrf.items()},
                     "candidates": {str(k): {name: d[str(k)] for name, d in dev.items()} for k in below},
                     "candidate_entries": {str(k): len(built[k][0]) for k in below}})
    phrases = set_phrases(paths)
    spec["phrases"] = phrases_spec(phrases, data_dirs, split, src, tgt)
    if genders:
        spec["genders"] = {"file": GENDERS_FILE, "entries": len(genders), "pos": ["n"],
                           "corpus": {"file": target.name, "sha256": sha256_of(target)} if target else None}
    if write:
        write_lexicon(Path(model_dir) / FILE, entries, forms)
        if genders:
            write_genders(Path(model_dir) / GENDERS_FILE, genders)
        write_phrases(Path(model_dir) / PHRASES_FILE, phrases)
        write_names(model_dir, spec, section="lexicon", also=[PHRASES_FILE] + ([GENDERS_FILE] if genders else []),
                    gone=[] if genders else [GENDERS_FILE])   # a refit without them leaves no stale table
    return spec


def fit_phrases(model_dir: Path, data_dirs: list[Path], cache: Path, split: str = "dev") -> dict:
    """Add or renew the set phrases of a model's lexicon (`attnmt fit-lexicon --phrases-only`),
    its words as they are."""
    m = load_manifest(Path(model_dir))
    if not m.lexicon:
        raise SystemExit(f"{model_dir}: the model has no lexicon; run `attnmt fit-lexicon` first")
    src, tgt = m.source_language, m.target_language
    phrases = set_phrases(bidix_paths(src, tgt, cache))
    spec = {**m.lexicon, "phrases": phrases_spec(phrases, data_dirs, split, src, tgt)}
    write_phrases(Path(model_dir) / PHRASES_FILE, phrases)
    write_names(model_dir, spec, section="lexicon",
                also=[PHRASES_FILE] + ([spec["genders"]["file"]] if spec.get("genders") else []))
    return spec["phrases"]


def phrases_spec(phrases: dict[str, str], data_dirs: list[Path], split: str, src: str, tgt: str) -> dict:
    """The set phrases' manifest entry (service/text/phrases.py), with how many lines of each dev set
    are one of them: a greeting typed alone is rare in written text, so the dev sets barely see the
    rule; `attnmt bench typed` and the tests show it."""
    matcher = Phrases(phrases, tgt)
    matched = {}
    for data_dir in data_dirs:
        pairs = read_split(Path(data_dir), split, src, tgt)
        matched[f"{Path(data_dir).name}/{split}"] = sum(matcher.match(s) is not None for s, _ in pairs)
    return {"file": PHRASES_FILE, "entries": len(phrases), "pos": ["ij"], "dev_lines": matched}
