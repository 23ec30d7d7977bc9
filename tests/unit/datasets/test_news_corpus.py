"""The news corpus (model/data/news.py): WMT's sets split by year, from a folder or a file:// URL,
each file's sha256 checked, dev and test kept whole and held out of train. Made-up files."""

import json

from attnmt.model.data import news


def write_sets(folder, shared="La economía crece."):
    """Three lines a set; every training year repeats one dev sentence."""
    folder.mkdir(parents=True, exist_ok=True)
    for names in news.SPLITS.values():
        for name in names:
            spanish = [f"Frase {n} de {name}." for n in range(2)] + [shared if name != "newstest2013" else "Fin."]
            english = [f"Sentence {n} of {name}." for n in range(2)] + ["The economy grows." if name != "newstest2013"
                                                                          else "The end."]
            (folder / f"{name}.spa").write_text("\n".join(spanish) + "\n", encoding="utf-8")
            (folder / f"{name}.eng").write_text("\n".join(english) + "\n", encoding="utf-8")


def test_years_split_and_dev_sentences_leave_train(tmp_path):
    write_sets(tmp_path / "sets")
    counts = news.extract_news(tmp_path / "news", str(tmp_path / "sets"), exclude=[])
    out = tmp_path / "news"
    assert counts == {"train": 10, "dev": 3, "test": 3}                 # each year's shared sentence left
    assert (out / "dev.es").read_text(encoding="utf-8").splitlines()[2] == "La economía crece."
    ids = (out / "train.ids").read_text()
    assert "newstest2012" not in ids and "newstest2013" not in ids
    by_set = json.loads((out / "counts.json").read_text())["sets"]
    assert all(by_set[name]["decontaminated"] == {"newstest2012": 1} for name in news.SPLITS["train"])
    card = (out / "DATA_CARD.md").read_text(encoding="utf-8")
    assert "research purposes" in card and "SOME DIFFER" in card          # made-up files: not the pinned ones


def test_a_file_url_is_downloaded_into_the_cache_and_checked(tmp_path, capsys):
    write_sets(tmp_path / "sets")
    news.extract_news(tmp_path / "news", (tmp_path / "sets").as_uri() + "/", exclude=[])
    assert (tmp_path / "news/cache/downloads/newstest2013.eng").exists()
    err = capsys.readouterr().err
    assert news.PINNED_SHA256["newstest2013.eng"] in err
    files = json.loads((tmp_path / "news/source.json").read_text())["files"]
    assert len(files) == 14 and not any(f["matches"] for f in files.values())
