"""The names corpus: places, shops, services and everyday things, named in Spanish and English.

Everyday Spanish asks for the station, the pharmacy, the cash machine and the traffic lights,
words the other corpora hold rarely. Three translated vocabularies carry them:

- npm `@openstreetmap/id-tagging-schema` (ISC): the map editor iD's presets and fields;
  `dist/translations/es.json` and `en.json` share keys, so every string at the same key path is a
  pair: preset names (Estación de tren / Train Station), field labels, options and their short
  descriptions, placeholders;
- npm `cldr-annotations-full` (Unicode License v3): CLDR's emoji names (`tts`), one a symbol
  (semáforo / vertical traffic light);
- Debian `gnome-maps`: the place types of its `osm-types.json` (inside the program's gresource,
  read with `gresource extract`) that have a Spanish title, against the untranslated ("C") one.

npm packages are fetched with `npm pack` at the pinned versions (PACKAGES) and their sha256
checked; the Debian package with `apt-get download` and `dpkg-deb -x`, as the other builders do.

The English of iD and gnome-maps is in Title Case (Ice Cream Shop) where the Spanish is in
sentence case (Heladería, Estación de tren). A pair teaches the model to write what it sees, so
the English is put in sentence case (Ice cream shop) when the Spanish has no capital past its
first word, which tells a common name from a proper one (Visa Electron); words in capitals (ATM)
stay. Names have no context: their weight in a mix is for the dev sets to decide.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Iterator

from attnmt.model.data import decontaminate, upstream
from attnmt.model.data.filters import describe, reject_reason
from attnmt.model.data.gettext import fetch_packages, normalise
from attnmt.model.data.splits import write_splits

ID_SCHEMA, CLDR, GNOME_MAPS = "id-tagging-schema", "cldr-annotations", "gnome-maps"
PACKAGES = {   # source → (npm package, pinned version, sha256 of its `npm pack` tarball, licence)
    ID_SCHEMA: ("@openstreetmap/id-tagging-schema", "7.2.0",
                "5c95a50a232a699778e821b19b8c4b92f1719193ffb9069a88545ed9dff55b6b", "ISC"),
    CLDR: ("cldr-annotations-full", "48.2.0",
           "28576e51225deb51e3ddd734b0f824a0079682cb5d8c27faa9f68149317a14d1", "Unicode-3.0"),
}
GRESOURCE = "usr/share/gnome-maps/org.gnome.Maps.data.gresource"
OSM_TYPES = "/org/gnome/Maps/osm-types.json"
# Filters of the sentence corpora that do not fit names: a name may be the same in both languages
# (Hotel, Visa Electron) and its translation may be much longer or shorter (Baño / Restroom).
NOT_FOR_NAMES = ("untranslated", "length_ratio")
_TITLE_PART = re.compile(r"\b[A-Z][a-z]+\b")


def id_schema_pairs(root: Path) -> Iterator[tuple[str, str, str]]:
    """(key path, Spanish, English) of every string both translation files hold at one key path."""
    es = json.loads((root / "dist/translations/es.json").read_text(encoding="utf-8"))["es"]
    en = json.loads((root / "dist/translations/en.json").read_text(encoding="utf-8"))["en"]

    def walk(a, b, path: str):
        if isinstance(a, str) and isinstance(b, str):
            yield f"{ID_SCHEMA}/{path}", a, b
        elif isinstance(a, dict) and isinstance(b, dict):
            for k in a:
                if k in b:
                    yield from walk(a[k], b[k], f"{path}/{k}" if path else k)
    yield from walk(es, en, "")


def cldr_pairs(root: Path) -> Iterator[tuple[str, str, str]]:
    """(code points, Spanish, English) of each emoji's name (`tts`) in both locales."""
    def annotations(locale: str) -> dict:
        path = root / "annotations" / locale / "annotations.json"
        return json.loads(path.read_text(encoding="utf-8"))["annotations"]["annotations"]
    es, en = annotations("es"), annotations("en")
    for symbol, names in es.items():
        if symbol in en and names.get("tts") and en[symbol].get("tts"):
            code = "+".join(f"U{ord(c):04X}" for c in symbol)
            yield f"{CLDR}/{code}", names["tts"][0], en[symbol]["tts"][0]


