"""`attnmt evaluate-alignment` and `attnmt data links` as a user runs them: the bundled
model's links scored on a small gold file (and checked against what the Align RPC
returns), and eflomal's links of a toy corpus."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attnmt.bench.evaluate_alignment import SERVED_DEFAULT, SERVED_MANIFEST, word_map
from attnmt.corpus.word_links import parse_pharaoh, read_gold
from conftest import REPO, RunningServer, synthetic_corpus

BUNDLED = REPO / "models" / "rnnsearch-es-en"
HEADER = "id\tdomain\tsource\ttarget\tlinks\n"
# Aligned by hand for these tests (Sure i-j, Possible-only ipj; source word i, target word j).
GOLD = [
    ("e1", "everyday", "El gobierno anunció nuevas medidas", "The government announced new measures",
     "0-0 1-1 2-2 3-3 4-4"),
    ("b1", "bible", "Y dijo Dios: Sea la luz: y fué la luz.", "God said, “Let there be light,” and there was light.",
     "1-1 2-0 3-2 3p3 3p4 5-5 6-6 7-8 7p7 9-9"),
    ("s1", "software", "No se puede abrir el archivo %s", "Cannot open file %s", "0-0 1p0 2-0 3-1 4p2 5-2 6-3"),
    ("b2", "bible", "Y Noemí dijo á sus nueras:", "Naomi said to her two daughters-in-law,", "1-0 2-1 3-2 4-3 5-5 5p4"),
    ("s2", "software", "Error al leer el fichero de configuración", "Error reading the configuration file",
     "0-0 1p1 2-1 3-2 4-4 5p3 6-3"),
    ("u1", "software", "Guardar como", "Save as", ""),                         # not aligned yet: not scored
]


def write_gold(directory: Path, rows=GOLD) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for split in ("dev", "test"):
        (directory / f"{split}.tsv").write_text(HEADER + "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    return directory


def attnmt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attnmt.service.cli", *args], capture_output=True, text=True,
                          timeout=240)


def sure_links(directory, rows, first_missing: bool = False):
    """`directory`/{dev,test}.links: each row's Sure links (an empty first line: a pair not found)."""
    directory.mkdir()
    for split in ("dev", "test"):
        (directory / f"{split}.links").write_text(("\n" if first_missing else "") + "".join(
            " ".join(x for x in r[4].split() if "p" not in x) + "\n" for r in rows), encoding="utf-8")
    return directory


def test_word_map_follows_the_gold_words():
    assert word_map(["a", "b,", "c"], "a b, c") == [0, 1, 2]
    # a tokeniser that split a word in two: both halves map to it
    assert word_map(["Beth", "-lehem", "de"], "Beth-lehem de") == [0, 0, 1]


