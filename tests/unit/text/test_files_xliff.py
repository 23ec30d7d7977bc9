"""XLIFF 1.2 and 2.0 (service/text/files/xliff.py): the units to translate as texts, their
targets filled with the inline codes carried, everything else kept, hostile XML refused."""

from __future__ import annotations

import re

import pytest
from lxml import etree

from attnmt.service.errors import InvalidInput
from attnmt.service.text import files
from conftest import REPO

LIMITS = files.Limits(max_bytes=100_000, max_entry_chars=2000, max_entry_lines=4)
NS1 = "{urn:oasis:names:tc:xliff:document:1.2}"
NS2 = "{urn:oasis:names:tc:xliff:document:2.0}"

XLIFF_12 = """<?xml version="1.0" encoding="UTF-8"?>
<!-- exported by a CAT tool -->
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2" xmlns:okp="okapi-framework:xliff-extensions">
  <file original="ui.properties" source-language="es" datatype="javaproperties">
    <header><note>Cabecera</note></header>
    <body>
      <trans-unit id="1" resname="open" okp:engine="x">
        <source xml:lang="es">No se puede abrir el archivo.</source>
        <context-group><context context-type="sourcefile">ui.c</context></context-group>
        <note from="dev">Título de la ventana</note>
      </trans-unit>
      <trans-unit id="2" translate="no"><source>Okapi</source></trans-unit>
      <group id="g" translate="no"><trans-unit id="3"><source>Tampoco</source></trans-unit></group>
      <trans-unit id="4"><source>Guardar</source><target state="final">Save</target></trans-unit>
      <trans-unit id="5"><source>Pulse <g id="1" ctype="bold">Guardar</g> y <x id="2" ctype="lb"/> salga.</source>
        <target state="new"/></trans-unit>
      <trans-unit id="6">
        <source>Es <bpt id="3">&lt;b&gt;</bpt>muy<ept id="3">&lt;/b&gt;</ept> fácil &amp; rápido.</source>
        <target state="needs-translation">x</target></trans-unit>
    </body>
  </file>
</xliff>
"""

XLIFF_20 = """<?xml version="1.0"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="es">
 <file id="f1">
  <unit id="u1">
   <notes><note>una nota</note></notes>
   <segment><source>Pulse <pc id="1" dataRefStart="d1">Guardar</pc> para <ph id="2" dataRef="d2"/> salir.</source>
   </segment>
   <ignorable><source> </source></ignorable>
   <segment><source>El <sc id="3"/>perro<ec startRef="3"/> come.</source><target/></segment>
  </unit>
  <unit id="u2" translate="no"><segment><source>No</source></segment></unit>
  <unit id="u3"><segment state="final"><source>Hola</source><target>Hello</target></segment></unit>
 </file>
</xliff>
"""


def upper(text: str) -> str:
    """A 'translation' that keeps the markup: the text between tags upper-cased."""
    return re.sub(r"(?<=>)[^<>]+|^[^<>]+", lambda m: m.group(0).upper(), text)


def parsed(data: bytes) -> etree._Element:
    return etree.fromstring(data)


