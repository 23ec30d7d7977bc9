"""Subtitles: SubRip (.srt, read here) and WebVTT (.vtt, through `webvtt-py`, MIT).

A cue's text is its lines joined by spaces (a line break in a cue is layout, not the end of
a sentence). Consecutive cues that carry one sentence ("Le dije que nos" / "veríamos al
mediodía.") are one entry, translated whole and spread back over the same cues by the
model's alignment (cues.py has the rule and the way back); any other cue is an entry alone.
The entries are HTML, so that the cues' tags are placed like any markup; every cue comes
back with its own tags. Timings, numbering, cue identifiers and settings, and a WebVTT
file's header, NOTE, STYLE and REGION blocks are written back as read, one cue out per cue
in; each cue's translation is re-flowed over as many lines as it had, the lines as even in
length as the words allow. SubRip declares no encoding, so its bytes go through the
detector (encoding.py); WebVTT is UTF-8 by its specification. Both are written as UTF-8.

SubRip is read here, in a few lines, with each cue's number and timing lines kept byte for
byte: `srt` (MIT) ships no wheel, and the serving image installs wheels only (`make lock`);
webvtt-py's SubRip reader renumbers the cues and drops their markup.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import webvtt
from webvtt.errors import MalformedCaptionError, MalformedFileError

from attnmt.service.errors import InvalidInput
from attnmt.service.text.files import cues
from attnmt.service.text.files.base import Check, FileDocument, Limits, go_on
from attnmt.service.text.files.cues import WORD
from attnmt.service.text.files.encoding import decode

_NUMBER = re.compile(r"^\s*\d+\s*$")
# a timing line: its start and end; what follows them (coordinates: X1:40 X2:600 ...) is kept as read
_TIMING = re.compile(r"^\s*(\d{1,3}:\d{1,2}:\d{1,2}[,.]\d{1,3})\s*-->\s*(\d{1,3}:\d{1,2}:\d{1,2}[,.]\d{1,3})")
_TIME = re.compile(r"(?:(\d+):)?(\d+):(\d+)[,.](\d+)")
# WebVTT's voice span opening a cue (<v Roger>, <v.loud Ann>): a label, not text to translate
_VOICE = re.compile(r"^<v(?:\.[^\s>]*)?(?:\s[^>]*)?>")


def reflow(text: str, lines: int) -> list[str]:
    """`text`'s words over `lines` lines (fewer if it has fewer words), each line's length as
    close as it can be to an even share of the whole."""
    words = WORD.findall(text)
    lines = max(1, min(lines, len(words)))
    if lines == 1:
        return [" ".join(words)]
    out: list[list[str]] = [[]]
    total = sum(len(w) for w in words) + len(words) - 1
    done = 0                                    # characters placed, a space after each word
    for i, word in enumerate(words):
        left = len(words) - i                   # words still to place, this one included
        lines_left = lines - len(out)           # lines still to open after the current one
        share = total * len(out) / lines        # where the current line should end
        if out[-1] and lines_left and (done + len(word) / 2 > share or left <= lines_left):
            out.append([])
        out[-1].append(word)
        done += len(word) + 1
    return [" ".join(line) for line in out]


def seconds(timestamp: str) -> float:
    """`00:01:02,500` (SubRip) or `01:02.500` (WebVTT) in seconds."""
    hours, minutes, whole, fraction = _TIME.search(timestamp).groups()
    return int(hours or 0) * 3600 + int(minutes) * 60 + int(whole) + int(fraction) / 10 ** len(fraction)


class SubtitleFile(FileDocument):
    """Cues read: `cue_texts` (each cue's text as sent, its lines joined by spaces), grouped
    into `texts` (cues.group); `write` puts one translation back in each cue. `proportional`
    counts the joined entries whose translation the last `write` cut by proportion."""

    def __init__(self, kind: str, media_type: str, timed: list[cues.Timed], limits: Limits, check: Check):
        vtt = kind == "vtt"
        self.entries = cues.group(timed, limits.max_entry_chars, vtt, check)
        super().__init__(kind, media_type, [e.markup for e in self.entries], html=True)
        self.cue_texts = [t.text for t in timed]
        self.proportional = 0

    def cue_translations(self, translations: list[str], check: Check = go_on) -> list[str]:
        """One text per cue: each entry's translation spread over its cues."""
        out: list[str] = []
        self.proportional = 0
        for entry, translation in zip(self.entries, translations, strict=True):
            check()
            texts, by_markers = cues.spread(entry, translation)
            self.proportional += not by_markers
            out += texts
        return out


@dataclass
class Cue:
    head: list[str]             # the number line (if any) and the timing line, as read
    lines: list[str]            # the text
    start: float                # seconds, from the timing line
    end: float


class SrtFile(SubtitleFile):
    def __init__(self, cues_read: list[Cue], eol: str, limits: Limits, check: Check):
        self.cues, self.eol = cues_read, eol
        timed = [cues.Timed(" ".join(" ".join(c.lines).split()), c.start, c.end) for c in cues_read]
        super().__init__("srt", "application/x-subrip; charset=utf-8", timed, limits, check)

    def write(self, translations, target, placeholders=None, check=go_on) -> bytes:
        blocks = [self.eol.join(cue.head + (reflow(text, len(cue.lines)) if cue.lines else []))
                  for cue, text in zip(self.cues, self.cue_translations(translations, check))]
        return (self.eol * 2).join(blocks).encode("utf-8") + self.eol.encode()


class VttFile(SubtitleFile):
    def __init__(self, vtt: webvtt.WebVTT, limits: Limits, check: Check):
        self.vtt = vtt
        self.voices = []
        timed = []
        for caption in vtt.captions:
            check()
            raw = " ".join(caption.raw_text.split())
            voice = _VOICE.match(raw)
            self.voices.append(voice.group(0) if voice else "")
            timed.append(cues.Timed(raw[voice.end():].lstrip() if voice else raw, seconds(caption.start),
                                    seconds(caption.end), self.voices[-1]))
        super().__init__("vtt", "text/vtt; charset=utf-8", timed, limits, check)

    def write(self, translations, target, placeholders=None, check=go_on) -> bytes:
        for caption, voice, text in zip(self.vtt.captions, self.voices, self.cue_translations(translations, check)):
            check()
            lines = reflow(text, len(caption.lines) or 1)
            lines[0] = voice + lines[0]
            caption.lines = lines
        return self.vtt.content.encode("utf-8")


def read_srt(data: bytes, limits: Limits, check: Check = go_on) -> SrtFile:
    """Cues separated by blank lines, each a number line (some files leave it out), a timing
    line and its text. `check` is called at each cue."""
    text = decode(data)
    lines = text.splitlines()
    found: list[Cue] = []
    i = 0
    while i < len(lines):
        check()
        if not lines[i].strip():
            i += 1
            continue
        head = []
        if _NUMBER.match(lines[i]) and i + 1 < len(lines) and _TIMING.match(lines[i + 1]):
            head.append(lines[i])
            i += 1
        timing = _TIMING.match(lines[i])
        if not timing:
            raise InvalidInput(f"the file is not SubRip (.srt): line {i + 1} is neither a cue's number nor its "
                               f"timing: {lines[i][:80]!r}")
        if "-->" in lines[i][timing.end():]:
            # a second arrow leaves in doubt where the cue ends (a typo, two lines run together)
            raise InvalidInput(f"the file is not SubRip (.srt): line {i + 1}, a cue's timing, holds more than "
                               f"one '-->': {lines[i][:80]!r}")
        head.append(lines[i])
        i += 1
        start = i
        while i < len(lines) and lines[i].strip():
            i += 1
        found.append(Cue(head, lines[start:i], *map(seconds, timing.groups())))
    if not found:
        raise InvalidInput("the file is not SubRip (.srt): it holds no cue")
    return SrtFile(found, "\r\n" if "\r\n" in text else "\n", limits, check)


def read_vtt(data: bytes, limits: Limits, check: Check = go_on) -> VttFile:
    """`check` is called at each cue (webvtt-py's parse takes none)."""
    text = decode(data, "utf-8")
    try:
        vtt = webvtt.from_string(text)
    except (MalformedFileError, MalformedCaptionError) as e:
        raise InvalidInput(f"the file is not WebVTT (.vtt): {e}") from None
    if not vtt.captions:
        raise InvalidInput("the file is not WebVTT (.vtt): it holds no cue")
    # what webvtt-py reads but will not write (its writer's ValueError) is refused now, not after translating
    try:
        _ = vtt.content
    except ValueError as e:
        raise InvalidInput(f"the file is not WebVTT (.vtt): {_unwritable(text) or e}") from None
    return VttFile(vtt, limits, check)


def _unwritable(text: str) -> str | None:
    """The line webvtt-py reads into a NOTE block and will not write back: a timing (`-->`) past
    the block's first line, which WebVTT's parser reads as a cue's timing that does not parse."""
    note: bool | None = False           # in a NOTE block; None: between blocks (the header is none)
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            note = None
        elif note is None:
            note = line.startswith("NOTE")
        elif note and "-->" in line:
            return f"line {i + 1}, in a NOTE block, is a cue's timing that does not parse: {line[:80]!r}"
    return None
