"""`attnmt evaluate --run`: a training run's checkpoint (either architecture) scored in
PyTorch, before any export: sacreBLEU BLEU and chrF on a test split, greedy and beam,
beside an exported model run by the serving engine (`--model`, the bundled RNNsearch)
and Apertium, in the same run.

Text goes through what the server does to it: the same normalisation, placeholder
protection when the run trained with sentinels (put back through the alignment
head's α, service/text/placeholders.py), </s> and sentinels dropped from the output.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import sacrebleu
import torch
import yaml

from attnmt.bench.evaluate import apertium, apertium_pair, placeholders_kept, score
from attnmt.corpus.splits import read_split
from attnmt.model.architectures.rnnsearch import count_parameters
from attnmt.model.batching import inference_batches, make_batch
from attnmt.model.export.rnnsearch import placeholder_contract
from attnmt.model.search import beam_search
from attnmt.model.tokenizer import EOS_ID, MODEL_FILE, Tokenizer
from attnmt.model.train import load_model
from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import SearchOptions
from attnmt.service.plotting import plot_alignment
from attnmt.service.text.numbers import Numbers
from attnmt.service.text.placeholders import Protector
from attnmt.service.text.translator import Hypothesis, Translator, normalise

EOS_TOKEN = "</s>"


class RunTranslator:
    """A checkpoint with its run's tokenizer, translating like the server's Translator."""

    def __init__(self, run_dir: Path, checkpoint: str = "best.pt"):
        self.model = load_model(run_dir / checkpoint)
        self.tokenizer = Tokenizer(run_dir / MODEL_FILE)
        config = yaml.safe_load((run_dir / "config.yaml").read_text())
        contract = placeholder_contract({"config": config})
        # Only a model trained with sentinels can carry them (the export writes the same contract).
        self.protector = (Protector(contract, Numbers(config.get("src_lang", ""), config.get("tgt_lang", "")))
                          if contract else None)

    def translate(self, texts: list[str], beam_size: int = 1, batch_size: int = 64) -> list[Hypothesis]:
        protected = [self.protector.protect(normalise(t)) if self.protector else None for t in texts]
        sources = [self.tokenizer.encode(p.text if p else normalise(t)) for t, p in zip(texts, protected)]
        out: list[Hypothesis | None] = [None] * len(texts)
        with torch.no_grad():
            for indices in inference_batches(sources, batch_size):
                batch = make_batch([sources[i] for i in indices], None, indices)
                for i, nbest in zip(indices, beam_search(self.model, batch.src, batch.lengths, beam_size)):
                    out[i] = self._hypothesis(sources[i] + [EOS_ID], nbest[0], protected[i])
        return out

    def _hypothesis(self, source: list[int], hyp, protected) -> Hypothesis:
        source_tokens = self.tokenizer.pieces(source)
        pieces = self.tokenizer.pieces(hyp.tokens)
        if protected is not None and protected.originals:
            written = self.protector.written(protected.originals)
            source_tokens, pieces, alignment, _, with_sentinels = self.protector.restore(
                source_tokens, pieces, hyp.alignment, protected.originals, written)
            text = self.protector.text([p for p in with_sentinels if p != EOS_TOKEN], written)
        else:
            alignment = hyp.alignment
            text = self.tokenizer.decode_pieces([p for t, p in zip(hyp.tokens, pieces) if t != EOS_ID])
            if self.protector is not None:
                text = self.protector.without_sentinels(text)
        return Hypothesis(text=text, target_tokens=pieces, token_log_probs=hyp.token_log_probs,
                          log_prob=hyp.log_prob, score=hyp.score, alignment=alignment, source_tokens=source_tokens)


def evaluate_run(run_dir: Path, data_dir: Path, split: str = "test", beam: int = 5, checkpoint: str = "best.pt",
                 baseline: Path | None = None, heatmaps: int = 4, out: Path | None = None) -> dict:
    translator = RunTranslator(run_dir, checkpoint)
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    src_lang, tgt_lang = config["src_lang"], config["tgt_lang"]
    pairs = read_split(data_dir, split, src_lang, tgt_lang)
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    out = out or run_dir / "eval" / Path(data_dir).name
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"run": str(run_dir), "checkpoint": checkpoint,
                    "architecture": config.get("architecture", "rnnsearch"),
                    "parameters": count_parameters(translator.model), "threads": torch.get_num_threads(),
                    "data": str(data_dir), "split": split, "sentences": len(pairs),
                    "date": dt.date.today().isoformat(),
                    "sacrebleu": f"sacreBLEU {sacrebleu.__version__} defaults (13a, exp smoothing), detokenised"}

    def record(section: dict, label: str, hyps: list[str], seconds: float | None, prefix: str) -> None:
        (out / f"{split}.{prefix}{label}.{tgt_lang}").write_text("\n".join(hyps) + "\n", encoding="utf-8")
        section[label] = {**score(hyps, refs), "placeholders": placeholders_kept(sources, hyps)}
        if seconds is not None:
            section[label].update(seconds=round(seconds, 1), sentences_per_second=round(len(hyps) / seconds, 1))

    beamed = None
    for label, size in (("greedy", 1), (f"beam{beam}", beam)):
        start = time.perf_counter()
        hyps = translator.translate(sources, beam_size=size)
        record(report, label, [h.text for h in hyps], time.perf_counter() - start, "")
        beamed = hyps
    for n in range(min(heatmaps, len(pairs))):
        index = n * max(1, len(pairs) // max(heatmaps, 1))
        plot_alignment(beamed[index], out / f"alignment-{index}.png", title=sources[index][:80])

    if baseline is not None:     # the exported model as users get it: the serving engine
        engine = Engine(baseline)
        section: dict = {"model": str(baseline), "name": engine.manifest.name}
        served = Translator(engine, max_tokens=100_000)
        for label, size in (("greedy", 1), (f"beam{beam}", beam)):
            start = time.perf_counter()
            hyps = [t.best.text for t in served.translate(sources, SearchOptions(beam_size=size))]
            record(section, label, hyps, time.perf_counter() - start, "baseline.")
        report["baseline"] = section
    reference = apertium(sources, apertium_pair(src_lang, tgt_lang))
    if reference is not None:
        report["apertium"] = {**score(reference, refs), "placeholders": placeholders_kept(sources, reference)}
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report
