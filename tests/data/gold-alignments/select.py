"""Choose the sentence pairs of the hand-aligned gold standard (see GUIDELINES.md).

Deterministic: the same test splits give the same 150 pairs.

- Bible: 100 verses of `data/bible/test.*` (Reina-Valera 1909 -> World English Bible).
- Software: 50 messages of `data/gettext/test.*` (git, coreutils, tar, wget catalogs).
- Pairs with more than MAX_WORDS whitespace words on either side are skipped.
- Software messages with at least MIN_SOFTWARE_WORDS words on both sides are
  preferred: the sample is drawn from them, and only topped up from shorter
  messages if there were too few.
- One `random.Random(SEED)` draws the Bible sample, then the software sample.
  The first third of each sample (33 verses, 17 messages) is dev, the rest test;
  within a file pairs keep corpus order, Bible first.
- Pairs the annotators found not to be translations of each other (EXCLUDED,
  with the reason) are replaced, after both samples are drawn, by further draws
  of the same generator from the same domain, so the rest of the selection stays put.
- Ids: the verse reference for the Bible (`Ruth 1:1`); `package/catalog:LINE`
  for software, LINE being the 1-based line of the message in the test split.

Usage (from the repository root, after `make data`):

    python tests/data/gold-alignments/select.py           # check the gold files hold exactly this selection
    python tests/data/gold-alignments/select.py --write   # (re)write them; links already annotated are kept by id
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

SEED = 2025
MAX_WORDS = 40
MIN_SOFTWARE_WORDS = 4
SAMPLE = {"bible": 100, "software": 50}
DEV = {"bible": 33, "software": 17}
CORPORA = {"bible": Path("data/bible"), "software": Path("data/gettext")}
# Found while annotating: not parallel, so nothing to align. Each is replaced (see above).
EXCLUDED = {
    "Jonah 2:9": "verse numbering differs: Reina-Valera follows the Hebrew (English Jonah 1:17 is its 2:1), "
                 "so its 2:9 translates the WEB's 2:8",
}
HERE = Path(__file__).resolve().parent
HEADER = "id\tdomain\tsource\ttarget\tlinks"


def read_split(data_dir: Path, domain: str) -> list[tuple[str, str, str]]:
    """(id, source, target) of a test split: `test.tsv` (source<TAB>target) or `test.es`/`test.en`/`test.ids`."""
    tsv = data_dir / "test.tsv"
    if tsv.exists():
        rows = [line.rstrip("\n").split("\t") for line in tsv.open(encoding="utf-8")]
        pairs = [(s.strip(), t.strip()) for s, t in rows]
        ids = [f"line:{n}" for n in range(1, len(pairs) + 1)]
    else:
        src = (data_dir / "test.es").read_text(encoding="utf-8").splitlines()
        tgt = (data_dir / "test.en").read_text(encoding="utf-8").splitlines()
        ids = (data_dir / "test.ids").read_text(encoding="utf-8").splitlines()
        assert len(src) == len(tgt) == len(ids), f"{data_dir}: test files differ in length"
        pairs = [(s.strip(), t.strip()) for s, t in zip(src, tgt)]
    if domain == "software":  # package/catalog is shared by many messages: add the line number
        ids = [f"{i}:{n}" for n, i in enumerate(ids, 1)]
    return [(i, s, t) for i, (s, t) in zip(ids, pairs)]


def short_enough(pair: tuple[str, str, str]) -> bool:
    return len(pair[1].split()) <= MAX_WORDS and len(pair[2].split()) <= MAX_WORDS


def choose(root: Path) -> dict[str, list[tuple[str, str, str, str]]]:
    """{'dev': [...], 'test': [...]} of (id, domain, source, target)."""
    rng = random.Random(SEED)
    out: dict[str, list] = {"dev": [], "test": []}
    samples = {}
    for domain in ("bible", "software"):
        pairs = read_split(root / CORPORA[domain], domain)
        eligible = [p for p in pairs if short_enough(p)]
        if domain == "software":
            long_ = [p for p in eligible if min(len(p[1].split()), len(p[2].split())) >= MIN_SOFTWARE_WORDS]
            short = [p for p in eligible if p not in long_]
            sample = rng.sample(long_, min(SAMPLE[domain], len(long_)))
            sample += rng.sample(short, SAMPLE[domain] - len(sample))
        else:
            sample = rng.sample(eligible, SAMPLE[domain])
        samples[domain] = (pairs, eligible, sample)
    for domain, (pairs, eligible, sample) in samples.items():
        order = {p[0]: n for n, p in enumerate(pairs)}
        for k in range(len(sample)):
            while sample[k][0] in EXCLUDED:
                sample[k] = rng.choice([p for p in eligible if p not in sample and p[0] not in EXCLUDED])
        for split, part in (("dev", sample[:DEV[domain]]), ("test", sample[DEV[domain]:])):
            out[split] += [(i, domain, s, t) for i, s, t in sorted(part, key=lambda p: order[p[0]])]
    return out


def read_gold(path: Path) -> list[list[str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == HEADER, f"{path}: bad header"
    return [line.split("\t") for line in lines[1:] if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path("."), help="repository root (holds data/)")
    parser.add_argument("--write", action="store_true", help="write dev.tsv/test.tsv, keeping existing links")
    args = parser.parse_args(argv)
    chosen = choose(args.root)
    bad = 0
    for split, rows in chosen.items():
        path = HERE / f"{split}.tsv"
        if args.write:
            links = {r[0]: r[4] for r in read_gold(path)} if path.exists() else {}
            path.write_text(HEADER + "\n" + "".join(f"{i}\t{d}\t{s}\t{t}\t{links.get(i, '')}\n" for i, d, s, t in rows),
                            encoding="utf-8")
            print(f"wrote {path} ({len(rows)} pairs)")
        else:
            have = [tuple(r[:4]) for r in read_gold(path)]
            if have != rows:
                bad += 1
                print(f"{path}: does not hold the selection (run with --write)", file=sys.stderr)
            else:
                print(f"{path}: {len(rows)} pairs, as selected")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
