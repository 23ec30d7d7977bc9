"""`attnmt fit-lexicon`: a model's lexicon (service/text/lexicon.py) from Apertium's bilingual
dictionary, and what translating the words it never learnt by it changes on the dev sets.

Which words it holds was chosen on newstest2012 and the Tatoeba and help-prose dev sets (beam 5,
docs/benchmarks.md, "Words the model never learnt"): nouns and adjectives only (with verbs,
Spanish→English newstest2012 lost 0.03 BLEU against the model alone, where nouns and adjectives
gained 0.11), a word the model dropped left dropped (inserting it: within ±0.05), and a word as
written in small letters only (matched in any case, the adjective "libia" turned the country
"Libia" into "Libyan").
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from attnmt.bench.names import dev_change
from attnmt.model.data.backtranslation import _installed_version
from attnmt.model.data.lexicon import APERTIUM_CODE, build_lexicon
from attnmt.model.export.measured import write_names
from attnmt.service.inference.engine import Engine
from attnmt.service.text.lexicon import Lexicon, write_lexicon
from attnmt.service.text.translator import Translator

FILE = "lexicon.tsv.gz"


def fit_lexicon(model_dir: Path, data_dirs: list[Path], cache: Path, split: str = "dev", beam: int = 5,
                write: bool = True) -> dict:
    """Build the lexicon for the model's pair and known-words list, measure BLEU and chrF on
    `split` of each data directory with and without it, and with `write` put both in the model
    directory."""
    translator = Translator(Engine(model_dir), max_tokens=100_000)
    m = translator.engine.manifest
    if translator.names is None:
        raise SystemExit(f"{model_dir}: the model has no known-words list; run `attnmt fit-names` first")
    src, tgt = m.source_language, m.target_language
    if src not in APERTIUM_CODE or tgt not in APERTIUM_CODE:
        raise SystemExit(f"{model_dir}: Apertium's dictionary here is Spanish–English; the model is {src}→{tgt}")
    entries, forms, counts = build_lexicon(src, tgt, translator.names.known, cache)
    dev = dev_change(translator, data_dirs, split, beam, {"use_lexicon": False}, Lexicon(entries, forms).apply)
    spec = {"file": FILE, "entries": len(entries), "pos": ["n", "adj", "np"],
            "source": {"package": "apertium-eng-spa", "version": _installed_version("apertium-eng-spa"),
                       "pair": f"{APERTIUM_CODE[src]}-{APERTIUM_CODE[tgt]}", "licence": "GPL-2.0-only"},
            "counts": counts, "beam": beam, "dev": dev, "date": dt.date.today().isoformat()}
    if write:
        write_lexicon(Path(model_dir) / FILE, entries, forms)
        write_names(model_dir, spec, section="lexicon")
    return spec
