"""Subtitles whose sentences run across cues (service/text/files/cues.py): which cues are
joined into one entry, how a joined entry's translation is spread back over its cues (at the
markers the markup transfer placed, else by proportion), and the cues' own markup kept."""

from __future__ import annotations

import re

import pytest

from attnmt.service.errors import InvalidInput
from attnmt.service.text import files
from attnmt.service.text.files import cues
from attnmt.service.text.files.cues import MARKER, Timed, continues, group, proportional
from conftest import REPO

LIMITS = files.Limits(max_bytes=10_000, max_entry_chars=2000, max_entry_lines=4)

SPLIT = """1
00:00:01,000 --> 00:00:02,500
Le dije
que nos

2
00:00:02,540 --> 00:00:04,000
veríamos al mediodía.

3
00:00:05,000 --> 00:00:06,000
Adiós.
"""


def blocks(srt: str) -> list[list[str]]:
    return [b.splitlines() for b in srt.strip().split("\n\n")]


def translated(markup: str, words: dict[str, str]) -> str:
    """What the documents mode would write for `markup`: each source phrase replaced, the
    markup (markers, tags) where it stood."""
    for source, target in words.items():
        markup = markup.replace(source, target)
    return markup


@pytest.mark.parametrize("first, then, gap, joins", [
    ("I told him that we", "would meet at noon.", 0.04, True),
    ("Gracias por su ayuda,", "es usted muy amable.", 0.5, True),
    ("<i>Le dije que nos</i>", "<i>veríamos.</i>", 0.0, True),          # tags are not text
    ("Hola.", "adiós.", 0.04, False),
    ("¿Vienes?", "sí.", 0.04, False),
    ("Espera…", "ya voy.", 0.04, False),
    ('Dijo "vete."', "y se fue.", 0.04, False),                         # closing quote after the end
    ("(Risas.)", "bueno.", 0.04, False),
    ("Hola,", "- Adiós.", 0.04, False),                                 # a dialogue line
    ("Hola,", "¿qué tal?", 0.04, False),                                # an opening ¿
    ("Y entonces", "¡corre!", 0.04, False),
    ("I told him that we", "would meet at noon.", 1.5, False),          # too long a pause
    ("I told him that we", "would meet at noon.", -2.0, False),         # shown at the same time
    ("<i></i>", "would meet at noon.", 0.04, False),                    # nothing to join
    ("Le dije que...", "...nos veríamos.", 0.04, True),                 # the continuation mark
    ("<i>Le dije que…</i>", "<i>…nos veríamos.</i>", 0.04, True),
    ("Le dije que...", "Nos veríamos.", 0.04, False),                   # a pause, not a cut
    ("...", "...nos veríamos.", 0.04, False),                           # no words before the cut
])
def test_which_cues_join(first, then, gap, joins):
    assert continues(Timed(first, 1.0, 3.0), Timed(then, 3.0 + gap, 5.0)) is joins


def test_a_different_voice_never_joins():
    assert continues(Timed("Le dije que", 1.0, 2.0, "<v Ana>"), Timed("no.", 2.04, 3.0, "<v Ana>"))
    assert not continues(Timed("Le dije que", 1.0, 2.0, "<v Ana>"), Timed("no.", 2.04, 3.0, "<v Bob>"))
    assert not continues(Timed("Le dije que", 1.0, 2.0, ""), Timed("no.", 2.04, 3.0, "<v Bob>"))


def test_a_group_is_capped_in_cues_and_characters():
    timed = [Timed(w, i, i + 0.96) for i, w in enumerate(["uno", "dos", "tres", "cuatro", "cinco."])]
    assert [e.cues for e in group(timed, 2000, vtt=False)] == [range(0, 3), range(3, 5)]
    assert [e.cues for e in group(timed, 20, vtt=False)] == [range(i, i + 1) for i in range(5)]


def test_a_sentence_across_two_cues_is_one_entry_written_back_over_both():
    document = files.read("a.srt", SPLIT.encode(), LIMITS)
    assert len(document.texts) == 2 and document.html
    assert document.texts[0] == f"Le dije que nos{MARKER.format(1)} veríamos al mediodía."
    assert document.cue_texts == ["Le dije que nos", "veríamos al mediodía.", "Adiós."]
    out = document.write([translated(document.texts[0], {"Le dije que nos": "I told him that we",
                                                         "veríamos al mediodía.": "would meet at noon."}), "Bye."],
                         "en").decode()
    assert blocks(out) == [["1", "00:00:01,000 --> 00:00:02,500", "I told him", "that we"],
                           ["2", "00:00:02,540 --> 00:00:04,000", "would meet at noon."],
                           ["3", "00:00:05,000 --> 00:00:06,000", "Bye."]]
    assert document.proportional == 0


