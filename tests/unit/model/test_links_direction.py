"""Word links and the direction they are read in: `attnmt data links --src en --tgt es` writes links whose
i indexes English words, its card says so, and training refuses links written for the other direction
(model/data/links.py, model/guided_alignment.py links_languages, model/train.py)."""

import json
from pathlib import Path

import pytest

from attnmt.corpus.word_links import parse_pharaoh
from attnmt.model.guided_alignment import GuidedAlignmentConfig, links_languages
from attnmt.model.train import TrainConfig, train
from conftest import REPO, VERBS, synthetic_corpus, tiny_config


def write_reversible(data: Path, pairs: list[tuple[str, str]]) -> Path:
    """The toy pairs as a corpus directory of train.es (the toy language) and train.en, as the mix writes."""
    data.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev"):
        (data / f"{split}.es").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
        (data / f"{split}.en").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return data


def test_links_written_english_to_spanish_index_english_words(tmp_path):
    pytest.importorskip("eflomal")
    from attnmt.model.data.links import write_links
    # 1,200 pairs: eflomal finds the verbs in most of them (it seeds its samplers from the system, so
    # how many varies from run to run: half to over nine in ten). Every English side has two words
    # more than its toy side ("the" twice), so only links read English first reach past the toy
    # sentence's end: that, not the aligner's quality, is what says the direction.
    pairs = synthetic_corpus(1200, seed=3)
    assert all(len(english.split()) > len(toy.split()) for toy, english in pairs)
    data = write_reversible(tmp_path / "toy", pairs)

    write_links([data], src_lang="en", tgt_lang="es")

    card = json.loads((data / "train.links.json").read_text())
    assert (card["source_language"], card["target_language"]) == ("en", "es")
    assert links_languages(data / "train.links") == ("en", "es")
    lines = (data / "train.links").read_text().splitlines()
    assert len(lines) == len(pairs)
    found = hits = beyond = 0
    for (toy, english), line in zip(pairs, lines):
        links = parse_pharaoh(line)[0]
        en, es = english.split(), toy.split()
        assert all(i < len(en) and j < len(es) for i, j in links)
        beyond += any(i >= len(es) for i, _ in links)
        verb = next(k for k, w in enumerate(es) if w in VERBS)
        expected = {(en.index(VERBS[es[verb]]), verb), (len(en) - 1, len(es) - 1)}    # (English i, Spanish j)
        found += len(expected)
        hits += len(expected & links)
    assert beyond / len(pairs) > 0.9               # English words past the toy sentence's end are linked
    assert hits / found > 0.4                       # and the links are the aligner's, not noise

    # the gold set is Spanish→English: its pairs would join the aligner's text reversed
    with pytest.raises(ValueError, match="without --gold"):
        write_links([data], gold_dir=tmp_path / "gold", src_lang="en", tgt_lang="es")


def test_links_languages_come_from_the_card_or_an_older_cards_files(tmp_path):
    links = tmp_path / "train.links"
    links.write_text("0-0\n")
    assert links_languages(links) is None                                     # no card: cannot tell
    card = tmp_path / "train.links.json"
    card.write_text(json.dumps({"text": {"data/mix/train.es": "…", "data/mix/train.en": "…"}}))
    assert links_languages(links) == ("es", "en")                             # written before the card said
    card.write_text(json.dumps({"text": {"data/toy/train.tsv": "…"}}))
    assert links_languages(links) is None
    card.write_text(json.dumps({"source_language": "en", "target_language": "es", "text": {}}))
    assert links_languages(links) == ("en", "es")


def test_training_refuses_links_of_the_other_direction(tmp_path):
    pairs = synthetic_corpus(200, seed=1)
    data = write_reversible(tmp_path / "toy", pairs)
    # Spanish→English links (i a toy word, j an English word): the diagonal is enough here
    (data / "train.links").write_text("".join("0-0\n" for _ in pairs))
    (data / "train.links.json").write_text(json.dumps({"source_language": "es", "target_language": "en"}))
    guided = GuidedAlignmentConfig(links=str(data / "train.links"))

    reversed_run = tiny_config(data, src_lang="en", tgt_lang="es", max_steps=1, guided_alignment=guided)
    with pytest.raises(ValueError, match=f"attnmt data links {data} --src en --tgt es"):
        train(reversed_run, tmp_path / "en-es")

    train(tiny_config(data, max_steps=1, guided_alignment=guided), tmp_path / "es-en")
    assert "200 pairs with links" in (tmp_path / "es-en" / "train.log").read_text()


def test_the_english_to_spanish_config_reads_its_own_mix_and_links():
    cfg = TrainConfig.from_yaml(REPO / "model" / "configs" / "transformer-en-es.yaml")
    assert (cfg.src_lang, cfg.tgt_lang, cfg.data_dir) == ("en", "es", "data/en-es-general")
    assert Path(cfg.guided_alignment.links).parent == Path(cfg.data_dir)
    assert cfg.spm_model == "models/rnnsearch-es-en/spm.model"                # the joint vocabulary of init_from
    assert cfg.device == "cpu" and 0 < cfg.max_minutes <= 150
