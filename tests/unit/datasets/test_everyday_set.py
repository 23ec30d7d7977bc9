"""The everyday Spanish→English test set (tests/data/everyday): its files parse,
it is large enough, dev is about a third, and no sentence is in it twice."""

from __future__ import annotations

import pytest

from conftest import TESTS

EVERYDAY = TESTS / "data" / "everyday"
SPLITS = ("dev", "test")


def read_pairs(split: str) -> list[tuple[str, str]]:
    pairs = []
    for number, line in enumerate((EVERYDAY / f"{split}.tsv").read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split("\t")
        # Two fields exactly: a third would mean a tab inside the text.
        assert len(fields) == 2, f"{split}.tsv line {number}: {len(fields)} fields"
        source, target = fields
        assert source.strip() and target.strip(), f"{split}.tsv line {number}: empty side"
        pairs.append((source, target))
    return pairs


@pytest.fixture(scope="module")
def everyday() -> dict[str, list[tuple[str, str]]]:
    return {split: read_pairs(split) for split in SPLITS}


def test_sizes_and_split(everyday):
    total = sum(len(pairs) for pairs in everyday.values())
    assert total >= 200
    assert 0.25 <= len(everyday["dev"]) / total <= 0.40


def test_no_source_twice_across_splits(everyday):
    sources = [source.casefold() for pairs in everyday.values() for source, _ in pairs]
    repeated = sorted({s for s in sources if sources.count(s) > 1})
    assert not repeated


def test_sides_are_clean_and_differ(everyday):
    for pairs in everyday.values():
        for source, target in pairs:
            assert "\t" not in source and "\t" not in target
            assert source == source.strip() and target == target.strip()
            assert source != target


def test_sources_are_spanish(everyday):
    sources = "".join(source for pairs in everyday.values() for source, _ in pairs)
    assert set("¿¡ñáéíóú") <= set(sources.lower())
