"""Placeholders: the spans of a software message that must come out verbatim.

printf conversions (`%s`, `%1$s`, `%.*s`, `%<PRIu64>`), Python's `%(name)s`,
brace fields (`{0}`, `{name}`, `{{var}}`), shell variables (`$VAR`, `${VAR}`),
Qt's `%1`, LibreOffice's `%PRODUCTNAME` and `$(ARG1)`, inline markup tags
(`<b>`, `</a>`, `<span ...>`; not metavariables such as `<archivo>`), command-line
options (`--all`, `--file=NAME`, `-n`), web and mail addresses, and emoji. \
The model learns to carry numbered sentinels (`⦃1⦄`, `⦃2⦄`,
...) from source to target: training replaces the placeholders of part of the
software pairs by sentinels, numbered in source order, and the service does the
same to a request before decoding and puts the original text back afterwards.

This module owns the pattern; `export` writes it into the manifest, which is
how the service (which never imports this package) learns it.
"""

from __future__ import annotations

import re
import zlib
from collections import defaultdict

# Markup elements messages carry (HTML's and GTK's Pango markup). Only these are tags: an
# angle-bracketed word is otherwise a metavariable its translator translates (`<archivo>` ->
# `<file>`, `<rama>` -> `<branch>`: 320 of the 387 "tags" of the software test set were such).
ELEMENTS = ("a", "abbr", "b", "big", "blockquote", "br", "center", "cite", "code", "dd", "del", "dfn", "div", "dl",
            "dt", "em", "font", "h[1-6]", "hr", "i", "img", "input", "ins", "kbd", "li", "link", "mark", "ol", "p",
            "pre", "q", "s", "samp", "small", "span", "strike", "strong", "sub", "sup", "table", "tbody", "td", "th",
            "thead", "tr", "tt", "u", "ul", "var")

FORMATS = (
    r"%<PRI[a-zA-Z0-9]+>"                                               # %<PRIu64> (gettext's inttypes)
    r"|%(?:\d+\$)?[-+0#']*(?:\d+|\*(?:\d+\$)?)?(?:\.(?:\d+|\*(?:\d+\$)?))?"
    r"(?:hh|h|ll|l|L|q|j|z|Z|t|I64|I32|I)?[diouxXeEfFgGaAcspnm%DETFVKHJB]"  # printf, gcc's %qD, bfd's %B
    r"|%[<>']"                                                          # gcc's quote markers %< %>
    r"|%\([A-Za-z_][A-Za-z0-9_]*\)[-+0#]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]"  # Python %(name)s
    r"|%\d+|%[A-Z][A-Z_]{2,}%?"                                         # Qt %1, LibreOffice %PRODUCTNAME
    r"|\{\{[^{}\s]+\}\}|\{[A-Za-z0-9_.\-]*(?::[^{}\s]*)?\}"            # {{var}}, {0}, {name}, {}
    r"|\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$\([A-Za-z0-9_]+\)|\$[A-Za-z_][A-Za-z0-9_]*"  # ${VAR} $(ARG) $VAR
    r"|</?(?i:" + "|".join(ELEMENTS) + r")(?:\s+[^<>]*)?/?>"          # inline tags: HTML/Pango elements
)
# Command-line options, long with their value's name (--connect-timeout=SECS) and short (-n): the
# program's own words, which the English→Spanish model otherwise translated or cut in 206 of the
# 1,130 software test messages that hold one ("--ca-directory=DIR" → "--ca-directorio=DIR"). Not a
# hyphen inside a word (e-mail, non-free) nor a dash between words, and a whole word or nothing
# ("--round=MÉTODO", never "--round=M"). Protected as the others are, and counted apart: a format
# directive lost breaks the program (msgfmt --check refuses it), an option lost its documentation.
OPTIONS = r"(?<![\w-])(?:--[A-Za-z0-9][A-Za-z0-9-]*(?:=[^\W\d][\w-]*)?|-[A-Za-z])(?![\w-])"
# Text that must come out as written though no program reads it: web and mail addresses (the models
# spelt them as words: "https://ejemplo.com/ruta" came back "https://jemplo.com/path",
# "juan.perez@ejemplo.org" "play.perez@emplo.org"; a Mastodon handle is an address too), and emoji,
# which the vocabularies lack ("esto 😀 muchísimo" gave "this ⁇ a lot"). An address ends before
# the punctuation that follows it. Not counted with the format directives: nothing breaks without them.
ADDRESSES = (r"(?:(?:https?|ftp)://|www\.)[^\s<>\"'`«»“”‘’]*[^\s<>\"'`«»“”‘’.,;:!?)\]}]"
             r"|@?[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PICTOGRAPH = r"[\u2600-\u27bf\U0001f000-\U0001faff](?:\ufe0f|[\U0001f3fb-\U0001f3ff])?"
EMOJI = rf"(?:[\U0001f1e6-\U0001f1ff]{{2}}|{_PICTOGRAPH}(?:\u200d{_PICTOGRAPH})*)+"
PATTERN = FORMATS + "|" + ADDRESSES + "|" + EMOJI + "|" + OPTIONS
PLACEHOLDER = re.compile(PATTERN)
OPTION = re.compile(OPTIONS)
VERBATIM = re.compile(ADDRESSES + "|" + EMOJI)
SENTINEL = "\u2983{}\u2984"            # ⦃n⦄: one SentencePiece user symbol per number
MAX_SENTINELS = 9
SENTINELS = [SENTINEL.format(n) for n in range(1, MAX_SENTINELS + 1)]


def find(text: str) -> list[str]:
    return PLACEHOLDER.findall(text)


def find_formats(text: str) -> list[str]:
    """The placeholders other than command-line options, addresses and emoji: format directives,
    variables, tags."""
    return [p for p in find(text) if not OPTION.fullmatch(p) and not VERBATIM.fullmatch(p)]


def find_options(text: str) -> list[str]:
    return [p for p in find(text) if OPTION.fullmatch(p)]


def protect_pair(source: str, target: str) -> tuple[str, str] | None:
    """Replace the placeholders of a pair by sentinels numbered in source order;
    None when the two sides do not hold the same placeholders (a translator
    changed `%s` to `%1$s`, say) or hold more than MAX_SENTINELS."""
    src_items = find(source)
    if not src_items or len(src_items) > MAX_SENTINELS or sorted(src_items) != sorted(find(target)):
        return None
    numbers: dict[str, list[int]] = defaultdict(list)
    counter = iter(range(1, MAX_SENTINELS + 1))
    source = PLACEHOLDER.sub(lambda m: _number(numbers, m.group(0), next(counter)), source)
    used: dict[str, int] = defaultdict(int)

    def target_sentinel(m: re.Match) -> str:
        n = numbers[m.group(0)][used[m.group(0)]]
        used[m.group(0)] += 1
        return SENTINEL.format(n)

    return source, PLACEHOLDER.sub(target_sentinel, target)


def _number(numbers: dict[str, list[int]], text: str, n: int) -> str:
    numbers[text].append(n)
    return SENTINEL.format(n)


def protect_share(pairs: list[tuple[str, str]], rate: float) -> list[tuple[str, str]]:
    """Sentinels in place of placeholders for about `rate` of the pairs that
    have any (chosen by a hash of the source, so reruns agree); the rest keep
    their placeholders, so the model learns to copy both forms."""
    if rate <= 0:
        return pairs
    out = []
    for source, target in pairs:
        chosen = zlib.crc32(source.encode()) % 1000 < rate * 1000
        protected = protect_pair(source, target) if chosen else None
        out.append(protected or (source, target))
    return out
