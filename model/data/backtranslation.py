"""Back-translation: real everyday English from Debian, synthetic Spanish from Apertium.

The help pages of the prose corpus are about computers; everyday talk (food,
family, work, health, feelings) has no parallel source in Debian. Its English
does: WordNet's example sentences (`wordnet-base`) and the `fortunes`
collections (`fortunes-min`, `fortunes`; `fortunes-off` is never used, and the
files below are the inoffensive everyday ones). `attnmt data backtranslate OUT`
translates them into Spanish with Apertium (`apertium eng-spa`), so the model
learns from a real, fluent English side (Sennrich et al. 2016).

Each synthetic source starts with BT_TAG (Caswell, Chelba and Grangier 2019,
"Tagged Back-Translation"): the model can tell Apertium's Spanish from real
Spanish and need not imitate its errors when it translates real input. The
tag exists only in these training files: a user's text reaches the model
untagged, which is the "real source" condition the tag was trained against,
and nothing in `service/` adds or knows it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Iterator

from attnmt.model.data.filters import describe, held_out_keys, is_held_out, reject_reason
from attnmt.model.data.gettext import fetch_packages, leak_key, normalise, package_licence

BT_TAG = "<bt>"
PACKAGES = ("wordnet-base", "fortunes-min", "fortunes")
WORDNET_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
# Everyday files of the inoffensive collections (usr/share/doc/fortunes/cookie-files). Left out:
# computing (computers, linux, linuxcookie, perl, debian), quotations from copyrighted fiction
# and scripts (pratchett, startrek, zippy), song lyrics (songs-poems), ASCII art, non-English
# (translate-me), and the files most prone to stereotypes or partisanship (men-women, ethnic,
# politics, drugs).
FORTUNE_FILES = ("fortunes", "literature", "riddles", "food", "kids", "pets", "people", "platitudes", "wisdom",
                 "work", "education", "medicine", "sports", "love", "miscellaneous", "humorists", "art", "science",
                 "news", "law", "magic")
MIN_WORDS, MAX_WORDS = 3, 40
# A last guard on what the maintainers' split let through into the inoffensive files.
OFFENSIVE = re.compile(r"\b(?:sex\w*|fuck\w*|shit\w*|damn\w*|bitch\w*|bastard\w*|ass(?:hole)?s?|whore\w*|"
                       r"nigg\w*|fag\w*|dick\w*|cock\w*|pussy|tits?|breasts?|rape\w*|porn\w*|penis\w*|"
                       r"orgasm\w*|nude\w*|naked|virgin\w*|prostitut\w*|homosexual\w*|gay|queer|kill\w*|suicide)\b",
                       re.I)
_QUOTED = re.compile(r'"([^"]+)"')
_ATTRIBUTION = re.compile(r"^\s*(?:--|—)\s")
_UNKNOWN = re.compile(r"\*(\w[\w'-]*)")        # Apertium marks a word it does not know: *word
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,;:!?])")


def wordnet_examples(root: Path) -> Iterator[tuple[str, str]]:
    """(id, sentence) for each quoted example of each synset's gloss."""
    for name in WORDNET_FILES:
        path = root / "usr/share/wordnet" / name
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("  ") or " | " not in line:
                continue                                     # the licence header
            for example in _QUOTED.findall(line.split(" | ", 1)[1]):
                yield f"wordnet/{name.removeprefix('data.')}", sentence_case(example)


def sentence_case(text: str) -> str:
    """WordNet's examples are lower-case fragments: capitalise, and end a clause of four
    words or more with a full stop, so they read like the sentences users type."""
    text = normalise(text)
    if not text:
        return text
    text = text[0].upper() + text[1:]
    if len(text.split()) >= 4 and text[-1].isalnum():
        text += "."
    return text


def fortunes(root: Path, name: str) -> Iterator[tuple[str, str]]:
    """(id, sentence) of a fortune file: entries split at `%` lines, attributions dropped,
    lines joined, then split into sentences with sentencex."""
    import sentencex
    path = root / "usr/share/games/fortunes" / name
    text = path.read_text(encoding="utf-8", errors="replace")
    for entry in re.split(r"^%\s*$", text, flags=re.M):
        lines = [line for line in entry.splitlines() if line.strip() and not _ATTRIBUTION.match(line)]
        body = normalise(" ".join(lines))
        if not body or OFFENSIVE.search(body):
            continue                                       # drop the whole fortune, not just a sentence
        for sentence in sentencex.segment("en", body):
            yield f"fortunes/{name}", normalise(sentence)


