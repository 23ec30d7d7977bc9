"""Language profiles for the language identifier (service/text/language.py), from gettext catalogs.

Every catalog a Debian system installs (`LOCALE_ROOT/<lang>/LC_MESSAGES/*.mo`,
region and variant directories such as `pt_BR` or `ca@valencia` included) pairs
an English msgid with a msgstr in `<lang>`: the msgstrs are that language's
text, the msgids of all catalogs are English text. Software messages are
impersonal and imperative, so everyday Spanish ("mañana tenemos examen") reads
to them as Galician or Portuguese about one sentence in twelve; the training splits of
the corpora in CORPORA (help pages, back-translated everyday sentences, Tatoeba's
short conversational ones), where they have been built, add Spanish and English
sentences. Tatoeba's took two-word Spanish phrases from 73 % to 90 % called Spanish
(its public test set's first two words, 2,056 lines; English 86 % to 94 %), and the held-out
messages of every other language were named better too, by 0.07 to 0.8 points (2026-11-29). `attnmt data languages
--out FILE` keeps the languages of LANGUAGES with at least `min_chars`
characters of clean text and writes the profiles that
`attnmt.service.text.language` loads (its package data: `--out
service/text/data/languages.json`).

Cleaning: contexts are dropped (`ctx\\x04msgid`); untranslated entries (msgstr
equal to msgid) leave the msgstr side; placeholders, markup, entities, URLs,
paths, identifiers and command-line options are removed, since they read the
same in every language; what is left must have 3 letters and be half letters.
Each language's text is deduplicated and capped at `max_chars` characters (a
seeded sample), so that no language's profile is much sharper than another's.

Training: 1 message in HELD_OUT (by CRC-32 of its text) is held out. The
features are the frequent characters and each language's `top` most frequent
n-grams of each order (see `fit`); each language's log P(n-gram) over them is
add-α smoothed and quantized to a byte. The temperature that divides the
log-likelihoods is the one that minimizes the held-out messages' log loss; the
held-out accuracy per language goes into the file. The builder never reads
tests/data (the everyday set is the identifier's test).
"""

from __future__ import annotations

import base64
import gettext
import heapq
import json
import random
import re
import unicodedata
import zlib
from collections import Counter
from pathlib import Path

import numpy as np

LOCALE_ROOT = Path("/usr/share/locale")
# Spanish is what the server translates and English what it translates into; the others
# are the languages a user is likeliest to paste by mistake, and those Debian has catalogs of.
LANGUAGES = {"es": "Spanish", "en": "English", "pt": "Portuguese", "fr": "French", "it": "Italian",
             "ca": "Catalan", "de": "German", "gl": "Galician", "nl": "Dutch"}
REQUIRED = ("es", "en")
# Corpora (`attnmt data prose`, `attnmt data backtranslate`, `attnmt data tatoeba`) whose training
# splits add everyday and help-page sentences to the Spanish and English software messages, when
# they have been built.
CORPORA = (Path("data/prose"), Path("data/backtranslation"), Path("data/tatoeba"))
ALPHA = 0.5          # add-α smoothing of the n-gram counts
HELD_OUT = 10        # 1 message in HELD_OUT is held out
# A character rarer than this in every language's text is left unknown, so that text in other
# scripts (Cyrillic, Turkish ı) lowers the confidence instead of being scored on stray letters.
MIN_LETTER_SHARE = 1e-5
# The features, as service/text/language.py counts them (model/ may not import it: the worlds share
# only the model-directory contract); tests/unit/text/test_language.py holds the two equal.
MAX_ORDER = 4
_WORD = re.compile(r"[^\W\d_]+(?:['·][^\W\d_]+)*|[¿¡]")
_TECHNICAL = re.compile(r"""
    %(?:\(\w+\))?[-+ #0']*(?:\d+\$)?(?:\d+|\*)?(?:\.(?:\d+|\*))?[hlLqjzt]*[a-zA-Z%]   # printf: %s %-5.2f %(name)s
  | \{[^{}\s]*\}              # {0} {name}
  | \$\{?\w+\}?               # $VAR ${VAR}
  | <[^<>]*>                  # markup
  | &[#\w]+;                  # entities
  | \S*(?:://|[_/\\=@])\S*    # URLs, paths, identifiers, key=value, e-mail addresses
  | (?<!\w)--?\w[\w-]*        # command-line options
""", re.X)