@pytest.mark.parametrize("translation", [
    "I told him that we would meet at noon.",                           # no marker
    f"I told him that we would meet at noon.{MARKER.format(1)}",        # the second cue left empty
    f"{MARKER.format(1)} I told him that we would meet at noon.",       # the first
    f"I told him{MARKER.format(1)} that we{MARKER.format(1)} would meet at noon.",     # twice
])
def test_without_a_marker_in_its_place_the_translation_is_cut_by_proportion(translation):
    document = files.read("a.srt", SPLIT.encode(), LIMITS)
    out = blocks(document.write([translation, "Bye."], "en").decode())
    # "Le dije que nos" is 15 of the 36 characters: the word boundary nearest 15/36 of the translation
    assert out[0] == ["1", "00:00:01,000 --> 00:00:02,500", "I told", "him that"]
    assert out[1] == ["2", "00:00:02,540 --> 00:00:04,000", "we would meet at noon."]
    assert document.proportional == 1


def test_markers_out_of_order_are_cut_by_proportion():
    entry = cues.encode([Timed("uno", 0, 1), Timed("dos", 1, 2), Timed("tres.", 2, 3)], range(3), vtt=False)
    texts, by_markers = cues.spread(entry, f"one {MARKER.format(2)}two {MARKER.format(1)}three.")
    assert texts == ["one", "two", "three."] and not by_markers


def test_the_cut_by_proportion_leaves_no_part_empty_while_there_are_words():
    assert proportional("a b c d", [1, 100]) == ["a", "b c d"]
    assert proportional("a b c d", [100, 1, 1]) == ["a b", "c", "d"]
    assert proportional("Yes.", [5, 5]) == ["Yes.", ""]                 # fewer words than cues


def test_a_cues_markup_and_its_characters_come_back():
    source = ('1\n00:00:01,000 --> 00:00:02,000\n<i>Le dije que nos</i>\n\n'
              '2\n00:00:02,040 --> 00:00:03,000\n<font color="#ffff00">veríamos</font> al mediodía.</b>\n\n'
              '3\n00:00:04,000 --> 00:00:05,000\n{\\an8}Tom & Jerry <3.\n')
    document = files.read("a.srt", source.encode(), LIMITS)
    assert len(document.texts) == 2 and "<font" not in document.texts[0] and "&lt;3" not in document.texts[1]
    first = translated(document.texts[0], {"Le dije que nos": "I told him that we", "veríamos": "would meet",
                                           "al mediodía.": "at noon."})
    # as the documents mode writes text: `&` and `<` escaped
    second = translated(document.texts[1], {"Tom & Jerry <3.": "Tom &amp; Jerry &lt;3 forever."})
    out = blocks(document.write([first, second], "en").decode())
    assert out[0][2:] == ["<i>I told him that we</i>"]
    assert out[1][2:] == ['<font color="#ffff00">would meet</font> at noon.</b>']
    assert out[2][2:] == ["{\\an8}Tom & Jerry <3 forever."]


def test_webvtt_joins_one_voices_cues_and_keeps_its_markup_escaped():
    source = ("WEBVTT\n\n00:01.000 --> 00:02.000\n<v Ana>Tom &amp; <c.yellow>Jerry</c> y yo\n\n"
              "00:02.040 --> 00:03.000\n<v Ana>somos amigos\n\n00:03.040 --> 00:04.000\n<v Bob>desde siempre.\n")
    document = files.read("a.vtt", source.encode(), LIMITS)
    assert len(document.texts) == 2 and document.texts[1] == "desde siempre."
    first = translated(document.texts[0], {"Tom &amp; ": "Tom &amp; ", "Jerry": "Jerry", " y yo": " and I",
                                           "somos amigos": "are friends"})
    out = document.write([first, "forever."], "en").decode()
    assert "\n<v Ana>Tom &amp; <c.yellow>Jerry</c> and I\n" in out and "\n<v Ana>are friends\n" in out
    assert "00:00:03.040 --> 00:00:04.000\n<v Bob>forever.\n" in out


def test_the_bundled_model_translates_the_sentence_whole_and_spreads_it():
    from attnmt.service.inference.engine import Engine, EngineOptions
    from attnmt.service.inference.search import SearchOptions
    from attnmt.service.text.documents import translate_documents
    from attnmt.service.text.translator import Translator
    translator = Translator(Engine(REPO / "models" / "transformer-es-en", EngineOptions(intra_op_threads=1)))
    source = SPLIT.replace("veríamos al mediodía.", "<i>veríamos</i> al mediodía & luego.")
    document = files.read("a.srt", source.encode(), LIMITS)
    done = translate_documents(translator, document.texts, html=True, split=True, options=SearchOptions(beam_size=1))
    out = blocks(document.write([d.text for d in done], "en").decode())
    assert [b[:2] for b in out] == [b[:2] for b in blocks(source)]
    assert [len(b) for b in out] == [len(b) for b in blocks(source)] and all(len(b) > 2 for b in out)
    joined = " ".join(out[0][2:] + out[1][2:])         # the <i> where the alignment puts "veríamos"
    assert joined.count("<i>") == joined.count("</i>") == 1 and "&amp;" not in joined
    whole = translator.translate(["Le dije que nos veríamos al mediodía & luego."], SearchOptions(beam_size=1))
    assert re.sub(r"</?i>", "", joined).split() == whole[0].best.text.split()