def usable_english(sentence: str) -> str | None:
    """Why an English sentence is not used, or None."""
    words = sentence.split()
    if not MIN_WORDS <= len(words) <= MAX_WORDS:
        return "length"
    letters = sum(c.isalpha() for c in sentence)
    if letters < 0.7 * sum(not c.isspace() for c in sentence):
        return "symbols"                                  # ASCII art, code, tables
    if re.search(r"[@#*_<>{}|\\]|https?:|www\.", sentence):
        return "markup"
    if sentence.isupper():
        return "all_caps"
    return None


def apertium(sentences: list[str], pair: str = "eng-spa") -> list[str]:
    """Translate one sentence per line; Apertium's unknown-word marks (`*word`) are kept."""
    if shutil.which("apertium") is None:
        raise SystemExit("apertium not found: run `apt-get install apertium apertium-eng-spa`")
    out: list[str] = []
    for start in range(0, len(sentences), 5000):                    # bounded pipes, and progress
        chunk = sentences[start:start + 5000]
        proc = subprocess.run(["apertium", pair], input="\n".join(chunk) + "\n", capture_output=True,
                              text=True, check=True)
        lines = proc.stdout.rstrip("\n").split("\n")
        if len(lines) != len(chunk):
            raise RuntimeError(f"apertium {pair} returned {len(lines)} lines for {len(chunk)}")
        out += lines
    return out


def synthetic_source(spanish: str, english: str) -> tuple[str | None, str | None]:
    """(cleaned Spanish, None) or (None, reason): a lower-case word Apertium did not know
    stays English in the output, so the pair is dropped; an unknown capitalised word is a
    name and is kept without its mark. `#` and `@` mark generation and transfer failures.
    Apertium's spacing before punctuation is undone, a dropped subject pronoun's
    capital restored, and the opening ¿ or ¡ it never writes added to a one-sentence
    question or exclamation."""
    if "#" in spanish or "@" in spanish:
        return None, "apertium_failure"
    if any(word[0].islower() for word in _UNKNOWN.findall(spanish)):
        return None, "apertium_unknown_word"
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", normalise(spanish.replace("*", "")))
    if text and english[:1].isupper():
        text = text[0].upper() + text[1:]
    for close, opening in (("?", "¿"), ("!", "¡")):
        if text.endswith(close) and opening not in text and not re.search(r"[.?!]\s", text):
            text = opening + text
    return text, None


def build_pairs(english: list[tuple[str, str]], held_out: set[str], translate=apertium) -> tuple[list, dict]:
    """English (id, sentence) → (id, tagged Spanish, English) training rows, and counts."""
    counts: dict = {"english_sentences": Counter(i.split("/")[0] for i, _ in english)}
    dropped: Counter = Counter()
    unique: dict[str, str] = {}
    for doc, sentence in english:
        reason = usable_english(sentence)
        if reason:
            dropped[reason] += 1
        elif leak_key(sentence) in held_out:
            dropped["held_out"] += 1
        elif leak_key(sentence) in unique:
            dropped["duplicate"] += 1
        else:
            unique[leak_key(sentence)] = (doc, sentence)
    counts["english_dropped"] = dict(dropped)
    rows = list(unique.values())
    counts["translated"] = len(rows)
    spanish = translate([s for _, s in rows])
    dropped = Counter()
    out = []
    for (doc, en), es in zip(rows, spanish):
        es, reason = synthetic_source(es, en)
        reason = reason or reject_reason(es, en) or ("held_out" if is_held_out(es, en, held_out) else None)
        if reason:
            dropped[reason] += 1
        else:
            out.append((doc, f"{BT_TAG} {es}", en))
    counts["pairs_dropped"] = dict(dropped)
    counts["train"] = len(out)
    counts["train_by_source"] = dict(Counter(doc.split("/")[0] for doc, _, _ in out))
    counts["english_sentences"] = dict(counts["english_sentences"])
    return out, counts


