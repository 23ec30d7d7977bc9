"""The prose corpus: LibreOffice's and GNOME's help, translated page by page.

`attnmt data prose OUT` downloads the help packages with `apt-get download`,
unpacks them with `dpkg-deb -x` (nothing is installed; the same cache as
`attnmt data gettext`), pairs paragraphs, splits them into sentences and
aligns those, filters, splits by page and writes a Spanish→English corpus.

- LibreOffice (`libreoffice-help-es`, `libreoffice-help-en-us`): the same HTML
  pages under `usr/share/libreoffice/help/{es,en-US}/text/`; every paragraph and
  heading carries the same `id` (`par_id…`, `hd_id…`) in both languages. The
  hidden macOS variants of menu paths and key names are dropped, and code samples.
- GNOME (`gnome-user-docs`): Mallard pages under `usr/share/help/{C,es}/{guide}/`;
  a page is paired when its sequence of text blocks (title, subtitle, desc, p)
  is the same in both languages, block by block.

Paragraph pairs become sentence pairs: sentencex (the splitter `attnmt serve`
uses, so training sees the sentences the server will) splits each side, and a
Gale–Church aligner (model/data/sentence_align.py) keeps 1-1, 1-2 and 2-1 beads.
Filters (model/data/filters.py) drop untranslated fallbacks, Spanish sides
that are English, letterless, over-long and badly length-mismatched pairs.
Whole pages are held out for dev and test (a hash of the page's path), and
their sentences leave train, as do the dev and test sentences of the held-out
sets named by `--held-out`.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterator

from attnmt.model.data.filters import describe, filter_pairs, held_out_keys, is_held_out, reject_reason
from attnmt.model.data.gettext import fetch_packages, leak_key, normalise, package_licence
from attnmt.model.data.sentence_align import align_sentences

LIBREOFFICE = ("libreoffice-help-es", "libreoffice-help-en-us")
GNOME = ("gnome-user-docs",)
GNOME_GUIDES = ("gnome-help", "system-admin-guide")
MALLARD = "{http://projectmallard.org/1.0/}"
MALLARD_BLOCKS = ("title", "subtitle", "desc", "p")
# Per mille of the pages held out, chosen by a hash of the page's path so reruns agree.
TEST_PER_MILLE, DEV_PER_MILLE = 40, 40
SPLITS = ("train", "dev", "test")


def split_of(document: str) -> str:
    bucket = zlib.crc32(document.encode()) % 1000
    return "test" if bucket < TEST_PER_MILLE else "dev" if bucket < TEST_PER_MILLE + DEV_PER_MILLE else "train"


def html_blocks(path: Path) -> list[tuple[str, str]]:
    """(id, text) of a LibreOffice help page's paragraphs and headings, in page order;
    a repeated id (an embedded section used twice) gets its occurrence number."""
    import lxml.html
    tree = lxml.html.parse(str(path), parser=lxml.html.HTMLParser(encoding="utf-8"))
    for hidden in tree.xpath('//*[contains(concat(" ", @class, " "), " MAC ")]'
                             '|//*[contains(concat(" ", @class, " "), " bascode ")]|//pre|//script'):
        hidden.drop_tree()
    seen: Counter = Counter()
    blocks = []
    for element in tree.xpath('//*[@id="DisplayArea"]//*[starts-with(@id, "par_id") or starts-with(@id, "hd_id")]'):
        key = element.get("id")
        seen[key] += 1
        blocks.append((f"{key}#{seen[key]}", normalise(element.text_content())))
    return blocks


def libreoffice_paragraphs(es_root: Path, en_root: Path) -> Iterator[tuple[str, str, str]]:
    """(page, Spanish, English) for every id both versions of a page hold."""
    es_text = es_root / "usr/share/libreoffice/help/es"
    en_text = en_root / "usr/share/libreoffice/help/en-US"
    for es_page in sorted(es_text.glob("text/**/*.html")):
        rel = es_page.relative_to(es_text)
        en_page = en_text / rel
        if not en_page.exists():
            continue
        english = dict(html_blocks(en_page))
        for key, spanish in html_blocks(es_page):
            if key in english:
                yield f"libreoffice/{rel}", spanish, english[key]


def mallard_blocks(path: Path) -> list[tuple[str, str]]:
    """(tag, text) of a Mallard page's text blocks in document order; an <info>'s
    metadata (credits, links, revisions) is skipped but its <desc> kept."""
    from lxml import etree
    root = etree.parse(str(path)).getroot()
    blocks = []
    for element in root.iter(*(MALLARD + tag for tag in MALLARD_BLOCKS)):
        if any(a.tag in (MALLARD + "code", MALLARD + "screen") for a in element.iterancestors()):
            continue
        blocks.append((element.tag.removeprefix(MALLARD), normalise("".join(element.itertext()))))
    return blocks


def gnome_paragraphs(root: Path, stats: Counter) -> Iterator[tuple[str, str, str]]:
    """(page, Spanish, English) for the pages whose block sequences agree."""
    for guide in GNOME_GUIDES:
        for en_page in sorted((root / "usr/share/help/C" / guide).glob("*.page")):
            es_page = root / "usr/share/help/es" / guide / en_page.name
            if not es_page.exists():
                continue
            english, spanish = mallard_blocks(en_page), mallard_blocks(es_page)
            if [tag for tag, _ in english] != [tag for tag, _ in spanish]:
                stats["gnome_pages_structure_differs"] += 1
                continue
            stats["gnome_pages_paired"] += 1
            for (_, es), (_, en) in zip(spanish, english):
                yield f"gnome/{guide}/{en_page.stem}", es, en


# sentencex ends a sentence at "▸" (LibreOffice's menu-path arrow, "Herramientas ▸ Opciones"):
# hidden behind a private-use character while splitting.
_ARROW, _SHIELD = "\u25b8", "\ue000"


def split_sentences(text: str, language: str) -> list[str]:
    import sentencex
    pieces = sentencex.segment(language, text.replace(_ARROW, _SHIELD))
    return [s for s in (normalise(s).replace(_SHIELD, _ARROW) for s in pieces) if s]


def length_ratio(paragraphs: list[tuple[str, str, str]]) -> float:
    """Gale–Church's c: English characters per Spanish character over the paragraph pairs."""
    return sum(len(en) for _, _, en in paragraphs) / max(sum(len(es) for _, es, _ in paragraphs), 1)