ELLIPSES = """1
00:00:01,000 --> 00:00:02,500
<i>Le dije que...</i>

2
00:00:02,540 --> 00:00:04,000
<i>...nos veríamos al mediodía.</i>
"""


def test_the_continuation_mark_joins_the_cues_and_comes_back_at_the_cut():
    """An ellipsis at both ends of a cut: one sentence for the model, without them; the
    translation gets them back where the marker cuts it, inside the cues' tags."""
    document = files.read("a.srt", ELLIPSES.encode(), LIMITS)
    (text,) = document.texts
    assert "..." not in text and MARKER.format(1) in text
    words = {"Le dije que": "I told him", "nos veríamos al mediodía.": "we would meet at noon."}
    out = blocks(document.write([translated(text, words)], "en").decode())
    assert [b[2:] for b in out] == [["<i>I told him...</i>"], ["<i>...we would meet at noon.</i>"]]
    # cut by proportion (no marker written): the marks still come back at the cut
    out = blocks(document.write(["I told him we would meet at noon."], "en").decode())
    assert [b[2:] for b in out] == [["<i>I told him...</i>"], ["<i>...we would meet at noon.</i>"]]
    assert document.proportional == 1


def test_a_cue_wrapped_whole_keeps_its_wrapper_around_its_own_part():
    """Two italic cues joined: each part of the translation comes back in its cue's italics,
    wherever the model's alignment would have put the second start tag."""
    srt = SPLIT.replace("Le dije\nque nos", "<i>Le dije\nque nos</i>").replace(
        "veríamos al mediodía.", "<font color=\"#ff0\">veríamos al mediodía.</font>")
    document = files.read("a.srt", srt.encode(), LIMITS)
    text = document.texts[0]
    assert "<" not in text.replace(MARKER.format(1), "")          # the wrappers are not the model's
    out = blocks(document.write([f"we would{MARKER.format(1)} I told him that meet at noon.", "Bye."],
                                "en").decode())
    assert out[0][2:] == ["<i>we", "would</i>"]                   # its two lines, as sent
    assert out[1][2:] == ['<font color="#ff0">I told him that meet at noon.</font>']
    assert cues._wrapper("<i>a</i> b <i>c</i>") is None and cues._wrapper("a <i>b</i>") is None
    assert cues._wrapper(" <b>dos</b> ") == ("<b>", "dos", "</b>")


@pytest.mark.parametrize("srt, line", [
    ("1\n00:00:01,000 --> 00:00:02,000 --> x\nHola.\n", 2),
    ("00:00:01,000 --> 00:00:02,000 --> 00:00:03,000\nHola.\n", 1),                    # no number line
    (SPLIT.replace("00:00:05,000 --> 00:00:06,000", "00:00:05,000 --> 00:00:06,000 -->"), 11),
])
def test_a_timing_line_with_a_second_arrow_is_refused_naming_its_line(srt, line):
    with pytest.raises(InvalidInput, match=re.escape(f"not SubRip (.srt): line {line}, a cue's timing, holds more")):
        files.read("a.srt", srt.encode(), LIMITS)


def test_webvtt_reads_what_follows_a_cues_end_as_its_settings():
    """WebVTT's parser takes all after the end time for settings and skips those it cannot read
    (no colon): the cue is read, its timing line written back as read."""
    vtt = "WEBVTT\n\n00:01.000 --> 00:02.000 --> x\nHola.\n"
    document = files.read("a.vtt", vtt.encode(), LIMITS)
    assert document.texts == ["Hola."]
    assert document.write(["Hello."], "en").decode() == "WEBVTT\n\n00:00:01.000 --> 00:00:02.000 --> x\nHello.\n"


def test_a_note_holding_a_timing_that_does_not_parse_is_refused_naming_its_line():
    """webvtt-py reads it into the NOTE block and then will not write it back (a ValueError, a 500)."""
    vtt = "WEBVTT\n\n00:01.000 --> 00:02.000\nHola.\n\nNOTE nota\n00:03.000 --> 00:04. x\nAdiós.\n"
    with pytest.raises(InvalidInput, match=re.escape("not WebVTT (.vtt): line 7, in a NOTE block, is a cue's timing")):
        files.read("a.vtt", vtt.encode(), LIMITS)