DATA_CARD = """# Data card: back-translated everyday English (WordNet examples, fortunes)

- **What**: real English sentences from Debian packages, translated into Spanish by Apertium
  (`apertium eng-spa`, `apertium-eng-spa` {apertium_version}); the English is the target, the
  synthetic Spanish the source, prefixed with the tag `{tag}` (tagged back-translation, Caswell et al.
  2019). The tag exists only in training data: served requests are untagged.
- **Sources and licences** (from each package's `usr/share/doc/PKG/copyright`):
  - `wordnet-base` {wn_version}: the quoted example sentences of WordNet 3.0's glosses. WordNet 3.0
    licence (Princeton; permission to use, copy, modify and distribute for any purpose, keeping the
    copyright notice: "WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.").
  - `fortunes-min`, `fortunes` {fortunes_version}: the inoffensive collections' everyday files
    ({fortune_files}); the package is under the BSD licence of the University of California, its
    quotations carry no licence of their own. `fortunes-off` is not used; computing, fiction and
    script quotations, lyrics and the files prone to stereotypes are left out, and any fortune
    matching a word list of sexual, vulgar, violent or slur terms is dropped whole.
- **Cleaning**: WordNet examples capitalised, and given a full stop when four words or longer;
  fortunes split at `%`, attributions (`-- Author`) removed, lines joined, split into sentences
  with sentencex. Kept: {min_words}–{max_words} words, at least 70 % letters, no markup, not all
  capitals; dropped {english_dropped} (held_out: the sentence is in a held-out set {held_out_dirs}).
- **Translation**: {translated} unique sentences; dropped {pairs_dropped}
  (apertium_unknown_word: a lower-case word Apertium did not know stays English in the Spanish;
  capitalised unknowns are names and are kept).
- **Pairs**: {train} training pairs ({by_source}); no dev or test split (the everyday set in
  `tests/data/everyday` measures it). Files: `train.es` (tagged), `train.en`, `train.ids` (source).
- **Caveats**: the Spanish is machine output (literal, some wrong senses and agreement); WordNet's
  examples are short and often fragments; fortunes are jokes and aphorisms, often old-fashioned.
"""


def extract_backtranslation(out_dir: Path, held_out_dirs: list[Path], cache: Path | None = None) -> dict:
    """`attnmt data backtranslate OUT_DIR`: fetch, read, translate, tag, filter and document."""
    held_out = held_out_keys(held_out_dirs)
    roots = fetch_packages(list(PACKAGES), cache or out_dir / "cache")
    english = list(wordnet_examples(roots["wordnet-base"]))
    for name in FORTUNE_FILES:
        root = roots["fortunes-min"] if (roots["fortunes-min"] / "usr/share/games/fortunes" / name).exists() \
            else roots["fortunes"]
        english += list(fortunes(root, name))
    rows, counts = build_pairs(english, held_out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for suffix, column in (("ids", 0), ("es", 1), ("en", 2)):
        (out_dir / f"train.{suffix}").write_text("".join(r[column] + "\n" for r in rows), encoding="utf-8")
        (out_dir / f"dev.{suffix}").write_text("", encoding="utf-8")
    facts = [{"package": p, "version": root.name.split("_")[1].replace("%3a", ":"),
              "licence": package_licence(root, p)} for p, root in roots.items()]
    version = {f["package"]: f["version"] for f in facts}
    card = DATA_CARD.format(
        apertium_version=_installed_version("apertium-eng-spa"), tag=BT_TAG, wn_version=version["wordnet-base"],
        fortunes_version=version["fortunes"], fortune_files=", ".join(FORTUNE_FILES), min_words=MIN_WORDS,
        max_words=MAX_WORDS, english_dropped=describe(counts["english_dropped"]),
        held_out_dirs=", ".join(f"`{d}`" for d in held_out_dirs), translated=counts["translated"],
        pairs_dropped=describe(counts["pairs_dropped"]), train=counts["train"],
        by_source=describe(counts["train_by_source"]))
    (out_dir / "DATA_CARD.md").write_text(card, encoding="utf-8")
    (out_dir / "packages.json").write_text(json.dumps(facts, indent=1) + "\n")
    (out_dir / "counts.json").write_text(json.dumps(counts, indent=2) + "\n")
    return {"train": counts["train"], **counts["train_by_source"]}


def _installed_version(package: str) -> str:
    proc = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True)
    return proc.stdout.strip() or "unknown"
