"""Everyday word pairs from Apertium's Spanish–English bilingual dictionary.

The model garbles everyday words it has rarely or never seen: the training mix holds
little everyday vocabulary. Apertium's bilingual dictionary
(Debian `apertium-eng-spa`) lists that vocabulary. `attnmt data dictionary OUT`
turns its entries into short phrase pairs: nouns with the definite article in the
singular and the plural ("la estación" / "the station", "los autobuses" / "the
buses"), adjectives in each gender and number ("roja" / "red"), verb infinitives
("reservar" / "to reserve").

Debian ships the dictionaries compiled, not their `.dix` source, so the entries are
read back from the transducer: `lt-print` (Debian `lttoolbox-dev`, fetched and
unpacked, not installed) writes `spa-eng.autobil.bin` as AT&T arcs, whose paths are
the entries (`estación<n><f>` : `station<n>`). The translations of a lemma come from
`lt-proc -b` in the dictionary's order, the first being Apertium's default; the
inflected forms come from Apertium's own generators (`lt-proc -g`), so plurals are
the dictionary's ("autobuses", "children"), not a rule's guess.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Iterator

from attnmt.model.data.filters import describe, held_out_keys, is_held_out
from attnmt.model.data.gettext import fetch_packages, normalise, require

APERTIUM = Path("/usr/share/apertium/apertium-eng-spa")
POS = ("n", "adj", "vblex")          # nouns, adjectives, lexical verbs: the everyday open classes
MAX_SENSES = 2                       # the default translation and one more ("estación": season, station)
MIN_COUNT = 3                        # the English word's occurrences in the frequency corpus, at least
MAX_PAIRS = 30_000
MAX_ARC_VISITS = 3_000_000           # per transducer section: a regular-expression section (numbers) is skipped
# The stage-8 mix, which does not contain these pairs: a mix that did would count their own words.
FREQUENCY_CORPUS = Path("data/es-en-everyday/train.en")
# Feminine nouns stressed on an initial a- take "el" in the singular ("el agua", "las aguas").
STRESSED_A = frozenset("agua águila ala alba alga alma alta ama ancla ansia arca área arma arpa asa "
                       "aula ave haba habla hacha hada hambre hampa".split())
_LEMMA = re.compile(r"[a-záéíóúüñ]+(?: [a-záéíóúüñ]+)?")       # lower case: proper nouns and acronyms leave
_ENGLISH = re.compile(r"[a-z]+(?:[ '-][a-z]+)?")
_TAGS = re.compile(r"<([^>]+)>")


# --- reading the compiled dictionary ------------------------------------------------------------

def att_sections(lines: Iterable[str]) -> Iterator[list[list[str]]]:
    """`lt-print` output, one list of tab-split rows per transducer section (`--` separates them)."""
    section: list[list[str]] = []
    for line in lines:
        line = line.rstrip("\n")
        if line == "--":
            yield section
            section = []
        elif line:
            section.append([f for f in line.split("\t") if f != ""])
    if section:
        yield section


def section_paths(rows: list[list[str]], max_visits: int = MAX_ARC_VISITS) -> list[tuple[str, str]] | None:
    """(left, right) strings of every path from state 0 to a final state; None when the section
    has more than `max_visits` arcs to walk (a regular expression, not a word list)."""
    arcs: dict[int, list[tuple[int, str, str]]] = {}
    final = set()
    for row in rows:
        if len(row) >= 4:
            arcs.setdefault(int(row[0]), []).append((int(row[1]), "" if row[2] == "ε" else row[2],
                                                     "" if row[3] == "ε" else row[3]))
        else:
            final.add(int(row[0]))
    out: list[tuple[str, str]] = []
    left: list[str] = []
    right: list[str] = []
    on_path: set[int] = set()
    visits = 0

    def walk(state: int) -> bool:
        nonlocal visits
        if state in final:
            out.append(("".join(left), "".join(right)))
        on_path.add(state)
        for target, a, b in arcs.get(state, ()):
            visits += 1
            if visits > max_visits:
                return False
            if target in on_path:                # a loop: no word list has one
                continue
            left.append(a)
            right.append(b)
            ok = walk(target)
            left.pop()
            right.pop()
            if not ok:
                return False
        on_path.discard(state)
        return True

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        return out if walk(0) else None
    finally:
        sys.setrecursionlimit(limit)


def lemmas(paths: Iterable[tuple[str, str]]) -> list[tuple[str, str, str, str]]:
    """(Spanish lemma, part of speech, gender or '', the entry's full tag string) of the entries
    worth a phrase, in order, de-duplicated: lower-case single words (or two-word compounds),
    nouns with a gender (m or f: with "mf" the article would be a guess)."""
    seen, out = set(), []
    for left, _ in paths:
        lemma, _, rest = left.partition("<")
        tags = _TAGS.findall("<" + rest)
        if not tags or tags[0] not in POS or not _LEMMA.fullmatch(lemma):
            continue
        gender = tags[1] if len(tags) > 1 and tags[1] in ("m", "f", "mf") else ""
        if tags[0] == "n" and gender not in ("m", "f"):
            continue
        key = (lemma, tags[0], gender)
        if key not in seen:
            seen.add(key)
            out.append((*key, "<" + rest if rest else ""))
    return out


# --- Apertium as a function: lexical units in, one answer per line out ---------------------------

def lt_proc(flag: str, transducer: Path, units: list[str]) -> list[str]:
    """Run `lt-proc FLAG` on `^unit$` lines, one output line per unit (null flush keeps them apart)."""
    text = "".join(f"^{u}$\0" for u in units)
    proc = subprocess.run(["lt-proc", "-z", flag, str(transducer)], input=text, capture_output=True,
                          text=True, check=True)
    out = proc.stdout.split("\0")
    return [o.strip() for o in out[:len(units)]]


def translations(units: list[str], bidix: Path) -> list[list[str]]:
    """English lemmas (tags dropped) of each Spanish unit, the dictionary's default first."""
    result = []
    for line in lt_proc("-b", bidix, units):
        alternatives = line.strip("^$").split("/")[1:]
        result.append([a.split("<")[0] for a in alternatives if not a.startswith(("@", "*"))])
    return result


def generate(units: list[str], generator: Path) -> list[str]:
    """Surface forms; '' where the generator does not know the form (it marks it with # or @)."""
    return ["" if not o or o[0] in "#@*" or "<" in o else o for o in lt_proc("-g", generator, units)]


# --- phrases ----------------------------------------------------------------------------------

def article(gender: str, plural: bool, noun: str) -> str:
    if plural:
        return "las" if gender == "f" else "los"
    return "la" if gender == "f" and noun not in STRESSED_A else "el"


def phrase_units(lemma: str, pos: str, gender: str) -> list[tuple[str, str, str, str]]:
    """(kind, Spanish unit for the generator, English tags, how the phrase is built) per phrase."""
    if pos == "n":
        return [("noun", f"{lemma}<n><{gender}><sg>", "<n><sg>", "sg"),
                ("noun_plural", f"{lemma}<n><{gender}><pl>", "<n><pl>", "pl")]
    if pos == "adj" and gender == "mf":                   # one form for both genders: "feliz", "felices"
        return [("adjective", f"{lemma}<adj><mf><sg>", "<adj>", ""),
                ("adjective", f"{lemma}<adj><mf><pl>", "<adj>", "")]
    if pos == "adj":
        return [("adjective", f"{lemma}<adj><m><sg>", "<adj>", ""),
                ("adjective", f"{lemma}<adj><f><sg>", "<adj>", ""),
                ("adjective", f"{lemma}<adj><m><pl>", "<adj>", "")]
    return [("verb", f"{lemma}<vblex><inf>", "<vblex><inf>", "to")]


def build_pairs(entries: list[tuple[str, str, str, str]], senses: list[list[str]],
                spanish: Callable[[list[str]], list[str]], english: Callable[[list[str]], list[str]],
                frequency: Counter, min_count: int = MIN_COUNT,
                max_senses: int = MAX_SENSES) -> tuple[list[tuple[str, str, str, int]], Counter]:
    """(kind, Spanish, English, rank) phrases of each entry and its first `max_senses` common
    translations; `spanish` and `english` generate surface forms. Dropped entries counted."""
    dropped: Counter = Counter()
    plans = []
    for (lemma, pos, gender, _), english_lemmas in zip(entries, senses):
        common = [e for e in dict.fromkeys(english_lemmas)
                  if _ENGLISH.fullmatch(e) and frequency[e] >= min_count][:max_senses]
        if not english_lemmas:
            dropped["no_translation"] += 1
        elif not common:
            dropped["rare_or_odd_english"] += 1
        for sense in common:
            for kind, es_unit, en_tags, build in phrase_units(lemma, pos, gender):
                plans.append((kind, lemma, gender, es_unit, f"{sense}{en_tags}", build, frequency[sense]))
    es_forms = spanish([p[3] for p in plans])
    en_forms = english([p[4] for p in plans])
    rows = []
    for (kind, _lemma, gender, _, _, build, count), es, en in zip(plans, es_forms, en_forms):
        if not es or not en:
            dropped["not_generated"] += 1        # a phrase, not an entry: a form the generator lacks
            continue
        if build in ("sg", "pl"):
            es, en = f"{article(gender, build == 'pl', es)} {es}", f"the {en}"
        elif build == "to":
            en = f"to {en}"
        rows.append((kind, es, en, count))
    return rows, dropped


def select_pairs(rows: list[tuple[str, str, str, int]], held_out: set[str],
                 max_pairs: int = MAX_PAIRS) -> tuple[list[tuple[str, str, str]], Counter]:
    """The `max_pairs` (kind, Spanish, English) pairs of the most common English words, less the
    held-out sentences and duplicates; reasons counted."""
    dropped: Counter = Counter()
    kept, seen = [], set()
    for kind, s, t, _ in sorted(rows, key=lambda r: -r[3]):      # stable: dictionary order within a count
        s, t = normalise(s), normalise(t)
        reason = ("held_out" if is_held_out(s, t, held_out) else "duplicate" if (s, t) in seen
                  else "over_max_pairs" if len(kept) >= max_pairs else None)
        if reason:
            dropped[reason] += 1
            continue
        seen.add((s, t))
        kept.append((kind, s, t))
    return kept, dropped


def word_counts(path: Path) -> Counter:
    """Lower-cased word counts of a text file: how common each English word is."""
    counts: Counter = Counter()
    with open(path, encoding="utf-8") as f:
        for line in f:
            counts.update(re.findall(r"[a-z]+", line.lower()))
    return counts


DATA_CARD = """# Data card: everyday word pairs from Apertium's Spanish–English dictionary

- **What**: short phrase pairs from the bilingual dictionary of `apertium-eng-spa` {version}
  (`spa-eng.autobil.bin`, read back with `lt-print` of `lttoolbox-dev` {lt_version}): nouns with
  the definite article, singular and plural ("la estación" / "the station", "los autobuses" / "the
  buses"), adjectives masculine, feminine and plural ("roja" / "red"), verb infinitives ("reservar"
  / "to reserve"). Forms come from Apertium's generators (`eng-spa.autogen.bin` for Spanish,
  `spa-eng.autogen.bin` for English); translations from `lt-proc -b`, the default first.
- **Licence**: GPL-2 (version 2 only) for the dictionaries (`/usr/share/doc/apertium-eng-spa/copyright`,
  "Files: *": Universitat d'Alacant, Generalitat de Catalunya, IULA-UPF, UPC, Jimmy O'Regan, Paul
  Breen); GPL-2+ for the Debian packaging only. The GPL speaks of programs and works based on them;
  it says nothing about using a work as training data, and whether a trained model (or phrase pairs
  derived from a dictionary) is a "work based on" it is not settled. **Unclear: check before
  publishing a model trained on these pairs.** The pairs themselves are GPL-2 data; keep this card
  with them.
- **Selection**: {entries} entries of {paths} dictionary paths ({skipped_sections} regular-expression
  section skipped): lower-case nouns with a gender, adjectives, lexical verbs; no digits, capitals,
  proper nouns, acronyms or multiword units with inflected heads. At most {max_senses} translations
  each, in the dictionary's order, each English word occurring at least {min_count} times in
  `{frequency_corpus}`. Dropped: {entries_dropped} (not_generated counts phrases whose form a
  generator lacks, the others entries).
- **Pairs**: {generated} phrases generated; dropped {dropped}; the {train} pairs whose English word
  is most frequent kept (at most {max_pairs}) ({by_kind}). Every sentence of the held-out sets
  {held_out_dirs} is removed. No dev or test split.
- **Files**: `train.es`, `train.en`, `train.ids` (the kind), one phrase per line.
- **Caveats**: words out of context; the second sense is often the less usual one ("la casa" /
  "the home"); feminine nouns take "el" only from a fixed list of stressed a- words (agua, arma…);
  English articles are always "the".
"""


def extract_dictionary(out_dir: Path, held_out_dirs: list[Path], cache: Path | None = None,
                       frequency_corpus: Path = FREQUENCY_CORPUS) -> dict:
    """`attnmt data dictionary OUT_DIR`: read the dictionary, generate, filter and document."""
    from attnmt.model.data.backtranslation import _installed_version
    require("lt-proc", "lttoolbox")
    bidix = APERTIUM / "spa-eng.autobil.bin"
    if not bidix.exists():
        raise SystemExit(f"{bidix} missing: apt-get install apertium-eng-spa")
    if not frequency_corpus.exists():
        raise SystemExit(f"{frequency_corpus} missing: build it first (`make data`), or pass another")
    held_out = held_out_keys(held_out_dirs)
    root = fetch_packages(["lttoolbox-dev"], cache or out_dir / "cache")["lttoolbox-dev"]
    printed = subprocess.run([str(root / "usr/bin/lt-print"), str(bidix)], capture_output=True, text=True,
                             check=True).stdout
    paths, skipped = [], 0
    for section in att_sections(printed.splitlines()):
        found = section_paths(section)
        if found is None:
            skipped += 1
        else:
            paths += found
    entries = lemmas(paths)
    senses = translations([lemma + tags for lemma, _, _, tags in entries], bidix)
    rows, entries_dropped = build_pairs(
        entries, senses, lambda units: generate(units, APERTIUM / "eng-spa.autogen.bin"),
        lambda units: generate(units, APERTIUM / "spa-eng.autogen.bin"), word_counts(frequency_corpus))
    kept, dropped = select_pairs(rows, held_out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for suffix, column in (("ids", 0), ("es", 1), ("en", 2)):
        (out_dir / f"train.{suffix}").write_text("".join(r[column] + "\n" for r in kept), encoding="utf-8")
        (out_dir / f"dev.{suffix}").write_text("", encoding="utf-8")
    by_kind = dict(Counter(kind for kind, _, _ in kept))
    counts = {"dictionary_paths": len(paths), "skipped_sections": skipped, "entries": len(entries),
              "entries_dropped": dict(entries_dropped), "generated": len(rows), "dropped": dict(dropped),
              "train": len(kept), "by_kind": by_kind}
    card = DATA_CARD.format(
        version=_installed_version("apertium-eng-spa"), lt_version=root.name.split("_")[1],
        entries=len(entries), paths=len(paths), max_senses=MAX_SENSES, min_count=MIN_COUNT,
        frequency_corpus=frequency_corpus, skipped_sections=skipped, entries_dropped=describe(dict(entries_dropped)),
        generated=len(rows), dropped=describe(dict(dropped)), train=len(kept), max_pairs=MAX_PAIRS,
        by_kind=describe(by_kind), held_out_dirs=", ".join(f"`{d}`" for d in held_out_dirs))
    (out_dir / "DATA_CARD.md").write_text(card, encoding="utf-8")
    (out_dir / "counts.json").write_text(json.dumps(counts, indent=2) + "\n")
    return {"train": len(kept), **by_kind}
