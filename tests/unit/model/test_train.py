import json

import pytest
import torch

from attnmt.model.train import TrainConfig, load_model, train
from conftest import tiny_config, write_corpus


def test_tiny_corpus_trains_and_loss_falls(tiny_run):
    history = json.loads((tiny_run / "history.json").read_text())
    assert len(history) >= 3
    assert history[-1]["dev_bleu"] > history[0]["dev_bleu"]
    assert max(h["dev_bleu"] for h in history) > 50       # the toy language is learnable
    log = (tiny_run / "train.log").read_text()
    losses = [float(line.split("loss ")[1].split()[0]) for line in log.splitlines() if " loss " in line]
    assert losses[-1] < losses[0] / 2
    assert (tiny_run / "best.pt").exists() and (tiny_run / "spm.model").exists()


def test_interrupted_run_resumes_where_it_stopped(tmp_path):
    data = write_corpus(tmp_path / "data", {"train": 300, "dev": 10})
    run = tmp_path / "run"
    cfg = tiny_config(data, max_epochs=1, checkpoint_every=5, log_every=5)
    # Stop after a few steps, as a killed process would (the time limit stands in for the kill).
    first = train(TrainConfig(**{**cfg.__dict__, "max_minutes": 1e-9}), run)
    assert first["steps"] == 5
    resumed = train(cfg, run)
    assert resumed["steps"] > first["steps"]
    assert "resumed from step 5" in (run / "train.log").read_text()
    model = load_model(run / "last.pt")
    assert isinstance(model, torch.nn.Module)


def test_an_update_budget_stops_validates_and_stays_done(tmp_path):
    data = write_corpus(tmp_path / "data", {"train": 300, "dev": 10})
    run = tmp_path / "run"
    cfg = TrainConfig(**{**tiny_config(data, max_epochs=5, checkpoint_every=5, log_every=5).__dict__,
                         "max_steps": 7})
    first = train(cfg, run)
    assert first["steps"] == 7 and first["history"][-1]["step"] == 7      # the last weights validated
    again = train(cfg, run)                                                # resumed at its budget: nothing to do
    assert again["steps"] == 7 and len(again["history"]) == len(first["history"])
    assert "update limit of 7 reached" in (run / "train.log").read_text()


def test_unknown_option_is_named(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("learning_rat: 0.1\n")
    try:
        TrainConfig.from_yaml(path)
    except ValueError as e:
        assert "learning_rat" in str(e)
    else:
        raise AssertionError("unknown option accepted")


def test_cuda_without_a_gpu_is_refused_naming_the_field(tmp_path):
    data = write_corpus(tmp_path / "data", {"train": 50, "dev": 5})
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the refusal is for machines without one")
    with pytest.raises(ValueError, match="device cuda: PyTorch sees no CUDA GPU"):
        train(tiny_config(data, device="cuda"), tmp_path / "run")
    assert not (tmp_path / "run").exists()                # refused before the run directory is made
    with pytest.raises(ValueError, match="device must be cpu or cuda, not 'gpu'"):
        train(tiny_config(data, device="gpu"), tmp_path / "run2")


def test_a_run_moves_between_cpu_and_cuda(tmp_path):
    """Started on the CPU, resumed on a GPU (the everyday5 stage's path), and the other way."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here (torch.cuda.is_available() is False)")
    data = write_corpus(tmp_path / "data", {"train": 300, "dev": 10})
    run = tmp_path / "run"
    # 300 pairs are 5 batches an epoch: 5 epochs leave room for the 20 updates
    cfg = tiny_config(data, max_epochs=5, checkpoint_every=5, log_every=5)
    first = train(TrainConfig(**{**cfg.__dict__, "max_steps": 5}), run)
    on_gpu = train(TrainConfig(**{**cfg.__dict__, "max_steps": 15, "device": "cuda"}), run)
    back = train(TrainConfig(**{**cfg.__dict__, "max_steps": 20}), run)
    assert (first["steps"], on_gpu["steps"], back["steps"]) == (5, 15, 20)
    assert on_gpu["history"][-1]["dev_bleu"] >= 0 and isinstance(load_model(run / "best.pt"), torch.nn.Module)
