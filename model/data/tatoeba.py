"""The Tatoeba corpus: everyday sentence pairs, as manythings.org packages Tatoeba's sentences.

`attnmt data tatoeba OUT --from PATH_OR_URL` reads manythings' `spa.txt` (English<TAB>Spanish,
and in its newer releases a third column naming the two sentences' Tatoeba numbers and authors)
or the `spa-eng.zip` that holds it, from a path or from https://www.manythings.org/anki/spa-eng.zip.
The corpus is documented on the 2018-05-13 file (PINNED_SHA256); a newer one is built too, and
said to differ.

Spanish is the source, English the target. Tatoeba's public test set is drawn from the same
sentences: every held-out sentence (decontaminate.py) leaves first. Then a dev slice is held out
by English sentence: DEV_ENGLISH English sentences drawn at random, and every pair that has one
of them goes to dev, so no translation of a dev sentence trains; a training pair whose Spanish
is a dev pair's Spanish leaves too.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import zipfile
from collections import Counter
from pathlib import Path

from attnmt.model.data import decontaminate, upstream
from attnmt.model.data.filters import describe, reject_reason
from attnmt.model.data.gettext import normalise
from attnmt.model.data.splits import write_splits

UPSTREAM = "https://www.manythings.org/anki/spa-eng.zip"
PINNED_VERSION = "2018-05-13"
PINNED_SHA256 = "6ec60e212f812ee3430f7568ea6f33b6fb080e32193c5952e8da0ee8ba45574c"   # its spa.txt
DEV_ENGLISH = 1500
LICENCE = "CC-BY 2.0 FR"
CREDIT = "Tatoeba (tatoeba.org) and manythings.org/anki"
_NUMBERS = re.compile(r"#(\d+)")


def read_text(path: Path) -> tuple[str, dict]:
    """spa.txt's text, from the file or from the zip that holds it; where it came from and its
    sha256 checked against the pinned file."""
    facts: dict = {"file": path.name}
    if zipfile.is_zipfile(path):
        facts["zip_sha256"] = upstream.sha256(path)
        with zipfile.ZipFile(path) as z:
            name = next((n for n in z.namelist() if Path(n).name == "spa.txt"), None)
            if name is None:
                raise SystemExit(f"{path}: no spa.txt in the zip ({', '.join(z.namelist())})")
            data = z.read(name)
        facts.update(upstream.check(hashlib.sha256(data).hexdigest(), PINNED_SHA256, f"spa.txt in {path}"))
        return data.decode("utf-8"), facts
    facts.update(upstream.check(upstream.sha256(path), PINNED_SHA256, f"Tatoeba's {path}"))
    return path.read_text(encoding="utf-8"), facts


def read_pairs(text: str) -> list[tuple[str, str, str]]:
    """(id, Spanish, English) of each line: the id is the Tatoeba sentence numbers of the
    attribution column when there is one ("tatoeba#2877272#4767409"), else the line number."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("\t")
        if len(fields) < 2:
            continue
        numbers = _NUMBERS.findall(fields[2]) if len(fields) > 2 else []
        row_id = "tatoeba#" + "#".join(numbers) if numbers else f"tatoeba/line{number}"
        rows.append((row_id, normalise(fields[1]), normalise(fields[0])))
    return rows


def build_corpus(rows: list[tuple[str, str, str]], held: decontaminate.HeldOut, dev_english: int = DEV_ENGLISH,
                 seed: int = 2026) -> tuple[dict[str, list], dict]:
    """Filter, de-duplicate, decontaminate and split by English sentence; splits and counts."""
    dropped: Counter = Counter()
    seen, kept = set(), []
    for row in rows:
        reason = reject_reason(row[1], row[2]) or ("duplicate" if row[1:] in seen else None)
        if reason:
            dropped[reason] += 1
            continue
        seen.add(row[1:])
        kept.append(row)
    removed: Counter = Counter()
    kept = decontaminate.remove(kept, held, removed)
    english = sorted({decontaminate.key(en) for _, _, en in kept})
    dev_keys = set(random.Random(seed).sample(english, min(dev_english, len(english))))
    dev = [row for row in kept if decontaminate.key(row[2]) in dev_keys]
    own_dev = decontaminate.HeldOut()
    own_dev.add("own dev", "es", (es for _, es, _ in dev))
    own_dev.add("own dev", "en", (en for _, _, en in dev))
    rest = [row for row in kept if decontaminate.key(row[2]) not in dev_keys]
    train = decontaminate.remove(rest, own_dev, removed)
    counts = {"pairs": len(rows), "dropped": dict(dropped), "decontaminated": dict(removed),
              "dev_english_sentences": len(dev_keys), "train": len(train), "dev": len(dev)}
    return {"train": train, "dev": dev}, counts


