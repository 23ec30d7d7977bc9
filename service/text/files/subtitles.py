"""Subtitles: SubRip (.srt, read here) and WebVTT (.vtt, through `webvtt-py`, MIT).

Each cue's text is one entry, its lines joined by spaces (a line break in a cue is layout,
not the end of a sentence). Timings, numbering, cue identifiers and settings, and a WebVTT
file's header, NOTE, STYLE and REGION blocks are written back as read; each translation is
re-flowed over as many lines as its cue had, the lines as even in length as the words allow.
SubRip declares no encoding, so its bytes go through the detector (encoding.py); WebVTT is
UTF-8 by its specification. Both are written as UTF-8.

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
from attnmt.service.text.files.base import FileDocument, Limits
from attnmt.service.text.files.encoding import decode

# a word for re-flowing: what lies between spaces, a tag with spaces inside (<font color="x">) included
_WORD = re.compile(r"(?:<[^<>]*>|[^\s<])+|<")
_NUMBER = re.compile(r"^\s*\d+\s*$")
_TIMING = re.compile(r"^\s*\d{1,3}:\d{1,2}:\d{1,2}[,.]\d{1,3}\s*-->\s*\d{1,3}:\d{1,2}:\d{1,2}[,.]\d{1,3}")
# WebVTT's voice span opening a cue (<v Roger>, <v.loud Ann>): a label, not text to translate
_VOICE = re.compile(r"^<v(?:\.[^\s>]*)?(?:\s[^>]*)?>")


def reflow(text: str, lines: int) -> list[str]:
    """`text`'s words over `lines` lines (fewer if it has fewer words), each line's length as
    close as it can be to an even share of the whole."""
    words = _WORD.findall(text)
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


@dataclass
class Cue:
    head: list[str]             # the number line (if any) and the timing line, as read
    lines: list[str]            # the text


class SrtFile(FileDocument):
    def __init__(self, cues: list[Cue], eol: str):
        super().__init__("srt", "application/x-subrip; charset=utf-8", [" ".join(" ".join(c.lines).split())
                                                                          for c in cues])
        self.cues, self.eol = cues, eol

    def write(self, translations, target, placeholders=None) -> bytes:
        blocks = [self.eol.join(cue.head + (reflow(text, len(cue.lines)) if cue.lines else []))
                  for cue, text in zip(self.cues, translations)]
        return (self.eol * 2).join(blocks).encode("utf-8") + self.eol.encode()


class VttFile(FileDocument):
    def __init__(self, vtt: webvtt.WebVTT):
        self.vtt = vtt
        self.voices = []
        texts = []
        for caption in vtt.captions:
            raw = " ".join(caption.raw_text.split())
            voice = _VOICE.match(raw)
            self.voices.append(voice.group(0) if voice else "")
            texts.append(raw[voice.end():].lstrip() if voice else raw)
        super().__init__("vtt", "text/vtt; charset=utf-8", texts)

    def write(self, translations, target, placeholders=None) -> bytes:
        for caption, voice, text in zip(self.vtt.captions, self.voices, translations):
            lines = reflow(text, len(caption.lines) or 1)
            lines[0] = voice + lines[0]
            caption.lines = lines
        return self.vtt.content.encode("utf-8")


def read_srt(data: bytes, limits: Limits) -> SrtFile:
    """Cues separated by blank lines, each a number line (some files leave it out), a timing
    line and its text."""
    text = decode(data)
    lines = text.splitlines()
    cues: list[Cue] = []
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        head = []
        if _NUMBER.match(lines[i]) and i + 1 < len(lines) and _TIMING.match(lines[i + 1]):
            head.append(lines[i])
            i += 1
        if not _TIMING.match(lines[i]):
            raise InvalidInput(f"the file is not SubRip (.srt): line {i + 1} is neither a cue's number nor its "
                               f"timing: {lines[i][:80]!r}")
        head.append(lines[i])
        i += 1
        start = i
        while i < len(lines) and lines[i].strip():
            i += 1
        cues.append(Cue(head, lines[start:i]))
    if not cues:
        raise InvalidInput("the file is not SubRip (.srt): it holds no cue")
    return SrtFile(cues, "\r\n" if "\r\n" in text else "\n")


def read_vtt(data: bytes, limits: Limits) -> VttFile:
    try:
        vtt = webvtt.from_string(decode(data, "utf-8"))
    except (MalformedFileError, MalformedCaptionError) as e:
        raise InvalidInput(f"the file is not WebVTT (.vtt): {e}") from None
    if not vtt.captions:
        raise InvalidInput("the file is not WebVTT (.vtt): it holds no cue")
    return VttFile(vtt)
