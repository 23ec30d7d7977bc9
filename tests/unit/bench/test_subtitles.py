"""`attnmt bench subtitles`: the SubRip file built from a split (one sentence a cue, the longest
across two cues, timed as subtitles are), the report on a file written back, and the whole
bench on the tiny model."""

from __future__ import annotations

import json
import re

from attnmt.bench.subtitles import Sentence, compare, halves, sentences_for, srt
from attnmt.service.cli import main
from attnmt.service.text import files
from conftest import synthetic_corpus, write_corpus

TIMING = re.compile(r"^(\d\d):(\d\d):(\d\d),(\d{3}) --> (\d\d):(\d\d):(\d\d),(\d{3})$")


def seconds(timing: str) -> tuple[float, float]:
    h, m, s, ms, h2, m2, s2, ms2 = map(int, TIMING.match(timing).groups())
    return h * 3600 + m * 60 + s + ms / 1000, h2 * 3600 + m2 * 60 + s2 + ms2 / 1000


def test_a_sentence_is_cut_at_the_space_nearest_its_middle():
    assert halves("Tom quería que Mary fuera más amable con John.") == ["Tom quería que Mary fuera",
                                                                        "más amable con John."]
    assert halves("Me gusta el té.") == ["Me gusta el té."]             # too few words to split


def test_the_longest_sentences_are_split_to_make_the_cues():
    pairs = synthetic_corpus(40, seed=3)
    sentences = sentences_for(pairs, cues=24, share=0.2)
    assert sum(len(s.cues) for s in sentences) == 24 and len(sentences) == 20
    split = [s for s in sentences if len(s.cues) == 2]
    assert len(split) == 4 and all(" ".join(s.cues) == s.source for s in split)
    assert min(len(s.source) for s in split) >= max(len(s.source) for s in sentences if len(s.cues) == 1
                                                    and len(s.source.split()) >= 5)
    assert all(s.reference == dict(pairs)[s.source] for s in sentences)


def test_the_file_is_subrip_timed_as_subtitles_are():
    sentences = [Sentence("Hola.", "Hi.", ["Hola."]),
                 Sentence("Yo le pregunté a mi profesora que debía hacer a continuación.", "I asked my teacher "
                          "what to do next.", ["Yo le pregunté a mi profesora", "que debía hacer a continuación."]),
                 Sentence("Tom ha estado ignorando a Mary durante todo el día de ayer.", "Tom ignored Mary.",
                          ["Tom ha estado ignorando a Mary durante todo el día de ayer."])]
    text = srt(sentences)
    document = files.read("a.srt", text.encode(), files.Limits(2**20, 50_000, 100))
    assert document.cue_texts == ["Hola.", "Yo le pregunté a mi profesora", "que debía hacer a continuación.",
                              "Tom ha estado ignorando a Mary durante todo el día de ayer."]
    assert [c.head[0] for c in document.cues] == ["1", "2", "3", "4"]
    times = [seconds(c.head[1]) for c in document.cues]
    assert times[0] == (1.0, 2.0)                                    # a second at least on screen
    assert all(start < end for start, end in times)
    assert round(times[2][0] - times[1][1], 3) == 0.04              # a split sentence's cues follow at once
    assert all(0.3 <= b[0] - a[1] <= 2.0 for a, b in (times[0:2], times[2:4]))    # a pause between sentences
    assert [len(c.lines) for c in document.cues] == [1, 1, 1, 2]     # over 42 characters: two lines


def test_the_report_counts_timings_cues_and_the_chrf_of_joined_pairs():
    sentences = [Sentence("kasa vidas peru .", "the house sees the dog .", ["kasa vidas peru ."]),
                 Sentence("gato granda amas luna roja .", "the big cat loves the red moon .",
                          ["gato granda amas", "luna roja ."])]
    sent = srt(sentences).encode()
    perfect = ["the house sees the dog .", "the big cat loves", "the red moon ."]
    written = sent
    for cue, translation in zip(["kasa vidas peru .", "gato granda amas", "luna roja ."], perfect):
        written = written.replace(cue.encode(), translation.encode())
    report = compare(sentences, sent, written, perfect, [s.reference for s in sentences])
    assert report["cues"] == {"in": 3, "out": 3, "equal": True} and report["timings_identical"] == 3
    assert report["file"] == report["cues_alone"] == report["sentences_whole"] == {"bleu": 100.0, "chrf": 100.0}
    assert report["differing_cues"] == 0 and report["targets"]["met"] is True
    # a timing moved, the last cue lost, one cue worse than alone
    blocks = written.decode().split("\n\n")
    blocks[0] = blocks[0].replace("00:00:01,000", "00:00:01,001").replace("the house", "a house")
    report = compare(sentences, sent, "\n\n".join(blocks[:2]).encode() + b"\n", perfect, perfect[:1] + perfect[2:])
    assert report["cues"] == {"in": 3, "out": 2, "equal": False} and report["timings_identical"] == 1
    assert report["difference"]["chrf"] < -1 and report["differing_cues"] == 1
    assert report["examples"][0] == {"cue": 1, "source": "kasa vidas peru .", "file": "a house sees the dog .",
                                     "alone": "the house sees the dog ."}
    assert report["targets"] == {"timings_identical": False, "one_cue_out_per_cue_in": False,
                                 "chrf_at_most_1_below": False, "met": False}


def test_bench_subtitles_on_the_tiny_model(tiny_model, tmp_path, capsys):
    data = write_corpus(tmp_path / "data", {"test": 30})
    out = tmp_path / "report.json"
    assert main(["bench", "subtitles", "--model", str(tiny_model), "--data", str(data), "--cues", "12", "--beam",
                 "2", "--json", str(out), "--out", str(tmp_path / "files")]) == 0
    report, table = json.loads(out.read_text()), capsys.readouterr().out
    assert (report["direction"], report["split"], report["beam"]) == ("xx→en", "test", 2)
    assert report["cues"] == {"in": 12, "out": 12, "equal": True} and report["timings_identical"] == 12
    assert (report["sentences"], report["split_across_two_cues"]) == (10, 2)
    # the two split sentences' cues are joined, and nothing else: the file is the sentences translated whole
    assert report["joined"]["entries"] == report["joined"]["split_sentences_joined"] == 2
    assert report["joined"]["cues"] == 4 and report["file"] == report["sentences_whole"]
    assert report["targets"]["met"] is True and "| chrF |" in table and "joined: 2 entries of 4 cues" in table
    written = (tmp_path / "files" / "subtitles_en.srt").read_text()
    sent = (tmp_path / "files" / "subtitles.srt").read_text()
    assert [b.splitlines()[:2] for b in written.split("\n\n")] == [b.splitlines()[:2] for b in sent.split("\n\n")]


def test_bench_subtitles_refuses_a_directory_without_the_split(tiny_model, tmp_path, capsys):
    assert main(["bench", "subtitles", "--model", str(tiny_model), "--data", str(tmp_path)]) == 2
    assert "no test data" in capsys.readouterr().err
