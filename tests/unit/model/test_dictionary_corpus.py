"""The dictionary corpus: a handmade `lt-print` transducer read back into entries, phrases
built with stand-in generators, the held-out sentences removed. No apt, no Apertium."""

from collections import Counter

from attnmt.model.data import dictionary as dc
from attnmt.model.data.gettext import leak_key


def split(text: str) -> list[str]:
    """'ab<n>' -> ['a', 'b', '<n>']: lt-print writes a tag as one symbol."""
    symbols, i = [], 0
    while i < len(text):
        j = text.index(">", i) + 1 if text[i] == "<" else i + 1
        symbols.append(text[i:j])
        i = j
    return symbols


def bidix(entries: list[tuple[str, str]]) -> list[str]:
    """A word-list section: each entry its own branch from state 0 to a shared final state."""
    lines, final, free = [], 1, 2
    for left, right in entries:
        lhs, rhs = split(left), split(right)
        n = max(len(lhs), len(rhs))
        lhs += ["ε"] * (n - len(lhs))
        rhs += ["ε"] * (n - len(rhs))
        states = [0] + list(range(free, free + n - 1)) + [final]
        free += n - 1
        lines += [f"{states[i]}\t{states[i + 1]}\t{lhs[i]}\t{rhs[i]}\t0.000000\t" for i in range(n)]
    return lines + [f"{final}\t0.000000"]


ENTRIES = [("autobús<n><m>", "bus<n>"), ("estación<n><f>", "season<n>"), ("estación<n><f>", "station<n>"),
           ("agua<n><f>", "water<n>"), ("estudiante<n><mf>", "student<n>"), ("rojo<adj>", "red<adj>"),
           ("feliz<adj><mf>", "happy<adj>"), ("reservar<vblex>", "reserve<vblex>"), ("Madrid<np><loc>", "Madrid<np>"),
           ("ab2<n><m>", "ab2<n>")]


def test_lt_print_sections_read_back_into_entries():
    # a second section with a loop (a regular expression for numbers) is not a word list
    looping = ["0\t1\t1\t1\t0.000000\t", "1\t1\t2\t2\t0.000000\t", "1\t0.000000"]
    text = bidix(ENTRIES) + ["--"] + looping
    sections = list(dc.att_sections(text))
    assert len(sections) == 2
    paths = dc.section_paths(sections[0])
    assert ("autobús<n><m>", "bus<n>") in paths and len(paths) == len(ENTRIES)
    assert dc.section_paths(sections[1]) == [("1", "1")]          # the loop is not followed
    assert dc.section_paths(sections[0], max_visits=5) is None     # too big to be a word list: skipped
    assert dc.lemmas(paths) == [("autobús", "n", "m", "<n><m>"), ("estación", "n", "f", "<n><f>"),
                                ("agua", "n", "f", "<n><f>"), ("rojo", "adj", "", "<adj>"),
                                ("feliz", "adj", "mf", "<adj><mf>"), ("reservar", "vblex", "", "<vblex>")]


# Stand-ins for Apertium's generators: the forms a real one gives for these units.
SPANISH = {"autobús<n><m><sg>": "autobús", "autobús<n><m><pl>": "autobuses", "estación<n><f><sg>": "estación",
           "estación<n><f><pl>": "estaciones", "agua<n><f><sg>": "agua", "agua<n><f><pl>": "aguas",
           "rojo<adj><m><sg>": "rojo", "rojo<adj><f><sg>": "roja", "rojo<adj><m><pl>": "rojos",
           "feliz<adj><mf><sg>": "feliz", "feliz<adj><mf><pl>": "felices", "reservar<vblex><inf>": "reservar"}
ENGLISH = {"bus<n><sg>": "bus", "bus<n><pl>": "buses", "season<n><sg>": "season", "season<n><pl>": "seasons",
           "station<n><sg>": "station", "station<n><pl>": "stations", "water<n><sg>": "water",
           "red<adj>": "red", "happy<adj>": "happy", "reserve<vblex><inf>": "reserve"}


def generate(forms):
    return lambda units: [forms.get(u, "") for u in units]


def test_phrases_have_articles_plurals_genders_and_infinitives():
    entries = dc.lemmas(dc.section_paths(list(dc.att_sections(bidix(ENTRIES)))[0]))
    senses = [["bus"], ["season", "station", "time"], ["water"], ["red"], ["happy"], ["reserve"]]
    frequency = Counter(bus=50, season=40, station=30, time=900, water=80, red=20, happy=10, reserve=5)
    rows, dropped = dc.build_pairs(entries, senses, generate(SPANISH), generate(ENGLISH), frequency)
    pairs = {(kind, es, en) for kind, es, en, _ in rows}
    assert {("noun", "el autobús", "the bus"), ("noun_plural", "los autobuses", "the buses"),
            ("noun", "la estación", "the season"), ("noun", "la estación", "the station"),
            ("noun_plural", "las estaciones", "the seasons"), ("noun_plural", "las estaciones", "the stations"),
            ("noun", "el agua", "the water"),                      # stressed a-: "el", though feminine
            ("adjective", "rojo", "red"), ("adjective", "roja", "red"), ("adjective", "rojos", "red"),
            ("adjective", "feliz", "happy"), ("adjective", "felices", "happy"),
            ("verb", "reservar", "to reserve")} == pairs
    assert not any(en == "the time" for _, _, en in pairs)        # a third sense, however common, is left out
    assert dropped["not_generated"] == 1                           # "waters": the stand-in lacks it
    rows, dropped = dc.build_pairs(entries, senses, generate(SPANISH), generate(ENGLISH), Counter(bus=50))
    assert {en for _, _, en, _ in rows} == {"the bus", "the buses"}
    assert dropped["rare_or_odd_english"] == 5


def test_selection_ranks_by_frequency_and_leaves_out_held_out_sentences():
    rows = [("noun", "la estación", "the season", 5), ("noun", "el autobús", "the bus", 50),
            ("noun", "el autobús", "the bus", 50), ("verb", "reservar", "to reserve", 3),
            ("noun", "la casa", "the house", 90)]
    held_out = {leak_key("La  Casa")}                              # case and spacing do not matter
    kept, dropped = dc.select_pairs(rows, held_out, max_pairs=2)
    assert kept == [("noun", "el autobús", "the bus"), ("noun", "la estación", "the season")]
    assert dropped == Counter(held_out=1, duplicate=1, over_max_pairs=1)
