"""The software-message corpus: Spanish gettext catalogs that Debian ships.

Every package with a Spanish catalog (`.../es/LC_MESSAGES/*.mo`) pairs an
English `msgid` with a Spanish `msgstr`. `attnmt data gettext OUT` downloads
the packages listed in `configs/gettext-packages.txt` with `apt-get download`,
unpacks them with `dpkg-deb -x` (nothing is installed), reads every Spanish
catalog with polib and writes a Spanish→English corpus split by package.

Cleaning (each rule also in the data card):
- a plural entry gives one pair per form (msgid ↔ msgstr[0], msgid_plural ↔ msgstr[1..]);
- message contexts are dropped from the text (they only disambiguate);
- accelerator markers (`_File`, `&File`, `~File`) are removed from both sides
  when each side has exactly one; a token that appears verbatim on both sides
  (`core_dump`) is an identifier, not an accelerator, and is kept;
- a multi-line message is split into line pairs when both sides have the same
  number of lines, otherwise its lines are joined with spaces; whitespace is
  collapsed;
- empty, untranslated (target equals source), letterless and long pairs
  (either side over MAX_CHARS characters) are dropped.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from attnmt.model.data.placeholders import find as find_placeholders

PACKAGE_LIST = Path(__file__).parents[1] / "configs" / "gettext-packages.txt"
TEST_PACKAGES = ("git", "coreutils", "tar", "wget")
DEV_PACKAGES = ("bash", "make")
MAX_CHARS = 300
_ACCELERATOR = re.compile(r"(?<![\w&~])([_&~])(?=\w)|(?<=\w)([_~])(?=\w)")
_ENTITY = re.compile(r"&(?:#\d+|#x[0-9a-fA-F]+|[a-zA-Z]+);")
_LETTER = re.compile(r"[^\W\d_]")


@dataclass(frozen=True)
class Message:
    package: str
    catalog: str
    source: str   # Spanish (msgstr)
    target: str   # English (msgid)


def read_package_list(path: Path = PACKAGE_LIST) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def require(command: str, package: str) -> None:
    if shutil.which(command) is None:
        raise SystemExit(f"{command} not found: it comes with Debian's `{package}` package")


def fetch_packages(packages: list[str], cache: Path) -> dict[str, Path]:
    """`apt-get download` what is not cached yet; {package: unpacked root}."""
    require("apt-get", "apt")
    require("dpkg-deb", "dpkg")
    debs, roots = cache / "debs", cache / "root"
    debs.mkdir(parents=True, exist_ok=True)
    missing = [p for p in packages if not list(debs.glob(f"{p}_*.deb"))]
    if missing:
        proc = subprocess.run(["apt-get", "download", "-q", *missing], cwd=debs, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"apt-get download failed ({proc.stderr.strip()[-300:]}); "
                             "run `apt-get update` first, or fix the package list")
    out = {}
    for package in packages:
        deb = sorted(debs.glob(f"{package}_*.deb"))[-1]
        root = roots / deb.stem
        if not root.exists():
            tmp = root.with_suffix(".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp)], check=True)
            tmp.rename(root)
        out[package] = root
    return out


def strip_accelerators(source: str, target: str) -> tuple[str, str]:
    """Remove one accelerator marker from each side, consistently (see module doc)."""
    def markers(text: str) -> list[re.Match]:
        found = [m for m in _ACCELERATOR.finditer(text) if not _ENTITY.match(text, m.start())]
        return found
    src_marks, tgt_marks = markers(source), markers(target)
    if len(src_marks) != 1 or len(tgt_marks) != 1 or src_marks[0].group(0) != tgt_marks[0].group(0):
        return source, target
    token = (re.search(r"\S*$", source[:src_marks[0].start()]).group(0)
             + re.match(r"\S*", source[src_marks[0].start():]).group(0))
    if token in target.split():
        return source, target
    s, t = src_marks[0].start(), tgt_marks[0].start()
    return source[:s] + source[s + 1:], target[:t] + target[t + 1:]


def normalise(text: str) -> str:
    return " ".join(text.replace("\t", " ").split())


def message_pairs(source: str, target: str) -> Iterator[tuple[str, str]]:
    """Clean one msgstr/msgid pair into zero or more sentence pairs."""
    if not source.strip() or not target.strip():
        return
    src_lines = [line for line in source.split("\n") if line.strip()]
    tgt_lines = [line for line in target.split("\n") if line.strip()]
    if len(src_lines) == len(tgt_lines) and len(src_lines) > 1:
        chunks = list(zip(src_lines, tgt_lines))
    else:
        chunks = [(source, target)]
    for src, tgt in chunks:
        src, tgt = strip_accelerators(normalise(src), normalise(tgt))
        if not src or not tgt or src == tgt or len(src) > MAX_CHARS or len(tgt) > MAX_CHARS:
            continue
        if not _LETTER.search(src) or not _LETTER.search(tgt):
            continue
        yield src, tgt


def read_catalog(path: Path) -> Iterator[tuple[str, str]]:
    """(msgstr, msgid) pairs of one .mo, plural forms each their own pair."""
    import polib
    for entry in polib.mofile(str(path)):
        if not entry.msgid:
            continue  # the header
        if entry.msgid_plural:
            forms = entry.msgstr_plural
            for n in sorted(forms):
                yield forms[n], entry.msgid if n == 0 else entry.msgid_plural
        else:
            yield entry.msgstr, entry.msgid


def package_licence(root: Path, package: str) -> str:
    """The licences named in the package's DEP-5 copyright file, or its first line."""
    copyright_file = root / "usr/share/doc" / package / "copyright"
    if not copyright_file.exists():
        return "unknown (no copyright file)"
    text = copyright_file.read_text(errors="replace")
    names = Counter(m.strip() for m in re.findall(r"^License:\s*(.+)$", text, re.M))
    return ", ".join(name for name, _ in names.most_common(4)) or text.strip().splitlines()[0][:80]


