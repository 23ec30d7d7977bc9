"""Back-translation by one of our own model directories, in PyTorch.

The first round of back-translation took its synthetic Spanish from Apertium (backtranslation.py,
sotu.py); the second takes it from our English→Spanish model (`models/transformer-en-es`). A
`ModelTranslator` is the `translate` function those builders take (a list of sentences in, one
line per sentence out, in order): the directory's network read back with `load_model_directory`
(its checkpoint.pt where present, else a Transformer's weights from its graphs: the same
float16-rounded numbers either way), its `spm.model`, and `model/search.py`'s beam search, which
follows the serving engine's. A directory whose manifest names another direction is refused
before anything is loaded. No placeholder protection: the prose these builders feed it has none.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from attnmt.service.modeldir.manifest import Manifest, load_manifest

if TYPE_CHECKING:                 # torch loads only when a translator is built
    from attnmt.model.architectures.rnnsearch import RNNsearch
    from attnmt.model.architectures.transformer import Transformer
    from attnmt.model.tokenizer import Tokenizer


class WrongDirection(ValueError):
    """A model directory that does not translate the direction asked for."""


@dataclass
class ModelTranslator:
    """`translate(sentences) -> lines` with a model directory's network and tokenizer."""

    model_dir: Path
    manifest: Manifest
    model: RNNsearch | Transformer     # eval mode
    tokenizer: Tokenizer               # the directory's spm.model
    beam_size: int = 5                 # 1: greedy
    batch_size: int = 64               # sentences a batch (x beam_size rows)
    weights: str = "checkpoint.pt"     # or "its graphs" (load_model_directory's two sources)
    progress_every: int = 0            # sentences between progress lines on stderr (0: none)

    def __call__(self, sentences: list[str]) -> list[str]:
        import torch

        from attnmt.model.batching import inference_batches, make_batch
        from attnmt.model.search import beam_search, greedy_decode

        sources = [self.tokenizer.encode(s) for s in sentences]
        out = [""] * len(sentences)
        done, start, reported = 0, time.perf_counter(), 0
        with torch.no_grad():
            # length-sorted batches: little padding, and a batch's rows end at about the same step
            for indices in inference_batches(sources, self.batch_size):
                batch = make_batch([sources[i] for i in indices], None, indices)
                if self.beam_size == 1:        # the batched greedy loop: no beam bookkeeping, no α kept
                    best = greedy_decode(self.model, batch.src, batch.lengths)
                else:
                    best = [nbest[0].tokens for nbest in
                            beam_search(self.model, batch.src, batch.lengths, self.beam_size)]
                for i, tokens in zip(indices, best):
                    out[i] = self.tokenizer.decode(tokens)     # </s> and specials dropped
                done += len(indices)
                if self.progress_every and done - reported >= self.progress_every:
                    reported = done
                    print(f"attnmt data: {self.manifest.name} translated {done}/{len(sentences)} sentences in "
                          f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        return out

    @property
    def search(self) -> str:
        return "greedy search" if self.beam_size == 1 else f"beam search (beam {self.beam_size})"

    def facts(self) -> dict:
        """What a data card and source.json record of the translator."""
        import torch
        m = self.manifest
        return {"model": m.name, "version": m.version, "directory": str(self.model_dir),
                "architecture": m.architecture, "direction": f"{m.source_language}→{m.target_language}",
                "weights": self.weights, "search": self.search,
                "engine": f"PyTorch {torch.__version__} (model/search.py)", "threads": torch.get_num_threads(),
                "date": dt.date.today().isoformat()}

    def describe(self) -> str:
        """One line for a data card: which model, which search, when."""
        f = self.facts()
        return (f"our model `{f['model']}` version {f['version']} (`{f['directory']}`, a {f['architecture']}, "
                f"weights from {f['weights']}), decoded with {f['search']} in {f['engine']} on {f['date']}")


def check_direction(model_dir: Path, source: str, target: str) -> Manifest:
    """The directory's manifest, or WrongDirection naming the direction it has and the one asked for."""
    manifest = load_manifest(model_dir)
    if (manifest.source_language, manifest.target_language) != (source, target):
        raise WrongDirection(f"{model_dir} ({manifest.name}) translates {manifest.source_language}→"
                             f"{manifest.target_language}; back-translation here needs {source}→{target}")
    return manifest


def load_translator(model_dir: Path, source: str = "en", target: str = "es", beam_size: int = 5,
                    batch_size: int = 64, progress_every: int = 0) -> ModelTranslator:
    """A ModelTranslator for a `source`→`target` model directory (WrongDirection otherwise)."""
    from attnmt.model.export.recover import load_model_directory
    from attnmt.model.tokenizer import Tokenizer

    if beam_size < 1:
        raise ValueError(f"beam size {beam_size}: 1 (greedy) or more")
    model_dir = Path(model_dir)
    manifest = check_direction(model_dir, source, target)
    weights = "checkpoint.pt" if (model_dir / "checkpoint.pt").exists() else "its graphs"
    return ModelTranslator(model_dir, manifest, load_model_directory(model_dir),
                           Tokenizer(model_dir / manifest.tokenizer), beam_size, batch_size, weights, progress_every)