def test_evaluate_alignment_scores_every_rule_and_measures_what_the_server_returns(tmp_path):
    gold = write_gold(tmp_path / "gold")
    # an aligner that finds the Sure links of all pairs but the first
    links = sure_links(tmp_path / "links", GOLD[1:], first_missing=True)
    out = tmp_path / "aer.json"
    done = attnmt("evaluate-alignment", "--model", str(BUNDLED), "--gold", str(gold), "--samples", "200",
                  "--links", f"aligner={links}/{{split}}.links", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "Gold test: 5 of 6 pairs aligned by hand" in done.stdout
    report = json.loads(out.read_text())
    rules = report["splits"]["test"]["rules"]
    assert rules["aligner"]["precision"]["value"] == 1.0 and 0 < rules["aligner"]["aer"]["value"] < 0.3
    assert rules["aligner"]["domains"]["software"] == {"value": 0.0, "low": 0.0, "high": 0.0}
    ratio = report["splits"]["test"]["ratios"]["served: argmax per target word (default) / aligner"]
    assert ratio["value"] == pytest.approx(rules["served: argmax per target word (default)"]["aer"]["value"]
                                           / rules["aligner"]["aer"]["value"])
    assert report["best_on_dev"] in rules and report["best_on_dev"] != "aligner"
    for name in ("served: argmax per target word (default)", "served: argmax per target piece, to words",
                 "attention grow-diag-final-and", "shift-att target-argmax", "diagonal (no model)"):
        r = rules[name]
        assert 0 < r["aer"]["value"] < 1 and r["aer"]["low"] <= r["aer"]["value"] <= r["aer"]["high"]
        assert set(r["domains"]) == {"bible", "everyday", "software"}
    threshold = report["thresholds"]["chosen"]["served: α"]
    assert f"served: α >= {threshold:g} (tuned on dev)" in rules
    assert report["forced_decoding"]["pairs"] == 10

    # The served rows are the Align RPC's links.
    from attnmt.bench.evaluate_alignment import model_links
    pairs = [p for p in read_gold(gold / "test.tsv") if p.annotated]
    found, _ = model_links(BUNDLED, pairs, thresholds=(threshold,))
    import grpc

    from attnmt.service.stubs import translator_pb2 as pb
    from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
    with RunningServer([BUNDLED]) as server, grpc.insecure_channel(server.address) as channel:
        stub = pb_grpc.TranslatorStub(channel)
        for pair, links_of in zip(pairs, found):
            answer = stub.Align(pb.AlignRequest(source=pair.source, target=pair.target), timeout=60)
            assert list(answer.source_words) == pair.source.split() + ["</s>"]
            served = links_of.get(SERVED_MANIFEST, links_of[SERVED_DEFAULT])     # the manifest's rule if it names one
            assert parse_pharaoh(answer.hypothesis.alignment.pharaoh)[0] == served
            answer = stub.Align(pb.AlignRequest(source=pair.source, target=pair.target,
                                                alignment_threshold=threshold), timeout=60)
            assert parse_pharaoh(answer.hypothesis.alignment.pharaoh)[0] == links_of[f"served: α >= {threshold:g}"]


def test_write_manifest_records_the_rule_with_the_lowest_dev_aer_and_the_server_applies_it(tiny_model, tmp_path):
    import shutil

    from attnmt.service.inference.engine import Engine
    from attnmt.service.modeldir.links import LINK_RULES
    from attnmt.service.text.translator import Translator
    model = tmp_path / "tiny"
    shutil.copytree(tiny_model, model)
    gold = tmp_path / "gold"
    gold.mkdir()
    rows = []
    for k, (source, target) in enumerate(synthetic_corpus(12, seed=43)):
        n = min(len(source.split()), len(target.split()))
        rows.append(f"p{k}\tsynthetic\t{source}\t{target}\t" + " ".join(f"{i}-{i}" for i in range(n)) + "\n")
    for split in ("dev", "test"):
        (gold / f"{split}.tsv").write_text(HEADER + "".join(rows), encoding="utf-8")
    out = tmp_path / "aer.json"
    done = attnmt("evaluate-alignment", "--model", str(model), "--gold", str(gold), "--samples", "50",
                  "--write-manifest", "--json", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    chosen = json.loads((model / "manifest.json").read_text())["hard_links"]
    assert chosen == report["hard_links"] and chosen["rule"] in LINK_RULES
    dev = report["splits"]["dev"]["rules"]
    assert chosen["dev_aer"] == pytest.approx(dev[chosen["row"]]["aer"]["value"], abs=1e-4)
    servable = [f"attention {r}" for r in LINK_RULES if f"attention {r}" in dev] + [SERVED_DEFAULT]
    assert dev[chosen["row"]]["aer"]["value"] <= min(dev[name]["aer"]["value"] for name in servable)
    assert "The server's hard links" in done.stdout
    translator = Translator(Engine(model))
    assert translator.links_rule == (chosen["rule"], chosen["threshold"])


def test_an_english_to_spanish_model_reads_the_gold_set_and_its_links_files_reversed(tmp_path):
    model = REPO / "models" / "transformer-en-es"
    if not (model / "manifest.json").exists():
        pytest.skip("no bundled en-es model")
    gold = write_gold(tmp_path / "gold", GOLD[:3])                   # Spanish words i, English words j
    (gold / "languages.txt").write_text("es\ten\n", encoding="utf-8")
    # an aligner's links for the gold pairs, es→en as the file: its Sure links
    links = sure_links(tmp_path / "links", GOLD[:3])
    out = tmp_path / "aer.json"
    done = attnmt("evaluate-alignment", "--model", str(model), "--gold", str(gold), "--samples", "50",
                  "--links", f"aligner={links}/{{split}}.links", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "Gold set reversed: es→en gold pairs and links files read en→es." in done.stdout
    report = json.loads(out.read_text())
    assert report["hard_links"]["gold_reversed"] == report["gold_reversed"]
    aligner = report["splits"]["test"]["rules"]["aligner"]
    assert aligner["precision"]["value"] == 1.0 and aligner["recall"]["value"] == 1.0     # the same pairs, same way
    assert report["forced_decoding"]["word_count_mismatches"] == 0


def test_a_gold_set_of_another_language_pair_is_refused(tmp_path):
    from attnmt.bench.evaluate_alignment import evaluate_alignment
    gold = write_gold(tmp_path / "gold")
    (gold / "languages.txt").write_text("fr\ten\n", encoding="utf-8")
    with pytest.raises(ValueError, match="declares the gold set fr→en; the model translates es→en"):
        evaluate_alignment(BUNDLED, gold)


def test_data_links_writes_one_line_per_training_pair(tmp_path):
    pytest.importorskip("eflomal")
    from attnmt.model.data.links import aligner_word
    assert [aligner_word(w) for w in ["¿Dónde", "tierra.", "“Let", "Beth-lehem", "—", "%s", "«%s».", "{name}:"]] == \
        ["dónde", "tierra", "let", "beth-lehem", "—", "%s", "%s", "{name}"]

    data = tmp_path / "toy"
    data.mkdir()
    # 1,200 pairs: eflomal's samplers are seeded from the system, and on 400 one run in a CI's
    # dozens found 73.5 % of the verbs and stops (8 runs here: 1.0 seven times, 0.94 once);
    # on 1,200, eight of eight runs found all of them
    pairs = synthetic_corpus(1200, seed=3)
    (data / "train.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in pairs + pairs[:5]), encoding="utf-8")
    gold = write_gold(tmp_path / "gold", [("g1", "toy", *synthetic_corpus(1, seed=9)[0], "0-1")])
    done = attnmt("data", "links", str(data), "--gold", str(gold), "--gold-out", str(tmp_path / "gold-links"))
    assert done.returncode == 0, done.stderr
    lines = (data / "train.links").read_text().splitlines()
    assert len(lines) == 1205 and lines[1200:] == lines[:5]
    card = json.loads((data / "train.links.json").read_text())
    assert card["aligner"].startswith("eflomal ") and card["settings"]["symmetrisation"] == "grow-diag-final-and"
    assert card["training_pairs"] == len(set(pairs)) and card["gold_pairs_appended"] == 1
    assert len((tmp_path / "gold-links" / "test.links").read_text().splitlines()) == 1

    # The toy language is word for word (adjectives swap with their nouns, English adds "the"):
    # its verbs and final stops are found in nearly every pair.
    from conftest import VERBS
    found = hits = 0
    for (source, target), line in zip(pairs, lines):
        s, t = source.split(), target.split()
        verb = next(k for k, w in enumerate(s) if w in VERBS)
        expected = {(verb, t.index(VERBS[s[verb]])), (len(s) - 1, len(t) - 1)}
        found += len(expected)
        hits += len(expected & parse_pharaoh(line)[0])
    assert hits / found > 0.9
