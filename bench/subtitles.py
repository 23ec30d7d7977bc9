"""`attnmt bench subtitles`: a SubRip file translated whole, as the server translates a file,
held against translating each of its cues alone.

The file is built from a parallel split: each cue one source sentence, timed as a subtitler
would time it (on screen for its length at a reading speed, within bounds, a pause between
sentences), a cue over one line's width on two lines; and about one sentence in five split
across two cues at the word boundary nearest its middle, as subtitles carry a long sentence
(the two cues follow each other with no pause). It goes through what `attnmt translate --file`
runs offline, the server's reader, documents mode and writer (bench/catalog.py
`translate_file`); each cue's text goes alone through `Translator.translate`, same model, same
beam. Both are scored against the references with sacreBLEU, sentence by sentence: a sentence
split over two cues is the two cues' translations joined, against its whole reference. For
scale, the sentences translated whole (what splitting them over cues costs either way).

The target: every timing line as sent, one cue out per cue in, and the file's chrF at most 1
below the cues' alone. The report also says how the reader joined cues into sentences (entries
of several cues, how many of them are exactly a split sentence, how many the writer had to cut
by proportion rather than at the marker the alignment placed: service/text/files/cues.py).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path

from attnmt.bench.catalog import bleu_chrf, translate_file
from attnmt.bench.loadtest import spread
from attnmt.service.inference.search import SearchOptions
from attnmt.service.server.settings import Settings
from attnmt.service.text import files
from attnmt.service.text.files.subtitles import reflow

CUES = 200
SPLIT_SHARE = 0.2           # sentences split across two cues
MIN_SPLIT_WORDS = 5         # a sentence of fewer words is never split
LINE = 42                   # characters on a subtitle line (the usual broadcast guideline: 37 to 42)
READING = 15.0              # characters a second a viewer reads
SHOWN = (1.0, 7.0)          # seconds a cue stays on screen, at least and at most
PAUSE = (0.3, 2.0)          # seconds between two sentences' cues, drawn
TARGET_CHRF_GAP = 1.0       # the file's chrF at most this far below the cues' alone


@dataclass
class Sentence:
    source: str
    reference: str
    cues: list[str]             # its text on screen: the whole sentence, or its two halves


def halves(sentence: str) -> list[str]:
    """The sentence cut at the space nearest its middle; [sentence] when it has too few words."""
    words = sentence.split()
    if len(words) < MIN_SPLIT_WORDS:
        return [sentence]
    cut = min(range(1, len(words)), key=lambda i: abs(len(" ".join(words[:i])) - len(sentence) / 2))
    return [" ".join(words[:cut]), " ".join(words[cut:])]


def sentences_for(pairs: list[tuple[str, str]], cues: int = CUES, share: float = SPLIT_SHARE) -> list[Sentence]:
    """Sentences evenly spread over `pairs`, `share` of them split (the longest, as a subtitler
    splits those that fill the screen), `cues` cues in all (fewer when too few sentences have
    MIN_SPLIT_WORDS words)."""
    pairs = [(s, t) for s, t in pairs if s.strip() and t.strip()]
    split = round(cues * share / (1 + share))           # sentences + split = cues, split = share * sentences
    chosen = spread(pairs, cues - split)
    splittable = [i for i, (s, _) in enumerate(chosen) if len(halves(s)) == 2]
    cut = set(sorted(splittable, key=lambda i: -len(chosen[i][0]))[:split])
    return [Sentence(s, t, halves(s) if i in cut else [s]) for i, (s, t) in enumerate(chosen)]


def timestamp(seconds: float) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


def srt(sentences: list[Sentence], seed: int = 0) -> str:
    """The SubRip file: cues numbered from 1, timed (see the module), a cue over LINE characters
    on two lines as even as its words allow."""
    rng = random.Random(seed)
    blocks, at = [], 1.0
    for sentence in sentences:
        for k, text in enumerate(sentence.cues):
            shown = min(max(len(text) / READING, SHOWN[0]), SHOWN[1])
            lines = reflow(text, 2 if len(text) > LINE else 1)
            blocks.append("\n".join([str(len(blocks) + 1), f"{timestamp(at)} --> {timestamp(at + shown)}", *lines]))
            at += shown + (0.04 if k + 1 < len(sentence.cues) else rng.uniform(*PAUSE))
    return "\n\n".join(blocks) + "\n"


def joined(sentences: list[Sentence], document) -> dict:
    """How the reader joined the sent file's cues (`document`: the file read): entries of several
    cues, the cues in them, the split sentences whose two cues are exactly one entry, and the
    joined entries the writer cut by proportion (`proportional`, after its `write`)."""
    spans = {(e.cues.start, e.cues.stop) for e in document.entries if len(e.cues) > 1}
    split, at = [], 0
    for sentence in sentences:
        if len(sentence.cues) == 2:
            split.append((at, at + 2))
        at += len(sentence.cues)
    return {"entries": len(spans), "cues": sum(b - a for a, b in spans),
            "split_sentences_joined": len(spans & set(split)), "cut_by_proportion": document.proportional}


def compare(sentences: list[Sentence], sent: bytes, written: bytes, alone: list[str], whole: list[str],
            examples: int = 8) -> dict:
    """The written file against the cues translated alone (`alone`, one per cue in order) and the
    sentences translated whole (`whole`), scored sentence by sentence on the references."""
    limits = Settings().file_limits(max(len(sent), len(written)))
    before, after = files.read("in.srt", sent, limits), files.read("out.srt", written, limits)
    timings = sum(a.head == b.head for a, b in zip(before.cues, after.cues))
    file_cues, units, at = after.cue_texts, [], 0
    for sentence in sentences:
        n = len(sentence.cues)
        units.append((" ".join(file_cues[at:at + n]), " ".join(alone[at:at + n])))
        at += n
    refs = [s.reference for s in sentences]
    report = {
        "cues": {"in": len(before.cues), "out": len(after.cues), "equal": len(before.cues) == len(after.cues)},
        "timings_identical": timings,
        "sentences": len(sentences), "split_across_two_cues": sum(len(s.cues) == 2 for s in sentences),
        "file": bleu_chrf([u[0] for u in units], refs),
        "cues_alone": bleu_chrf([u[1] for u in units], refs),
        "sentences_whole": bleu_chrf(whole, refs),
    }
    report["difference"] = {m: round(report["file"][m] - report["cues_alone"][m], 2) for m in ("bleu", "chrf")}
    differing = [i for i in range(min(len(file_cues), len(alone))) if file_cues[i].split() != alone[i].split()]
    report["differing_cues"] = len(differing)
    report["examples"] = [{"cue": i + 1, "source": before.cue_texts[i], "file": file_cues[i], "alone": alone[i]}
                          for i in differing[:examples]]
    parts = {"timings_identical": timings == len(before.cues), "one_cue_out_per_cue_in": report["cues"]["equal"],
             f"chrf_at_most_{TARGET_CHRF_GAP:g}_below": report["difference"]["chrf"] >= -TARGET_CHRF_GAP}
    report["targets"] = {**parts, "met": all(parts.values())}
    return report


def bench_subtitles(model: Path, data: Path, split: str, cues: int = CUES, share: float = SPLIT_SHARE,
                    beam: int = 5, seed: int = 0, examples: int = 8, out: Path | None = None) -> dict:
    from attnmt.corpus.splits import read_split
    from attnmt.service.inference.engine import Engine
    from attnmt.service.text.documents import translate_documents
    from attnmt.service.text.translator import Translator
    translator = Translator(Engine(model), max_tokens=10_000)      # as `attnmt translate` builds it
    m = translator.engine.manifest
    sentences = sentences_for(read_split(data, split, m.source_language, m.target_language), cues, share)
    sent = srt(sentences, seed).encode("utf-8")
    options = SearchOptions(beam_size=beam).validate()
    pattern = translator.sentinels.pattern if translator.sentinels is not None else None

    def documents(texts: list[str], html: bool) -> list[str]:
        return [d.text for d in translate_documents(translator, texts, html, True, options)]
    written, document, _ = translate_file("subtitles.srt", sent, documents, m.target_language, pattern)
    alone = [t.best.text for t in translator.translate([c for s in sentences for c in s.cues], options)]
    whole = [t.best.text for t in translator.translate([s.source for s in sentences], options)]
    report = {"model": m.name, "direction": f"{m.source_language}→{m.target_language}", "data": str(data),
              "split": split, "beam": beam, "seed": seed,
              **compare(sentences, sent, written, alone, whole, examples), "joined": joined(sentences, document)}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "subtitles.srt").write_bytes(sent)
        (out / f"subtitles_{m.target_language}.srt").write_bytes(written)
    return report


def format_subtitles(report: dict) -> str:
    f, a, w, t = report["file"], report["cues_alone"], report["sentences_whole"], report["targets"]
    c, j = report["cues"], report["joined"]
    mark = lambda met: "yes" if met else "NO"       # noqa: E731
    return "\n".join([
        f"{report['data']} ({report['split']}): model {report['model']} ({report['direction']}), beam {report['beam']}",
        f"{report['sentences']} sentences, {report['split_across_two_cues']} of them across two cues; cues in "
        f"{c['in']}, out {c['out']}; timings as sent {report['timings_identical']}; cues translated differently "
        f"{report['differing_cues']}",
        f"joined: {j['entries']} entries of {j['cues']} cues, {j['split_sentences_joined']} of them a split sentence "
        f"exactly; cut by proportion {j['cut_by_proportion']}", "",
        "| | file | cues alone | difference | sentences whole |", "|---|---:|---:|---:|---:|",
        f"| BLEU | {f['bleu']} | {a['bleu']} | {report['difference']['bleu']:+} | {w['bleu']} |",
        f"| chrF | {f['chrf']} | {a['chrf']} | {report['difference']['chrf']:+} | {w['chrf']} |", "",
        "| target | met |", "|---|---|",
        f"| every timing as sent | {mark(t['timings_identical'])} |",
        f"| one cue out per cue in | {mark(t['one_cue_out_per_cue_in'])} |",
        f"| chrF at most {TARGET_CHRF_GAP:g} below the cues' alone | "
        f"{mark(t[f'chrf_at_most_{TARGET_CHRF_GAP:g}_below'])} |"])


def default_data() -> tuple[Path, str]:
    """Game dialogue's test split where there is one, else Tatoeba's dev split (`make data`
    builds both; data/dialogue has no held-out split of its own so far)."""
    data = Path(__file__).resolve().parent.parent / "data"
    if any((data / "dialogue").glob("test.*")):
        return data / "dialogue", "test"
    return data / "tatoeba", "dev"


def cmd_bench_subtitles(args: argparse.Namespace) -> int:
    from attnmt.service.errors import AttnmtError
    data, split = default_data() if args.data is None else (args.data, "test")
    try:
        report = bench_subtitles(args.model, data, args.split or split, args.cues, args.split_share, args.beam,
                                 args.seed, args.examples, args.out)
    except (OSError, ValueError, AttnmtError) as e:       # no such split, a model directory that is not one
        print(f"attnmt bench subtitles: {e}", file=sys.stderr)
        return 2
    print(format_subtitles(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return 0
