"""`attnmt data mix`: train splits repeated by weight, dev capped per corpus, and a held-out set
with weight 0 (no train split, only the dev it lends to validation)."""

import json

import pytest

from attnmt.model.data.gettext import mix
from attnmt.service.cli import main


def write(directory, split, pairs):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{split}.es").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (directory / f"{split}.en").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")


def test_weights_repeat_train_and_a_held_out_set_lends_only_its_dev(tmp_path):
    a = tmp_path / "a"
    write(a, "train", [("uno", "one"), ("dos", "two")])
    write(a, "dev", [(f"d{i}", f"d{i}") for i in range(10)])
    held_out = tmp_path / "everyday"
    held_out.mkdir()
    (held_out / "dev.tsv").write_text("¿Dónde está la estación?\tWhere is the station?\n", encoding="utf-8")

    counts = mix(tmp_path / "mix", [(a, 3), (held_out, 0)], dev_max=4)

    train = (tmp_path / "mix" / "train.es").read_text(encoding="utf-8").splitlines()
    dev = (tmp_path / "mix" / "dev.es").read_text(encoding="utf-8").splitlines()
    assert train == ["uno", "dos"] * 3
    assert len(dev) == 5 and dev[-1] == "¿Dónde está la estación?"
    assert counts == {"train": 6, "dev": 5}
    assert json.loads((tmp_path / "mix" / "counts.json").read_text()) == counts
    assert "train 0 pairs × 0, dev 1 pairs" in (tmp_path / "mix" / "DATA_CARD.md").read_text(encoding="utf-8")


def test_an_untagged_copy_drops_the_sources_tag_and_lends_no_dev(tmp_path):
    bt = tmp_path / "backtranslation"
    write(bt, "train", [("<bt> Era lleno.", "It was full."), ("<bt> El <b>equipo</b>.", "The team.")])
    write(bt, "dev", [("<bt> Hola.", "Hello.")])

    counts = mix(tmp_path / "mix", [(bt, 1), (bt, 2, True)], dev_max=4)

    train = (tmp_path / "mix" / "train.es").read_text(encoding="utf-8").splitlines()
    assert train == ["<bt> Era lleno.", "<bt> El <b>equipo</b>."] + ["Era lleno.", "El <b>equipo</b>."] * 2
    assert (tmp_path / "mix" / "dev.es").read_text(encoding="utf-8").splitlines() == ["<bt> Hola."]
    assert counts == {"train": 6, "dev": 1}
    assert "(untagged: sources without their leading tag): train 2 pairs × 2, dev 0 pairs" in \
        (tmp_path / "mix" / "DATA_CARD.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("spec, message", [
    ("data/x:2:tagged", "the third part may only be 'untagged'"),
    ("data/x:1.5", "the weight must be a whole number of copies (0: dev only), not '1.5'"),
    ("data/x:-1", "not '-1'"),
])
def test_a_spec_it_cannot_read_is_refused_naming_it(tmp_path, capsys, spec, message):
    assert main(["data", "mix", str(tmp_path / "mix"), spec]) == 2
    err = capsys.readouterr().err
    assert f"attnmt data mix: {spec}: " in err and message in err
    assert not (tmp_path / "mix").exists()
