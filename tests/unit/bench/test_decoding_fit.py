"""`attnmt fit-length-penalty`'s rule (bench/decoding.py): the highest mean chrF over the dev sets
among the values that lose no dev set more than 0.3 BLEU against 1.0."""

from attnmt.bench.decoding import choose


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