def split_of(package: str) -> str:
    return "test" if package in TEST_PACKAGES else "dev" if package in DEV_PACKAGES else "train"


def leak_key(text: str) -> str:
    return normalise(text).casefold()


def build_corpus(roots: dict[str, Path]) -> tuple[dict[str, list[Message]], list[dict]]:
    """Read, clean, split by package and de-duplicate; returns splits and per-package facts."""
    splits: dict[str, list[Message]] = {"train": [], "dev": [], "test": []}
    facts = []
    for package, root in roots.items():
        catalogs = sorted(root.glob("**/es/LC_MESSAGES/*.mo"))
        entries = 0
        for catalog in catalogs:
            for msgstr, msgid in read_catalog(catalog):
                entries += 1
                for src, tgt in message_pairs(msgstr, msgid):
                    splits[split_of(package)].append(Message(package, catalog.stem, src, tgt))
        facts.append({"package": package, "version": root.name.split("_")[1], "catalogs": len(catalogs),
                      "entries": entries, "licence": package_licence(root, package)})
    # The same message recurs across packages (gnulib, glibc): anything a
    # held-out catalog contains leaves train, and test's leaves dev.
    held_out = {leak_key(m.source) for m in splits["test"]}
    splits["dev"] = [m for m in splits["dev"] if leak_key(m.source) not in held_out]
    held_out |= {leak_key(m.source) for m in splits["dev"]}
    splits["train"] = [m for m in splits["train"] if leak_key(m.source) not in held_out]
    for name, messages in splits.items():
        seen, unique = set(), []
        key = (lambda m: (m.source, m.target)) if name == "train" else (lambda m: m.source)
        for m in messages:
            if key(m) not in seen:
                seen.add(key(m))
                unique.append(m)
        splits[name] = unique
    return splits, facts


