"""The dialogue corpus: game dialogue, story narration and puzzles from Debian's Spanish catalogs.

The software messages (model/data/gettext.py) and the help pages (prose.py) are
about computers; the closest Debian comes to people talking is its games.
`attnmt data dialogue OUT` downloads the packages listed in
`configs/dialogue-packages.txt` with `apt-get download`, unpacks them with
`dpkg-deb -x` (nothing is installed; the same cache layout as `attnmt data
gettext`) and reads their Spanish gettext catalogs (`.../es/LC_MESSAGES/*.mo`):
Wesnoth's campaigns, FreedroidRPG's NPC dialogue, Widelands' campaign story and
gbrainy's puzzles. English `msgid` is the target, Spanish `msgstr` the source.

Each message becomes one pair (a multi-line message is joined into one line,
plural forms are a pair each, accelerators are removed as gettext.py does);
placeholders and markup stay as they are, since training protects them. The
catalogs in EXCLUDED_CATALOGS (interface, help, unit descriptions) are skipped.
Filters drop empty, untranslated, letterless pairs and Spanish sides that are
English; pairs with fewer than MIN_WORDS words a side (labels, names), with
more markup than a third of the Spanish words, over-long or length-mismatched
pairs; pairs with a sentence in a held-out set (`--held-out`); and duplicates.
There is only a train split: the everyday test set measures what it adds.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from attnmt.model.data.filters import describe, held_out_keys, is_held_out
from attnmt.model.data.filters import reject_reason as shared_reject_reason
from attnmt.model.data.gettext import (
    fetch_packages,
    normalise,
    package_licence,
    read_catalog,
    read_package_list,
    strip_accelerators,
)
from attnmt.model.data.placeholders import FORMATS as PLACEHOLDER_PATTERN

PACKAGE_LIST = Path(__file__).parents[1] / "configs" / "dialogue-packages.txt"
# Wesnoth's catalogs other than the campaigns' and the tutorial's: the engine's interface
# (wesnoth, wesnoth-lib, wesnoth-editor), the help and unit descriptions (wesnoth-help,
# wesnoth-units), multiplayer scenarios and eras (wesnoth-multiplayer), and the two add-on
# modes whose strings are mostly objectives and game-mechanics help (wesnoth-anl: "A New
# Land", wesnoth-wc: "World Conquest"); Widelands' interface (widelands, widelands_editor,
# widelands_console) and its tribes' encyclopedia of wares and buildings. Reference text, not
# dialogue or narration.
EXCLUDED_CATALOGS = frozenset({"wesnoth", "wesnoth-lib", "wesnoth-editor", "wesnoth-help", "wesnoth-units",
                               "wesnoth-multiplayer", "wesnoth-anl", "wesnoth-wc", "widelands", "widelands_editor",
                               "widelands_console", "tribes_encyclopedia"})
MIN_WORDS = 4                  # on each side: shorter messages are labels, names and menu items
MAX_MARKUP_SHARE = 1 / 3       # placeholders and tags per Spanish word, beyond which a message is a template
# Placeholders (printf, braces, $var; model/data/placeholders.py), any other tag (Widelands'
# and Wesnoth's rich text: <rt>, <vspace>, <ref>), FreedroidRPG's BBCode ([b], [/b]) and
# gbrainy's template fields ([option_a]), and character entities.
MARKUP = re.compile(PLACEHOLDER_PATTERN + r"|<[^<>\s][^<>]*>|\[/?[A-Za-z_][A-Za-z0-9_]*\]"
                    r"|&(?:#\d+|#x[0-9a-fA-F]+|[a-zA-Z]+);")
_WORD = re.compile(r"[^\W\d_]+")
_GPL2_OR_LATER = re.compile(r"GNU General Public License,?\s+version 2,?\s+or\s+(?:\(?at your option\)?\s+)?"
                            r"any later version")


def words(text: str) -> int:
    """Letter runs outside placeholders and markup."""
    return len(_WORD.findall(MARKUP.sub(" ", text)))


def reject_reason(source: str, target: str) -> str | None:
    """Why a (Spanish, English) message pair is dropped, or None; the shared filters
    (model/data/filters.py) with the word-count and markup rules between them, so that a
    short label counts as one and not as a length mismatch."""
    reason = shared_reject_reason(source, target)
    if reason in ("empty", "letterless", "untranslated", "spanish_side_english"):
        return reason
    spanish_words = words(source)
    if spanish_words < MIN_WORDS or words(target) < MIN_WORDS:
        return "too_few_words"
    if len(MARKUP.findall(source)) > MAX_MARKUP_SHARE * spanish_words:
        return "markup"
    return reason                                        # too_long, length_ratio or None


def licence(root: Path, package: str) -> str:
    """gettext.package_licence, but a copyright file in free prose rather than DEP-5 (Wesnoth's,
    whose empty `License:` line would name its first copyright holder) is read for its GPL grant."""
    path = root / "usr/share/doc" / package / "copyright"
    text = path.read_text(errors="replace") if path.exists() else ""
    if not text.startswith("Format:") and _GPL2_OR_LATER.search(text):
        return "GPL-2+ (stated in the copyright file's text)"
    return package_licence(root, package)


def catalog_messages(root: Path) -> tuple[list[tuple[str, str, str]], list[str], list[str]]:
    """(catalog, Spanish, English) of every message in a package's Spanish catalogs but the
    excluded ones, multi-line messages joined; and the catalogs read and skipped."""
    read, skipped, messages = [], [], []
    for catalog in sorted(root.glob("**/es/LC_MESSAGES/*.mo")):
        if catalog.stem in EXCLUDED_CATALOGS:
            skipped.append(catalog.stem)
            continue
        read.append(catalog.stem)
        for msgstr, msgid in read_catalog(catalog):
            source, target = strip_accelerators(normalise(msgstr), normalise(msgid))
            messages.append((catalog.stem, source, target))
    return messages, read, skipped


def build_corpus(roots: dict[str, Path], held_out: set[str]) -> tuple[list[tuple[str, str, str]], dict]:
    """Packages' unpacked roots → training rows (package/catalog, Spanish, English) and counts."""
    rows: list[tuple[str, str, str]] = []
    seen: set[tuple[str, str]] = set()
    packages = {}
    for package, root in roots.items():
        messages, read, skipped = catalog_messages(root)
        dropped: Counter = Counter()
        kept = 0
        for catalog, source, target in messages:
            reason = reject_reason(source, target)
            if not reason and is_held_out(source, target, held_out):
                reason = "held_out"
            if not reason and (source, target) in seen:
                reason = "duplicate"                       # across packages too: Wesnoth's campaigns share lines
            if reason:
                dropped[reason] += 1
                continue
            seen.add((source, target))
            rows.append((f"{package}/{catalog}", source, target))
            kept += 1
        packages[package] = {"catalogs": read, "catalogs_excluded": skipped, "messages": len(messages),
                             "dropped": dict(dropped), "train": kept}
    total: Counter = Counter()
    for facts in packages.values():
        total.update(facts["dropped"])
    counts = {"packages": packages, "messages": sum(p["messages"] for p in packages.values()),
              "dropped": dict(total), "train": len(rows)}
    return rows, counts