def ngrams(text: str) -> Counter[str]:
    """Counts of the character 1- to MAX_ORDER-grams of the text's words, each padded with spaces."""
    text = unicodedata.normalize("NFC", text).lower().replace("’", "'")
    counts: Counter[str] = Counter()
    for word in _WORD.findall(text):
        padded = f" {word} "
        for n in range(1, MAX_ORDER + 1):
            for i in range(len(padded) - n + 1):
                counts[padded[i:i + n]] += 1
    del counts[" "]
    return counts


def catalogs(root: Path, language: str) -> list[Path]:
    """The .mo files of `language`, its region and variant directories included."""
    dirs = [d for d in root.iterdir() if re.fullmatch(rf"{language}(?:_[A-Z]{{2}})?(?:@\w+)?", d.name)]
    return sorted(path for d in dirs for path in (d / "LC_MESSAGES").glob("*.mo"))


def read_catalog(path: Path) -> list[tuple[str, str]]:
    """(msgid, msgstr) of one .mo, without its header and contexts; [] if it cannot be decoded."""
    try:
        with open(path, "rb") as f:
            catalog = gettext.GNUTranslations(f)._catalog
    except (OSError, UnicodeDecodeError):      # a few catalogs declare a charset they are not in
        return []
    pairs = []
    for key, msgstr in catalog.items():
        msgid = key[0] if isinstance(key, tuple) else key      # plurals: (msgid, n)
        if msgid:
            pairs.append((msgid.split("\x04")[-1], msgstr))
    return pairs


def clean(text: str) -> str | None:
    """The message's natural-language text, or None if too little is left (see module doc)."""
    text = " ".join(_TECHNICAL.sub(" ", text).split())
    letters = sum(ch.isalpha() for ch in text)
    if letters < 3 or letters < 0.5 * len(text.replace(" ", "")):
        return None
    return text


def collect(root: Path, languages: list[str]) -> tuple[dict[str, set[str]], dict[str, int]]:
    """Clean texts per language, English from every catalog's msgids; and catalogs read per language."""
    texts: dict[str, set[str]] = {code: set() for code in languages}
    read: Counter[str] = Counter()
    for code in languages:
        if code == "en":
            continue
        for path in catalogs(root, code):
            pairs = read_catalog(path)
            read[code] += bool(pairs)
            for msgid, msgstr in pairs:
                if "en" in texts and (english := clean(msgid)):
                    texts["en"].add(english)
                if msgstr != msgid and (text := clean(msgstr)):
                    texts[code].add(text)
    read["en"] = sum(read.values())
    return texts, dict(read)


def read_corpora(corpora: list[Path], languages: list[str]) -> dict[str, set[str]]:
    """Clean lines of the corpora's training splits (`DIR/train.<code>`), per language."""
    texts: dict[str, set[str]] = {code: set() for code in languages}
    for corpus in corpora:
        for code in languages:
            path = corpus / f"train.{code}"
            if path.exists():
                texts[code].update(t for line in path.read_text(encoding="utf-8").splitlines() if (t := clean(line)))
    return texts


def sample(texts: set[str], max_chars: int, seed: int = 0) -> list[str]:
    """A seeded sample of at most max_chars characters."""
    pool = sorted(texts)
    random.Random(seed).shuffle(pool)
    kept, total = [], 0
    for text in pool:
        if total + len(text) > max_chars:
            break
        kept.append(text)
        total += len(text)
    return kept


def fit(train: dict[str, list[str]], top: int) -> tuple[list[str], np.ndarray]:
    """The feature list and log P(n-gram | language): languages x n-grams.

    Features: every character of at least MIN_LETTER_SHARE of some language's characters, and
    each language's `top` most frequent n-grams of each order from 2 to MAX_ORDER."""
    counts = {}
    for code, texts in train.items():
        counts[code] = Counter()
        for text in texts:
            counts[code].update(ngrams(text))
    vocabulary = set()
    for c in counts.values():
        letters = sum(count for gram, count in c.items() if len(gram) == 1)
        vocabulary |= {gram for gram, count in c.items() if len(gram) == 1 and count >= MIN_LETTER_SHARE * letters}
        for n in range(2, MAX_ORDER + 1):
            vocabulary |= set(heapq.nlargest(top, (gram for gram in c if len(gram) == n), key=c.__getitem__))
    vocabulary = sorted(vocabulary)
    # table: languages x n-grams, counts over the feature list only (other n-grams are never scored)
    table = np.array([[counts[code][gram] for gram in vocabulary] for code in train], dtype=np.float64)
    smoothed = table + ALPHA
    return vocabulary, np.log(smoothed / smoothed.sum(axis=1, keepdims=True))


