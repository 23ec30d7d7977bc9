""".docx and .odt (service/text/files/office/): each paragraph an HTML entry whose runs
come back around the translated words, every other zip entry as read, zip bombs and hostile
XML refused."""

from __future__ import annotations

import io
import re
import struct
import zipfile

import pytest
from lxml import etree

from attnmt.service.errors import InvalidInput
from attnmt.service.text import files
from attnmt.service.text.files import office
from conftest import REPO

LIMITS = files.Limits(max_bytes=10 * 2**20, max_entry_chars=2000, max_entry_lines=4)
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
T = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
XLINK = "{http://www.w3.org/1999/xlink}"
DATE = (2024, 3, 9, 10, 30, 0)
PNG = bytes(range(256)) * 4             # stands for an image: stored, as Word stores media

WORD_NS = ('xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
           'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"')
ARIAL = '<w:rFonts w:ascii="Arial" w:hAnsi="Arial"/>'
LANG = '<w:lang w:val="es-ES"/>'

DOCUMENT = f"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document {WORD_NS}><w:body>
<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:rPr>{LANG}</w:rPr><w:t>Informe anual</w:t></w:r></w:p>
<w:p w:rsidR="00AB"><w:pPr><w:jc w:val="center"/></w:pPr>\
<w:r><w:rPr>{ARIAL}{LANG}</w:rPr><w:t xml:space="preserve">Pulse </w:t></w:r>\
<w:r><w:rPr>{ARIAL}<w:b/>{LANG}</w:rPr><w:t>Guardar</w:t></w:r>\
<w:r><w:rPr>{ARIAL}{LANG}</w:rPr><w:t xml:space="preserve"> y lea </w:t></w:r>\
<w:hyperlink r:id="rId5" w:history="1"><w:r><w:rPr><w:rStyle w:val="Hyperlink"/>{ARIAL}{LANG}</w:rPr>\
<w:t>la ayuda</w:t></w:r></w:hyperlink>\
<w:r><w:rPr>{ARIAL}{LANG}</w:rPr><w:t xml:space="preserve"> antes de </w:t></w:r>\
<w:r><w:rPr>{ARIAL}<w:i/>{LANG}</w:rPr><w:t>salir</w:t></w:r>\
<w:r><w:rPr>{ARIAL}{LANG}</w:rPr><w:t>.</w:t></w:r></w:p>
<w:p><w:bookmarkStart w:id="0" w:name="datos"/><w:r><w:t>Nombre:</w:t><w:tab/><w:t>Juan</w:t></w:r>\
<w:bookmarkEnd w:id="0"/><w:r><w:br/><w:t xml:space="preserve">Página </w:t></w:r>\
<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText xml:space="preserve"> PAGE </w:instrText></w:r>\
<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>1</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r>\
<w:r><w:t xml:space="preserve"> de la guía</w:t></w:r>\
<w:r><w:rPr><w:rStyle w:val="FootnoteReference"/></w:rPr><w:footnoteReference w:id="1"/></w:r></w:p>
<w:p/>
<w:p><w:r><w:t xml:space="preserve">   </w:t></w:r><w:bookmarkStart w:id="1" w:name="vacio"/></w:p>
<w:p><w:r><w:t>Pie: </w:t></w:r><w:fldSimple w:instr=" NUMPAGES "><w:r><w:t>3</w:t></w:r></w:fldSimple>\
<w:hyperlink w:anchor="fin"/></w:p>
<w:sectPr><w:headerReference w:type="default" r:id="rId7"/></w:sectPr>
</w:body></w:document>"""

HEADER = f"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:hdr {WORD_NS}><w:p><w:r><w:t>Confidencial</w:t></w:r></w:p></w:hdr>"""