def build_corpus(paragraphs: list[tuple[str, str, str]], held_out: set[str]) -> tuple[dict, dict]:
    """Paragraph pairs (page, es, en) → {split: [(page, es, en)]} sentence pairs, and counts."""
    counts: dict = {"paragraph_pairs": len(paragraphs)}
    dropped: Counter = Counter()
    kept = []
    for doc, es, en in paragraphs:
        reason = reject_reason(es, en)
        if reason in ("empty", "letterless", "untranslated", "spanish_side_english"):
            dropped[reason] += 1
        else:
            kept.append((doc, es, en))
    counts["paragraphs_dropped"] = dict(dropped)
    paragraphs = list({(doc, es, en): None for doc, es, en in kept})       # an embedded paragraph once per page
    counts["paragraph_pairs_kept"] = len(paragraphs)
    ratio = length_ratio(paragraphs)
    counts["gale_church_ratio"] = round(ratio, 3)

    beads: Counter = Counter()
    per_split: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    dropped = Counter()
    for doc, es, en in paragraphs:
        source, target = split_sentences(es, "es"), split_sentences(en, "en")
        beads["spanish_sentences"] += len(source)
        beads["english_sentences"] += len(target)
        pairs = align_sentences(source, target, ratio)
        beads["aligned_pairs"] += len(pairs)
        for s, t in filter_pairs(pairs, dropped):
            per_split[split_of(doc)].append((doc, s, t))
    counts["sentences"] = dict(beads)
    counts["sentence_pairs_dropped"] = dict(dropped)
    counts["sentence_pairs_kept"] = sum(len(v) for v in per_split.values())
    splits, leaks = remove_leaks(per_split, held_out)
    counts["held_out_removed"] = leaks
    counts.update({split: len(splits[split]) for split in SPLITS})
    return splits, counts