def gnome_maps_pairs(root: Path) -> Iterator[tuple[str, str, str]]:
    """(OSM tag, Spanish, English) of each place type with a Spanish title."""
    if shutil.which("gresource") is None:
        raise SystemExit("gresource not found: it comes with Debian's `libglib2.0-bin` package")
    proc = subprocess.run(["gresource", "extract", str(root / GRESOURCE), OSM_TYPES], capture_output=True,
                          check=True)
    for tag, entry in json.loads(proc.stdout.decode("utf-8")).items():
        titles = entry.get("title", {})
        if titles.get("es") and titles.get("C"):
            yield f"{GNOME_MAPS}/{tag}", titles["es"], titles["C"]


def sentence_case(spanish: str, english: str) -> str:
    """The English in sentence case when it is in Title Case and the Spanish is not (see the
    module doc); else as it is. Every capitalised word part but the first is lowered
    (Lactose-Free → Lactose-free); words with other capitals (ATM, McDonald's) stay."""
    if any(w[:1].isupper() for w in spanish.split()[1:]):
        return english
    return _TITLE_PART.sub(lambda m: m.group(0) if m.start() == 0 else m.group(0).lower(), english)


def build_corpus(sources: dict[str, list[tuple[str, str, str]]], held: decontaminate.HeldOut) -> tuple[list, dict]:
    """Training rows (id, Spanish, English) and counts per source."""
    rows, seen, per_source = [], set(), {}
    for source, pairs in sources.items():
        dropped, removed = Counter(), Counter()
        kept, recased = [], 0
        for row_id, spanish, english in pairs:
            spanish, english = normalise(spanish), normalise(english)
            reason = reject_reason(spanish, english)
            reason = None if reason in NOT_FOR_NAMES else reason
            if not reason:
                cased = sentence_case(spanish, english)
                recased += cased != english
                english = cased
                reason = "duplicate" if (spanish, english) in seen else None
            if reason:
                dropped[reason] += 1
                continue
            seen.add((spanish, english))
            kept.append((row_id, spanish, english))
        kept = decontaminate.remove(kept, held, removed)
        per_source[source] = {"pairs": len(pairs), "dropped": dict(dropped), "decontaminated": dict(removed),
                              "sentence_cased": recased, "train": len(kept),
                              "same_in_both": sum(1 for _, s, t in kept if s.casefold() == t.casefold())}
        rows += kept
    return rows, {"sources": per_source, "train": len(rows)}


DATA_CARD = """# Data card: names of places, shops, services and things (iD presets, CLDR emoji, GNOME Maps)

- **What**: translated vocabularies, Spanish → English, one name or short label a line, no context:
  the map editor iD's presets, fields and options (npm `@openstreetmap/id-tagging-schema`:
  `dist/translations/es.json` against `en.json`, paired by key path: names, labels, options, their
  short descriptions, placeholders), CLDR's emoji names (npm `cldr-annotations-full`, `tts`), and
  GNOME Maps' place types (Debian `gnome-maps`, `osm-types.json` in its data gresource: the Spanish
  title against the untranslated one).
- **Licences**: iD tagging schema: ISC ("Copyright (c) iD Contributors"; the presets' names come from
  OpenStreetMap's tagging, translated on Transifex); CLDR annotations: Unicode License v3 (copyright
  and permission notice kept); gnome-maps: GPL-2+ (its `usr/share/doc/gnome-maps/copyright`,
  `Files: *`; the place types follow OpenStreetMap's tags). All free to use, modify and redistribute
  with their notices.
- **Versions and checksums**: below. npm packages fetched with `npm pack PACKAGE@VERSION` (the sha256 of
  the tarball), the Debian package with `apt-get download` (the sha256 of the .deb).
- **Cleaning**: whitespace collapsed; dropped: empty, letterless, Spanish side English, over 300
  characters (`model/data/filters.py`), and a pair seen before in any source. Kept, unlike the
  sentence corpora: names the same in both languages (Hotel, Visa Electron: {same} pairs) and
  pairs of very different lengths. English in Title Case put in sentence case when the Spanish has no
  capital past its first word (Ice Cream Shop → Ice cream shop; ATM kept): {recased} pairs.
- **Decontamination** (`model/data/decontaminate.py`): a pair leaves when its Spanish is a held-out
  Spanish sentence or its English a held-out English sentence, compared lower-cased without
  punctuation or spaces. Held-out sets: {held_out}. Removed: {removed}.
- **Pairs**: {train} training pairs; no dev or test split (the general mix's dev sets measure what
  they add). Files: `train.es`, `train.en`, `train.ids` (source and key path, emoji code points or
  OSM tag); `counts.json`, `sources.json`.
- **Caveats**: names without context, a few senses wrong out of it (an option "Block" / "Bloque");
  iD's options include technical OpenStreetMap values; CLDR's English emoji names are sometimes
  looser than the Spanish (semáforo / vertical traffic light). GNOME Maps' place types come from
  iD's presets, so most of them are duplicates here. Weigh the corpus by the dev sets.

| source | version | licence | sha256 | as pinned | pairs | kept | sentence-cased | dropped | decontaminated |
|---|---|---|---|---|---:|---:|---:|---|---|
{table}
"""