FOOTNOTES = f"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:footnotes {WORD_NS}>
<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>
<w:footnote w:id="1"><w:p><w:r><w:rPr><w:rStyle w:val="FootnoteReference"/></w:rPr><w:footnoteRef/></w:r>\
<w:r><w:t xml:space="preserve"> Una nota al pie.</w:t></w:r></w:p></w:footnote>
</w:footnotes>"""

DOCX = [
    ("[Content_Types].xml", b'<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
     b'content-types"><Default Extension="xml" ContentType="application/xml"/></Types>', zipfile.ZIP_DEFLATED),
    ("_rels/.rels", b'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
     b'relationships"/>', zipfile.ZIP_DEFLATED),
    ("word/document.xml", DOCUMENT.encode(), zipfile.ZIP_DEFLATED),
    ("word/_rels/document.xml.rels", b'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats'
     b'.org/package/2006/relationships"><Relationship Id="rId5" Type="http://schemas.openxmlformats.org/'
     b'officeDocument/2006/relationships/hyperlink" Target="https://example.org/ayuda" TargetMode="External"/>'
     b'</Relationships>', zipfile.ZIP_DEFLATED),
    ("word/styles.xml", f'<?xml version="1.0"?><w:styles {WORD_NS}/>'.encode(), zipfile.ZIP_DEFLATED),
    ("word/header1.xml", HEADER.encode(), zipfile.ZIP_DEFLATED),
    ("word/footnotes.xml", FOOTNOTES.encode(), zipfile.ZIP_DEFLATED),
    ("word/media/image1.png", PNG, zipfile.ZIP_STORED),
    ("docProps/core.xml", "<?xml version='1.0'?><core>Título: Informe</core>".encode(), zipfile.ZIP_DEFLATED),
]

ODT_NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
          'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
          'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
          'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" '
          'xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:dc="http://purl.org/dc/elements/1.1/"')

CONTENT = f"""<?xml version="1.0" encoding="UTF-8"?>
<office:document-content {ODT_NS} office:version="1.3"><office:automatic-styles>\
<style:style style:name="T1" style:family="text"><style:text-properties fo:font-weight="bold" \
style:font-weight-asian="bold"/></style:style>\
<style:style style:name="T2" style:family="text"><style:text-properties fo:font-style="italic"/></style:style>\
<style:style style:name="T3" style:family="text"><style:text-properties fo:color="#ff0000"/></style:style>\
</office:automatic-styles><office:body><office:text>\
<text:h text:style-name="H1" text:outline-level="1">Informe anual</text:h>\
<text:p text:style-name="P1">Pulse <text:span text:style-name="T1">Guardar</text:span> y lea \
<text:a xlink:type="simple" xlink:href="https://example.org/ayuda">la ayuda</text:a> antes de \
<text:span text:style-name="T2">salir</text:span>.</text:p>\
<text:p>Nombre:<text:tab/>Juan<text:line-break/>Página <text:page-number>1</text:page-number> \
<text:span text:style-name="T3">roja</text:span>.<text:note text:id="n1" text:note-class="footnote">\
<text:note-citation>1</text:note-citation><text:note-body><text:p>Una nota al pie.</text:p></text:note-body>\
</text:note><office:annotation><dc:creator>Ana</dc:creator><text:p>Revisar esto.</text:p></office:annotation></text:p>\
<text:p/><text:p>  <text:s text:c="3"/> </text:p>\
</office:text></office:body></office:document-content>"""

STYLES = f"""<?xml version="1.0" encoding="UTF-8"?>
<office:document-styles {ODT_NS}><office:styles/><office:master-styles>\
<style:master-page style:name="Standard"><style:header><text:p>Confidencial</text:p></style:header>\
</style:master-page></office:master-styles></office:document-styles>"""

ODT = [
    ("mimetype", office.ODT_TYPE.encode(), zipfile.ZIP_STORED),
    ("META-INF/manifest.xml", b'<?xml version="1.0"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:'
     b'opendocument:xmlns:manifest:1.0"><manifest:file-entry manifest:full-path="/" manifest:media-type="'
     b'application/vnd.oasis.opendocument.text"/></manifest:manifest>', zipfile.ZIP_DEFLATED),
    ("content.xml", CONTENT.encode(), zipfile.ZIP_DEFLATED),
    ("styles.xml", STYLES.encode(), zipfile.ZIP_DEFLATED),
    ("meta.xml", "<?xml version='1.0'?><meta>Título</meta>".encode(), zipfile.ZIP_DEFLATED),
    ("Pictures/1.png", PNG, zipfile.ZIP_STORED),
]


def zipped(entries: list[tuple[str, bytes, int]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as package:
        for name, data, compression in entries:
            info = zipfile.ZipInfo(name, DATE)
            info.compress_type = compression
            info.external_attr = 0o644 << 16
            package.writestr(info, data)
    return out.getvalue()


def upper(text: str) -> str:
    """A 'translation' that keeps the markup: the text between tags upper-cased."""
    return re.sub(r"(?<=>)[^<>]+|^[^<>]+", lambda m: m.group(0).upper(), text)


def part(data: bytes, name: str) -> etree._Element:
    with zipfile.ZipFile(io.BytesIO(data)) as package:
        assert package.testzip() is None
        return etree.fromstring(package.read(name))


def runs(p: etree._Element) -> list[tuple]:
    """Each run's text with what formats it: (text, bold, italic, the hyperlink's r:id)."""
    out = []
    for run in p.iter(f"{W}r"):
        rpr = run.find(f"{W}rPr")
        link = run.getparent().get(f"{R}id") if run.getparent().tag == f"{W}hyperlink" else None
        out.append(("".join(t.text for t in run.iter(f"{W}t")),
                    rpr is not None and rpr.find(f"{W}b") is not None,
                    rpr is not None and rpr.find(f"{W}i") is not None, link))
    return out


def test_each_docx_paragraph_is_an_html_entry_its_formatting_tags_the_rest_atoms():
    document = files.read("informe.docx", zipped(DOCX), LIMITS)
    assert (document.kind, document.media_type, document.html) == ("docx", office.DOCX_TYPE, True)
    assert document.texts == [
        "Informe anual",
        'Pulse <b data-r="1">Guardar</b> y lea <a data-w="0"><span data-r="2">la ayuda</span></a> antes de '
        '<i data-r="3">salir</i>.',
        '<img data-x="0">Nombre:<img data-x="2"> Juan<img data-x="4"><br data-x="5">Página <img data-x="7">'
        '<img data-x="8"><img data-x="9">1<img data-x="11"> de la guía<span data-r="1"><img data-x="13"></span>',
        'Pie: <span data-w="0">3</span><img data-x="2">',       # an empty link is an atom
        '<span data-r="0"><img data-x="0"></span> Una nota al pie.',      # after the body, by part name
        "Confidencial",
    ]                                                   # empty paragraphs and the separator are not sent


def test_the_runs_come_back_around_the_translated_words_with_their_properties():
    document = files.read("informe.docx", zipped(DOCX), LIMITS)
    out = document.write([upper(t) for t in document.texts], "en")
    assert document.untranslated == 0
    body = part(out, "word/document.xml")
    paragraphs = list(body.iter(f"{W}p"))
    assert runs(paragraphs[1]) == [("PULSE ", False, False, None), ("GUARDAR", True, False, None),
                                   (" Y LEA ", False, False, None), ("LA AYUDA", False, False, "rId5"),
                                   (" ANTES DE ", False, False, None), ("SALIR", False, True, None),
                                   (".", False, False, None)]
    second = paragraphs[1]
    assert second.get(f"{W}rsidR") == "00AB" and second.find(f"{W}pPr/{W}jc").get(f"{W}val") == "center"
    assert second.find(f"{W}hyperlink").get(f"{W}history") == "1"
    assert second.find(f"{W}hyperlink/{W}r/{W}rPr/{W}rStyle").get(f"{W}val") == "Hyperlink"
    assert all(r.find(f"{W}rPr/{W}rFonts").get(f"{W}ascii") == "Arial" for r in second.iter(f"{W}r"))
    assert {lang.get(f"{W}val") for lang in body.iter(f"{W}lang")} == {"en"}      # the target, where named
    assert paragraphs[0].find(f"{W}pPr/{W}pStyle").get(f"{W}val") == "Heading1"
    assert "".join(paragraphs[0].itertext()) == "INFORME ANUAL"
    # leading and trailing spaces kept: a w:t with them says so
    spaced = [t for t in second.iter(f"{W}t") if t.text != t.text.strip()]
    assert spaced and all(t.get("{http://www.w3.org/XML/1998/namespace}space") == "preserve" for t in spaced)
    assert "".join(part(out, "word/header1.xml").itertext()) == "CONFIDENCIAL"
    assert "".join(part(out, "word/footnotes.xml").itertext()).strip() == "UNA NOTA AL PIE."


def test_a_tag_moved_by_the_translation_moves_its_formatting():
    document = files.read("informe.docx", zipped(DOCX), LIMITS)
    moved = ('Read <a data-w="0"><span data-r="2">the help</span></a> before you <i data-r="3">leave</i>, '
             'then press <b data-r="1">Save</b>.')
    out = document.write([document.texts[0], moved, *document.texts[2:]], "en")
    second = list(part(out, "word/document.xml").iter(f"{W}p"))[1]
    assert runs(second) == [("Read ", False, False, None), ("the help", False, False, "rId5"),
                            (" before you ", False, False, None), ("leave", False, True, None),
                            (", then press ", False, False, None), ("Save", True, False, None),
                            (".", False, False, None)]


def test_tabs_breaks_fields_bookmarks_and_note_references_survive():
    document = files.read("informe.docx", zipped(DOCX), LIMITS)
    out = document.write([upper(t) for t in document.texts], "en")
    third = list(part(out, "word/document.xml").iter(f"{W}p"))[2]

    def sequence(p):
        for element in p.iter():
            name = etree.QName(element).localname
            if name == "t":
                yield element.text
            elif name in ("tab", "br", "bookmarkStart", "bookmarkEnd", "footnoteReference", "instrText"):
                yield name if name != "instrText" else element.text
            elif name == "fldChar":
                yield element.get(f"{W}fldCharType")
    assert list(sequence(third)) == ["bookmarkStart", "NOMBRE:", "tab", "JUAN", "bookmarkEnd", "br", "PÁGINA ",
                                     "begin", " PAGE ", "separate", "1", "end", " DE LA GUÍA", "footnoteReference"]
    reference = third.find(f".//{W}footnoteReference").getparent()
    assert reference.find(f"{W}rPr/{W}rStyle").get(f"{W}val") == "FootnoteReference"
    simple = list(part(out, "word/document.xml").iter(f"{W}p"))[5].find(f"{W}fldSimple")
    assert simple.get(f"{W}instr") == " NUMPAGES " and "".join(simple.itertext()) == "3"
    assert simple.getnext().tag == f"{W}hyperlink" and simple.getnext().get(f"{W}anchor") == "fin"


def test_markers_keep_their_order_wherever_the_alignment_puts_them():
    document = files.read("informe.docx", zipped(DOCX), LIMITS)
    # the field's end before its begin, the bookmark's end before its start
    swapped = ('<img data-x="2"> Name:<img data-x="4">John<img data-x="0"><br data-x="5">Page <img data-x="11">'
               '<img data-x="7"><img data-x="8"><img data-x="9">1 of the guide<span data-r="1">'
               '<img data-x="13"></span>')
    out = document.write([*document.texts[:2], swapped, *document.texts[3:]], "en")
    third = list(part(out, "word/document.xml").iter(f"{W}p"))[2]
    markers = [e.get(f"{W}fldCharType") or etree.QName(e).localname for e in third.iter()
               if etree.QName(e).localname in ("fldChar", "bookmarkStart", "bookmarkEnd")]
    assert markers == ["bookmarkStart", "bookmarkEnd", "begin", "separate", "end"]
    assert document.untranslated == 0


def test_a_translation_whose_tags_do_not_map_back_is_written_whole_in_the_first_runs_formatting():
    document = files.read("informe.docx", zipped(DOCX), LIMITS)
    unknown = 'Press <b data-r="9">Save</b> and read the help before leaving.'
    lost_atom = 'Name: John Page 1 of the guide'
    out = document.write([document.texts[0], unknown, lost_atom, *document.texts[3:]], "en")
    assert document.untranslated == 0
    paragraphs = list(part(out, "word/document.xml").iter(f"{W}p"))
    assert runs(paragraphs[1]) == [("Press Save and read the help before leaving.", False, False, None)]
    assert paragraphs[1].find(f"{W}r/{W}rPr/{W}rFonts") is not None       # the first run's properties
    third = paragraphs[2]
    assert "".join(t.text for t in third.iter(f"{W}t")) == "Name: John Page 1 of the guide"
    assert [etree.QName(e).localname for e in third.iter(f"{W}tab", f"{W}br", f"{W}footnoteReference",
                                                         f"{W}bookmarkStart")] == [
        "bookmarkStart", "tab", "br", "footnoteReference"]


def test_a_blank_translation_leaves_its_paragraph_and_is_counted():
    document = files.read("informe.docx", zipped(DOCX), LIMITS)
    out = document.write(["", *document.texts[1:]], "en")
    assert document.untranslated == 1
    assert "".join(next(part(out, "word/document.xml").iter(f"{W}p")).itertext()) == "Informe anual"


def test_every_entry_not_translated_is_written_back_as_read_in_its_order():
    data = zipped(DOCX)
    document = files.read("informe.docx", data, LIMITS)
    out = document.write([upper(t) for t in document.texts], "en")
    with zipfile.ZipFile(io.BytesIO(data)) as before, zipfile.ZipFile(io.BytesIO(out)) as after:
        assert after.testzip() is None
        assert after.namelist() == before.namelist()
        for old, new in zip(before.infolist(), after.infolist()):
            assert (new.compress_type, new.date_time, new.external_attr) == (
                old.compress_type, old.date_time, old.external_attr), old.filename
            if old.filename not in ("word/document.xml", "word/header1.xml", "word/footnotes.xml"):
                assert after.read(new) == before.read(old), old.filename
    assert part(out, "word/document.xml").find(f"{W}body/{W}sectPr/{W}headerReference").get(f"{R}id") == "rId7"
    with zipfile.ZipFile(io.BytesIO(out)) as after:
        assert after.read("word/document.xml").startswith(b"<?xml version='1.0' encoding='UTF-8' standalone='yes'?>")
    again = files.read("informe_en.docx", out, LIMITS)                   # and it reads again
    assert again.texts == [upper(t) for t in document.texts]


def test_each_odt_paragraph_and_heading_is_an_html_entry_notes_too_comments_not():
    document = files.read("informe.odt", zipped(ODT), LIMITS)
    assert (document.kind, document.media_type, document.html) == ("odt", office.ODT_TYPE, True)
    assert document.texts == [
        "Informe anual",
        'Pulse <b data-r="1">Guardar</b> y lea <a data-w="0">la ayuda</a> antes de <i data-r="2">salir</i>.',
        'Nombre:<img data-x="1"> Juan<br data-x="3">Página <img data-x="5"> <span data-r="1">roja</span>.'
        '<img data-x="9"><img data-x="10">',
        "Una nota al pie.",             # the note's paragraph, nested in the one before
        "Confidencial",                 # the master page's header, in styles.xml
    ]


def test_odt_spans_links_and_notes_come_back_and_mimetype_stays_first_and_stored():
    data = zipped(ODT)
    document = files.read("informe.odt", data, LIMITS)
    translated = ["Annual report",
                  'Read <a data-w="0">the help</a> before you <i data-r="2">leave</i>, then press '
                  '<b data-r="1">Save</b>.',
                  'Name:<img data-x="1"> John<br data-x="3">Page <img data-x="5"> <span data-r="1">red</span>.'
                  '<img data-x="9"><img data-x="10">',
                  "A footnote.", "Confidential"]
    out = document.write(translated, "en")
    assert document.untranslated == 0
    content = part(out, "content.xml")
    heading, second, third, *_ = content.iter(f"{T}h", f"{T}p")
    assert (heading.text, heading.get(f"{T}outline-level")) == ("Annual report", "1")
    assert etree.tostring(second, encoding="unicode", with_tail=False).split(">", 1)[1] == (
        'Read <text:a xlink:type="simple" xlink:href="https://example.org/ayuda">the help</text:a> before you '
        '<text:span text:style-name="T2">leave</text:span>, then press <text:span text:style-name="T1">Save'
        '</text:span>.</text:p>')
    assert second.get(f"{T}style-name") == "P1"
    assert [etree.QName(c).localname for c in third] == ["tab", "line-break", "page-number", "span", "note",
                                                         "annotation"]
    assert (third.text, third[0].tail) == ("Name:", "John")     # the tab's space for the model taken back
    assert "".join(third.find(f"{T}note/{T}note-body").itertext()) == "A footnote."
    assert "".join(third.find("{urn:oasis:names:tc:opendocument:xmlns:office:1.0}annotation").itertext()) == (
        "AnaRevisar esto.")
    assert "".join(part(out, "styles.xml").itertext()) == "Confidential"
    with zipfile.ZipFile(io.BytesIO(out)) as after, zipfile.ZipFile(io.BytesIO(data)) as before:
        first = after.infolist()[0]
        assert (first.filename, first.compress_type, first.extra) == ("mimetype", zipfile.ZIP_STORED, b"")
        assert after.read("mimetype") == office.ODT_TYPE.encode()
        assert out[30:38] == b"mimetype" and out[38:38 + len(office.ODT_TYPE)] == office.ODT_TYPE.encode()
        for name in ("META-INF/manifest.xml", "meta.xml", "Pictures/1.png"):
            assert after.read(name) == before.read(name)
            assert after.getinfo(name).compress_type == before.getinfo(name).compress_type
    assert files.read("informe_en.odt", out, LIMITS).texts[1] == (        # numbered as they come now
        'Read <a data-w="0">the help</a> before you <i data-r="1">leave</i>, then press <b data-r="2">Save</b>.')


# As LibreOffice Writer saves what a person typed (tests/data/office/libreoffice.odt): every span
# carries a revision id (officeooo:rsid), T3 nothing else; styles.xml names its own T1 for the header
RSID = 'xmlns:officeooo="http://openoffice.org/2009/office"'
WRITER_CONTENT = f"""<?xml version="1.0" encoding="UTF-8"?>
<office:document-content {ODT_NS} {RSID} office:version="1.3"><office:automatic-styles>\
<style:style style:name="T1" style:family="text"><style:text-properties fo:font-weight="bold" \
officeooo:rsid="000b2f47" style:font-weight-complex="bold"/></style:style>\
<style:style style:name="T2" style:family="text"><style:text-properties fo:font-style="italic" \
officeooo:rsid="000b2f47"/></style:style>\
<style:style style:name="T3" style:family="text"><style:text-properties officeooo:rsid="000d41a2"/></style:style>\
</office:automatic-styles><office:body><office:text>\
<text:p>La casa es <text:span text:style-name="T1">grande</text:span><text:span text:style-name="T3"> y tiene \
un <text:span text:style-name="T2">jardín</text:span>.</text:span></text:p>\
<text:p><text:span text:style-name="T3" text:class-names="Nota">Hola.</text:span></text:p>\
</office:text></office:body></office:document-content>"""
WRITER_STYLES = f"""<?xml version="1.0" encoding="UTF-8"?>
<office:document-styles {ODT_NS} {RSID}><office:styles>\
<style:style style:name="Sin_20_formato" style:family="text"/></office:styles><office:automatic-styles>\
<style:style style:name="T1" style:family="text"><style:text-properties fo:font-style="italic"/></style:style>\
</office:automatic-styles><office:master-styles><style:master-page style:name="Standard"><style:header>\
<text:p>Documento <text:span text:style-name="T1">interno</text:span> \
<text:span text:style-name="Sin_20_formato">hoy</text:span></text:p>\
</style:header></style:master-page></office:master-styles></office:document-styles>"""


def test_writer_revision_ids_neither_hide_bold_nor_make_spans_and_automatic_styles_are_per_part():
    data = zipped(replaced(replaced(ODT, "content.xml", WRITER_CONTENT.encode()), "styles.xml", WRITER_STYLES.encode()))
    document = files.read("informe.odt", data, LIMITS)
    assert document.texts == [
        'La casa es <b data-r="1">grande</b> y tiene un <i data-r="2">jardín</i>.',     # T3 read as its parent
        "Hola.",                                    # a span with more than its style is kept (below)
        # styles.xml's own T1 (italic), not content.xml's; a common style is the user's, kept as a span
        'Documento <i data-r="1">interno</i> <span data-r="2">hoy</span>',
    ]
    out = document.write(['The house is <b data-r="1">big</b> and has a <i data-r="2">garden</i>.', "Hello.",
                          'Internal <i data-r="1">document</i> <span data-r="2">today</span>'], "en")
    first, second = part(out, "content.xml").iter(f"{T}p")
    assert etree.tostring(first, encoding="unicode", with_tail=False).split(">", 1)[1] == (
        'The house is <text:span text:style-name="T1">big</text:span> and has a '
        '<text:span text:style-name="T2">garden</text:span>.</text:p>')
    assert second[0].get(f"{T}class-names") == "Nota" and second[0].text == "Hello."
    header = next(part(out, "styles.xml").iter(f"{T}p"))
    assert [(s.get(f"{T}style-name"), s.text) for s in header] == [("T1", "document"), ("Sin_20_formato", "today")]


def patched(data: bytes, name: str, *, flags: int | None = None, size: int | None = None) -> bytes:
    """`data` with the central directory's record of `name` saying other flags or another
    unpacked size (what zipfile believes)."""
    at = data.index(b"PK\x01\x02")
    while data[at + 46:at + 46 + len(name)] != name.encode():
        at = data.index(b"PK\x01\x02", at + 4)
    out = bytearray(data)
    if flags is not None:
        struct.pack_into("<H", out, at + 8, flags)
    if size is not None:
        struct.pack_into("<I", out, at + 24, size)
    return bytes(out)


def replaced(entries, name: str, data: bytes):
    return [(n, data if n == name else d, c) for n, d, c in entries]


BILLION_LAUGHS = DOCUMENT.replace('standalone="yes"?>', 'standalone="yes"?>\n<!DOCTYPE w:document [\n'
                                  ' <!ENTITY lol "lol">\n <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;">\n]>',
                                  1).replace("Informe anual", "&lol2;")


@pytest.mark.parametrize("name, data, message", [
    ("a.docx", b"Hola, esto no es un documento.", "not a zip package"),
    ("a.odt", b"PK\x03\x04 roto", "not a zip package"),
    ("a.docx", office.OLE + bytes(504), "encrypted .password-protected. document or an old binary one"),
    ("a.docx", zipped([e for e in DOCX if e[0] != "word/document.xml"]), "has no word/document.xml"),
    ("a.odt", zipped([e for e in ODT if e[0] != "content.xml"]), "has no content.xml"),
    ("a.docx", zipped(replaced(DOCX, "word/document.xml", BILLION_LAUGHS.encode())), "declares a DTD"),
    ("a.docx", zipped(replaced(DOCX, "word/document.xml",
                               BILLION_LAUGHS.replace('"UTF-8"', '"UTF-16"').encode("utf-16"))), "declares a DTD"),
    ("a.docx", zipped(replaced(DOCX, "word/header1.xml", b"<w:hdr><w:p>")), "header1.xml is not well-formed"),
    ("a.docx", zipped(replaced(DOCX, "word/document.xml", b'<document xmlns="http://purl.oclc.org/ooxml/'
                                                          b'wordprocessingml/main"/>')), "Strict Open XML"),
    ("a.docx", patched(zipped(DOCX), "word/document.xml", flags=1), "is encrypted"),
    ("a.odt", zipped(replaced(ODT, "META-INF/manifest.xml", b"<manifest><manifest:encryption-data/></manifest>")),
     "is encrypted"),
])
def test_what_is_not_a_document_is_refused(name, data, message):
    with pytest.raises(InvalidInput, match=message):
        files.read(name, data, LIMITS)


def test_zip_bombs_are_refused_before_they_inflate():
    zeros = bytes(8 * 2**20)                    # deflates 1000:1
    bomb = zipped(DOCX + [("word/media/fondo.bin", zeros, zipfile.ZIP_DEFLATED)])
    assert len(bomb) < 20_000
    with pytest.raises(InvalidInput, match=r"entry word/media/fondo.bin inflates \d+:1, over the limit of 100:1"):
        files.read("a.docx", bomb, LIMITS)
    small = files.Limits(LIMITS.max_bytes, LIMITS.max_entry_chars, LIMITS.max_entry_lines, max_unpacked_bytes=2**20)
    stored = zipped(DOCX + [("word/media/fondo.bin", bytes(2**20), zipfile.ZIP_STORED)])
    with pytest.raises(InvalidInput, match=r"unpacks to \d+ bytes, over the limit of 1048576 \(max_unpacked"):
        files.read("a.docx", stored, small)
    # a size that lies: the entry declares 900 bytes and inflates to 8 MiB; never read past them
    lying = patched(zipped(replaced(DOCX, "word/document.xml", DOCUMENT.encode() + zeros)), "word/document.xml",
                    size=900)
    with pytest.raises(InvalidInput, match="damaged: its entry word/document.xml cannot be read .Bad CRC"):
        files.read("a.docx", lying, LIMITS)


def test_a_damaged_entry_is_refused():
    data = bytearray(zipped(DOCX))
    start = data.index(b"word/document.xml") + len("word/document.xml")        # its local header's end
    data[start + 40:start + 60] = bytes(20)
    with pytest.raises(InvalidInput, match="damaged: its entry word/document.xml cannot be read"):
        files.read("a.docx", bytes(data), LIMITS)


def test_the_read_of_an_entry_is_bounded_by_the_unpacked_bytes_left():
    package = office.Package(zipped(DOCX), LIMITS, "Word document (.docx)")
    package.left = 100                          # as if the entries read before had inflated the rest
    with pytest.raises(InvalidInput, match="unpacks to more than the limit of 100 bytes .* entry word/document"):
        package.read("word/document.xml")


def test_two_entries_of_one_name_are_refused():
    with pytest.warns(UserWarning, match="Duplicate name"):
        twice = zipped(DOCX + [("word/document.xml", b"<other/>", zipfile.ZIP_DEFLATED)])
    with pytest.raises(InvalidInput, match="two zip entries share a name"):       # which one would Word read?
        files.read("a.docx", twice, LIMITS)


def test_too_many_entries_are_refused():
    many = zipped(DOCX + [(f"word/media/{i}.png", b"", zipfile.ZIP_STORED) for i in range(office.MAX_ENTRIES)])
    with pytest.raises(InvalidInput, match=rf"has {len(DOCX) + office.MAX_ENTRIES} zip entries, over the limit"):
        files.read("a.docx", many, LIMITS)


def test_the_formats_are_served_by_their_extensions():
    assert {".docx", ".odt"} <= set(files.EXTENSIONS)
    assert files.translated_name("Informe Final.DOCX", "en") == "InformeFinal_en.docx"


def test_the_bundled_model_translates_a_docx_with_its_runs():
    from attnmt.service.inference.engine import Engine, EngineOptions
    from attnmt.service.inference.search import SearchOptions
    from attnmt.service.text.documents import translate_documents
    from attnmt.service.text.translator import Translator
    translator = Translator(Engine(REPO / "models" / "transformer-es-en", EngineOptions(intra_op_threads=1)))
    for name, entries, paragraph in (("a.docx", DOCX, f"{W}p"), ("a.odt", ODT, f"{T}p")):
        document = files.read(name, zipped(entries), LIMITS)
        done = translate_documents(translator, document.texts, html=True, split=True,
                                   options=SearchOptions(beam_size=1))
        out = document.write([d.text for d in done], "en")
        assert document.untranslated == 0
        again = files.read(name, out, LIMITS)
        assert len(again.texts) == len(document.texts)
        for source, target in zip(document.texts, again.texts):
            # every tag of the source in the translation (renumbered as read again)
            assert sorted(re.findall(r"</?\w+", source)) == sorted(re.findall(r"</?\w+", target))
        main = "word/document.xml" if name == "a.docx" else "content.xml"
        text = " ".join("".join(p.itertext()) for p in part(out, main).iter(paragraph))
        assert "Guardar" not in text and "ayuda" not in text