def remove_leaks(per_split: dict[str, list[tuple[str, str, str]]], held_out: set[str]) -> tuple[dict, dict]:
    """De-duplicate (train: unique pairs; dev, test: unique sources), then drop from dev what
    test holds and from train what dev, test or the external held-out sets hold."""
    test = _unique(per_split["test"], by_source=True)
    dev = _unique(per_split["dev"], by_source=True)
    train = _unique(per_split["train"], by_source=False)
    removed = {"duplicates": sum(len(per_split[k]) for k in SPLITS) - len(test) - len(dev) - len(train)}

    def keys(rows: list[tuple[str, str, str]]) -> set[str]:
        return {leak_key(text) for _, s, t in rows for text in (s, t)}

    def without(rows: list[tuple[str, str, str]], held: set[str], reason: str) -> list[tuple[str, str, str]]:
        kept = [row for row in rows if not is_held_out(row[1], row[2], held)]
        removed[reason] = len(rows) - len(kept)
        return kept

    dev = without(dev, keys(test), "dev_in_own_test")
    train = without(train, keys(test) | keys(dev), "train_in_own_dev_test")
    train = without(train, held_out, "train_in_held_out_sets")
    return {"train": train, "dev": dev, "test": test}, removed


def _unique(pairs: list[tuple[str, str, str]], by_source: bool) -> list[tuple[str, str, str]]:
    seen, out = set(), []
    for doc, s, t in pairs:
        key = s if by_source else (s, t)
        if key not in seen:
            seen.add(key)
            out.append((doc, s, t))
    return out


def write_splits(splits: dict[str, list[tuple[str, str, str]]], out_dir: Path) -> None:
    """`{split}.es`, `{split}.en`, `{split}.ids` (the page), line-aligned, as the other corpora."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        for suffix, column in (("ids", 0), ("es", 1), ("en", 2)):
            (out_dir / f"{split}.{suffix}").write_text("".join(row[column] + "\n" for row in rows), encoding="utf-8")


DATA_CARD = """# Data card: Spanish→English prose (LibreOffice and GNOME help)

- **What**: the help of LibreOffice 7.4 (`libreoffice-help-es`, `libreoffice-help-en-us`) and
  GNOME's user and administrator guides (`gnome-user-docs`), as Debian ships them; the
  English original is the target, the professional Spanish translation the source.
- **Licences** (from each package's `usr/share/doc/PKG/copyright`): {licences}.
  LibreOffice's help is MPL-2.0 (`Files: *`, with Apache-2.0 material; the other licences listed
  cover other files of the LibreOffice source, such as fonts); GNOME's is CC-BY-SA 3.0 (attribution:
  the GNOME Documentation Project; share-alike applies to the text, not to a model trained on it).
- **Extraction**: `apt-get download` + `dpkg-deb -x` (nothing installed). LibreOffice: paragraphs
  and headings with the same `id` on the same page in both languages; hidden macOS variants of
  menu paths and keys, Basic code samples and `<pre>` dropped; markup stripped. GNOME: Mallard
  pages whose block sequence (title, subtitle, desc, p) is the same in both languages
  ({gnome_pairs} pages; {gnome_differs} differ and are skipped); markup stripped.
- **Paragraphs**: {paragraph_pairs} pairs read; dropped {paragraphs_dropped}; {paragraph_pairs_kept}
  unique pairs (page, Spanish, English) kept.
