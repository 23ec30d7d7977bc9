"""`attnmt bench typed`: the typed variants of a split's short pairs, and the command on the bundled
models (their scores are whatever the models make of them; the variants' sentences are checked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnmt.bench.typed import variants
from attnmt.service.cli import main

REPO = Path(__file__).resolve().parents[3]
PAIRS = [("¿Dónde está la estación?", "Where is the station?"), ("Hola.", "Hello."),
         ("Tengo hambre.", "I'm hungry."), ("Muchas gracias", "Thank you very much"),
         ("El tren sale a las ocho de la mañana.", "The train leaves at eight in the morning.")]


def test_variants_take_the_short_pairs_and_drop_marks_capitals_and_accents():
    sets = variants(PAIRS, max_words=4)
    assert [s for s, _ in sets["written"]] == ["¿Dónde está la estación?", "Hola.", "Tengo hambre.", "Muchas gracias"]
    # a pair without final marks has no unpunctuated variant
    assert sets["unpunctuated"] == [("Dónde está la estación", "Where is the station"), ("Hola", "Hello"),
                                    ("Tengo hambre", "I'm hungry")]
    assert [s for s, _ in sets["lower-cased"]] == ["dónde está la estación", "hola", "tengo hambre"]
    assert sets["unaccented"] == [("Donde esta la estacion?", "Where is the station?")]


def test_variants_leave_out_a_variant_no_source_has():
    assert "unaccented" not in variants([("Hello.", "Hola.")], max_words=4)


@pytest.mark.parametrize("model, src, tgt", [("transformer-es-en", "es", "en"), ("transformer-en-es", "en", "es")])
def test_bench_typed_on_a_bundled_model(model, src, tgt, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    pairs = PAIRS if src == "es" else [(t, s) for s, t in PAIRS]
    (data / f"dev.{src}").write_text("".join(s + "\n" for s, _ in pairs))
    (data / f"dev.{tgt}").write_text("".join(t + "\n" for _, t in pairs))
    out = tmp_path / "typed.json"
    assert main(["bench", "typed", "--model", str(REPO / "models" / model), "--data", str(data),
                 "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    expected = {"written": 4, "unpunctuated": 3, "lower-cased": 3, **({"unaccented": 1} if src == "es" else {})}
    assert report["sentences"] == expected
    (scores,) = [m["scores"] for m in report["models"].values()]
    assert set(scores) == set(expected)
    assert all(0 <= s["bleu"] <= 100 and 0 < s["chrf"] <= 100 for s in scores.values())
    assert "| lower-cased | 3 |" in capsys.readouterr().out


def test_models_of_different_directions_are_refused_with_a_message(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    for lang, side in (("es", 0), ("en", 1)):
        (data / f"dev.{lang}").write_text("".join(p[side] + "\n" for p in PAIRS))
    assert main(["bench", "typed", "--model", str(REPO / "models" / "transformer-es-en"),
                 "--model", str(REPO / "models" / "transformer-en-es"), "--data", str(data)]) == 2
    assert "translates en→es" in capsys.readouterr().err
