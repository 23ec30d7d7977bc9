"""A model's lexicon: translations of the words it never learnt, from Apertium's dictionary.

A subword model translates a word it never saw piece by piece and often invents one: "los
perdedores" comes out "its perdestors", "el estilista" "the stilist", "obese children" "los
niños obes". The lexicon lists, for every noun and adjective form of Apertium's bilingual
dictionary (Debian `apertium-eng-spa`) that the model's known-words list lacks, Apertium's
translation of it alone ("perdedores" → "losers", "stylist" → "estilista"); at translation time
service/text/lexicon.py writes it over the target words aligned to the word.

Which forms: the bilingual dictionary's nouns and adjectives (read back from the compiled
transducer with `lt-print`, as dictionary.py does), each lemma's singular and plural (and an
adjective's genders) from Apertium's own generator, kept when it is a lower-case single word,
every analysis of it by Apertium's analyser is a noun or an adjective ("cuidadas" is also a
participle, "research" a verb: left to the model), and `known` lacks it (the model's known-words list,
less the words it saw rarely where bench/lexicon.py's fit says so). The
translation is `apertium SRC-TGT` on the word alone, so its number is the dictionary's
("roedores" → "rodents"); verbs stay out, their translation alone carries a pronoun ("delimitan"
→ "They delimit") and a person the sentence may not have. Chosen on the dev sets
(docs/benchmarks.md, "Words the model never learnt"): with verbs, Spanish→English newstest2012
lost 0.03 BLEU where nouns and adjectives gained 0.11.

Names too, where the other language spells them otherwise: the dictionary's one-word proper nouns
the model does not know as written, with their dictionary translation ("Camerún" → "Cameroon",
"Eslovaquia" → "Slovakia"), matched as written (names.py would keep them so).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

from attnmt.model.data.dictionary import APERTIUM, att_sections, generate, section_paths
from attnmt.model.data.gettext import fetch_packages, require

POS = ("n", "adj")
WORD = re.compile(r"[a-zñáéíóúü]+")
# A one-word name as the bilingual dictionary writes it ("Camerún"), and its translation ("Cameroon",
# "Latin America")
NAME = re.compile(r"[A-ZÁÉÍÓÚÑ][a-zñáéíóúü]+")
NAME_TRANSLATION = re.compile(r"[A-Za-zÀ-ÿ]+(?:[ '-][A-Za-zÀ-ÿ]+)*")
# An acronym as the bilingual dictionary writes it ("OTAN", "EEUU"), and its translation ("NATO",
# "EE.UU.", "Reino Unido", "sida")
ACRONYM = re.compile(r"[A-ZÁÉÍÓÚÑ]{2,}")
ACRONYM_TRANSLATION = re.compile(r"[A-Za-zÀ-ÿ]+(?:(?:[ '-]|\.)[A-Za-zÀ-ÿ]+)*\.?")
ACRONYM_MIN_COUNT = 5
_TAGS = re.compile(r"<([^>]+)>")
# The tags the source side's generator takes for each form of a lemma (its left-side tags kept).
FORMS = {
    ("es", "n"): ("<sg>", "<pl>"),
    ("es", "adj"): ("<sg>", "<pl>"),
    ("en", "n"): ("<sg>", "<pl>"),
    ("en", "adj"): ("",),
}
APERTIUM_CODE = {"es": "spa", "en": "eng"}
# A Spanish adjective's masculine singular (or both genders') as the analyser reads it
_ADJECTIVE = re.compile(r"[^<]+<adj><(m|mf)><sg>")


def source_units(paths: list[tuple[str, str]], src: str) -> list[str]:
    """Lexical units for the source side's generator: each noun and adjective lemma of the
    bilingual dictionary's left side, in each form, once."""
    units: dict[str, None] = {}
    for left, _ in paths:
        lemma, _, rest = left.partition("<")
        tags = _TAGS.findall("<" + rest)
        if not tags or tags[0] not in POS or not WORD.fullmatch(lemma):
            continue
        base = lemma + "".join(f"<{t}>" for t in tags)
        if src == "es" and tags[0] == "adj" and len(tags) == 1:
            for gender in ("<m>", "<f>"):
                for number in FORMS[(src, "adj")]:
                    units[base + gender + number] = None
            continue
        if src == "es" and tags[0] == "n" and (len(tags) < 2 or tags[1] not in ("m", "f", "mf")):
            continue
        for number in FORMS[(src, tags[0])]:
            units[base + number] = None
    return list(units)


