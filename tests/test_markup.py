"""HTML through translation: the cases users reported against LibreTranslate (#144
`<p>hello</p>`, #288 newlines inside <p>, #806 nested inline tags, #123 `%1$s`) and the
usual suspects (a tag around one word, a tag across a sentence boundary, entities,
void elements, comments, translate="no"). Every output must be well-formed, hold
exactly the source's tags, and each inline tag must surround the target words
aligned to the source words it surrounded.

The realistic cases run on the bundled Spanish -> English model; the assertions are
structural, so a retrained model passes them too. The gRPC cases use the tiny model."""

from __future__ import annotations

import html as html_module
import random
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import grpc
import pytest

from attnmt.service.client import Client
from attnmt.service.documents import translate_documents
from attnmt.service.decoding import SearchOptions
from attnmt.service.errors import InvalidInput
from attnmt.service.markup import VOID, parse_html
from attnmt.service.stubs import translator_pb2 as pb

BUNDLED = Path(__file__).resolve().parent.parent / "models" / "rnnsearch-es-en"
GREEDY = SearchOptions(beam_size=1)


class Tags(HTMLParser):
    """An independent reading of markup: every tag as written, with its offsets; raises on
    mis-nesting or an unclosed element."""

    def __init__(self, markup: str):
        super().__init__(convert_charrefs=False)
        self.lines = [0] + [i + 1 for i, c in enumerate(markup) if c == "\n"]
        self.markup = markup
        self.written: Counter = Counter()        # start tags as written, end tags, comments, entities
        self.elements: list[tuple[str, int, int]] = []   # (start tag, content start, content end)
        self.stack: list[tuple[str, str, int]] = []
        self.feed(markup)
        self.close()
        assert not self.stack, f"unclosed {self.stack}"

    def _at(self) -> int:
        line, column = self.getpos()
        return self.lines[line - 1] + column

    def handle_starttag(self, tag, attrs):
        raw = self.get_starttag_text()
        self.written["start " + raw] += 1
        if tag not in VOID:
            self.stack.append((tag, raw, self._at() + len(raw)))

    def handle_startendtag(self, tag, attrs):
        self.written["start " + self.get_starttag_text()] += 1

    def handle_endtag(self, tag):
        self.written["end " + tag] += 1
        name, raw, start = self.stack.pop()
        assert name == tag, f"</{tag}> closes <{name}>"
        self.elements.append((raw, start, self._at()))

    def handle_comment(self, data):
        self.written["comment " + data] += 1

    def handle_entityref(self, name):
        self._entity(f"&{name};")

    def handle_charref(self, name):
        self._entity(f"&#{name};")

    def _entity(self, raw: str) -> None:
        # Letters and spaces (&aacute; &nbsp;) are text the model translates; the rest must survive.
        decoded = html_module.unescape(raw)
        if decoded == raw or not all(c.isalnum() or c.isspace() for c in decoded):
            self.written["entity " + raw] += 1


def check(source: str, document) -> Tags:
    """Well-formed, same tags, inline tags around the target words aligned to their source words."""
    before, after = Tags(source), Tags(document.text)
    assert after.written == before.written
    # The k-th element with a given start tag in the source is the k-th in the output.
    outputs: dict[str, list[tuple[int, int]]] = {}
    for raw, start, end in sorted(after.elements, key=lambda e: e[1]):
        outputs.setdefault(raw, []).append((start, end))
    seen: Counter = Counter()
    for raw, start, end in sorted(before.elements, key=lambda e: e[1]):
        out_start, out_end = outputs[raw][seen[raw]]
        seen[raw] += 1
        for sentence in document.sentences:
            if not sentence.translation.hypotheses:
                continue
            best = sentence.translation.best
            targets = sentence.target_word_spans[0]
            for s, t in best.hard_alignment():
                word_start, word_end = sentence.source_word_spans[s]
                if start <= word_start and word_end <= end and word_end > word_start:
                    a, b = targets[t]
                    assert out_start <= a and b <= out_end, (raw, best.source_words[s], best.target_words[t])
    return after


@pytest.fixture(scope="module")
def bundled():
    from attnmt.service.engine import Engine, EngineOptions
    from attnmt.service.translator import Translator
    return Translator(Engine(BUNDLED, EngineOptions(intra_op_threads=1)))


def html(translator, text: str, split: bool = False):
    return translate_documents(translator, [text], html=True, split=split, options=GREEDY)[0]


