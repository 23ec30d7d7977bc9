"""Every score function of RNNsearch's alignment model (model/architectures/rnnsearch.py SCORE_FUNCTIONS)
trains, exports with parity and serves: one tiny model each, at the widths where all
of them run (decoder_hidden == 2 * encoder_hidden), served side by side by one server."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from attnmt.model.architectures.rnnsearch import SCORE_FUNCTIONS, Attention, ModelConfig
from attnmt.service.modeldir.manifest import load_manifest
from conftest import RunningServer, synthetic_corpus, tiny_config, write_corpus

SENTENCE = "kasa granda vidas peru ."


def widths(**overrides) -> ModelConfig:
    """Tiny widths every score function accepts: s_{i-1} (32) as wide as h_j (2 x 16)."""
    values = dict(embedding_size=16, encoder_hidden=16, decoder_hidden=32, attention_size=16, readout_size=16,
                  dropout=0.0)
    return ModelConfig(**{**values, **overrides})


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """score function -> a model directory exported from a short training run (about 3 s each)."""
    from attnmt.model.export.rnnsearch import export
    from attnmt.model.train import train
    root = tmp_path_factory.mktemp("score-functions")
    data = write_corpus(root / "data", {"train": 400, "dev": 10})
    parity_sentences = [s for s, _ in synthetic_corpus(8, seed=99)]
    out = {}
    for score in SCORE_FUNCTIONS:
        run = root / "runs" / score
        train(tiny_config(data, model=widths(attention=score), max_epochs=2), run)
        out[score] = root / "models" / f"tiny-{score}"
        export(run / "best.pt", run / "spm.model", out[score], f"tiny-{score}", "xx", "en", parity_sentences)
    return out


@pytest.fixture(scope="module")
def server(models):
    with RunningServer(list(models.values()), {"ATTNMT_DEFAULT_BEAM_SIZE": "1"}) as running:
        yield running

# `stub` is conftest's: it takes this module's `server`.


@pytest.mark.parametrize("score", list(SCORE_FUNCTIONS))
def test_export_holds_parity_and_names_the_score_function(models, score):
    manifest = load_manifest(models[score])
    assert manifest.score_function == score == manifest.dimensions["attention"]
    parity = json.loads((models[score] / "manifest.json").read_text())["export_parity"]
    for key in ("annotations", "log_probs", "forced_log_probs", "alpha", "shared_vs_direct"):
        assert parity[key] <= 1e-4, key
    assert parity["greedy_identical"] == "8/8"


@pytest.mark.parametrize("score", list(SCORE_FUNCTIONS))
@pytest.mark.parametrize("beam", [1, 3])
def test_each_score_function_serves_with_alpha_rows_summing_to_one(stub, score, beam):
    from attnmt.service.stubs import translator_pb2 as pb
    info = stub.GetModel(pb.GetModelRequest(name=f"tiny-{score}"))
    assert json.loads(info.manifest_json)["score_function"] == score
    options = pb.DecodingOptions(beam_size=beam, n_best=beam, alignment=pb.ALIGNMENT_SOFT)
    response = stub.Translate(pb.TranslateRequest(sentences=[SENTENCE], model=f"tiny-{score}", options=options))
    translation = response.translations[0]
    assert len(translation.hypotheses) == beam
    for hyp in translation.hypotheses:
        alpha = np.array([list(r.weights) for r in hyp.alignment.rows])   # target pieces x source pieces
        assert alpha.shape == (len(hyp.target_tokens), len(translation.source_tokens))
        assert np.allclose(alpha.sum(1), 1, atol=1e-5)


def test_scaled_dot_is_dot_divided_by_the_square_root_of_the_width():
    torch.manual_seed(0)
    cfg = widths(attention="scaled_dot")
    annotations = torch.randn(2, 5, 32)                     # batch x src_len x 2n
    query = torch.randn(2, 32)                              # s_{i-1}: batch x decoder_hidden
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    attention = Attention(cfg)
    _, alpha = attention(query, attention.keys(annotations), annotations, mask)
    scores = torch.einsum("bsk,bk->bs", annotations, query) / 32 ** 0.5
    expected = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    assert torch.allclose(alpha, expected, atol=1e-6)


@pytest.mark.parametrize("score", ["dot", "scaled_dot"])
def test_a_score_without_projection_names_the_widths_it_needs(score):
    with pytest.raises(ValueError, match=rf"{score} attention needs decoder_hidden == 2 \* encoder_hidden: .*"
                                         r"\(32 wide\) .* \(2 \* 32 = 64 wide\); set decoder_hidden: 64"):
        widths(attention=score, encoder_hidden=32, decoder_hidden=32)
    for other in ("bahdanau", "general"):                   # these project, so any widths run
        widths(attention=other, encoder_hidden=32, decoder_hidden=32)


def test_manifests_exported_before_the_field_read_it_from_their_dimensions():
    from attnmt.service.server.settings import BUNDLED_MODEL
    if not (BUNDLED_MODEL / "manifest.json").exists():
        pytest.skip("no bundled model")
    raw = json.loads((BUNDLED_MODEL / "manifest.json").read_text())
    assert "score_function" not in raw or raw["score_function"] == "bahdanau"
    assert load_manifest(BUNDLED_MODEL, verify=False).score_function == "bahdanau"


def test_one_config_trains_each_score_function_at_the_same_widths():
    """`make score-functions`: the shared config with `--score-function` for each run; the
    widths let dot and scaled_dot run (s_{i-1} as wide as the bidirectional h_j)."""
    from attnmt.model.train import TrainConfig
    from conftest import REPO
    config = REPO / "model" / "configs" / "rnnsearch-es-en-score-functions.yaml"
    runs = {score: TrainConfig.from_yaml(config, score_function=score) for score in SCORE_FUNCTIONS}
    for score, cfg in runs.items():
        assert cfg.model.attention == score and cfg.max_steps > 0
        assert cfg.model.decoder_hidden == 2 * cfg.model.encoder_hidden
        Attention(cfg.model)                                   # every score accepts these widths
    assert len({(c.model.decoder_hidden, c.seed, c.token_budget, c.max_steps, c.data_dir) for c in runs.values()}) == 1
    with pytest.raises(ValueError, match="a transformer has none"):
        TrainConfig.from_yaml(REPO / "model" / "configs" / "transformer-es-en.yaml", score_function="dot")


def test_make_score_functions_command_line_sets_the_score_and_the_seed(tmp_path, monkeypatch):
    """What `make score-functions` runs for each seed: `attnmt train --score-function S --seed N`."""
    import attnmt.model.train as train_module
    from attnmt.service.cli import main
    from conftest import REPO
    seen = {}
    monkeypatch.setattr(train_module, "train", lambda cfg, run: seen.update(cfg=cfg, run=run) or {"steps": 0})
    config = REPO / "model" / "configs" / "rnnsearch-es-en-score-functions.yaml"
    assert main(["train", "--config", str(config), "--score-function", "dot", "--seed", "2027",
                 "--run", str(tmp_path / "run")]) == 0
    assert (seen["cfg"].model.attention, seen["cfg"].seed) == ("dot", 2027)
    assert main(["train", "--config", str(config), "--run", str(tmp_path / "run")]) == 0
    assert (seen["cfg"].model.attention, seen["cfg"].seed) == ("bahdanau", 2026)      # the config's own
