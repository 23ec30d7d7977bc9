"""Reading word links on hand-made cases (attnmt.corpus.word_links): Pharaoh lines, Sure and
Possible marks, and the gold set's TSV."""

import pytest

from attnmt.corpus.word_links import parse_pharaoh, read_gold, read_links
from attnmt.service.modeldir.links import format_pharaoh

GOLD_HEADER = "id\tdomain\tsource\ttarget\tlinks\n"


def test_pharaoh_sure_and_possible():
    sure, possible = parse_pharaoh("0-0 1p2 2-1\n")
    assert sure == {(0, 0), (2, 1)}
    assert possible == {(0, 0), (1, 2), (2, 1)}                # Sure ⊆ Possible
    assert parse_pharaoh("") == (set(), set())
    assert format_pharaoh({(2, 1), (0, 0), (1, 2)}) == "0-0 1-2 2-1"
    assert format_pharaoh([]) == ""


def test_a_links_file_has_one_line_per_pair(tmp_path):
    path = tmp_path / "test.links"
    path.write_text("0-0 1-1\n\n2p0 0-1\n", encoding="utf-8")
    assert read_links(path) == [{(0, 0), (1, 1)}, set(), {(2, 0), (0, 1)}]     # Possible marks read as links
    assert [format_pharaoh(links) for links in read_links(path)] == ["0-0 1-1", "", "0-1 2-0"]


def test_read_gold(tmp_path):
    (tmp_path / "dev.tsv").write_text(GOLD_HEADER + "x\tbible\tuna casa\ta house\t0-0 1-1 0p1\n"
                                      "y\tsoftware\tGuardar como\tSave as\t\n", encoding="utf-8")
    done, todo = read_gold(tmp_path / "dev.tsv")
    assert (done.id, done.domain, done.source, done.target) == ("x", "bible", "una casa", "a house")
    assert done.sure == {(0, 0), (1, 1)} and done.possible == {(0, 0), (1, 1), (0, 1)} and done.annotated
    assert not todo.annotated and todo.possible == set()       # not aligned by hand yet


def test_read_gold_refuses_links_outside_the_sentence(tmp_path):
    (tmp_path / "dev.tsv").write_text(GOLD_HEADER + "x\tbible\tuna casa\ta house\t0-0 1-2\n", encoding="utf-8")
    with pytest.raises(ValueError, match="outside 2 source x 2 target words"):
        read_gold(tmp_path / "dev.tsv")
    (tmp_path / "dev.tsv").write_text("id\tsource\ttarget\n", encoding="utf-8")
    with pytest.raises(ValueError, match="header"):
        read_gold(tmp_path / "dev.tsv")