DATA_CARD = """# Data card: Spanish→English software messages (Debian gettext catalogs)

- **What**: every Spanish gettext catalog (`*/es/LC_MESSAGES/*.mo`) in {n_packages} Debian
  packages (list: `model/configs/gettext-packages.txt`); English `msgid` is the target,
  Spanish `msgstr` the source.
- **Extraction**: `apt-get download` + `dpkg-deb -x` (nothing installed), read with polib;
  plural forms give one pair each; contexts dropped; accelerators (`_`, `&`, `~`) removed
  from both sides when each has exactly one (identifiers such as `core_dump` kept);
  multi-line messages split into line pairs when the line counts agree, joined otherwise;
  dropped: empty, untranslated (target = source), letterless, longer than {max_chars} characters.
- **Split by package**: test = {test_packages} ({test} pairs); dev = {dev_packages} ({dev} pairs);
  train = every other package ({train} pairs). Every source that occurs in a test or dev
  catalog (case-folded, whitespace collapsed) is removed from train, test sources from dev;
  train keeps unique (source, target) pairs, dev and test unique sources.
- **Placeholders**: {with_placeholders} train pairs hold printf/brace/shell placeholders or inline tags.
- **Files**: `{{split}}.es`, `{{split}}.en`, `{{split}}.ids` (`package/catalog`), one message per line;
  `packages.json`: package, version, catalogs, entries, licence (from its copyright file).
- **Licences**: each catalog carries its package's licence (mostly GPL/LGPL/MPL; see `packages.json`).
  The corpus is for training and evaluation; a model trained on it is not a copy of the catalogs,
  but check the licences before redistributing the text itself.
- **Caveats**: UI strings are short and repetitive; a few translators' catalogs are partial or
  machine-assisted; some messages are ambiguous without their context.

| package | version | catalogs | entries | licence |
|---|---|---:|---:|---|
{table}
"""


def write_corpus(splits: dict[str, list[Message]], facts: list[dict], out_dir: Path) -> dict[str, int]:
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split, messages in splits.items():
        counts[split] = len(messages)
        for suffix, field in (("es", "source"), ("en", "target")):
            (out_dir / f"{split}.{suffix}").write_text("".join(getattr(m, field) + "\n" for m in messages),
                                                       encoding="utf-8")
        (out_dir / f"{split}.ids").write_text("".join(f"{m.package}/{m.catalog}\n" for m in messages))
    table = "\n".join(f"| {f['package']} | {f['version']} | {f['catalogs']} | {f['entries']} | {f['licence']} |"
                      for f in facts)
    with_ph = sum(1 for m in splits["train"] if find_placeholders(m.source))
    card = DATA_CARD.format(n_packages=len(facts), max_chars=MAX_CHARS, test_packages=", ".join(TEST_PACKAGES),
                            dev_packages=", ".join(DEV_PACKAGES), with_placeholders=with_ph, table=table, **counts)
    (out_dir / "DATA_CARD.md").write_text(card, encoding="utf-8")
    (out_dir / "packages.json").write_text(json.dumps(facts, indent=1) + "\n")
    (out_dir / "counts.json").write_text(json.dumps({**counts, "train_with_placeholders": with_ph}, indent=2) + "\n")
    return counts


def extract_gettext(out_dir: Path, cache: Path | None = None) -> dict[str, int]:
    """`attnmt data gettext OUT_DIR`: fetch, read, clean, split and document."""
    roots = fetch_packages(read_package_list(), cache or out_dir / "cache")
    splits, facts = build_corpus(roots)
    return write_corpus(splits, facts, out_dir)


_TAG = re.compile(r"^<[a-z]+> ")     # a synthetic source's tag, as `attnmt data backtranslate` writes it


