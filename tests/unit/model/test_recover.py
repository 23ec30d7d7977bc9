"""A Transformer's weights read back from its model directory (model/export/recover.py): what
continued training and the CTranslate2 conversion start from when `checkpoint.pt` is not shipped."""

from __future__ import annotations

import shutil

import pytest
import torch

from conftest import synthetic_corpus


@pytest.fixture(scope="module")
def shipped(tiny_transformer, tmp_path_factory):
    """The tiny Transformer's directory as the repository ships one: without checkpoint.pt."""
    out = tmp_path_factory.mktemp("models") / "shipped"
    shutil.copytree(tiny_transformer, out)
    (out / "checkpoint.pt").unlink()
    return out


def test_every_parameter_comes_back_as_exported(tiny_transformer, shipped):
    from attnmt.model.export.recover import recover_checkpoint
    exported = torch.load(tiny_transformer / "checkpoint.pt", map_location="cpu", weights_only=False)
    recovered = recover_checkpoint(shipped)
    assert recovered["model_config"] == exported["model_config"]
    assert set(recovered["state_dict"]) == set(exported["state_dict"])
    for name, value in exported["state_dict"].items():
        # the exported checkpoint is the float16-rounded weights, which is what the graphs store
        assert torch.equal(recovered["state_dict"][name], value.float()), name


def test_the_recovered_network_passes_the_exports_parity_check(shipped):
    from attnmt.model.export.recover import recover_checkpoint
    from attnmt.model.export.transformer import check_parity, onnx_sessions
    from attnmt.model.tokenizer import Tokenizer
    from attnmt.model.train import build_model
    ckpt = recover_checkpoint(shipped)
    model = build_model(ckpt)
    model.load_state_dict(ckpt["state_dict"])
    tok = Tokenizer(shipped / "spm.model")
    sources = [tok.encode(s) for s, _ in synthetic_corpus(6, seed=5)]
    assert check_parity(model.eval(), onnx_sessions(shipped), sources, 1e-4)["greedy_identical"] == "6/6"


def test_training_starts_from_a_directory_without_its_checkpoint(tiny_transformer_run, shipped, tmp_path):
    from attnmt.model.train import TrainConfig, build_model, initial_weights
    cfg = TrainConfig.from_yaml(tiny_transformer_run / "config.yaml", init_from=str(shipped))
    logged: list[str] = []
    recovered = torch.load(tiny_transformer_run / "last.pt", map_location="cpu", weights_only=False)
    state = initial_weights(cfg, tmp_path, logged.append, build_model(recovered))
    assert any("read back from the graphs" in line for line in logged)
    assert set(state) == set(recovered["state_dict"])


def test_an_rnnsearch_directory_is_refused_by_name(tiny_model):
    from attnmt.model.export.recover import recover_checkpoint
    with pytest.raises(ValueError, match="only a Transformer"):
        recover_checkpoint(tiny_model)