DATA_CARD = """# Data card: Spanish→English everyday sentences (Tatoeba, as packaged by manythings.org)

- **What**: short everyday sentence pairs written and translated by Tatoeba's contributors
  (tatoeba.org), as manythings.org packages them for Anki (`spa.txt`: English, Spanish{third}).
  Spanish is the source, English the target.
- **Credit (required by the licence)**: {credit}.
- **Licence**: {licence} (Tatoeba's sentences: https://tatoeba.org/eng/terms_of_use,
  https://creativecommons.org/licenses/by/2.0/fr/). A model trained on it credits the line above
  in its own card.
- **Source file**: `{file}`, sha256 `{sha256}`; {version_note}. Upstream:
  {upstream} (newer and larger, with an attribution column).
- **Filters**: {pairs} pairs read; dropped {dropped} (untranslated: the two sides equal once
  case-folded; length_ratio: one side over twice the other once the longer has more than 20
  characters; `model/data/filters.py`); duplicate: the same pair twice.
- **Decontamination** (`model/data/decontaminate.py`): a pair leaves when its Spanish is a held-out
  Spanish sentence or its English a held-out English sentence, compared lower-cased without
  punctuation or spaces (NFKC, Unicode categories P, Z, Cc, Cf removed). Held-out sets: {held_out}.
  Removed: {removed}.
- **Dev split, by English sentence**: {dev_english} English sentences drawn at random (seed 2026);
  every pair with one of them is in dev ({dev} pairs), and a training pair with a dev pair's
  Spanish left train too (`own dev` above). No test split: Tatoeba's public test set
  (`tatoeba-test-v2021-08-07`) is the test.
- **Pairs**: train {train}, dev {dev}. Files: `{{split}}.es`, `{{split}}.en`, `{{split}}.ids`
  (`tatoeba#N#M`: the two sentences' Tatoeba numbers, when the file names them; else the line);
  `counts.json`, `source.json` (file, sha256).
- **Caveats**: Tatoeba's sentences are short and conversational, many alternative translations of
  the same sentence (Go. / Ve. / Vete. / Vaya.); some contributors' Spanish is non-native; the
  Spanish mixes Spain's and Latin America's usage.
"""


def write_card(out_dir: Path, counts: dict, facts: dict, held: decontaminate.HeldOut) -> None:
    version_note = (f"the {PINNED_VERSION} release this card's counts were first made on" if facts["matches"]
                    else f"not the {PINNED_VERSION} release (sha256 {PINNED_SHA256}): a newer file")
    card = DATA_CARD.format(
        third=", attribution" if counts.get("with_attribution") else "", credit=CREDIT, licence=LICENCE,
        file=facts["file"], sha256=facts["sha256"], version_note=version_note, upstream=UPSTREAM,
        pairs=counts["pairs"], dropped=describe(counts["dropped"]), held_out=held.describe(),
        removed=describe(counts["decontaminated"]), dev_english=counts["dev_english_sentences"],
        dev=counts["dev"], train=counts["train"])
    (out_dir / "DATA_CARD.md").write_text(card, encoding="utf-8")


def extract_tatoeba(out_dir: Path, location: str, exclude: list[Path] | None, cache: Path | None = None,
                    dev_english: int = DEV_ENGLISH) -> dict:
    """`attnmt data tatoeba OUT_DIR --from PATH_OR_URL`: read, filter, decontaminate, split, document."""
    held = decontaminate.load(exclude)
    path = upstream.obtain(location, cache or out_dir / "cache")
    text, facts = read_text(path)
    facts["location"] = str(location)
    rows = read_pairs(text)
    splits, counts = build_corpus(rows, held, dev_english)
    counts["with_attribution"] = sum(1 for row_id, _, _ in rows if row_id.startswith("tatoeba#"))
    write_splits(out_dir, splits)
    write_card(out_dir, counts, facts, held)
    (out_dir / "counts.json").write_text(json.dumps(counts, indent=2) + "\n")
    (out_dir / "source.json").write_text(json.dumps(facts, indent=1) + "\n")
    return {"train": counts["train"], "dev": counts["dev"], "decontaminated": sum(counts["decontaminated"].values())}