DATA_CARD = """# Data card: Spanish→English dialogue and narration (Debian game and puzzle catalogs)

- **What**: the Spanish gettext catalogs (`*/es/LC_MESSAGES/*.mo`) of {n_packages} Debian packages
  (list: `model/configs/dialogue-packages.txt`): The Battle for Wesnoth's campaigns and tutorial,
  FreedroidRPG's NPC dialogue, Widelands' campaigns and gbrainy's puzzles. English `msgid` is the
  target, Spanish `msgstr` the source.
- **Licences** (from each package's `usr/share/doc/PKG/copyright`): {licences}. All DFSG-free; the text
  is GPL-2+ throughout. A model trained on it is not a copy of the catalogs, but check the licences
  before redistributing the text itself.
- **Extraction**: `apt-get download` + `dpkg-deb -x` (nothing installed), read with polib; one pair per
  message (plural forms each their own), multi-line messages joined into one line, whitespace collapsed,
  accelerators removed as in the software-message corpus. Placeholders (`$name`, `%s`, `{{0}}`,
  `[option_a]`) and markup (`<i>`, `[b]`) are kept as they are. Catalogs left out (interface, help,
  unit descriptions, multiplayer): {excluded}.
- **Filters**: {messages} messages read; dropped {dropped}; {train} kept.
  empty: no text on a side; untranslated: Spanish equals English (case-folded); letterless;
  spanish_side_english: English function words outnumber Spanish ones in the Spanish side;
  too_few_words: fewer than {min_words} words (letter runs outside markup) on either side; markup:
  placeholders, tags and entities number more than a third of the Spanish words; too_long: either side
  over 300 characters; length_ratio: one side over twice the other once the longer has more than 20
  characters (`model/data/filters.py`); held_out: either side is a dev or test sentence of
  {held_out_dirs} (case-folded, whitespace collapsed); duplicate: the same (Spanish, English) pair
  seen before, in any package.
- **Pairs**: {train} training pairs, {with_markup} of them with placeholders or markup. No dev or test
  split (`tests/data/everyday` measures what it adds). Files: `train.es`, `train.en`, `train.ids`
  (`package/catalog`), one message per line, and empty `dev.*`; `packages.json`: package, version,
  licence; `counts.json`: the counts below.
- **Caveats**: the register is fantasy and science fiction (kings, orcs, spells, robots), not shopping
  or weather; Wesnoth's Spanish is Spain's, with many *vosotros* forms and an archaic tone, and its orcs
  speak broken Spanish on purpose. FreedroidRPG's translation is amateur: accents are often missing
  (`tio`, `mantendra`), punctuation is odd and some lines are loose; they are kept, so the model sees
  unaccented input, but its Spanish is not a model of spelling. Widelands' catalogs also hold economy
  help and some interface text. A message is translated out of context: some pronouns and genders
  follow the game's state, not the sentence.

| package | version | catalogs read | messages | kept | dropped |
|---|---|---:|---:|---:|---|
{table}
"""


