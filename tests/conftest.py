"""Shared fixtures: a synthetic parallel corpus, a small RNNsearch trained on it
in seconds and exported to a real model directory."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

# A toy language pair: each source word has one target word; adjective-noun
# pairs swap order, so the alignment is not the diagonal.
NOUNS = {"kasa": "house", "peru": "dog", "libo": "book", "mesa": "table", "gato": "cat", "arbo": "tree",
         "sola": "sun", "luna": "moon"}
ADJECTIVES = {"granda": "big", "roja": "red", "nova": "new", "blanka": "white"}
VERBS = {"vidas": "sees", "havas": "has", "amas": "loves"}


def synthetic_pair(rng: random.Random) -> tuple[str, str]:
    def phrase() -> tuple[list[str], list[str]]:
        noun = rng.choice(list(NOUNS))
        if rng.random() < 0.5:
            adj = rng.choice(list(ADJECTIVES))
            return [noun, adj], [ADJECTIVES[adj], NOUNS[noun]]
        return [noun], [NOUNS[noun]]
    s1, t1 = phrase()
    verb = rng.choice(list(VERBS))
    s2, t2 = phrase()
    return " ".join(s1 + [verb] + s2) + " .", " ".join(["the"] + t1 + [VERBS[verb], "the"] + t2) + " ."


def synthetic_corpus(n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [synthetic_pair(rng) for _ in range(n)]


def write_corpus(data_dir: Path, sizes: dict[str, int]) -> Path:
    data_dir.mkdir(parents=True, exist_ok=True)
    for seed, (split, n) in enumerate(sizes.items()):
        with open(data_dir / f"{split}.tsv", "w") as f:
            for s, t in synthetic_corpus(n, seed):
                f.write(f"{s}\t{t}\n")
    return data_dir


def tiny_config(data_dir: Path, **overrides):
    from attnmt.model.network import ModelConfig
    from attnmt.model.train import TrainConfig
    model = ModelConfig(embedding_size=32, encoder_hidden=32, decoder_hidden=32, attention_size=32,
                        readout_size=32, dropout=0.0)
    values = dict(data_dir=str(data_dir), vocab_size=64, token_budget=600, learning_rate=5e-3, max_epochs=6,
                  validate_every=0, checkpoint_every=50, log_every=50, patience=10, seed=7, threads=1, model=model)
    values.update(overrides)
    return TrainConfig(**values)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """A run directory with a small model trained on the synthetic corpus."""
    from attnmt.model.train import train
    root = tmp_path_factory.mktemp("tiny")
    data = write_corpus(root / "data", {"train": 1500, "dev": 40, "test": 40})
    run = root / "run"
    train(tiny_config(data), run)
    return run


@pytest.fixture(scope="session")
def tiny_model(tiny_run, tmp_path_factory) -> Path:
    """The tiny run exported to an ONNX model directory (parity-checked by export)."""
    from attnmt.model.export import export
    out = tmp_path_factory.mktemp("models") / "tiny-xx-en"
    sentences = [s for s, _ in synthetic_corpus(16, seed=99)]
    export(tiny_run / "best.pt", tiny_run / "spm.model", out, "tiny", "xx", "en", sentences)
    return out


@pytest.fixture(scope="session")
def engine(tiny_model):
    from attnmt.service.engine import Engine, EngineOptions
    return Engine(tiny_model, EngineOptions(intra_op_threads=1))


@pytest.fixture(scope="session")
def translator(engine):
    from attnmt.service.translator import Translator
    return Translator(engine)
