"""`attnmt fit-length-penalty`'s and `attnmt fit-first-word`'s rule (bench/decoding.py): the highest
mean chrF over the dev sets among the values that lose no dev set more than 0.3 BLEU against the
baseline (1.0; "never"), and fit-first-word on the bundled model's dev sets."""

import json
import shutil

import pytest

from attnmt.bench.decoding import choose, fit_first_word
from attnmt.service.server.settings import BUNDLED_TRANSFORMER


def sets(**scores: dict[str, tuple[float, float]]) -> dict:
    return {name: {value: {"bleu": b, "chrf": c} for value, (b, c) in by_value.items()}
            for name, by_value in scores.items()}


def test_the_best_mean_chrf_wins_when_no_set_loses_bleu():
    dev = sets(news={"1.0": (10.0, 40.0), "1.6": (10.1, 40.6), "2.0": (10.2, 40.9)},
               chat={"1.0": (40.0, 60.0), "1.6": (40.0, 60.2), "2.0": (39.8, 60.3)})
    chosen, means = choose(dev, [1.0, 1.6, 2.0])
    assert chosen == 2.0 and means == {1.0: 50.0, 1.6: 50.4, 2.0: 50.6}


def test_a_value_that_costs_one_set_more_than_0_3_bleu_is_not_kept_however_its_chrf():
    dev = sets(news={"1.0": (10.0, 40.0), "1.6": (10.1, 40.6), "2.0": (10.2, 41.9)},
               chat={"1.0": (40.0, 60.0), "1.6": (39.8, 60.2), "2.0": (39.6, 60.3)})
    assert choose(dev, [1.0, 1.6, 2.0])[0] == 1.6


def test_the_default_stays_when_nothing_beats_it():
    dev = sets(news={"1.0": (10.0, 40.0), "0.6": (10.3, 39.5)}, chat={"1.0": (40.0, 60.0), "0.6": (40.1, 60.5)})
    assert choose(dev, [0.6, 1.0])[0] == 1.0
    tie = sets(news={"1.0": (10.0, 40.0), "1.3": (10.0, 40.0)})
    assert choose(tie, [1.0, 1.3])[0] == 1.0


def test_a_baseline_outside_the_values_and_the_first_value_where_every_one_loses_too_much():
    # fit-lexicon's thresholds against the model without a lexicon
    dev = sets(news={"without": (20.0, 48.0), "5": (20.1, 48.2), "40": (20.5, 48.9)},
               prose={"without": (50.0, 70.0), "5": (50.0, 70.0), "40": (49.8, 69.9)})
    assert choose(dev, [5, 40], baseline="without")[0] == 40
    worse = sets(news={"without": (20.0, 48.0), "5": (19.6, 48.2), "40": (19.5, 48.9)})
    assert choose(worse, [5, 40], baseline="without")[0] == 5


def test_the_first_word_rule_is_held_against_reading_every_line_as_sent():
    dev = sets(news={"never": (20.0, 49.0), "unmarked": (20.0, 49.1), "any": (19.6, 49.5)},
               labels={"never": (40.0, 60.0), "unmarked": (41.0, 61.0), "any": (41.0, 61.0)})
    assert choose(dev, ["unmarked", "any", "never"], baseline="never")[0] == "unmarked"   # any costs news 0.4


@pytest.mark.skipif(not (BUNDLED_TRANSFORMER / "manifest.json").exists(), reason="no bundled model")
def test_fit_first_word_measures_each_rule_and_writes_the_chosen_one(tmp_path):
    model = tmp_path / "model"
    shutil.copytree(BUNDLED_TRANSFORMER, model)
    data = tmp_path / "labels"
    data.mkdir()
    # labels typed with a capital the model does not know ("Cerveza" came back "Cerve") and a sentence
    (data / "dev.es").write_text("Cerveza\nTren\nManzana\nEl tren sale a las ocho.\n", encoding="utf-8")
    (data / "dev.en").write_text("Beer\nTrain\nApple\nThe train leaves at eight.\n", encoding="utf-8")
    spec = fit_first_word(model, [data], beam=1)
    scores = spec["first_word_chosen"]["dev"]["labels/dev"]
    assert scores["unmarked"]["lines"] == 3 and scores["never"]["lines"] == 0
    assert scores["unmarked"]["chrf"] > scores["never"]["chrf"]
    assert spec["first_word"] in ("unmarked", "any")
    decoding = json.loads((model / "manifest.json").read_text())["decoding"]
    assert decoding["first_word"] == spec["first_word"]
    assert decoding.get("length_penalty", 1.0) == (json.loads((BUNDLED_TRANSFORMER / "manifest.json").read_text())
                                                   .get("decoding") or {}).get("length_penalty", 1.0)