- **Sentences**: split with sentencex (the server's splitter): {spanish_sentences} Spanish,
  {english_sentences} English; aligned within each paragraph pair by Gale–Church (c = {ratio},
  `model/data/sentence_align.py`), keeping 1-1 beads and 1-2/2-1 beads joined: {aligned_pairs} pairs.
- **Filters** (`model/data/filters.py`): dropped {sentence_dropped}; {sentence_kept} kept.
  untranslated: Spanish equals English (case-folded); spanish_side_english: English function words
  outnumber Spanish ones in the Spanish side (a PO fallback); length_ratio: one side over twice
  the other once the longer has more than 20 characters; too_long: over 300 characters.
- **Split by page** (a hash of the page path, {test_pm}‰ test, {dev_pm}‰ dev): test {test}, dev {dev},
  train {train} pairs. Removed: {removed}. Train keeps unique pairs, dev and test unique sources;
  every sentence (either side) of the held-out sets {held_out_dirs} left train.
- **Files**: `{{split}}.es`, `{{split}}.en`, `{{split}}.ids` (the page), one sentence per line;
  `packages.json`: package, version, licence.
- **Caveats**: all of it is about computers (menus, dialogs, settings): formal usted Spanish,
  interface terms. Menu paths keep LibreOffice's `▸`. Length-based alignment errs where a
  paragraph's sentences are split differently on the two sides; those beads are dropped.
"""


def write_card(out_dir: Path, counts: dict, facts: list[dict], held_out_dirs: list[Path], stats: Counter) -> None:
    sentences = counts["sentences"]
    card = DATA_CARD.format(
        licences="; ".join(f"`{f['package']}` {f['version']}: {f['licence']}" for f in facts),
        gnome_pairs=stats["gnome_pages_paired"], gnome_differs=stats["gnome_pages_structure_differs"],
        paragraph_pairs=counts["paragraph_pairs"], paragraphs_dropped=describe(counts["paragraphs_dropped"]),
        paragraph_pairs_kept=counts["paragraph_pairs_kept"], spanish_sentences=sentences["spanish_sentences"],
        english_sentences=sentences["english_sentences"], ratio=counts["gale_church_ratio"],
        aligned_pairs=sentences["aligned_pairs"], sentence_dropped=describe(counts["sentence_pairs_dropped"]),
        sentence_kept=counts["sentence_pairs_kept"], test_pm=TEST_PER_MILLE, dev_pm=DEV_PER_MILLE,
        removed=describe(counts["held_out_removed"]), held_out_dirs=", ".join(f"`{d}`" for d in held_out_dirs),
        **{split: counts[split] for split in SPLITS})
    (out_dir / "DATA_CARD.md").write_text(card, encoding="utf-8")


def extract_prose(out_dir: Path, held_out_dirs: list[Path], cache: Path | None = None) -> dict:
    """`attnmt data prose OUT_DIR`: fetch, pair, align, filter, split and document."""
    held_out = held_out_keys(held_out_dirs)
    roots = fetch_packages([*LIBREOFFICE, *GNOME], cache or out_dir / "cache")
    stats: Counter = Counter()
    paragraphs = list(libreoffice_paragraphs(roots[LIBREOFFICE[0]], roots[LIBREOFFICE[1]]))
    stats["libreoffice_paragraph_pairs"] = len(paragraphs)
    paragraphs += list(gnome_paragraphs(roots[GNOME[0]], stats))
    stats["gnome_paragraph_pairs"] = len(paragraphs) - stats["libreoffice_paragraph_pairs"]
    splits, counts = build_corpus(paragraphs, held_out)
    counts = {**dict(stats), **counts}
    facts = [{"package": p, "version": root.name.split("_")[1].replace("%3a", ":"), "licence": package_licence(root, p)}
             for p, root in roots.items()]
    write_splits(splits, out_dir)
    write_card(out_dir, counts, facts, held_out_dirs, stats)
    (out_dir / "packages.json").write_text(json.dumps(facts, indent=1) + "\n")
    (out_dir / "counts.json").write_text(json.dumps(counts, indent=2) + "\n")
    return {split: counts[split] for split in SPLITS}
