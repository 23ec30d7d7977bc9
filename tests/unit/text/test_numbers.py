"""Numbers: hidden like placeholders, read in the source's convention, written in the target's."""

import numpy as np
import pytest

from attnmt.model.data.placeholders import MAX_SENTINELS, PATTERN, SENTINEL
from attnmt.service.text.numbers import NUMBER, Numbers
from attnmt.service.text.placeholders import Protector, detokenize

SPEC = {"pattern": PATTERN, "sentinel": SENTINEL, "max": MAX_SENTINELS}
NBSP = "\u00a0"


@pytest.mark.parametrize("written, english", [
    ("1.250,50", "1,250.50"), ("333 000", "333,000"), (f"333{NBSP}000", "333,000"), ("6,5", "6.5"),
    ("17.000", "17,000"), ("17,000", "17,000"), ("2.500.000", "2,500,000"), ("3.7", "3.7"), ("0,125", "0.125"),
    ("20 564,25", "20,564.25"), ("1000", "1000"), ("12.345.67", "12.345.67"), ("3,2 %", "3.2%"), ("100 %", "100%"),
])
def test_spanish_numbers_are_written_as_english_writes_them(written, english):
    assert Numbers("es", "en").written(written) == english


@pytest.mark.parametrize("written, spanish", [
    ("76,000", f"76{NBSP}000"), ("3,000,000", f"3{NBSP}000{NBSP}000"), ("6,000", "6000"), ("6.5", "6,5"),
    ("1,250.50", "1250,50"), ("14.3", "14,3"), ("1,5", "1,5"), ("2020", "2020"), ("3.2%", f"3,2{NBSP}%"),
])
def test_english_numbers_are_written_as_the_academy_writes_spanish(written, spanish):
    assert Numbers("en", "es").written(written) == spanish


def test_a_language_without_a_convention_gets_its_numbers_as_written():
    assert Numbers("es", "fr").written("1.250,50") == "1.250,50"
    assert Numbers("fr", "en").written("1 250,50") == "1 250,50"


@pytest.mark.parametrize("text, numbers", [
    ("unos 30 000 ciervos y 6,5 millones.", ["30 000", "6,5"]),
    ("en 1978, el 2,5% y 5 más", ["1978", "2,5%"]),
    ("(1644-1912), AUD$450, 23 de julio", ["1644", "1912", "450"]),   # one or two digits: the model's
    ("un 3,2 % y el 100%, 100%% y 100%s", ["3,2 %", "100%", "100", "100"]),   # "%%", "%s": a program's
    ("a las 12:00 del 30/11/2026, 4:41.30", []),                 # times and dates are not amounts
    # a time with a point or a comma, where a.m./p.m., a time zone or Spanish's "las" says it is one
    ("at 12.00 GMT, 6.30 a.m., 8.15pm, (15.00 UTC), 18.45 local time, 9.05 EST", []),
    ("a las 9.30 y la 1.15, de las 20.00 h a Las 10,45", []),
    # without one, or not shaped as a time, it is an amount
    ("3.25 percent, at 12.50 dollars, 2.30 hours, 3.50 a month, 9.30 amazing, Dallas 9.30", ["3.25", "12.50", "2.30",
                                                                                          "3.50", "9.30", "9.30"]),
    ("las 2.500 personas, las 12.000, 25.00 EST, 9.60 pm, 1.250,50 am, 12.00 GMTX", ["2.500", "12.000", "25.00",
                                                                                    "9.60", "1.250,50", "12.00"]),
    ("802.11n a 2.4GHz, versión 1.2.3, 192.168.0.1, M16, 18th", []),
])
def test_which_numbers_are_hidden(text, numbers):
    assert [m.group() for m in NUMBER.finditer(text)] == numbers


def test_numbers_are_hidden_after_placeholders_and_written_in_the_target_convention():
    protector = Protector(SPEC, Numbers("es", "en"))
    p = protector.protect("Cuesta 1.250,50 € (%s), o 2020 %d")
    assert p.text == "Cuesta ⦃1⦄ € (⦃2⦄), o ⦃3⦄ ⦃4⦄"
    assert p.originals == ("1.250,50", "%s", "2020", "%d")
    assert protector.written(p.originals) == ("1,250.50", "%s", "2020", "%d")
    # placeholders keep their sentinels when there are more than nine: numbers give way first
    crowded = protector.protect(" ".join(f"{n}00 %{n}$s" for n in range(10, 16)))
    assert crowded.originals == ("1000", "%10$s", "1100", "%11$s", "1200", "%12$s", "%13$s", "%14$s", "%15$s")
    assert crowded.text.startswith("⦃1⦄ ⦃2⦄ ⦃3⦄") and crowded.text.endswith("1300 ⦃7⦄ 1400 ⦃8⦄ 1500 ⦃9⦄")


def test_the_target_gets_the_number_as_written_for_it_and_the_source_keeps_its_own():
    protector = Protector(SPEC, Numbers("es", "en"))
    originals = ("1.250,50",)
    source = ["▁Cuesta", "▁", "⦃1⦄", "▁€", "</s>"]
    target = ["▁It", "▁costs", "▁", "⦃1⦄", "▁€", "</s>"]
    src, tgt, _, _, with_sentinels = protector.restore(source, target, np.eye(6, 5, dtype=np.float32), originals,
                                                       protector.written(originals))
    assert detokenize(src[:-1]) == "Cuesta 1.250,50 €" and detokenize(tgt[:-1]) == "It costs 1,250.50 €"
    assert protector.text(with_sentinels[:-1], protector.written(originals)) == "It costs 1,250.50 €"


def test_a_currency_or_percent_sign_before_a_number_stays_and_one_before_a_format_directive_goes():
    protector = Protector(SPEC, Numbers("en", "es"))
    assert protector.text(["▁cuesta", "▁$", "⦃1⦄", "▁y", "▁%", "⦃2⦄"], ("450", "%s")) == "cuesta $450 y %s"
