"""`attnmt data mix` decontaminates: a training pair with a sentence of an --exclude set, or of
any mixed corpus's dev or test split, leaves every corpus's train, each side against its side."""

import json

from attnmt.model.data.gettext import mix
from attnmt.service.cli import main


def write(directory, split, pairs):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{split}.es").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (directory / f"{split}.en").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")


def test_excluded_and_mixed_dev_sentences_leave_train_and_are_reported(tmp_path):
    tatoeba, news = tmp_path / "tatoeba", tmp_path / "news"
    write(tatoeba, "train", [("Hola.", "Hello."), ("¿Qué hora es?", "What's the time?"), ("La bolsa cae", "Other."),
                             ("Gracias.", "Thanks!")])
    write(tatoeba, "dev", [("Adiós.", "Goodbye.")])
    write(news, "train", [("Adiós", "Bye."), ("Texto.", "Text.")])
    write(news, "dev", [("La bolsa cae.", "Stocks fall.")])
    write(news, "test", [("Fin.", "The end.")])
    public = tmp_path / "public"
    write(public, "x", [])
    (public / "tatoeba-test-v2021-08-07.spa").write_text("¿Que hora es?\nGracias\n", encoding="utf-8")
    (public / "tatoeba-test-v2021-08-07.eng").write_text("What's the time\nThank you.\n", encoding="utf-8")
    bt = tmp_path / "bt"
    write(bt, "train", [("<bt> Fin", "Finally."), ("<bt> Bien.", "Good.")])
    write(bt, "dev", [])

    assert main(["data", "mix", str(tmp_path / "mix"), f"{tatoeba}:2", f"{news}:1", f"{bt}:1:untagged",
                 "--exclude", str(public)]) == 0

    train = (tmp_path / "mix/train.es").read_text(encoding="utf-8").splitlines()
    assert train == ["Hola."] * 2 + ["Texto."] + ["Bien."]
    removed = json.loads((tmp_path / "mix/decontaminated.json").read_text())
    assert removed == {str(tatoeba): {"tatoeba-test-v2021-08-07": 2, f"{news}/dev": 1},
                       str(news): {f"{tatoeba}/dev": 1}, f"{bt} (untagged)": {f"{news}/test": 1}}
    card = (tmp_path / "mix/DATA_CARD.md").read_text(encoding="utf-8")
    assert "train 1 pairs × 2, dev 1 pairs; decontaminated 3" in card


def test_the_default_exclusion_is_the_repositorys_test_sets(tmp_path):
    corpus = tmp_path / "c"
    write(corpus, "train", [("Zorro veloz.", "Quick fox.")])
    write(corpus, "dev", [])
    mix(tmp_path / "mix", [(corpus, 1)], dev_max=10)
    assert "tatoeba-test-v2021-08-07" in (tmp_path / "mix/DATA_CARD.md").read_text(encoding="utf-8")