def only(readings: str, pos: tuple[str, ...] = POS) -> bool:
    """Whether every analysis of an `lt-proc -w` line is one of `pos` (and it has one)."""
    analyses = readings.strip("^$").split("/")[1:]
    return bool(analyses) and all(not a.startswith("*") and (_TAGS.findall(a) or [""])[0] in pos for a in analyses)


def analyse(words: list[str], analyser: Path) -> list[str]:
    """`lt-proc -w` of each word alone, one `^word/analysis/…$` line each (null flush)."""
    out = subprocess.run(["lt-proc", "-z", "-w", str(analyser)], input="".join(w + "\0" for w in words),
                         capture_output=True, text=True, check=True).stdout.split("\0")
    return [o.strip() for o in out[:len(words)]]


def translate_alone(words: list[str], src: str, tgt: str) -> list[str]:
    """`apertium SRC-TGT` on each word alone, one sentence each; '' where it knows no translation
    (its marks *, # and @). The word follows a comma, or Apertium would capitalise it as a
    sentence's first: ", birmana ." → ", Burmese .", ", felinos ." → ", feline ."."""
    pair = f"{APERTIUM_CODE[src]}-{APERTIUM_CODE[tgt]}"
    out = subprocess.run(["apertium", pair], input="".join(f", {w} .\n" for w in words), capture_output=True,
                         text=True, check=True).stdout.splitlines()
    if len(out) != len(words):
        raise RuntimeError(f"apertium {pair} gave {len(out)} lines for {len(words)} words")
    result = []
    for line in out:
        text = line.strip().removeprefix(",").removesuffix(".").strip()
        result.append("" if not text or any(c in text for c in "*#@,") else text)
    return result


def acronyms(paths: list[tuple[str, str]], target_counts: Mapping[str, int], min_count: int = ACRONYM_MIN_COUNT
             ) -> dict[str, tuple[str, str]]:
    """{acronym: (translation, its gender where the dictionary gives one)} for the bilingual
    dictionary's acronyms the other language writes otherwise ("ONU" → "UN", "NATO" → "OTAN" f),
    where the model's training target writes each word of the translation `min_count` times or
    more (`target_counts`). A model copies an acronym it did not learn to translate, known or not
    ("La ONU y la OTAN" → "The U.S. and the OTAN"), so the known-words list does not gate them; the
    training target leaves out the dictionary's senses its domains do not use ("ICU", the Unicode
    library in help prose, is no "UVI") and its errors ("PNB" → "PNV")."""
    found: dict[str, set[tuple[str, str]]] = {}
    for left, right in paths:
        name, _, tags = left.partition("<")
        if ACRONYM.fullmatch(name) and tags.startswith(("n><acr>", "np>")):
            translation, _, right_tags = right.partition("<")
            gender = next((g for g in ("m", "f") if f"<{g}>" in "<" + right_tags), "")
            found.setdefault(name, set()).add((translation, gender))
    result = {}
    for name, readings in found.items():
        translations = {t for t, _ in readings}
        genders = {g for _, g in readings if g}
        if len(translations) != 1:
            continue
        translation = translations.pop()
        if translation == name or not ACRONYM_TRANSLATION.fullmatch(translation) or any(
                target_counts.get(w, 0) < min_count for w in re.findall(r"\w+", translation)):
            continue
        result[name] = (translation, genders.pop() if len(genders) == 1 else "")
    return result


def exonyms(paths: list[tuple[str, str]], known: frozenset[str]) -> dict[str, str]:
    """{name: translation} for the bilingual dictionary's one-word proper nouns (np) that the
    target language spells otherwise ("Camerún" → "Cameroon", "Latvia" → "Letonia") and the
    model does not know as written: names.py would keep them as written, in the wrong language.
    Left out where the dictionary gives a name two translations."""
    found: dict[str, set[str]] = {}
    for left, right in paths:
        name, _, tags = left.partition("<")
        if tags.startswith("np>") and NAME.fullmatch(name) and name not in known:
            found.setdefault(name, set()).add(right.partition("<")[0])
    return {n: t for n, ts in found.items() if len(ts) == 1 for t in ts if t != n and NAME_TRANSLATION.fullmatch(t)}


