"""`attnmt data links`: statistical word alignments of the training corpora, the
links guided alignment trains on and the reference the gold set measures attention
against.

The aligner is eflomal (Östling & Tiedemann 2016, "Efficient word alignment with
Markov chain Monte Carlo"; PyPI `eflomal`, GPL-3). It is a development tool in
the `align` extra: nothing in service/ imports it and the serving image never
holds it.

Words are the server's (`text.split()`: whitespace tokens, punctuation attached),
so a link's indices are `source_words`/`target_words` indices. The aligner sees
each word lower-cased with the punctuation at its edges stripped ("¿Dónde" →
"dónde", "tierra." → "tierra", "«%s»" → "%s"); a word of punctuation alone stays
as it is, so the aligner has exactly one token per word. It is trained once on the unique training
pairs of every data directory given plus the gold pairs, appended as unlabelled
text (standard practice for unsupervised aligners: their hand links are never
seen), in both directions, symmetrised grow-diag-final-and
(attnmt.service.modeldir.links, the same code the evaluation scores).

Writes, for each DATA_DIR, `train.links` (one Pharaoh line per line of its train
split) and `train.links.json` (the card: aligner, version, settings, the
checksums of the text it aligned); for the gold set, `{split}.links` (one line per
gold pair) and `links.json` in GOLD_OUT.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import tempfile
import time
import unicodedata
from importlib import metadata
from pathlib import Path

from attnmt.corpus.splits import corpus_files, read_parallel
from attnmt.corpus.word_links import Links, read_gold, read_links
from attnmt.model.data.placeholders import PLACEHOLDER
from attnmt.service.modeldir.links import format_pharaoh, grow_diag

# The gold set's source and target (tests/data/gold-alignments: Spanish words i, English words j).
GOLD_LANGUAGES = ("es", "en")

# eflomal.Aligner's defaults, written down so the card states them.
SETTINGS = {
    "model": 3,                 # IBM1, then HMM, then HMM with fertility
    "n_samplers": 3,            # independent Gibbs samplers, averaged
    "null_prior": 0.2,
    "rel_iterations": 1.0,      # iterations per model scaled from the corpus size (eflomal's default)
    "symmetrisation": "grow-diag-final-and",
    "words": "text.split(), lower-cased, punctuation at a word's edges stripped (placeholders and punctuation-only "
             "words kept)",
}


def aligner_word(word: str) -> str:
    """Lower-cased, punctuation at the edges stripped, but never a placeholder's (`%s`, `{0}`,
    `$HOME`: model/data/placeholders.py); a word of punctuation alone is kept whole."""
    lowered = word.lower()
    kept = [not unicodedata.category(c).startswith("P") for c in lowered]
    for m in PLACEHOLDER.finditer(word):
        kept[m.start():m.end()] = [True] * (m.end() - m.start())
    if not any(kept):
        return lowered
    start, end = kept.index(True), len(kept) - kept[::-1].index(True)
    return lowered[start:end]


def aligner_text(text: str) -> str:
    return " ".join(aligner_word(w) for w in text.split())


def align_pairs(pairs: list[tuple[str, str]], settings: dict = SETTINGS) -> list[Links]:
    """Links (source word, target word) of each pair, both directions symmetrised."""
    import eflomal  # the `align` extra

    aligner = eflomal.Aligner(model=settings["model"], n_samplers=settings["n_samplers"],
                              null_prior=settings["null_prior"], rel_iterations=settings["rel_iterations"])
    with tempfile.TemporaryDirectory() as tmp:
        forward_file, backward_file = Path(tmp) / "forward", Path(tmp) / "backward"
        # both outputs are source-target Pharaoh: forward has one source word per target word, backward the reverse
        aligner.align([aligner_text(s) for s, _ in pairs], [aligner_text(t) for _, t in pairs],
                      links_filename_fwd=str(forward_file), links_filename_rev=str(backward_file), quiet=True)
        forward, backward = read_links(forward_file), read_links(backward_file)
    if not (len(forward) == len(backward) == len(pairs)):
        raise RuntimeError(f"eflomal wrote {len(forward)} and {len(backward)} lines for {len(pairs)} pairs")
    return [grow_diag(f, b, "final-and") for f, b in zip(forward, backward)]


def machine() -> dict:
    """Where the aligner ran, for the card: its seconds depend on the CPU and on how busy it was."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"date": dt.date.today().isoformat(), "arch": platform.machine(), "cpu": cpu, "cores": os.cpu_count(),
            "load_average": round(os.getloadavg()[0], 2)}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_links(data_dirs: list[Path], gold_dir: Path | None = None, gold_out: Path | None = None,
                src_lang: str = "es", tgt_lang: str = "en", settings: dict = SETTINGS) -> dict:
    corpora = {}
    for data_dir in data_dirs:
        files = corpus_files(Path(data_dir), "train", src_lang, tgt_lang)
        corpora[Path(data_dir)] = (files, list(read_parallel(*files)))
    gold = {}
    if gold_dir is not None:
        if (src_lang, tgt_lang) != GOLD_LANGUAGES:     # its pairs would join the aligner's text reversed
            raise ValueError(f"the gold set is {GOLD_LANGUAGES[0]}->{GOLD_LANGUAGES[1]}: align {src_lang}->{tgt_lang} "
                             "corpora without --gold")
        gold = {path.stem: [(p.source, p.target) for p in read_gold(path)]
                for path in sorted(Path(gold_dir).glob("*.tsv"))}

    unique: dict[tuple[str, str], int] = {}
    for _, pairs in corpora.values():
        for pair in pairs:
            if pair[0] and pair[1]:
                unique.setdefault(pair, len(unique))
    training_pairs = len(unique)
    for pairs in gold.values():
        for pair in pairs:
            unique.setdefault(pair, len(unique))
    start = time.perf_counter()
    links = align_pairs(list(unique))
    seconds = round(time.perf_counter() - start, 1)

    card = {"aligner": f"eflomal {metadata.version('eflomal')}", "settings": settings,
            # i of `i-j` indexes the source_language's words (guided alignment checks it against its config)
            "source_language": src_lang, "target_language": tgt_lang,
            "machine": machine(), "seconds": seconds, "pairs": len(unique),
            "training_pairs": training_pairs, "gold_pairs_appended": len(unique) - training_pairs,
            "corpora": [str(d) for d in corpora], "gold": str(gold_dir) if gold_dir else None,
            "note": "eflomal seeds its samplers from the system: two runs differ slightly"}
    report = {"aligner": card["aligner"], "pairs": len(unique), "seconds": seconds, "written": []}
    for data_dir, (files, pairs) in corpora.items():
        out = data_dir / "train.links"
        out.write_text("".join(format_pharaoh(links[unique[p]]) + "\n" if p in unique else "\n" for p in pairs),
                       encoding="utf-8")
        own = {**card, "lines": len(pairs), "links": str(out),
               "text": {str(f): _sha256(f) for f in files if f is not None}}
        (data_dir / "train.links.json").write_text(json.dumps(own, indent=2, ensure_ascii=False) + "\n")
        report["written"].append(str(out))
    if gold and gold_out is not None:
        gold_out.mkdir(parents=True, exist_ok=True)
        for split, pairs in gold.items():
            (gold_out / f"{split}.links").write_text("".join(format_pharaoh(links[unique[p]]) + "\n" for p in pairs),
                                                     encoding="utf-8")
            report["written"].append(str(gold_out / f"{split}.links"))
        (gold_out / "links.json").write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n")
    return report