def mix(out_dir: Path, corpora: list[tuple[Path, int] | tuple[Path, int, bool]], dev_max: int,
        seed: int = 1234, exclude: list[Path] | None = None) -> dict[str, int]:
    """`attnmt data mix`: concatenate corpora into one training directory.

    Each corpus's train split is repeated WEIGHT times (oversampling); dev holds
    at most `dev_max` pairs of each corpus (a fixed random sample), so dev BLEU
    during training weighs the domains alike and stays quick. Test splits are
    not mixed: evaluate on each corpus's own test split.

    Every training pair that holds a held-out sentence leaves first (decontaminate.py): the
    sets at `exclude` (None: decontaminate.DEFAULT_EXCLUDE, the repository's test sets) and the
    dev and test splits of every corpus mixed, so that no corpus trains on another's dev or test
    sentences. What each corpus lost is in the card and `decontaminated.json`.

    A corpus marked untagged (a third item True) enters with its sources' leading tag removed
    (`<bt> ` of back-translation): the same synthetic pairs, looking like real input. It lends
    no dev pairs (its tagged self does, if mixed too).
    """
    from attnmt.corpus.splits import corpus_files, read_parallel
    from attnmt.model.data import decontaminate
    from attnmt.model.data.filters import describe
    held = decontaminate.load(exclude)
    for data_dir, *_ in corpora:
        decontaminate.add_path(held, Path(data_dir))        # its dev and test splits
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = {"train": 0, "dev": 0}
    removals = {}
    cards = []
    with open(out_dir / "train.es", "w", encoding="utf-8") as fs, \
            open(out_dir / "train.en", "w", encoding="utf-8") as ft, \
            open(out_dir / "dev.es", "w", encoding="utf-8") as ds, \
            open(out_dir / "dev.en", "w", encoding="utf-8") as dt:
        for data_dir, weight, *marks in corpora:
            untagged = bool(marks and marks[0])
            # weight 0: a held-out set whose dev split joins validation (tests/data/everyday has no train)
            train = list(read_parallel(*corpus_files(data_dir, "train", "es", "en"))) if weight else []
            removed: Counter = Counter()
            train = decontaminate.remove(train, held, removed)
            if untagged:
                train = [(_TAG.sub("", s, count=1), t) for s, t in train]
            for _ in range(weight):
                fs.writelines(s + "\n" for s, _ in train)
                ft.writelines(t + "\n" for _, t in train)
            dev = [] if untagged else list(read_parallel(*corpus_files(data_dir, "dev", "es", "en")))
            if len(dev) > dev_max:
                dev = random.Random(seed).sample(dev, dev_max)
            ds.writelines(s + "\n" for s, _ in dev)
            dt.writelines(t + "\n" for _, t in dev)
            counts["train"] += weight * len(train)
            counts["dev"] += len(dev)
            if weight:
                removals[f"{data_dir}{' (untagged)' if untagged else ''}"] = dict(removed)
            cards.append(f"- `{data_dir}`{' (untagged: sources without their leading tag)' if untagged else ''}: "
                         f"train {len(train)} pairs × {weight}, dev {len(dev)} pairs"
                         + (f"; decontaminated {sum(removed.values())} ({describe(dict(removed))})" if weight else ""))
            card = data_dir / "DATA_CARD.md"
            if card.exists() and not untagged:
                cards.append("\n" + card.read_text(encoding="utf-8"))
    header = ("# Data card: mixed corpus\n\nDecontaminated (`model/data/decontaminate.py`): a training pair whose "
              "Spanish is a held-out Spanish sentence or whose English is a held-out English sentence (lower-cased, "
              f"without punctuation or spaces) left; held-out sets: {held.describe()}.\n\n")
    (out_dir / "DATA_CARD.md").write_text(header + "\n".join(cards) + "\n", encoding="utf-8")
    (out_dir / "counts.json").write_text(json.dumps(counts, indent=2) + "\n")
    (out_dir / "decontaminated.json").write_text(json.dumps(removals, indent=2, ensure_ascii=False) + "\n")
    return counts