def write_card(out_dir: Path, rows: list[tuple[str, str, str]], counts: dict, facts: list[dict],
               held_out_dirs: list[Path]) -> None:
    version = {f["package"]: f["version"] for f in facts}
    licences: dict[str, list[str]] = {}
    for f in facts:
        licences.setdefault(f["licence"], []).append(f"`{f['package']}`")
    table = "\n".join(f"| {package} | {version[package]} | {len(p['catalogs'])} | {p['messages']} | {p['train']} "
                      f"| {describe(p['dropped'])} |" for package, p in counts["packages"].items())
    excluded = sorted({c for p in counts["packages"].values() for c in p["catalogs_excluded"]})
    card = DATA_CARD.format(
        n_packages=len(facts),
        licences="; ".join(f"{', '.join(packages)}: {licence}" for licence, packages in licences.items()),
        excluded=", ".join(f"`{c}`" for c in excluded) or "none found", messages=counts["messages"],
        dropped=describe(counts["dropped"]), min_words=MIN_WORDS,
        held_out_dirs=", ".join(f"`{d}`" for d in held_out_dirs), train=counts["train"],
        with_markup=sum(1 for _, s, _ in rows if MARKUP.search(s)), table=table)
    (out_dir / "DATA_CARD.md").write_text(card, encoding="utf-8")


def write_train_only(out_dir: Path, rows: list[tuple[str, str, str]], counts: dict, facts: list[dict]) -> None:
    """train.{ids,es,en}, empty dev.* (so `attnmt data mix` reads it), the packages and the counts:
    what a corpus with only a train split writes beside its card (here and model/data/school.py)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for suffix, column in (("ids", 0), ("es", 1), ("en", 2)):
        (out_dir / f"train.{suffix}").write_text("".join(r[column] + "\n" for r in rows), encoding="utf-8")
        (out_dir / f"dev.{suffix}").write_text("", encoding="utf-8")
    (out_dir / "packages.json").write_text(json.dumps(facts, indent=1) + "\n")
    (out_dir / "counts.json").write_text(json.dumps(counts, indent=2) + "\n")


def write_corpus(out_dir: Path, rows: list[tuple[str, str, str]], counts: dict, facts: list[dict],
                 held_out_dirs: list[Path]) -> None:
    """The corpus files and its card."""
    write_train_only(out_dir, rows, counts, facts)
    write_card(out_dir, rows, counts, facts, held_out_dirs)


def extract_dialogue(out_dir: Path, held_out_dirs: list[Path], cache: Path | None = None) -> dict:
    """`attnmt data dialogue OUT_DIR`: fetch, read, filter and document."""
    held_out = held_out_keys(held_out_dirs)
    roots = fetch_packages(read_package_list(PACKAGE_LIST), cache or out_dir / "cache")
    rows, counts = build_corpus(roots, held_out)
    facts = [{"package": p, "version": root.name.split("_")[1].replace("%3a", ":"),
              "licence": licence(root, p)} for p, root in roots.items()]
    write_corpus(out_dir, rows, counts, facts, held_out_dirs)
    return {"train": counts["train"], **{p: c["train"] for p, c in counts["packages"].items()}}