CORPUS = [
    "<p>Hola</p>",                                                            # LibreTranslate #144
    "<p>Y dijo Dios:\nSea la luz.</p>",                                       # #288: a newline is whitespace
    "<p>Y <b>dijo <i>Dios</i></b>: Sea la <em>luz</em>.</p>",                 # #806: nested inline tags
    "<p>Y dijo <b>Dios</b>: Sea la luz.</p>",                                 # a tag around one word
    "<div><p>En el principio crió Dios los <a href=\"/cielos\" title=\"los cielos\">cielos y la tierra</a>."
    "</p>\n  <ul><li>Uno</li><li>El <strong>rey</strong> David</li></ul></div>",
    "Y dijo Dios<br>Sea la luz<br/>Y fue la luz.",
    "<p>Y vio Dios <!-- nota --> que la luz era <img src=\"luz.png\" alt=\"la luz\"> buena.</p>",
    "<p>El rey &amp; su hijo &copy; &lt;Salomón&gt; &#169; dijeron: &iexcl;Sea!</p>",
    "<p>Palabra de <span translate=\"no\">Reina Valera</span> y de <span class=\"x notranslate\">WEB</span>.</p>",
    "<p>No se puede abrir %1$s: el archivo {name} de %s ya existe en {{dir}}.</p>",   # #123
    "<script>var luz = '<b>';</script><style>p { color: red }</style><p>La luz.</p>",
    "<table><tr><td>Dios</td><td><i>luz</i></td></tr></table>",
]


@pytest.mark.parametrize("source", CORPUS)
def test_the_bug_report_corpus_comes_back_well_formed_with_its_tags_in_place(bundled, source):
    check(source, html(bundled, source))


def test_tags_across_a_sentence_boundary_wrap_both_translations(bundled):
    source = "<p><b>Y dijo Dios: Sea la luz. Y fue la luz.</b> Y vio Dios que la luz era buena.</p>"
    document = html(bundled, source, split=True)
    check(source, document)
    assert len(document.sentences) == 3
    first, second, third = (document.text[a:b] for a, b in (s.target for s in document.sentences))
    inner = document.text[document.text.index("<b>") + 3:document.text.index("</b>")]
    assert first in inner and second in inner and third not in inner


def test_block_tags_and_br_split_sentences_but_a_newline_does_not(bundled):
    assert len(html(bundled, "<p>Y dijo Dios:\nSea la luz</p>").sentences) == 1
    assert len(html(bundled, "<p>Y dijo Dios</p><p>Sea la luz</p>").sentences) == 2
    assert len(html(bundled, "Y dijo Dios<br>Sea la luz").sentences) == 2
    assert len(html(bundled, "<p><b>Y dijo</b> <i>Dios</i></p>").sentences) == 1     # #806: inline tags do not


def test_hello_in_a_paragraph_is_the_plain_translation_in_the_paragraph(bundled):
    plain = bundled.translate(["Hola"], GREEDY)[0].best.text
    assert html(bundled, "<p>Hola</p>").text == f"<p>{plain}</p>"               # LibreTranslate #144


def test_verbatim_parts_come_through_exactly_once(bundled):
    source = ("<p>No se puede abrir %1$s: el archivo {name} de <code translate=\"no\">ls -l</code> "
              "<!-- x --> ya existe &amp; <img src=\"a.png\" alt=\"una casa\"> en {{dir}}.</p>")
    text = html(bundled, source).text
    for part in ("%1$s", "{name}", "{{dir}}", "<code translate=\"no\">ls -l</code>", "<!-- x -->", "&amp;",
                 "<img src=\"a.png\" alt=\"una casa\">"):
        assert text.count(part) == 1, part
    assert "una casa" in text and text.count("casa") == 1    # attribute values are not translated


def test_word_spans_point_into_the_markup(bundled):
    source = "<p>Y dijo <b>Dios</b>: Sea la <i>luz</i>.</p>"
    document = html(bundled, source)
    (sentence,) = document.sentences
    best = sentence.translation.best
    untagged = lambda text: re.sub(r"<[^>]*>", "", text)  # noqa: E731
    assert [untagged(source[a:b]) for a, b in sentence.source_word_spans] == best.source_words[:-1] + [""]
    assert [untagged(document.text[a:b]) for a, b in sentence.target_word_spans[0]] == best.target_words[:-1] + [""]


