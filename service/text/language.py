"""Which language a text is in: LibreTranslate's `POST /detect` and `source: "auto"`.

A multinomial naive Bayes classifier over character 1- to 4-grams of lower-cased
words, each word padded with a space on both sides so that n-grams at its edges
(" el ", "ción ") are features of their own (Cavnar & Trenkle 1994; Lui &
Baldwin 2012, langid.py). The profiles, log P(n-gram | language) for a shared
list of n-grams, are package data (`data/languages.json`), trained by `attnmt
data languages` (model/data/languages.py) on the gettext catalogs of a Debian
system, with help pages and everyday sentences for Spanish and English; the
file records its training sizes and held-out accuracy. `LANGUAGES` (code →
English name) comes from the same file; both are read once, on first use.

Confidence: the posterior with a uniform prior, its log-likelihoods divided by
the temperature fitted on held-out messages (overlapping n-grams are far from
independent, so raw naive Bayes posteriors are near 0 or 1 whatever the text),
then multiplied by the share of the text's characters the profiles know: a Russian
text with one English word in it is not English with confidence 0.99.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import re
import unicodedata
from collections import Counter
from pathlib import Path

import numpy as np

from attnmt.service.errors import ModelLoadError

PROFILES = Path(__file__).parent / "data" / "languages.json"
LANGUAGES: dict[str, str]       # code -> English name; provided by __getattr__ below
MAX_ORDER = 4
# The language of a document shows in its first few thousand characters; reading no
# more keeps detect() fast on whole documents.
MAX_CHARS = 4096
# Letters, with the apostrophes and Catalan's middle dot inside words ("l'home",
# "col·lega"), and ¿ ¡ as words of their own: all are strong cues between these languages.
_WORD = re.compile(r"[^\W\d_]+(?:['·][^\W\d_]+)*|[¿¡]")


# markup a text may carry (an HTML request, a file's entries): tags and comments, not language
_MARKUP = re.compile(r"<!--.*?-->|</?[A-Za-z][^<>]*>", re.S)


def _without_markup(text: str) -> str:
    """`text` with its HTML tags and comments left out and its character references read, for
    the detector: `<span data-t="0">Sí.</span>` is Spanish, not tag names."""
    return html.unescape(_MARKUP.sub(" ", text)) if "<" in text or "&" in text else text


def ngrams(text: str) -> Counter[str]:
    """Counts of the character 1- to MAX_ORDER-grams of `text`'s words, as trained.

    model/data/languages.py counts the training text with a copy of this function (the
    worlds share no code beyond the model directory's); test_language.py holds them equal."""
    text = unicodedata.normalize("NFC", text[:MAX_CHARS]).lower().replace("’", "'")
    counts: Counter[str] = Counter()
    for word in _WORD.findall(text):
        padded = f" {word} "
        for n in range(1, MAX_ORDER + 1):
            for i in range(len(padded) - n + 1):
                counts[padded[i:i + n]] += 1
    del counts[" "]      # the padding alone says nothing
    return counts


class Profiles:
    """The trained profiles of one languages.json (see `attnmt data languages` for its fields)."""

    def __init__(self, doc: dict):
        if doc["max_order"] != MAX_ORDER:
            raise ValueError(f"n-grams up to {doc['max_order']} characters, this module counts up to {MAX_ORDER}")
        self.languages: dict[str, str] = doc["languages"]
        self.codes = list(self.languages)
        self.temperature = float(doc["temperature"])
        self.index = {gram: i for i, gram in enumerate(doc["ngrams"])}
        # log_probs: languages x n-grams; stored as uint8 q with log P = -q / scale
        quantized = np.stack([np.frombuffer(base64.b64decode(doc["log_probs"][code]), dtype=np.uint8)
                              for code in self.codes])
        if quantized.shape[1] != len(self.index):
            raise ValueError(f"{quantized.shape[1]} log-probabilities per language for {len(self.index)} n-grams")
        self.log_probs = -quantized.astype(np.float32) / float(doc["scale"])

    def posterior(self, text: str) -> np.ndarray | None:
        """P(language | text) over self.codes, times the share of known characters; None if none is known."""
        idx, n = [], []
        chars = known_chars = 0         # 1-grams: the text's characters, the known ones
        for gram, count in ngrams(text).items():
            i = self.index.get(gram)
            if len(gram) == 1:
                chars += count
                known_chars += count if i is not None else 0
            if i is not None:
                idx.append(i)
                n.append(count)
        if not known_chars:
            return None
        # log_likelihood: languages; the log-probabilities of the known n-grams times their counts
        log_likelihood = self.log_probs[:, idx] @ np.array(n, dtype=np.float32)
        z = log_likelihood / self.temperature
        p = np.exp(z - z.max())
        return p / p.sum() * (known_chars / chars)


@functools.cache
def profiles() -> Profiles:
    """The package's profiles, read once on first use."""
    try:
        return Profiles(json.loads(PROFILES.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError) as e:
        raise ModelLoadError(f"language profiles {PROFILES}: {e} "
                             "(rebuild with `attnmt data languages --out service/text/data/languages.json`)") from e


def detect(text: str, top: int = 3) -> list[tuple[str, float]]:
    """The `top` likeliest languages of `text`, best first: (ISO 639-1 code, probability).

    The probabilities of all known languages sum to the share of the text's letters the
    profiles know (1 for text in these languages), so the returned ones sum to at most 1.
    A text with no letters, or none the profiles know (another script), gives []: no
    language this module could name. Short texts ("OK") get an answer with low confidence;
    only the first MAX_CHARS characters are read, HTML tags and comments left out."""
    p = profiles().posterior(_without_markup(text))
    if p is None:
        return []
    best = np.argsort(-p, kind="stable")[:max(top, 0)]
    return [(profiles().codes[i], float(p[i])) for i in best]


def __getattr__(name: str):
    # LANGUAGES comes from the profiles file, which is read only when first needed.
    if name == "LANGUAGES":
        return dict(profiles().languages)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