def agreeing_forms(translations: dict[str, str], analyses: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """{English adjective: its Spanish translation's masculine and feminine singular, masculine and
    feminine plural} ("obese" → obeso obesa obesos obesas), for the adjectives every analysis of
    which is one ("green" is a noun too: left as translated), from Spanish's analyser and
    generator; the translation alone is the masculine singular, which "los niños obeso" shows."""
    adjectives = [w for w, t in translations.items() if only(analyses[w], ("adj",)) and WORD.fullmatch(t)]
    readings = analyse([translations[w] for w in adjectives], APERTIUM / "spa-eng.automorf.bin")
    wanted: dict[str, list[str]] = {}
    for word, reading in zip(adjectives, readings):
        lemma = next((a for a in reading.strip("^$").split("/")[1:] if _ADJECTIVE.fullmatch(a)), None)
        if lemma is None:
            continue
        base, gender = lemma.split("<")[0], _TAGS.findall(lemma)[1]
        wanted[word] = ([f"{base}<adj><m><sg>", f"{base}<adj><f><sg>", f"{base}<adj><m><pl>", f"{base}<adj><f><pl>"]
                        if gender == "m" else [f"{base}<adj><mf><sg>"] * 2 + [f"{base}<adj><mf><pl>"] * 2)
    units = [u for forms in wanted.values() for u in forms]
    generated = iter(generate(units, APERTIUM / "eng-spa.autogen.bin"))
    result = {}
    for word in wanted:
        forms = tuple(next(generated) for _ in range(4))
        if all(forms) and forms[0] == translations[word] and len(set(forms)) > 1:
            result[word] = forms
    return result


def spanish_nouns(words: list[str]) -> dict[str, tuple[str, str]]:
    """{Spanish word: (its gender "m" or "f", the tags of its readings other than a noun's or an
    adjective's, "" if none)} for the words Spanish's analyser reads as a noun of one gender, and
    as nothing of the other ("bomba" f, "lujo" m, "cuervo" m, noun and adjective, "conquista" f and
    conquistar<vblex>): the determiner before them is written in that gender (determiners.py). Left
    out: a noun of both genders ("artista") or none, one that is also an adjective of the other
    gender or both ("general"), and a name."""
    result = {}
    for word, reading in zip(words, analyse(words, APERTIUM / "spa-eng.automorf.bin")):
        tags = [_TAGS.findall(a) for a in reading.strip("^$").split("/")[1:]]   # bomba<n><f><sg> → n f sg
        if not tags or not all(tags):                                             # unknown (*bomba)
            continue
        # an adjective of the same gender is no doubt ("cuervo"); of both or the other, it is ("general")
        genders = {t[1] for t in tags if t[0] in ("n", "adj") and len(t) > 1}
        others = sorted({t[0] for t in tags if t[0] not in ("n", "adj")})   # a verb's form: "la" may be its pronoun
        if any(t[0] == "n" for t in tags) and len(genders) == 1 and genders <= {"m", "f"} and "np" not in others:
            result[word] = (genders.pop(), " ".join(others))
    return result


def bidix_paths(src: str, tgt: str, cache: Path) -> list[tuple[str, str]]:
    """The bilingual dictionary's entries for src→tgt, (source analysis, target analysis), read back
    from the compiled transducer with `lt-print` (lttoolbox-dev, fetched into `cache`)."""
    bidix = APERTIUM / f"{APERTIUM_CODE[src]}-{APERTIUM_CODE[tgt]}.autobil.bin"
    if not bidix.exists():
        raise SystemExit(f"{bidix} missing: apt-get install apertium-eng-spa")
    root = fetch_packages(["lttoolbox-dev"], cache)["lttoolbox-dev"]
    printed = subprocess.run([str(root / "usr/bin/lt-print"), str(bidix)], capture_output=True, text=True,
                             check=True).stdout
    return [p for section in att_sections(printed.splitlines()) for p in (section_paths(section) or [])]


# A set phrase that is also one of these is left out: alone on a line it is as often that
# ("Bueno" → "Good", a program's rating, not "Well")
_OTHER_READINGS = ("adj", "vblex")


def set_phrases(paths: list[tuple[str, str]]) -> dict[str, str]:
    """The dictionary's set phrases, {source: translation}: its interjections, tagged `<ij>` and
    nothing else on both sides ("hola" → "hello", "buenos días" → "good morning", "más vale tarde
    que nunca" → "better late than never"), the first entry of a source, less those it also lists
    as an adjective or a verb ("bueno", "boo") (service/text/phrases.py)."""
    other = {source.split("<")[0].replace("#", "").lower() for source, _ in paths
             if any(f"<{tag}>" in source for tag in _OTHER_READINGS)}
    phrases: dict[str, str] = {}
    for source, target in paths:
        if (source.endswith("<ij>") and target.endswith("<ij>") and "<" not in source[:-4] + target[:-4]
                and source[:-4].lower() not in other):
            phrases.setdefault(source[:-4], target[:-4])
    return phrases


def build_lexicons(src: str, tgt: str, knowns: dict, paths: list[tuple[str, str]],
                   target_counts: Mapping[str, int] | None = None) -> dict:
    """For each of `knowns` (a key: a known-words list), {source form: translation} for the forms
    of the bilingual dictionary's entries (`paths`, bidix_paths) the model does not know, Spanish
    adjectives' forms (agreeing_forms), for a Spanish target the genders of the nouns among the
    small-letter words of `target_counts` (the words of the model's training target, as counted)
    and the lexicon's translations (spanish_nouns), and what was counted. Names and acronyms the
    other language writes otherwise are entries too (exonyms, acronyms; an acronym only with
    `target_counts`). Apertium reads each word once, for the list that knows fewest: each word's
    entries depend on it alone, so every other lexicon is part of that one."""
    require("lt-proc", "lttoolbox")
    require("apertium", "apertium")
    a, b = APERTIUM_CODE[src], APERTIUM_CODE[tgt]
    units = source_units(paths, src)
    # the source language's generator is the other direction's
    forms = sorted({f for f in generate(units, APERTIUM / f"{b}-{a}.autogen.bin") if WORD.fullmatch(f)})
    # every form some list lacks, read once
    unknown = [f for f in forms if any(f not in known for known in knowns.values())]
    analyses = dict(zip(unknown, analyse(unknown, APERTIUM / f"{a}-{b}.automorf.bin")))
    candidates = [f for f in unknown if only(analyses[f])]
    translations = dict(zip(candidates, translate_alone(candidates, src, tgt)))
    spanish = (src, tgt) == ("en", "es")
    target_counts = target_counts or {}
    target_words = frozenset(w for w in target_counts if w == w.lower())
    every = {f: t for f, t in translations.items() if t}
    agreeing = agreeing_forms(every, analyses) if spanish else {}
    nouns = sorted(target_words | {t for t in every.values() if WORD.fullmatch(t)}) if spanish else []
    genders = spanish_nouns(nouns) if nouns else {}
    abbreviations = acronyms(paths, target_counts) if target_counts else {}
    if spanish:                                    # "la OTAN", "el ADN": the dictionary's gender
        genders.update({t.lower(): (g, "") for t, g in abbreviations.values() if g and t.isalpha()})
    built = {}
    for key, known in knowns.items():
        lacking = [f for f in unknown if f not in known]
        lexicon = {f: translations[f] for f in lacking if translations.get(f)}
        lexicon_agreeing = {w: f for w, f in agreeing.items() if w in lexicon}
        targets = target_words | set(lexicon.values()) | {t.lower() for t, _ in abbreviations.values()}
        lexicon_genders = {w: g for w, g in genders.items() if w in targets}
        names = exonyms(paths, known) | {a: t for a, (t, _) in abbreviations.items()}
        counts = {"units": len(units), "forms": len(forms), "unknown": len(lacking),
                  "nouns_and_adjectives_only": sum(f in translations for f in lacking),
                  "adjectives_agreeing": len(lexicon_agreeing), "spanish_nouns": len(lexicon_genders),
                  "names": len(names) - len(abbreviations), "acronyms": len(abbreviations),
                  "entries": len(lexicon) + len(names)}
        lexicon.update(names)
        built[key] = (lexicon, lexicon_agreeing, lexicon_genders, counts)
    return built