def random_markup(rng: random.Random, words: list[str], depth: int = 0) -> str:
    parts = []
    for _ in range(rng.randint(1, 4)):
        roll = rng.random()
        if roll < 0.5 or depth > 3:
            parts.append(" ".join(rng.choices(words, k=rng.randint(1, 5))) + rng.choice(["", " ", "\n", " . "]))
        elif roll < 0.6:
            parts.append(rng.choice(["<br>", "<img src=x>", "<!-- c -->", "<hr/>", '<span translate="no">X y</span>',
                                     "&amp;", "&copy;", "%s", "{name}"]))
        else:
            tag = rng.choice(["b", "i", "a href='#'", "p", "li", "span class=c", "em", "div", "x:y"])
            parts.append(f"<{tag}>" + random_markup(rng, words, depth + 1) + f"</{tag.split()[0]}>")
    return "".join(parts)


@pytest.mark.parametrize("split", [False, True])
def test_any_well_formed_markup_comes_back_well_formed_with_the_same_tags(translator, split):
    rng = random.Random(8)
    words = ["kasa", "granda", "vidas", "peru", "gato", "amas", "luna", "roja", "."]
    sources = [random_markup(rng, words) for _ in range(60)]
    for source, document in zip(sources, translate_documents(translator, sources, True, split, GREEDY)):
        assert Tags(document.text).written == Tags(source).written, (source, document.text)


@pytest.mark.parametrize("markup, problem", [
    ("<b>Hola", "<b> opened at offset 0 is never closed"),
    ("Hola</b>", "</b> at offset 4 closes nothing"),
    ("<b><i>Hola</b></i>", "</b> at offset 10 does not close <i>"),
    ("a < b", "'<' at offset 2"),
    ("Hola</br>", "void element"),
    ("<p>Uno<p>Dos</p>", "never closed"),
])
def test_malformed_markup_is_refused_naming_the_problem(markup, problem):
    with pytest.raises(InvalidInput, match="markup") as info:
        parse_html(markup)
    assert problem in str(info.value)


# --- over gRPC ------------------------------------------------------------------

def test_the_corpus_over_grpc_on_the_bundled_model(bundled):
    from conftest import RunningServer
    with RunningServer([BUNDLED], {"ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_WARMUP": "false"}) as running, \
            Client(running.address) as client:
        documents = client.translate_documents(CORPUS, GREEDY, html=True, split_sentences=True)
    offline = translate_documents(bundled, CORPUS, html=True, split=True, options=GREEDY)
    for source, document, alone in zip(CORPUS, documents, offline):
        check(source, document)
        assert document.text == alone.text

def test_html_over_grpc_places_tags_by_the_alignment(server):
    source = "<p><b>kasa</b> granda vidas <i>peru</i> .</p><p>gato <a href=\"/x\" title=\"kasa\">amas</a> luna .</p>"
    with Client(server.address) as client:
        (document,) = client.translate_documents([source], GREEDY, html=True, split_sentences=False)
    check(source, document)
    def inside(start: str, end: str) -> str:
        return document.text[document.text.index(start) + len(start):document.text.index(end)]
    assert "house" in inside("<b>", "</b>") and "dog" in inside("<i>", "</i>")
    assert "loves" in inside('title="kasa">', "</a>") and "cat" not in inside('title="kasa">', "</a>")
    assert re.sub(r"<[^>]*>", "", document.text) == "the big house sees the dog .the cat loves the moon ."
    assert [s.translation.best.text for s in document.sentences] == ["the big house sees the dog .",
                                                                      "the cat loves the moon ."]


def test_html_streams_and_malformed_markup_is_invalid_argument(server, stub):
    with Client(server.address) as client:
        results = dict(client.stream([("a", "<i>peru</i> vidas kasa ."), ("b", "<b>peru vidas")],
                                     GREEDY, alignment="soft", html=True))
    check("<i>peru</i> vidas kasa .", results["a"])
    assert results["a"].sentences[0].translation.best.text == "the dog sees the house ."
    assert results["b"].code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and "never closed" in results["b"].message
    with pytest.raises(grpc.RpcError) as info:
        stub.Translate(pb.TranslateRequest(sentences=["kasa</b>"], format=pb.TEXT_FORMAT_HTML))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "sentences[0]: markup: </b> at offset 4 closes nothing" in info.value.details()
