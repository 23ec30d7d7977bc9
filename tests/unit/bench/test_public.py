"""`attnmt evaluate-public` on a made-up folder of test sets and the tiny models: test sets found by
file name, downloaded once from an address, scored with sacreBLEU's paired bootstrap, published
figures beside; and the committed public test sets against their checksums."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from attnmt.bench import public
from attnmt.bench.public import download, find_testsets, published, score_systems
from attnmt.service.cli import main
from conftest import REPO, synthetic_corpus

PUBLIC = REPO / "tests" / "data" / "public"


def write_testset(folder, name, pairs, source="spa", target="eng"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.{source}").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (folder / f"{name}.{target}").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")


def as_spanish(model_dir, tmp_path, suffix="es"):
    """A copy of a tiny xx→en model whose manifest says es→en, so it takes the spa→eng test sets."""
    copy = tmp_path / f"{model_dir.name}-{suffix}"
    shutil.copytree(model_dir, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**manifest, "source_language": "es"}, indent=2))
    return copy


def test_the_committed_test_sets_match_their_checksums_and_readme():
    lines = (PUBLIC / "SHA256SUMS").read_text().splitlines()
    sums = {name: digest for digest, name in (line.split() for line in lines)}
    assert set(sums) == {f"{n}.{s}" for n in ("flores200-devtest", "tatoeba-test-v2021-08-07") for s in ("spa", "eng")}
    readme = (PUBLIC / "README.md").read_text()
    for name, digest in sums.items():
        assert hashlib.sha256((PUBLIC / name).read_bytes()).hexdigest() == digest, name
        assert digest in readme
    for name, lines in (("flores200-devtest", 1012), ("tatoeba-test-v2021-08-07", 16583)):
        assert all(len((PUBLIC / f"{name}.{s}").read_text(encoding="utf-8").splitlines()) == lines
                   for s in ("spa", "eng"))
    assert "CC-BY-SA 4.0" in readme and "Tatoeba (tatoeba.org)" in readme and "ac0f19c0b" in readme


def test_published_figures_name_their_source_and_file():
    data = json.loads(public.PUBLISHED.read_text())
    for entry in data["scores"]:
        assert entry["source"] in data["sources"] and entry["file"] and entry["direction"] in ("spa-eng", "eng-spa")
        assert entry["bleu"] is not None or entry["chrf"] is not None
    flores = {p["system"]: (p["bleu"], p["chrf"]) for p in published("spa-eng", "flores200-devtest")}
    assert flores["OPUS-MT spa-eng opus-2021-02-19"] == (27.6, 58.3)
    assert [p["bleu"] for p in published("eng-spa", "flores200-devtest")] == [26.5]
    assert published("spa-eng", "no-such-set") == []


def test_test_sets_are_found_by_name_headline_first(tmp_path):
    pairs = synthetic_corpus(5)
    write_testset(tmp_path / "a", "zzz-other", pairs)
    write_testset(tmp_path / "a", "tatoeba-test-v2021-08-07", pairs)
    write_testset(tmp_path / "a", "flores200-devtest", pairs)
    (tmp_path / "a" / "lonely.spa").write_text("sin pareja\n")          # no .eng: not a test set
    write_testset(tmp_path / "b", "newstest2013", pairs)
    write_testset(tmp_path / "b", "flores200-devtest", pairs[:3])          # differs: the first kept, a note
    found, notes = find_testsets([str(tmp_path / "a"), str(tmp_path / "b")])
    assert [t.name for t in found] == ["flores200-devtest", "newstest2013", "tatoeba-test-v2021-08-07", "zzz-other"]
    assert found[0].source == tmp_path / "a" / "flores200-devtest.spa"
    assert found[0].sha256["flores200-devtest.eng"] == hashlib.sha256(found[0].reference.read_bytes()).hexdigest()
    assert len(notes) == 1 and "flores200-devtest" in notes[0] and "differ" in notes[0]
    only, notes = find_testsets([str(tmp_path / "a")], names=["zzz-other", "newstest2013"])
    assert [t.name for t in only] == ["zzz-other"] and notes == [f"newstest2013: not found in {tmp_path / 'a'}"]
    backwards, _ = find_testsets([str(tmp_path / "b")], direction="eng-spa")
    assert [(t.source.name, t.reference.name) for t in backwards] == [
        ("flores200-devtest.eng", "flores200-devtest.spa"), ("newstest2013.eng", "newstest2013.spa")]
    with pytest.raises(FileNotFoundError, match="no folder of test sets"):
        find_testsets([str(tmp_path / "missing")])


def test_a_test_set_address_is_downloaded_once(tmp_path):
    write_testset(tmp_path / "upstream", "newstest2013", synthetic_corpus(4))
    said = []
    folder = download((tmp_path / "upstream" / "newstest2013.spa").as_uri(), tmp_path / "cache", said.append)
    assert sorted(p.name for p in folder.iterdir()) == ["newstest2013.eng", "newstest2013.spa"]
    digest = hashlib.sha256((tmp_path / "upstream" / "newstest2013.eng").read_bytes()).hexdigest()
    assert any(digest in line for line in said) and len(said) == 2
    shutil.rmtree(tmp_path / "upstream")                     # the cache answers now
    found, _ = find_testsets([(tmp_path / "upstream" / "newstest2013").as_uri()], cache=tmp_path / "cache",
                             log=said.append)
    assert [t.name for t in found] == ["newstest2013"] and found[0].source.parent == folder


def test_paired_bootstrap_against_the_first_system_is_seeded():
    refs = ["the cat sat on the mat .", "a dog ran in the park .", "we eat bread and cheese ."] * 10
    worse = ["the cat sat .", "a dog ran .", "we eat ."] * 10
    scores, signatures = score_systems({"first": refs, "same": list(refs), "worse": worse}, refs, samples=200)
    assert scores["first"]["bleu"] == 100.0 and "paired" not in scores["first"]
    assert scores["same"]["paired"]["bleu"]["difference"] == 0.0
    assert scores["worse"]["paired"]["against"] == "first"
    assert scores["worse"]["paired"]["bleu"]["difference"] < -30 and scores["worse"]["paired"]["chrf"]["p"] < 0.01
    assert scores["worse"]["bleu_bootstrap"]["ci95"] > 0
    assert "bs:200" in signatures["bleu"] and "seed:12345" in signatures["chrf"]
    assert score_systems({"first": refs, "worse": worse}, refs, samples=200)[0]["worse"] == scores["worse"]


def test_evaluate_public_scores_every_model_and_writes_the_report(tiny_model, tmp_path, monkeypatch, capsys):
    folder = tmp_path / "sets"
    write_testset(folder, "flores200-devtest", synthetic_corpus(12, seed=3))
    write_testset(folder, "toy", synthetic_corpus(20, seed=4))
    first, second = as_spanish(tiny_model, tmp_path), as_spanish(tiny_model, tmp_path, "copy")
    monkeypatch.setattr(public.shutil, "which", lambda name: None)          # a machine without Apertium
    out = tmp_path / "report.json"
    assert main(["evaluate-public", "--testsets", str(folder), "--model", str(first), "--model", str(second),
                 "--model", str(tiny_model), "--beam", "2", "--limit", "10", "--samples", "100",
                 "--json", str(out), "--out", str(tmp_path / "hyps")]) == 0
    table = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert [t["name"] for t in report["testsets"]] == ["flores200-devtest", "toy"]
    toy = report["testsets"][1]
    assert (toy["sentences"], toy["scored"]) == (20, 10) and "evenly spaced" in toy["sampling"]
    assert list(toy["systems"]) == ["tiny", f"tiny ({second})"]          # the xx→en model skipped, no Apertium
    assert toy["systems"]["tiny"]["bleu"] > 20 and toy["published"] == []
    paired = toy["systems"][f"tiny ({second})"]["paired"]        # the same model twice: no difference
    assert paired["against"] == "tiny" and paired["bleu"]["difference"] == paired["chrf"]["difference"] == 0.0
    assert any("not installed" in n for n in report["notes"]) and any("xx→en" in n for n in report["notes"])
    assert report["bootstrap"] == {"samples": 100, "seed": 12345, "against": "tiny"}
    assert "| toy | 10 of 20 | tiny |" in table and "OPUS-MT spa-eng opus-2021-02-19 (published" in table
    assert (tmp_path / "hyps" / "toy.tiny.eng").read_text().count("\n") == 10


@pytest.mark.skipif(shutil.which("apertium") is None, reason="Apertium is not installed")
def test_apertium_translates_in_the_same_run(tiny_model, tmp_path):
    folder = tmp_path / "sets"
    write_testset(folder, "everyday", [("El perro come pan.", "The dog eats bread."),
                                       ("La casa es grande.", "The house is big."),
                                       ("Tengo dos gatos negros.", "I have two black cats.")] * 4)
    report = public.evaluate_public([as_spanish(tiny_model, tmp_path)], [str(folder)], beam=1, samples=50,
                                    log=lambda _: None)
    systems = report["testsets"][0]["systems"]
    assert list(systems) == ["tiny", "apertium"] and systems["apertium"]["chrf"] > 50
    assert systems["apertium"]["paired"]["bleu"]["difference"] > 0
    assert report["systems"][-1] == {"label": "apertium", "command": "apertium -u spa-eng"}
