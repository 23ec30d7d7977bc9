
import pytest

from attnmt.model.data import corpus as data

# Two verses in the format `mod2imp` prints: OSIS markup, a footnote in the
# middle of a word run, a heading, a chapter heading (verse 0).
SPANISH = """$$$[ Module Heading ]

$$$Ruth 1:0
<chapter n="1" osisID="Ruth.1" sID="Ruth.1"/>
$$$Ruth 1:1
<w lemma="strong:H1961">Y ACONTECIÓ</w> en los días ¶que <transChange type="added">gobernaban</transChange> los jueces.
$$$Ruth 1:2
<title type="x-head">Noemí</title>El nombre de aquel varón era Elimelech;
$$$Genesis 1:1
EN el principio crió Dios los cielos y la tierra.
$$$Jude 1:1
Judas, siervo de Jesucristo.
"""
ENGLISH = """$$$Ruth 1:0
<chapter n="1"/> <milestone type="x-chapterLabel"/>
$$$Ruth 1:1
<w lemma="strong:H1961">In</w> the days when the judges judged<note placement="foot">\
<reference>1:1 </reference>a footnote</note>.
$$$Ruth 1:2
The name of the man was <w>Elimelech</w>,<lb/> and
   the name of his wife &amp; Naomi.
$$$Genesis 1:1
In the beginning, God<note placement="foot">The Hebrew word</note><w>created</w> the heavens and the earth.
$$$Jude 1:1
Jude, a servant of Jesus Christ.
"""


def test_parse_strips_markup_notes_and_headings():
    es = data.parse_imp(SPANISH.splitlines(keepends=True))
    en = data.parse_imp(ENGLISH.splitlines(keepends=True))
    assert "Ruth 1:0" not in es and "Ruth 1:0" not in en
    assert es["Ruth 1:1"] == "Y ACONTECIÓ en los días que gobernaban los jueces."
    assert es["Ruth 1:2"] == "El nombre de aquel varón era Elimelech;"          # editorial heading dropped
    assert en["Ruth 1:1"] == "In the days when the judges judged."               # footnote dropped
    assert en["Ruth 1:2"] == "The name of the man was Elimelech, and the name of his wife & Naomi."
    assert en["Genesis 1:1"] == "In the beginning, God created the heavens and the earth."  # no 'Godcreated'


def test_chapter_openings_get_normal_case():
    pairs = data.align_bibles(data.parse_imp(SPANISH.splitlines(True)), data.parse_imp(ENGLISH.splitlines(True)))
    by_id = {p.id: p for p in pairs}
    assert by_id["Ruth 1:1"].source.startswith("Y aconteció en")
    assert by_id["Genesis 1:1"].source.startswith("En el principio")


def test_split_never_puts_test_or_dev_books_in_train(tmp_path):
    pairs = data.align_bibles(data.parse_imp(SPANISH.splitlines(True)), data.parse_imp(ENGLISH.splitlines(True)))
    counts = data.write_split(pairs, tmp_path)
    assert counts == {"train": 1, "dev": 1, "test": 2}
    train_ids = (tmp_path / "train.ids").read_text().splitlines()
    assert all(data.book_of(v) not in data.TEST_BOOKS + data.DEV_BOOKS for v in train_ids)
    assert (tmp_path / "test.ids").read_text().splitlines() == ["Ruth 1:1", "Ruth 1:2"]
    assert (tmp_path / "dev.ids").read_text().splitlines() == ["Jude 1:1"]
    # line-aligned files
    for split in ("train", "dev", "test"):
        n = len((tmp_path / f"{split}.ids").read_text().splitlines())
        assert len((tmp_path / f"{split}.es").read_text().splitlines()) == n
        assert len((tmp_path / f"{split}.en").read_text().splitlines()) == n


@pytest.mark.parametrize("book", data.TEST_BOOKS + data.DEV_BOOKS)
def test_every_held_out_book_is_held_out(book):
    assert data.split_of(f"{book} 1:1") in ("test", "dev")
    assert data.split_of("Genesis 1:1") == "train"


def test_missing_sword_module_names_the_packages(monkeypatch):
    if data.shutil.which("mod2imp") is None:
        with pytest.raises(SystemExit, match="apt-get install sword-text-sparv"):
            data.export_module("spaRV1909eb")
    else:
        with pytest.raises(SystemExit, match="apt-get install sword-text-sparv"):
            data.export_module("NoSuchModule")