def write_card(out_dir: Path, counts: dict, facts: dict, held: decontaminate.HeldOut) -> None:
    per = counts["sources"]
    table = "\n".join(
        f"| {s} | {facts[s]['version']} | {facts[s]['licence']} | `{facts[s]['sha256']}` | "
        f"{'yes' if facts[s]['matches'] else 'no'} | {c['pairs']} | {c['train']} | {c['sentence_cased']} | "
        f"{describe(c['dropped'])} | {describe(c['decontaminated'])} |" for s, c in per.items())
    removed: Counter = Counter()
    for c in per.values():
        removed.update(c["decontaminated"])
    card = DATA_CARD.format(same=sum(c["same_in_both"] for c in per.values()),
                            recased=sum(c["sentence_cased"] for c in per.values()), held_out=held.describe(),
                            removed=describe(dict(removed)), train=counts["train"], table=table)
    (out_dir / "DATA_CARD.md").write_text(card, encoding="utf-8")


def extract_names(out_dir: Path, exclude: list[Path] | None, cache: Path | None = None) -> dict:
    """`attnmt data names OUT_DIR`: fetch, pair, clean, decontaminate and document."""
    held = decontaminate.load(exclude)
    cache = cache or out_dir / "cache"
    sources, facts = {}, {}
    for source, reader in ((ID_SCHEMA, id_schema_pairs), (CLDR, cldr_pairs)):
        package, version, pinned, licence = PACKAGES[source]
        root, tarball = upstream.npm_pack(package, version, cache)
        facts[source] = {"package": f"npm {package}", "version": version, "licence": licence,
                         **upstream.check(upstream.sha256(tarball), pinned, f"npm {package}@{version}")}
        sources[source] = list(reader(root))
    root = fetch_packages([GNOME_MAPS], cache)[GNOME_MAPS]
    deb = sorted((cache / "debs").glob(f"{GNOME_MAPS}_*.deb"))[-1]
    facts[GNOME_MAPS] = {"package": "Debian gnome-maps", "version": root.name.split("_")[1].replace("%3a", ":"),
                         "licence": "GPL-2+", "sha256": upstream.sha256(deb), "pinned": None, "matches": True}
    sources[GNOME_MAPS] = list(gnome_maps_pairs(root))
    rows, counts = build_corpus(sources, held)
    write_splits(out_dir, {"train": rows, "dev": []})
    write_card(out_dir, counts, facts, held)
    (out_dir / "counts.json").write_text(json.dumps(counts, indent=2) + "\n")
    (out_dir / "sources.json").write_text(json.dumps(facts, indent=1) + "\n")
    return {"train": counts["train"], **{s: c["train"] for s, c in counts["sources"].items()}}
