"""The school corpus: GCompris' activities and Tux Paint's stamp descriptions, in Spanish and English.

The dialogue corpus (model/data/dialogue.py) is about kings and robots; the everyday
test set is about shops, streets and school. Two Debian packages for children hold
real translations of that register. `attnmt data school OUT` downloads them with
`apt-get download`, unpacks them with `dpkg-deb -x` (nothing is installed; the cache
layout of `attnmt data gettext`) and reads:

- `gcompris-qt-data`: GCompris' Spanish Qt catalog (`translations/gcompris_es.qm`:
  activity instructions, goals and manuals, word problems, quiz questions, names of
  places and things) and the vocabulary of its "lang" activity (`rcc/lang.rcc`, a Qt
  resource bundle holding `content-es.json` and `content-en.json`, both keyed by the
  word's voice file). A .qm compiled by lrelease keeps each message's English source
  text and context beside its translation, so English is recovered from the file itself;
  the English plural forms come from `gcompris_en.qm`.
- `tuxpaint-stamps-default`: each stamp's description file (`stamps/**/NAME.txt`), its
  first line English, `es.utf8=` its Spanish ("A bunch of grapes." / "Un racimo de uvas.").

Spanish is the source, English the target. A message of several lines with as many lines
on each side becomes a pair a line (GCompris' lines are separate instructions), any other
one line; placeholders and markup stay as they are, since training protects them. The Qt
contexts in EXCLUDED_CONTEXTS (release notes, credits, command-line help, word lists) are
skipped. The filters are the dialogue corpus's (empty, letterless, untranslated, Spanish
side English, markup, too long, length ratio, held out, duplicate) and word lists, but
short items are kept: a pair with fewer than MIN_WORDS words a side is counted as
vocabulary, any other as a sentence. There is only a train split: the everyday test set
measures what it adds.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections import Counter
from pathlib import Path

from attnmt.model.data.dialogue import MARKUP, MAX_MARKUP_SHARE, MIN_WORDS, licence, words, write_train_only
from attnmt.model.data.filters import describe, held_out_keys, is_held_out
from attnmt.model.data.filters import reject_reason as shared_reject_reason
from attnmt.model.data.gettext import fetch_packages, normalise

GCOMPRIS, TUXPAINT = "gcompris-qt-data", "tuxpaint-stamps-default"
PACKAGES = (GCOMPRIS, TUXPAINT)
GCOMPRIS_ROOT = "usr/share/gcompris-qt"
LANG_WORDS = "/gcompris/src/activities/lang/resource/content-{}.json"   # inside rcc/lang.rcc
STAMPS = "usr/share/tuxpaint/stamps"
# GCompris' Qt contexts that are no school text: release notes (ChangeLog), the about box's
# credits and KDE's appeal (DialogAbout), command-line help and download errors (QObject), and
# the crane activity's word lists, which each translator picks anew rather than translates.
EXCLUDED_CONTEXTS = frozenset({"ChangeLog", "DialogAbout", "QObject", "crane"})
# Three or more items joined by "|" or ";" without spaces: an activity's list to split
# ("The|dog|barks.", "cat;dog;win"), whose Spanish items are the translator's own choice.
WORD_LIST = re.compile(r"[^\s;|]+(?:[;|][^\s;|]+){2,}")


# --- Qt's binary formats. translate-toolkit's `translate.storage.qm` (3.20) was tried: it
# refuses the whole of gcompris_es.qm for one message without source text, decodes source
# texts as Latin-1 where Qt 5 writes UTF-8 (154 of them: "5×5", "Trøndelag", no-break spaces)
# and drops contexts; nothing on PyPI reads .rcc without Qt. Hence two small readers, after
# qttools' src/linguist/shared/qm.cpp and qtbase's src/tools/rcc/rcc.cpp.

QM_MAGIC = bytes.fromhex("3cb86418caef9c95cd211cbf60a1bddd")
QM_MESSAGES = 0x69                                        # the section of message records
TAG_END, TAG_TRANSLATION, TAG_HASH = 0x01, 0x03, 0x05    # record fields; 6-8 are length-prefixed UTF-8
TAG_TEXT = {0x06: "source", 0x07: "context", 0x08: "comment"}


def read_qm(path: Path) -> list[tuple[str, str, list[str]]]:
    """(context, English source, translations) of every message of a .qm compiled with its
    source texts (lrelease's default); a message without source text is skipped. A plural
    message has one translation per form."""
    data = path.read_bytes()
    if data[:16] != QM_MAGIC:
        raise ValueError(f"{path} is not a Qt .qm file")
    pos, records = 16, b""
    while pos < len(data):                                # sections: tag (1 byte), length (4), body
        tag, length = struct.unpack_from(">BI", data, pos)
        if tag == QM_MESSAGES:
            records = data[pos + 5:pos + 5 + length]
        pos += 5 + length
    messages, message, pos = [], {}, 0
    while pos < len(records):
        tag = records[pos]
        pos += 1
        if tag == TAG_END:
            if message.get("source"):
                messages.append((message.get("context", ""), message["source"], message.get("translations", [])))
            message = {}
        elif tag == TAG_TRANSLATION:                      # UTF-16BE; length 0xffffffff: a null translation
            (length,) = struct.unpack_from(">I", records, pos)
            pos += 4
            if length != 0xFFFFFFFF:
                message.setdefault("translations", []).append(records[pos:pos + length].decode("utf-16-be"))
                pos += length
        elif tag == TAG_HASH:
            pos += 4
        elif tag in TAG_TEXT:
            (length,) = struct.unpack_from(">I", records, pos)
            message[TAG_TEXT[tag]] = records[pos + 4:pos + 4 + length].decode("utf-8")
            pos += 4 + length
        else:
            raise ValueError(f"{path}: unknown .qm message tag {tag:#x} at byte {pos - 1}")
    return messages


def read_rcc(path: Path, name: str) -> bytes:
    """One file of a Qt resource bundle (.rcc), by its path inside the bundle."""
    data = path.read_bytes()
    if data[:4] != b"qres":
        raise ValueError(f"{path} is not a Qt .rcc file")
    version, tree, payloads, names = struct.unpack_from(">IIII", data, 4)
    node_size = 22 if version >= 2 else 14               # v2 added an 8-byte modification time

    def node_name(offset: int) -> str:                    # length (UTF-16 units), hash, UTF-16BE
        (length,) = struct.unpack_from(">H", data, names + offset)
        return data[names + offset + 6:names + offset + 6 + 2 * length].decode("utf-16-be")

    def find(node: int, parts: list[str]) -> bytes | None:
        offset, flags = struct.unpack_from(">IH", data, tree + node * node_size)
        if flags & 0x02:                                  # a directory: its children are consecutive nodes
            count, first = struct.unpack_from(">II", data, tree + node * node_size + 6)
            for child in range(first, first + count):
                (child_offset,) = struct.unpack_from(">I", data, tree + child * node_size)
                if parts and node_name(child_offset) == parts[0]:
                    return find(child, parts[1:])
            return None
        if parts:
            return None
        (at,) = struct.unpack_from(">I", data, tree + node * node_size + 10)
        (size,) = struct.unpack_from(">I", data, payloads + at)
        body = data[payloads + at + 4:payloads + at + 4 + size]
        if flags & 0x04:
            raise ValueError(f"{path}:{name} is zstd-compressed, which this reader does not handle")
        return zlib.decompress(body[4:]) if flags & 0x01 else body   # zlib after a 4-byte plain size

    found = find(0, [part for part in name.split("/") if part])
    if found is None:
        raise KeyError(f"{name} not in {path}")
    return found


# --- The packages' texts, as (id, Spanish, English) pairs.

def lines(source: str, target: str) -> list[tuple[str, str]]:
    """A pair per line when both sides have the same number of non-empty lines, else one."""
    source_lines = [line for line in source.split("\n") if line.strip()]
    target_lines = [line for line in target.split("\n") if line.strip()]
    if len(source_lines) > 1 and len(source_lines) == len(target_lines):
        return [(normalise(s), normalise(t)) for s, t in zip(source_lines, target_lines)]
    return [(normalise(source), normalise(target))]


def gcompris_pairs(root: Path) -> tuple[list[tuple[str, str, str]], list[str], list[str]]:
    """GCompris' catalog messages (plural forms each their own pair) and its "lang" vocabulary;
    the files read and the contexts skipped."""
    translations = root / GCOMPRIS_ROOT / "translations"
    english_plurals = {}
    if (translations / "gcompris_en.qm").exists():    # "%n hour(s)" → ["%n hour", "%n hours"]
        english_plurals = {(c, s): t for c, s, t in read_qm(translations / "gcompris_en.qm")}
    pairs, skipped = [], set()
    for context, source, forms in read_qm(translations / "gcompris_es.qm"):
        if context in EXCLUDED_CONTEXTS:
            skipped.add(context)
            continue
        forms = forms or [""]                             # no translation: dropped as empty
        english = english_plurals.get((context, source), [])
        if len(english) != len(forms):
            english = [source] * len(forms)
        for spanish, target in zip(forms, english):
            pairs += [(f"{GCOMPRIS}/{context}", s, t) for s, t in lines(spanish, target)]
    bundle = root / GCOMPRIS_ROOT / "rcc/lang.rcc"
    spanish_words = json.loads(read_rcc(bundle, LANG_WORDS.format("es")))
    english_words = json.loads(read_rcc(bundle, LANG_WORDS.format("en")))
    pairs += [(f"{GCOMPRIS}/lang.rcc", normalise(spanish_words.get(voice, "")), normalise(english))
              for voice, english in sorted(english_words.items())]
    read = [f"{GCOMPRIS_ROOT}/translations/gcompris_es.qm", f"{GCOMPRIS_ROOT}/rcc/lang.rcc"]
    return pairs, read, sorted(skipped)


def stamp_pairs(root: Path) -> tuple[list[tuple[str, str, str]], list[str], list[str]]:
    """Tux Paint's stamp descriptions: the first line English, `es.utf8=` (or `es=`) Spanish."""
    stamps = root / STAMPS
    pairs = []
    for path in sorted(stamps.rglob("*.txt")):
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
        english = next((line for line in text if line.strip()), "")
        spanish = next((line.split("=", 1)[1] for line in text if line.startswith(("es.utf8=", "es="))), "")
        pairs.append((f"{TUXPAINT}/{path.relative_to(stamps).with_suffix('')}", normalise(spanish),
                      normalise(english)))
    return pairs, [f"{STAMPS}/**/*.txt"], []


READERS = {GCOMPRIS: gcompris_pairs, TUXPAINT: stamp_pairs}


# --- Filters, counts and the card.

def is_word_list(text: str) -> bool:
    return bool(WORD_LIST.search(MARKUP.sub(" ", text)))     # markup out first: the ";" of "&lt;" separates nothing


def reject_reason(source: str, target: str) -> str | None:
    """Why a (Spanish, English) pair is dropped, or None; the dialogue corpus's filters with
    word lists added and no minimum length (a short pair is vocabulary, kept)."""
    reason = shared_reject_reason(source, target)
    if reason in ("empty", "letterless", "untranslated", "spanish_side_english"):
        return reason
    if is_word_list(source) or is_word_list(target):
        return "word_list"
    if len(MARKUP.findall(source)) > MAX_MARKUP_SHARE * words(source):
        return "markup"
    return reason                                         # too_long, length_ratio or None


def kind(source: str, target: str) -> str:
    return "vocabulary" if words(source) < MIN_WORDS or words(target) < MIN_WORDS else "sentences"


def build_corpus(roots: dict[str, Path], held_out: set[str]) -> tuple[list[tuple[str, str, str]], dict]:
    """Packages' unpacked roots → training rows (id, Spanish, English) and counts."""
    rows: list[tuple[str, str, str]] = []
    seen: set[tuple[str, str]] = set()
    packages = {}
    for package, root in roots.items():
        pairs, read, skipped = READERS[package](root)
        dropped: Counter = Counter()
        kept: Counter = Counter()
        for row_id, source, target in pairs:
            reason = reject_reason(source, target)
            if not reason and is_held_out(source, target, held_out):
                reason = "held_out"
            if not reason and (source, target) in seen:
                reason = "duplicate"                        # GCompris repeats "Yes", "Quit", Tux Paint its letters
            if reason:
                dropped[reason] += 1
                continue
            seen.add((source, target))
            rows.append((row_id, source, target))
            kept[kind(source, target)] += 1
        packages[package] = {"read": read, "contexts_excluded": skipped, "pairs": len(pairs),
                             "dropped": dict(dropped), "train": sum(kept.values()),
                             "sentences": kept["sentences"], "vocabulary": kept["vocabulary"]}
    total: Counter = Counter()
    for facts in packages.values():
        total.update(facts["dropped"])
    counts = {"packages": packages, "pairs": sum(p["pairs"] for p in packages.values()), "dropped": dict(total),
              "train": len(rows), **{k: sum(p[k] for p in packages.values()) for k in ("sentences", "vocabulary")}}
    return rows, counts


def text_licence(root: Path, package: str) -> str:
    """The licence of a DEP-5 copyright file's `Files: *` stanza, which covers the translations
    (GCompris' other stanzas are its images' and fonts'), with a note when its text adds "or any
    later version" to a bare version; dialogue.licence where there is no such stanza."""
    path = root / "usr/share/doc" / package / "copyright"
    stanzas = re.split(r"\n\s*\n", path.read_text(errors="replace")) if path.exists() else []
    name = next((m.group(1).strip() for s in stanzas if re.match(r"Files:\s*\*\s*$", s, re.M)
                 for m in [re.search(r"^License:\s*(.+)$", s, re.M)] if m), None)
    if name is None:
        return licence(root, package)
    grant = next((s for s in stanzas if s.startswith(f"License: {name}\n")), "")
    if not name.endswith("+") and re.search(r"any\s+later\s+version", grant):
        return f"{name} (its text adds \"or any later version\")"
    return name


DATA_CARD = """# Data card: Spanish→English school text (GCompris activities, Tux Paint stamps)

- **What**: real translations from two Debian packages for children. `gcompris-qt-data`:
  GCompris' Spanish Qt catalog (`translations/gcompris_es.qm`; English is each message's source
  text, kept in the .qm; the contexts are the activities and their datasets) and its "lang"
  activity's vocabulary (`rcc/lang.rcc`: `content-es.json` against `content-en.json`).
  `tuxpaint-stamps-default`: the stamps' descriptions (`stamps/**/NAME.txt`: the first line
  English, `es.utf8=` Spanish).
- **Licences** (from each package's `usr/share/doc/PKG/copyright`, the `Files: *` stanza, which
  covers the text): {licences}. All DFSG-free. A model trained on it is not a copy of the text,
  but check the licences before redistributing the text itself.
- **Extraction**: `apt-get download` + `dpkg-deb -x` (nothing installed); the .qm and .rcc read by
  `model/data/school.py`'s own readers. A message with as many lines on each side becomes a pair a
  line, any other one line; whitespace collapsed; a plural message a pair per form (English forms
  from `gcompris_en.qm`). Placeholders (`%1`, `%n`) and markup (`<b>`, `<br/>`, `&lt;`) are kept as
  they are. Qt contexts left out (release notes, credits, command-line help, word lists): {excluded}.
- **Filters**: {pairs} pairs read; dropped {dropped}; {train} kept.
  empty: no text on a side (a stamp without Spanish); untranslated: Spanish equals English
  (case-folded: place names, "Manual"); letterless; spanish_side_english: English function words
  outnumber Spanish ones in the Spanish side; word_list: three or more items joined by `|` or `;`
  (an activity's list, chosen anew by the translator); markup: placeholders, tags and entities number
  more than a third of the Spanish words; too_long: either side over 300 characters; length_ratio: one
  side over twice the other once the longer has more than 20 characters (`model/data/filters.py`);
  held_out: either side is a dev or test sentence of {held_out_dirs} (case-folded, whitespace
  collapsed); duplicate: the same (Spanish, English) pair seen before, in any package. There is no
  minimum length: short pairs are vocabulary and kept.
- **Pairs**: {train} training pairs: {sentences} sentences ({min_words} words or more a side) and
  {vocabulary} vocabulary items (fewer: words, names, labels, "A dingo."); {with_markup} with
  placeholders or markup. No dev or test split (`tests/data/everyday` measures what it adds). Files:
  `train.es`, `train.en`, `train.ids` (`package/context`, `package/lang.rcc`, `package/stamp path`),
  one pair per line, and empty `dev.*`; `packages.json`: package, version, licence; `counts.json`:
  the counts below.
- **Caveats**: GCompris' Spanish is Spain's (*tú* imperatives: "Arrastra", "Pulsa"; "ordenador" and
  "computadora" both occur); its activity texts mix school instructions with some interface labels
  ("Iniciar el editor") and encyclopedic notes (monuments, paintings, planets). A vocabulary item is a
  word or a name out of context ("bottom" / "nalgas"). Tux Paint's descriptions are short noun phrases
  ("Un racimo de uvas.") and some are looser than the English ("A bolted lettuce." / "Una planta de
  lechuga.").

| package | version | licence | pairs read | kept | sentences | vocabulary | dropped |
|---|---|---|---:|---:|---:|---:|---|
{table}
"""


def write_card(out_dir: Path, rows: list[tuple[str, str, str]], counts: dict, facts: list[dict],
               held_out_dirs: list[Path]) -> None:
    table = "\n".join(f"| {f['package']} | {f['version']} | {f['licence']} | {p['pairs']} | {p['train']} "
                      f"| {p['sentences']} | {p['vocabulary']} | {describe(p['dropped'])} |"
                      for f, p in zip(facts, counts["packages"].values()))
    excluded = sorted({c for p in counts["packages"].values() for c in p["contexts_excluded"]})
    card = DATA_CARD.format(
        licences="; ".join(f"`{f['package']}`: {f['licence']}" for f in facts),
        excluded=", ".join(f"`{c}`" for c in excluded) or "none found", pairs=counts["pairs"],
        dropped=describe(counts["dropped"]), train=counts["train"], sentences=counts["sentences"],
        vocabulary=counts["vocabulary"], min_words=MIN_WORDS,
        held_out_dirs=", ".join(f"`{d}`" for d in held_out_dirs),
        with_markup=sum(1 for _, s, _ in rows if MARKUP.search(s)), table=table)
    (out_dir / "DATA_CARD.md").write_text(card, encoding="utf-8")


def write_corpus(out_dir: Path, rows: list[tuple[str, str, str]], counts: dict, facts: list[dict],
                 held_out_dirs: list[Path]) -> None:
    """The corpus files (as the dialogue corpus writes them) and its card."""
    write_train_only(out_dir, rows, counts, facts)
    write_card(out_dir, rows, counts, facts, held_out_dirs)


def extract_school(out_dir: Path, held_out_dirs: list[Path], cache: Path | None = None) -> dict:
    """`attnmt data school OUT_DIR`: fetch, read, filter and document."""
    held_out = held_out_keys(held_out_dirs)
    roots = fetch_packages(list(PACKAGES), cache or out_dir / "cache")
    rows, counts = build_corpus(roots, held_out)
    facts = [{"package": p, "version": root.name.split("_")[1].replace("%3a", ":"),
              "licence": text_licence(root, p)} for p, root in roots.items()]
    write_corpus(out_dir, rows, counts, facts, held_out_dirs)
    return {"train": counts["train"], "sentences": counts["sentences"], "vocabulary": counts["vocabulary"],
            **{p: c["train"] for p, c in counts["packages"].items()}}