def test_xliff_12_fills_the_units_to_translate_and_nothing_else():
    document = files.read("ui.xlf", XLIFF_12.encode(), LIMITS)
    assert document.html        # some unit has inline codes: all its texts go as HTML
    assert document.texts == [
        "No se puede abrir el archivo.",
        'Pulse <span data-x="0">Guardar</span> y <img data-x="1"> salga.',
        'Es <img data-x="0">muy<img data-x="1"> fácil &amp; rápido.']
    out = document.write([upper(t) for t in document.texts], "en")
    assert document.untranslated == 0
    root = parsed(out)
    assert root.find(f"{NS1}file").get("target-language") == "en"
    units = {u.get("id"): u for u in root.iter(f"{NS1}trans-unit")}
    assert list(units) == ["1", "2", "3", "4", "5", "6"]
    first = units["1"].find(f"{NS1}target")
    assert first.text == "NO SE PUEDE ABRIR EL ARCHIVO."
    assert first.get("state") == "needs-review-translation"
    assert first.get("{http://www.w3.org/XML/1998/namespace}lang") == "en"
    # the target right after its source; notes and contexts kept
    assert [etree.QName(c).localname for c in units["1"]] == ["source", "target", "context-group", "note"]
    assert units["2"].find(f"{NS1}target") is None and units["3"].find(f"{NS1}target") is None
    assert units["4"].find(f"{NS1}target").text == "Save"
    assert units["4"].find(f"{NS1}target").get("state") == "final"
    # inline codes carried with their ids and attributes
    fifth = etree.tostring(units["5"].find(f"{NS1}target"), encoding="unicode", with_tail=False)
    assert re.sub(r' xmlns(:\w+)?="[^"]*"', "", fifth) == ('<target state="needs-review-translation">PULSE '
                                                           '<g id="1" ctype="bold">GUARDAR</g> Y <x id="2" '
                                                           'ctype="lb"/> SALGA.</target>')
    sixth = units["6"].find(f"{NS1}target")
    assert [(c.tag, c.get("id"), c.text) for c in sixth] == [(f"{NS1}bpt", "3", "<b>"), (f"{NS1}ept", "3", "</b>")]
    assert "".join(sixth.itertext()) == "ES <b>MUY</b> FÁCIL & RÁPIDO."


def test_everything_but_the_targets_and_the_language_is_written_back_as_read():
    document = files.read("ui.xliff", XLIFF_12.encode(), LIMITS)
    out = document.write(document.texts, "en").decode()
    assert out.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<!-- exported by a CAT tool -->\n<xliff ')
    stripped = re.sub(r"<target[^>]*/>|<target[^>]*>.*?</target>", "", out, flags=re.S)
    original = re.sub(r"<target[^>]*/>|<target[^>]*>.*?</target>", "", XLIFF_12, flags=re.S)

    def normalise(text: str) -> str:
        return re.sub(r"\s+", " ", re.sub(r'<xliff[^>]*>|\starget-language="en"|\sxml:lang="en"', "", text))
    assert normalise(stripped) == normalise(original)


def test_plain_units_go_as_plain_text():
    source = XLIFF_12.replace('<g id="1" ctype="bold">Guardar</g>', "Guardar").replace('<x id="2" ctype="lb"/>', "")
    source = re.sub(r"<bpt.*?</ept>", "muy", source)
    document = files.read("ui.xlf", source.encode(), LIMITS)
    assert not document.html and document.texts[2] == "Es muy fácil & rápido."
    out = parsed(document.write(["A < B & C"] * 3, "en"))
    assert [t.text for t in out.iter(f"{NS1}target")][0] == "A < B & C"


def test_a_translation_that_loses_a_code_or_misorders_a_pair_is_left_untranslated():
    document = files.read("ui.xlf", XLIFF_12.encode(), LIMITS)
    lost = document.texts[1].replace('<img data-x="1">', "")
    swapped = 'Es <img data-x="1">muy<img data-x="0"> fácil.'
    out = parsed(document.write([document.texts[0], lost, swapped], "en"))
    assert document.untranslated == 2
    units = {u.get("id"): u for u in out.iter(f"{NS1}trans-unit")}
    assert units["5"].find(f"{NS1}target").get("state") == "new" and len(units["5"].find(f"{NS1}target")) == 0
    assert units["6"].find(f"{NS1}target").text == "x"
    # a repeated code, or a lost placeholder, too
    document = files.read("ui.xlf", XLIFF_12.replace("el archivo.", "el archivo %s.").encode(), LIMITS)
    twice = document.texts[1].replace('<img data-x="1">', '<img data-x="1"><img data-x="1">')
    document.write(["Cannot open the file.", twice, document.texts[2]], "en")
    assert document.untranslated == 2