def quantize(log_probs: np.ndarray) -> tuple[float, np.ndarray]:
    """scale and uint8 q with log P ≈ -q / scale; the scale makes the rarest n-gram 255."""
    scale = 255 / float(-log_probs.min())
    return scale, np.round(-log_probs * scale).astype(np.uint8)


def calibrate(log_probs: np.ndarray, vocabulary: list[str], held_out: dict[str, list[str]]) -> tuple[float, dict]:
    """The temperature minimizing the held-out log loss, and the held-out accuracy per language."""
    index = {gram: i for i, gram in enumerate(vocabulary)}
    codes = list(held_out)
    rows, labels = [], []
    for label, code in enumerate(codes):
        for text in held_out[code]:
            # features: n-grams; the counts of the text's known n-grams
            features = np.zeros(len(vocabulary), dtype=np.float32)
            for gram, count in ngrams(text).items():
                if gram in index:
                    features[index[gram]] = count
            rows.append(log_probs @ features)
            labels.append(label)
    if not rows:        # tiny catalogs: nothing to calibrate on
        return 1.0, {"messages": 0, "log_loss": None, "accuracy": {code: None for code in codes}}
    # log_likelihood: messages x languages
    log_likelihood, labels = np.array(rows), np.array(labels)

    def log_loss(temperature: float) -> float:
        z = log_likelihood / temperature
        z = z - z.max(axis=1, keepdims=True)
        log_posterior = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return float(-log_posterior[np.arange(len(labels)), labels].mean())

    temperature = min(np.geomspace(0.5, 200, 121), key=log_loss)
    correct = log_likelihood.argmax(axis=1) == labels
    return float(temperature), {
        "messages": len(labels), "log_loss": round(log_loss(temperature), 4),
        "accuracy": {code: round(float(correct[labels == i].mean()), 4) if held_out[code] else None
                     for i, code in enumerate(codes)}}


def build_profiles(out: Path, locale_root: Path = LOCALE_ROOT, corpora: tuple[Path, ...] = CORPORA,
                   languages: dict[str, str] = LANGUAGES, min_chars: int = 300_000, max_chars: int = 2_000_000,
                   top: int = 2000) -> dict:
    """Write the profiles file `out`; returns its training and held-out report."""
    texts, read = collect(locale_root, list(languages))
    corpora = [c for c in corpora if c.is_dir()]
    corpus_texts = read_corpora(corpora, list(languages))
    for code, lines in corpus_texts.items():
        texts[code] |= lines
    sizes = {code: sum(map(len, texts[code])) for code in texts}
    for code in REQUIRED:
        if sizes.get(code, 0) < min_chars:
            raise SystemExit(f"{sizes.get(code, 0)} characters of {code} text under {locale_root}, "
                             f"{min_chars} needed: install packages with {code} catalogs")
    kept = [code for code in languages if sizes.get(code, 0) >= min_chars]
    train, held_out = {}, {}
    for code in kept:
        chosen = sample(texts[code], max_chars)
        train[code] = [t for t in chosen if zlib.crc32(t.encode()) % HELD_OUT]
        held_out[code] = [t for t in chosen if not zlib.crc32(t.encode()) % HELD_OUT]
    vocabulary, log_probs = fit(train, top)
    scale, q = quantize(log_probs)
    temperature, evaluation = calibrate(-q.astype(np.float32) / scale, vocabulary, held_out)
    training = {code: {"catalogs": read.get(code, 0), "texts": len(train[code]),
                       "from_corpora": sum(t in corpus_texts[code] for t in train[code]),
                       "chars": sum(map(len, train[code]))} for code in kept}
    left_out = {code: sizes.get(code, 0) for code in languages if code not in kept}
    doc = {"about": "Character n-gram profiles of service/text/language.py, written by `attnmt data languages` "
                    "(model/data/languages.py). log_probs[code]: base64 of one byte q per n-gram, "
                    "log P(n-gram | language) = -q / scale.",
           "languages": {code: languages[code] for code in kept}, "max_order": MAX_ORDER, "alpha": ALPHA,
           "corpora": [str(c) for c in corpora], "top_per_order": top, "temperature": round(temperature, 4),
           "scale": scale,
           "training": training, "left_out_chars": left_out, "held_out": evaluation,
           "ngrams": vocabulary,
           "log_probs": {code: base64.b64encode(q[i].tobytes()).decode("ascii") for i, code in enumerate(kept)}}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    return {key: doc[key] for key in ("languages", "temperature", "training", "left_out_chars", "held_out")} | {
        "ngrams": len(vocabulary), "bytes": out.stat().st_size}
