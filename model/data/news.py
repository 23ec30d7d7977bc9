"""The news corpus: WMT's older news test sets, the usual training and tuning material.

`attnmt data news OUT --from DIR_OR_URL` reads the Spanish–English WMT news test sets as
Helsinki-NLP/OPUS-MT-testsets lays them out (`testsets/spa-eng/NAME.spa`, `NAME.eng`, line-aligned),
from a folder or from that folder's address (UPSTREAM, at the commit the corpus was documented
on). By convention the older years train and tune and newstest2013 stays a test set: train =
news-test2008, newssyscomb2009, newstest2009–2011; dev = newstest2012; test = newstest2013, kept
for reference. Each file's sha256 is checked against PINNED_SHA256.

Training pairs are filtered as the other corpora's (`filters.reject_reason`), except that long
sentences are kept: a 400-character news sentence is a sentence, not a table. Dev and test are
kept whole, as published, so that scores compare with others'.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from attnmt.model.data import decontaminate, upstream
from attnmt.model.data.filters import describe, reject_reason
from attnmt.model.data.gettext import normalise
from attnmt.model.data.splits import write_splits

UPSTREAM = ("https://raw.githubusercontent.com/Helsinki-NLP/OPUS-MT-testsets/"
            "ac0f19c0be3cb4e0d9450fcb2d7a9847c4bdd180/testsets/spa-eng/")
SPLITS = {"train": ("news-test2008", "newssyscomb2009", "newstest2009", "newstest2010", "newstest2011"),
          "dev": ("newstest2012",), "test": ("newstest2013",)}
PINNED_SHA256 = {
    "news-test2008.spa": "8480a85f47c652fac2f6d7acd7d0f7625ec13dd764397591c0a1d27e24815d0b",
    "news-test2008.eng": "134e1140848bb0d05e774dbe35b8b69602faf401250c03dbb437bdbe38c37b6f",
    "newssyscomb2009.spa": "caa8f6a3cb9b1a0e8d00f566e355af2e120734f4cb7a1be906d5a199c68382ed",
    "newssyscomb2009.eng": "b734a44294fa3b23a2491cd9a2c59fb5eb71332ace70b2c9039978863dd0e43d",
    "newstest2009.spa": "bb7dafdb6d4b60574f0d7362459f8c30724d4b80f2234b7a7ab84181d0c61012",
    "newstest2009.eng": "c74a4862decfe87f88fb10eacdcb6ac972a648f0dd6deeb25ac2dbc6128dc0b6",
    "newstest2010.spa": "f746037c558529dce0bd23ac73fdb4361cefaf2df482010fc0ae29ff389dacce",
    "newstest2010.eng": "1ebece77e333965cbc66fde735a6f17e026b4d6690f4f7fdaba839b7bdadac3b",
    "newstest2011.spa": "2cfc4007fa812891c6e89ccf0ee3b3c0d2fbfb422f54a3996cc60296224794b1",
    "newstest2011.eng": "d387569743c0fa9097df4d4e2c1dd9e6ba9ef3cee6e0f473da3204c887dcf8fd",
    "newstest2012.spa": "399bdda6a530fb1d0d4df28bcb6af055c607d0f0ab64894ac9d70b8047a91c7c",
    "newstest2012.eng": "f9e51f85c4948033fc7d77ef427f4d88908a8dd3f778970f62d0baafac3ff97e",
    "newstest2013.spa": "d188693be1ca37a4d3e70bea6edafe6fa9b779b02685fa7ed8d3c51e07b5f9d9",
    "newstest2013.eng": "ace268a1d9724ca76f6d8e5c720ffdc08f01bdce45630ed8b269dc7918e1c16e",
}
TERMS = ("WMT distributes its news test sets for research and evaluation: the data released for the news "
         "translation task may be freely used for research purposes, citing the WMT overview paper of the year "
         "and respecting any citation requirements of the individual sets; for other uses, consult the original "
         "owners of the texts (the news publishers)")


def read_set(location: str, name: str, cache: Path) -> tuple[list[tuple[str, str, str]], dict]:
    """(id, Spanish, English) rows of one test set and the two files' facts."""
    facts, sides = {}, {}
    for suffix in ("spa", "eng"):
        file = f"{name}.{suffix}"
        where = location.rstrip("/") + "/" + file if upstream.is_url(location) else str(Path(location) / file)
        path = upstream.obtain(where, cache)
        facts[file] = upstream.check(upstream.sha256(path), PINNED_SHA256.get(file), file)
        sides[suffix] = path.read_text(encoding="utf-8").splitlines()
    if len(sides["spa"]) != len(sides["eng"]):
        raise SystemExit(f"{name}: {len(sides['spa'])} Spanish lines against {len(sides['eng'])} English")
    rows = [(f"{name}/{n}", normalise(es), normalise(en)) for n, (es, en) in
            enumerate(zip(sides["spa"], sides["eng"]), 1)]
    return rows, facts