def test_xliff_20_fills_segments_and_sets_trglang():
    document = files.read("ui.xlf", XLIFF_20.encode(), LIMITS)
    assert document.texts == ['Pulse <span data-x="0">Guardar</span> para <img data-x="1"> salir.',
                              'El <img data-x="0">perro<img data-x="1"> come.']
    root = parsed(document.write([upper(t) for t in document.texts], "en"))
    assert root.get("trgLang") == "en" and root.get("srcLang") == "es"
    segments = list(root.iter(f"{NS2}segment"))
    assert [s.get("state") for s in segments] == ["translated", "translated", None, "final"]
    first = segments[0].find(f"{NS2}target")
    assert [(etree.QName(c).localname, dict(c.attrib)) for c in first] == [
        ("pc", {"id": "1", "dataRefStart": "d1"}), ("ph", {"id": "2", "dataRef": "d2"})]
    assert "".join(first.itertext()) == "PULSE GUARDAR PARA  SALIR."
    second = segments[1].find(f"{NS2}target")
    assert [c.get("id") or c.get("startRef") for c in second] == ["3", "3"]
    assert segments[2].find(f"{NS2}target") is None
    assert segments[3].find(f"{NS2}target").text == "Hello"
    assert root.find(f"{NS2}file/{NS2}unit/{NS2}ignorable") is not None


def test_xliff_20_ec_before_sc_is_left_untranslated():
    document = files.read("ui.xlf", XLIFF_20.encode(), LIMITS)
    document.write([document.texts[0], 'The <img data-x="1">dog<img data-x="0"> eats.'], "en")
    assert document.untranslated == 1


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE xliff [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="es" datatype="x"
 original="a"><body><trans-unit id="1"><source>&lol9;</source></trans-unit></body></file></xliff>
"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE xliff [<!ENTITY secret SYSTEM "file://{path}">]>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="es" datatype="x"
 original="a"><body><trans-unit id="1"><source>&secret;</source></trans-unit></body></file></xliff>
"""


@pytest.mark.parametrize("data, message", [
    (BILLION_LAUGHS, "declares a DTD"),
    (EXTERNAL_ENTITY.format(path=REPO / "pyproject.toml"), "declares a DTD"),
    ("Hola, esto no es XML.", "not well-formed"),
    ("<xliff version='1.2' xmlns='urn:oasis:names:tc:xliff:document:1.2'><file>", "not well-formed"),
    ("<html><body><p>Hola</p></body></html>", "root is <html>"),
    ("<xliff xmlns='urn:example' version='3.0'/>", "not XLIFF 1.2 or 2.0"),
])
def test_hostile_or_foreign_xml_is_refused(data, message):
    for encoding in ("utf-8", "utf-8-sig", "utf-16"):
        with pytest.raises(InvalidInput, match=message) as refused:
            files.read("evil.xlf", data.encode(encoding), LIMITS)
        assert "[project]" not in str(refused.value)           # the external file was never read


def test_the_bundled_model_carries_the_codes():
    from attnmt.service.inference.engine import Engine, EngineOptions
    from attnmt.service.inference.search import SearchOptions
    from attnmt.service.text.documents import translate_documents
    from attnmt.service.text.translator import Translator
    translator = Translator(Engine(REPO / "models" / "transformer-es-en", EngineOptions(intra_op_threads=1)))
    for source, ns in ((XLIFF_12, NS1), (XLIFF_20, NS2)):
        document = files.read("ui.xlf", source.encode(), LIMITS)
        done = translate_documents(translator, document.texts, html=document.html, split=True,
                                   options=SearchOptions(beam_size=1))
        root = parsed(document.write([d.text for d in done], "en"))
        assert document.untranslated == 0
        for unit in root.iter(f"{ns}trans-unit", f"{ns}segment"):
            source_codes = [(c.tag, sorted(c.attrib.items())) for c in unit.find(f"{ns}source").iter()][1:]
            target = unit.find(f"{ns}target")
            if target is not None:
                assert [(c.tag, sorted(c.attrib.items())) for c in target.iter()][1:] == source_codes
        translated = [unit for unit in root.iter(f"{ns}trans-unit", f"{ns}segment")
                      if unit.find(f"{ns}target") is not None and unit.get("id") != "4" and
                      unit.get("state") != "final"]
        assert all("".join(u.find(f"{ns}target").itertext()) != "".join(u.find(f"{ns}source").itertext())
                   for u in translated)
