"""Reading a corpus split: the one rule (corpus/splits.py) training and measurement use."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnmt.corpus import splits


def test_readers_accept_tsv_and_two_files(tmp_path):
    (tmp_path / "train.tsv").write_text("hola\thello\nadiós\tbye\n")
    assert list(splits.read_parallel(tmp_path / "train.tsv")) == [("hola", "hello"), ("adiós", "bye")]
    (tmp_path / "dev.es").write_text("uno\ndos\n")
    (tmp_path / "dev.en").write_text("one\ntwo\n")
    src, tgt = splits.corpus_files(tmp_path, "dev", "es", "en")
    assert list(splits.read_parallel(src, tgt)) == [("uno", "one"), ("dos", "two")]


def test_readers_reject_malformed_input(tmp_path):
    (tmp_path / "bad.tsv").write_text("only one column\n")
    with pytest.raises(ValueError, match="bad.tsv:1"):
        list(splits.read_parallel(tmp_path / "bad.tsv"))
    (tmp_path / "a.es").write_text("uno\ndos\n")
    (tmp_path / "a.en").write_text("one\n")
    with pytest.raises(ValueError, match="different numbers of lines"):
        list(splits.read_parallel(tmp_path / "a.es", tmp_path / "a.en"))
    with pytest.raises(FileNotFoundError, match="test.tsv"):
        splits.corpus_files(tmp_path, "test", "es", "en")


def test_read_split_finds_either_layout(tmp_path):
    (tmp_path / "test.tsv").write_text("hola\thello\n")
    assert splits.read_split(tmp_path, "test", "es", "en") == [("hola", "hello")]
    (tmp_path / "dev.es").write_text("uno\n")
    (tmp_path / "dev.en").write_text("one\n")
    assert splits.read_split(tmp_path, "dev", "es", "en") == [("uno", "one")]
    with pytest.raises(FileNotFoundError, match="no train data"):
        splits.read_split(tmp_path, "train", "es", "en")


def test_a_tsv_that_names_its_columns_is_read_in_either_direction(tmp_path):
    (tmp_path / "test.tsv").write_text("hola\thello\n")
    (tmp_path / splits.COLUMNS_FILE).write_text("es\ten\n")
    assert splits.read_split(tmp_path, "test", "es", "en") == [("hola", "hello")]
    assert splits.read_split(tmp_path, "test", "en", "es") == [("hello", "hola")]
    with pytest.raises(ValueError, match="declares es→en, asked for fr→en"):
        splits.read_split(tmp_path, "test", "fr", "en")


def test_the_bundled_everyday_set_names_its_columns():
    # written Spanish first (tests/data/everyday/README.md): English→Spanish reads it swapped
    assert splits.tsv_languages(Path(__file__).resolve().parents[2] / "data" / "everyday") == ("es", "en")
