"""The hand-aligned gold standard for word alignment (tests/data/gold-alignments):
the files parse, every link points at a word of its sentence, the counts and the
dev/test split are as documented, and the pairs are the test splits' own."""

from __future__ import annotations

import importlib.util
import re

import pytest

from conftest import REPO, TESTS

GOLD = TESTS / "data" / "gold-alignments"
ROOT = REPO
HEADER = ["id", "domain", "source", "target", "links"]
LINK = re.compile(r"(\d+)([-p])(\d+)")
COUNTS = {"dev": {"bible": 33, "software": 17}, "test": {"bible": 67, "software": 33}}


def load(split: str) -> list[dict]:
    lines = (GOLD / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0].split("\t") == HEADER
    rows = []
    for n, line in enumerate(lines[1:], 2):
        fields = line.split("\t")
        assert len(fields) == 5, f"{split}.tsv:{n}: {len(fields)} fields"
        rows.append(dict(zip(HEADER, fields), line=n))
    return rows


def links(row: dict) -> list[tuple[int, int, bool]]:
    """(source index, target index, sure) for each link of a row."""
    out = []
    for token in row["links"].split():
        m = LINK.fullmatch(token)
        assert m, f"line {row['line']}: bad link {token!r}"
        out.append((int(m[1]), int(m[3]), m[2] == "-"))
    return out


ROWS = {split: load(split) for split in ("dev", "test")}
ALL = [(split, row) for split, rows in ROWS.items() for row in rows]


@pytest.mark.parametrize("split, row", ALL, ids=[f"{s}:{r['id']}" for s, r in ALL])
def test_links_are_valid(split, row):
    assert row["domain"] in ("bible", "software")
    assert row["source"] == row["source"].strip() and row["target"] == row["target"].strip()
    src, tgt = row["source"].split(), row["target"].split()
    found = links(row)
    assert found, "no links"
    for i, j, _ in found:
        assert 0 <= i < len(src), f"source index {i} of {len(src)} words"
        assert 0 <= j < len(tgt), f"target index {j} of {len(tgt)} words"
    pairs = [(i, j) for i, j, _ in found]
    assert len(pairs) == len(set(pairs)), "a link written twice (or as both Sure and Possible)"
    assert pairs == sorted(pairs), "links not sorted"
    assert any(sure for _, _, sure in found), "no Sure link"


def test_counts_and_domain_split():
    for split, rows in ROWS.items():
        by_domain = {d: sum(r["domain"] == d for r in rows) for d in ("bible", "software")}
        assert by_domain == COUNTS[split], split
    assert sum(len(rows) for rows in ROWS.values()) == 150


def test_dev_and_test_are_disjoint():
    for key in ("id", "source"):
        dev, test = [r[key] for r in ROWS["dev"]], [r[key] for r in ROWS["test"]]
        assert len(set(dev)) == len(dev) and len(set(test)) == len(test), f"repeated {key}"
        assert not set(dev) & set(test), f"{key} in both dev and test"


def _selector():
    spec = importlib.util.spec_from_file_location("gold_select", GOLD / "select.py")  # not the stdlib `select`
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("domain", ["bible", "software"])
def test_pairs_come_from_the_test_split(domain):
    selector = _selector()
    data_dir = ROOT / selector.CORPORA[domain]
    if not ((data_dir / "test.tsv").exists() or (data_dir / "test.es").exists()):
        pytest.skip(f"{data_dir.relative_to(ROOT)} has no test split: run `make data`")
    corpus = selector.read_split(data_dir, domain)
    by_text = {(s, t): i for i, s, t in corpus}
    for split, row in ALL:
        if row["domain"] != domain:
            continue
        key = (row["source"], row["target"])
        assert key in by_text, f"{split}:{row['id']} is not in {data_dir.relative_to(ROOT)}/test"
        if domain == "bible":
            assert by_text[key] == row["id"]
        else:  # package/catalog:LINE; the line may move if the catalogs are rebuilt
            assert by_text[key].rsplit(":", 1)[0] == row["id"].rsplit(":", 1)[0]
        assert row["id"] not in selector.EXCLUDED