def build_corpus(sets: dict[str, list[tuple[str, str, str]]], held: decontaminate.HeldOut) -> tuple[dict, dict]:
    """Splits by SPLITS; train filtered, de-duplicated and decontaminated (its own dev and test held
    out besides `held`), dev decontaminated against test; counts per set."""
    own = decontaminate.HeldOut()
    for split in ("dev", "test"):
        for name in SPLITS[split]:
            own.add(name, "es", (es for _, es, _ in sets[name]))
            own.add(name, "en", (en for _, _, en in sets[name]))
    per_set, train, seen = {}, [], set()
    for name in SPLITS["train"]:
        dropped, removed = Counter(), Counter()
        kept = []
        for row in sets[name]:
            reason = reject_reason(row[1], row[2])
            reason = None if reason == "too_long" else reason
            if reason:
                dropped[reason] += 1
            elif held_out := own.match(row[1], row[2]) or held.match(row[1], row[2]):
                removed[held_out] += 1
            elif row[1:] in seen:
                dropped["duplicate"] += 1
            else:
                seen.add(row[1:])
                kept.append(row)
        per_set[name] = {"pairs": len(sets[name]), "dropped": dict(dropped), "decontaminated": dict(removed),
                         "train": len(kept)}
        train += kept
    splits = {"train": train}
    for split in ("dev", "test"):
        rows = [row for name in SPLITS[split] for row in sets[name]]
        removed = Counter()
        if split == "dev":                      # never a test sentence in dev
            test_only = decontaminate.HeldOut()
            for name in SPLITS["test"]:
                test_only.add(name, "es", (es for _, es, _ in sets[name]))
                test_only.add(name, "en", (en for _, _, en in sets[name]))
            rows = decontaminate.remove(rows, test_only, removed)
        splits[split] = rows
        for name in SPLITS[split]:
            per_set[name] = {"pairs": len(sets[name]), "decontaminated": dict(removed), split: len(rows)}
    counts = {"sets": per_set, **{split: len(rows) for split, rows in splits.items()}}
    return splits, counts


DATA_CARD = """# Data card: Spanish→English news (WMT news test sets 2008–2013)

- **What**: the Spanish–English news test sets of WMT (news articles, professionally translated,
  most in one direction from a third language or from either side), as Helsinki-NLP/OPUS-MT-testsets
  distributes them (`testsets/spa-eng/`). Spanish is the source, English the target.
- **Splits** (the usual convention): train = {train_sets}; dev = newstest2012 ({dev} pairs, whole);
  test = newstest2013 ({test} pairs, whole, for reference: never trained or tuned on).
- **Terms**: {terms}. Not a licence for commercial redistribution of the text: record these terms
  with any model trained on it.
- **Source**: `{location}`; files and sha256 below ({matches}).
- **Filters (train)**: dropped {dropped} (`model/data/filters.py`: empty, letterless, untranslated,
  Spanish side English, length ratio); long sentences kept; duplicate: the same pair twice.
- **Decontamination** (`model/data/decontaminate.py`): a training pair leaves when its Spanish is a
  held-out Spanish sentence or its English a held-out English sentence, compared lower-cased without
  punctuation or spaces; held out: this corpus's dev and test, and {held_out}. Removed: {removed}.
  Dev pairs that are test sentences removed: {dev_removed}.
- **Pairs**: train {train}, dev {dev}, test {test}. Files: `{{split}}.es`, `{{split}}.en`,
  `{{split}}.ids` (`set/line`); `counts.json`; `source.json` (files, sha256).
- **Caveats**: about 10,500 training pairs: too few to learn news alone, enough to tune towards it;
  the articles are 2008–2012 news (finance, politics) and much of the English is itself a
  translation.

| set | split | pairs | kept | dropped | decontaminated |
|---|---|---:|---:|---|---|
{table}

| file | sha256 | as documented |
|---|---|---|
{files}
"""


def write_card(out_dir: Path, counts: dict, facts: dict, held: decontaminate.HeldOut, location: str) -> None:
    rows = []
    for split, names in SPLITS.items():
        for name in names:
            s = counts["sets"][name]
            rows.append(f"| {name} | {split} | {s['pairs']} | {s.get(split, s.get('train'))} | "
                        f"{describe(s.get('dropped', {}))} | {describe(s['decontaminated'])} |")
    dropped, removed = Counter(), Counter()
    for name in SPLITS["train"]:
        dropped.update(counts["sets"][name]["dropped"])
        removed.update(counts["sets"][name]["decontaminated"])
    files = "\n".join(f"| {file} | `{f['sha256']}` | {'yes' if f['matches'] else 'no: a newer file'} |"
                      for file, f in facts.items())
    card = DATA_CARD.format(
        train_sets=", ".join(SPLITS["train"]), terms=TERMS, location=location,
        matches="all as documented" if all(f["matches"] for f in facts.values()) else "SOME DIFFER",
        dropped=describe(dict(dropped)), held_out=held.describe(), removed=describe(dict(removed)),
        dev_removed=describe(counts["sets"]["newstest2012"]["decontaminated"]), train=counts["train"],
        dev=counts["dev"], test=counts["test"], table="\n".join(rows), files=files)
    (out_dir / "DATA_CARD.md").write_text(card, encoding="utf-8")


def extract_news(out_dir: Path, location: str, exclude: list[Path] | None, cache: Path | None = None) -> dict:
    """`attnmt data news OUT_DIR --from DIR_OR_URL`: read, check, filter, decontaminate, document."""
    held = decontaminate.load(exclude)
    sets, facts = {}, {}
    for name in (name for names in SPLITS.values() for name in names):
        sets[name], set_facts = read_set(str(location), name, cache or out_dir / "cache")
        facts.update(set_facts)
    splits, counts = build_corpus(sets, held)
    write_splits(out_dir, splits)
    write_card(out_dir, counts, facts, held, str(location))
    (out_dir / "counts.json").write_text(json.dumps(counts, indent=2) + "\n")
    (out_dir / "source.json").write_text(json.dumps({"location": str(location), "files": facts}, indent=1) + "\n")
    return {split: counts[split] for split in SPLITS}
