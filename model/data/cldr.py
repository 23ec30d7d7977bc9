"""Short everyday phrase pairs from the Unicode CLDR, as PyPI `babel` ships it.

The other corpora hold almost no weekdays, months or dates, so the model garbles
them. CLDR's locale data is a small, real, professionally reviewed
parallel lexicon of exactly such words: weekday and month names, countries,
languages, currencies, unit names ("{0} kilómetros" / "{0} kilometers") and
relative times ("dentro de {0} días" / "in {0} days"), and full dates as each
locale writes them. `attnmt data cldr OUT` writes them as a training split,
patterns filled with numbers, the plural category matched on both sides.
"""

from __future__ import annotations

import datetime
import json
import random
from collections import Counter
from pathlib import Path

from attnmt.model.data.filters import describe, held_out_keys, is_held_out
from attnmt.model.data.gettext import normalise

RELATIVE_FIELDS = ("second", "minute", "hour", "day", "week", "month", "year",
                   "mon", "tue", "wed", "thu", "fri", "sat", "sun")
NUMBERS = (2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 24, 30, 45, 50, 100)   # under 1,000: no digit grouping
DATES = 300


def _locales():
    try:
        from babel import Locale
    except ImportError as e:
        raise SystemExit("`attnmt data cldr` needs PyPI `babel` (it ships the CLDR data): pip install babel") from e
    return Locale("es"), Locale("en")


def names(es, en) -> list[tuple[str, str, str]]:
    """(kind, Spanish, English): weekdays, months, territories, languages, currencies."""
    rows = []
    for kind, es_map, en_map in (("weekday", es.days["format"]["wide"], en.days["format"]["wide"]),
                                 ("month", es.months["format"]["wide"], en.months["format"]["wide"]),
                                 ("territory", es.territories, en.territories),
                                 ("language", es.languages, en.languages),
                                 ("currency", es.currencies, en.currencies)):
        rows += [(kind, es_map[key], en_map[key]) for key in es_map if key in en_map]
        if kind in ("weekday", "month"):                 # also as a sentence or title starts them
            rows += [(kind, es_map[key].capitalize(), en_map[key]) for key in es_map if key in en_map]
    return rows


def filled_patterns(es, en, rng: random.Random) -> list[tuple[str, str, str]]:
    """Relative times and unit names, each plural category filled with numbers of that category."""
    rows = []
    groups = [("relative", es._data["date_fields"].get(f, {}).get(d, {}), en._data["date_fields"].get(f, {}).get(d, {}))
              for f in RELATIVE_FIELDS for d in ("future", "past")]
    groups += [("unit", es._data["unit_patterns"][u]["long"], en._data["unit_patterns"][u]["long"])
               for u in es._data["unit_patterns"] if u in en._data["unit_patterns"]
               and "long" in es._data["unit_patterns"][u] and "long" in en._data["unit_patterns"][u]]
    for kind, es_forms, en_forms in groups:
        if "one" in es_forms and "one" in en_forms:
            rows.append((kind, es_forms["one"].replace("{0}", "1"), en_forms["one"].replace("{0}", "1")))
        if "other" in es_forms and "other" in en_forms:
            for n in rng.sample(NUMBERS, 3):
                rows.append((kind, es_forms["other"].replace("{0}", str(n)), en_forms["other"].replace("{0}", str(n))))
    return rows


def dates(rng: random.Random, count: int = DATES) -> list[tuple[str, str, str]]:
    """Random dates of 1950–2049 in the 'full' and 'long' formats of each locale."""
    from babel.dates import format_date
    rows = []
    for _ in range(count):
        day = datetime.date(1950, 1, 1) + datetime.timedelta(days=rng.randrange(365 * 100))
        style = rng.choice(("full", "long"))
        rows.append(("date", format_date(day, style, locale="es"), format_date(day, style, locale="en")))
    return rows


DATA_CARD = """# Data card: CLDR phrase pairs (weekdays, months, countries, units, relative times)

- **What**: short real parallel phrases from the Unicode CLDR (version {cldr}) as PyPI `babel`
  {babel} ships it: weekday and month names, territory, language and currency names, unit names
  and relative-time patterns ("dentro de {{0}} días" / "in {{0}} days"; the plural categories
  `one` and `other` paired, filled with 1 and with three of {numbers}), and {dates} random dates
  (1950–2049) in each locale's full and long formats.
- **Licence**: Unicode License v3 (`babel/locale-data/LICENSE.unicode`; babel itself is
  BSD-3-Clause): free to use, copy, modify and distribute, with the copyright and permission notice.
- **Pairs**: {total} generated; dropped {dropped}; {train} training pairs ({by_kind}). Names that
  are the same in both languages (Portugal) are kept: they are translations, not fallbacks.
  Every sentence of the held-out sets {held_out_dirs} is removed. No dev or test split.
- **Files**: `train.es`, `train.en`, `train.ids` (the kind), one phrase per line.
- **Caveats**: phrases, not sentences; Spanish names in lower case (lunes, enero, alemán) as
  Spanish writes them; some language and currency names are rare.
"""


def extract_cldr(out_dir: Path, held_out_dirs: list[Path], seed: int = 2026) -> dict:
    """`attnmt data cldr OUT_DIR`: generate, filter and document the phrase pairs."""
    import babel
    es, en = _locales()
    rng = random.Random(seed)
    rows = names(es, en) + filled_patterns(es, en, rng) + dates(rng)
    held_out = held_out_keys(held_out_dirs)
    dropped: Counter = Counter()
    kept, seen = [], set()
    for kind, s, t in rows:
        s, t = normalise(s), normalise(t)
        reason = ("empty" if not s or not t else "held_out" if is_held_out(s, t, held_out)
                  else "duplicate" if (s, t) in seen else None)
        if reason:
            dropped[reason] += 1
            continue
        seen.add((s, t))
        kept.append((kind, s, t))
    out_dir.mkdir(parents=True, exist_ok=True)
    for suffix, column in (("ids", 0), ("es", 1), ("en", 2)):
        (out_dir / f"train.{suffix}").write_text("".join(r[column] + "\n" for r in kept), encoding="utf-8")
        (out_dir / f"dev.{suffix}").write_text("", encoding="utf-8")
    by_kind = dict(Counter(kind for kind, _, _ in kept))
    counts = {"generated": len(rows), "dropped": dict(dropped), "train": len(kept), "by_kind": by_kind}
    from babel.core import get_cldr_version
    card = DATA_CARD.format(cldr=get_cldr_version(), babel=babel.__version__, numbers=", ".join(map(str, NUMBERS)),
                            dates=DATES, total=len(rows), dropped=describe(dict(dropped)), train=len(kept),
                            by_kind=describe(by_kind), held_out_dirs=", ".join(f"`{d}`" for d in held_out_dirs))
    (out_dir / "DATA_CARD.md").write_text(card, encoding="utf-8")
    (out_dir / "counts.json").write_text(json.dumps(counts, indent=2) + "\n")
    return {"train": len(kept), **by_kind}
