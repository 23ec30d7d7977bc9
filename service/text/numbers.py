"""Numbers: kept digit for digit, and written as the target language writes them.

Left to the model, a long number is several pieces (`▁ 19 7 9`), and the models drop or repeat
some of them: "1979" came back "197", "2020" as "20", "1644-1912" as "1644644-1912",
in 18 of the 196 FLORES-200 devtest sentences with numbers English->Spanish. Hidden as placeholders
(placeholders.py), they come back whole. Each language groups and marks decimals its own way, so
the number the target gets is written in the target's convention:

- English: a comma between groups of three, a decimal point (1,250.50);
- Spanish: the Real Academia's (Ortografía de la lengua española, 2010): groups of three apart by a
  no-break space in numbers of five digits or more, none in four-digit ones (1250 and 333 000), a
  decimal comma (6,5), which most of the Spanish-speaking world writes, and a space before a
  percent sign (3,2 %, where English writes 3.2%).

A number is read in the source's convention. A Spanish number with one kind of separator before
groups of exactly three digits is read as grouped ("17.000" in Spain, "17,000" in Mexico); one
with both is grouped by the first and decimal after the last ("1.250,50"). A number without a
separator is copied as written (a year, a page, a code: the Academy leaves those ungrouped), and so
is a number in a language without a convention here. Times, dates and versions (12:00, 12.00 GMT,
las 9.30, 30/11/2026, 802.11n, 1.2.3) are not hidden: they are not amounts, and a piece of them may be
a placeholder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_GROUP_SPACES = " \u00a0\u202f"          # space, no-break space, narrow no-break space
_GROUPED = r"\d{1,3}(?:(?P<sep>[.,\u00a0\u202f ])\d{3})(?:(?P=sep)\d{3})*(?:[.,]\d+)?"
# A number stands alone: not inside a word (M16, 2.4GHz, 18th), a time, a date or a version (12:00,
# 30/11/2026, 1.2.3). Without a mark, it has three digits or more: one or two are one or two pieces,
# which the models carry, and hidden they would not read as a day or an age ("el 23 de julio" came
# back "the 23 of July", where the model, shown the number, writes "July 23").
# A percent sign after it goes with it, spaced as the target spaces it ("%%" and "%s" are a program's).
# A time written with a point or a comma, as British English and Spanish write them, is not an amount
# either: hidden, "at 12.00 GMT" came back "en 12,00 GMT", and shown, the models copy it ("en
# 12.00 GMT"). Read as a time where it says so: an hour and two-digit minutes before a.m. or p.m., a
# time zone or "local time", or after Spanish's article of the hour ("las 9.30", "la 1.15"). Not
# before "h" or "hours": "2.30 hours" is also a duration in decimals.
_HOUR = r"(?:[01]?\d|2[0-4])"
_MINUTES = r"[.,][0-5]\d(?!\d|[.,]\d)"
_TIME = (r"(?:(?<=\b[lL]as )" + _HOUR + _MINUTES + r"|(?<=\b[lL]a )\d" + _MINUTES + "|" + _HOUR + _MINUTES
         + r"(?=[ \u00a0\u202f]?(?:[aApP]\.?[ \u00a0]?[mM]\b\.?|(?:GMT|UTC|BST|CES?T|[ECMP][SD]T)\b"
           r"|local time|hora local)))")
NUMBER = re.compile(r"(?<![\w.,:/\u00a0\u202f])(?!" + _TIME + r")(?:" + _GROUPED + r"|\d+[.,]\d+|\d{3,})"
                    r"(?:[ \u00a0\u202f]?%(?![\w%]))?(?!\w|[.,:/]\d)")
_PERCENT = re.compile(r"[ \u00a0\u202f]?%$")


@dataclass(frozen=True)
class Convention:
    group: str            # between groups of three digits
    decimal: str
    min_grouped: int      # the fewest digits a grouped integer has
    percent: str          # a percent sign, after the number


CONVENTIONS = {
    "en": Convention(group=",", decimal=".", min_grouped=4, percent="%"),
    "es": Convention(group="\u00a0", decimal=",", min_grouped=5, percent="\u00a0%"),   # "3,2 %"
}


def read(number: str, language: str) -> tuple[str, str | None] | None:
    """A written number as (integer digits, decimal digits or None), in `language`'s convention;
    None where that is not known or the number does not fit it."""
    marks = [c for c in number if not c.isdigit()]
    if not marks or language not in CONVENTIONS:
        return None
    spaces = [c for c in marks if c in _GROUP_SPACES]
    points = [c for c in marks if c not in _GROUP_SPACES]
    if spaces:                                   # 333 000, 20 564,25: spaces group, a point or comma is decimal
        if len(points) > 1:
            return None
        whole, _, decimals = number.rpartition(points[0]) if points else (number, "", None)
        return re.sub(r"\D", "", whole), decimals
    if len(set(points)) == 2:                    # 1.250,50 or 1,250.50: the last mark is the decimal one
        last = max(number.rfind("."), number.rfind(","))
        return re.sub(r"\D", "", number[:last]), number[last + 1:]
    parts = number.split(points[0])
    grouped = all(len(p) == 3 for p in parts[1:]) and not parts[0].startswith("0")
    if language == "en" and points[0] == ",":    # 6,000; "1,5" is no English number
        return ("".join(parts), None) if grouped else None
    # an English point is decimal; a Spanish mark before groups of three groups them (17.000, 17,000)
    if language == "es" and grouped:
        return "".join(parts), None
    return (parts[0], parts[1]) if len(parts) == 2 else None


def write(integer: str, decimals: str | None, language: str) -> str:
    """Digits as `language` writes them (CONVENTIONS)."""
    convention = CONVENTIONS[language]
    if len(integer) >= convention.min_grouped and not integer.startswith("0"):
        head = len(integer) % 3 or 3
        integer = convention.group.join([integer[:head]] + [integer[i:i + 3] for i in range(head, len(integer), 3)])
    return integer if decimals is None else integer + convention.decimal + decimals


class Numbers:
    """The numbers of a language pair: which to hide, and how the target writes each."""

    pattern = NUMBER

    def __init__(self, source_language: str, target_language: str):
        self.source_language = source_language
        self.target_language = target_language

    def written(self, number: str) -> str:
        """`number` as the target writes it; as it is where either convention is unknown."""
        if self.target_language not in CONVENTIONS or self.source_language not in CONVENTIONS:
            return number
        percent = _PERCENT.search(number)
        digits = number[:percent.start()] if percent else number
        value = read(digits, self.source_language)
        written = digits if value is None else write(*value, self.target_language)
        return written + CONVENTIONS[self.target_language].percent if percent else written

    def is_number(self, text: str) -> bool:
        return self.pattern.fullmatch(text) is not None
