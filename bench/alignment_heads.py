"""`attnmt evaluate-alignment --run RUN`: a Transformer checkpoint's cross-attention, every
decoder layer and head, scored on the hand-aligned gold set before any export.

The served α of a Transformer is the mean of some heads of one decoder layer, fixed in
its step graph at export (the manifest's `alignment`). Which layer and heads align best
is measured here, in PyTorch, on the gold dev split, so the export can name them
(`attnmt export --alignment-layer/--alignment-heads`): the issue's "every layer (heads
averaged), the chosen setting and the guided head if trained".

Each gold pair is teacher-forced through the checkpoint: the source and the reference
encoded as the Align RPC encodes them (normalised, no placeholder protection, `</s>`
last), the decoder fed `<s>` + the reference, so row k of a layer's α belongs to the step
that predicts piece k, the convention of the served alignment. Each variant's α (one
head, or the mean of a layer's heads) is then read exactly as `evaluate_alignment` reads
a served hypothesis: word level, the `attention` and `shift-att` readings, every
symmetrisation rule.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from attnmt.bench.evaluate_alignment import GOLD, _readings, _score, word_map
from attnmt.bench.loadtest import describe, machine
from attnmt.corpus.word_links import GoldPair, Links, read_gold
from attnmt.model.tokenizer import BOS_ID, EOS_ID, MODEL_FILE, Tokenizer
from attnmt.model.train import load_model
from attnmt.service.modeldir.links import rules_from_alpha
from attnmt.service.text.translator import Hypothesis, normalise

READINGS = ("attention", "shift-att")
DEFAULT_RULE = "attention target-argmax"          # what the server returns by default


def variant_name(layer: int, heads: tuple[int, ...], layers: int, all_heads: int) -> str:
    """`layer L head h` / `layer L heads mean`, L counted from 0 (the manifest's `layer` may be
    negative: -1 is layer L-1)."""
    which = "heads mean" if len(heads) == all_heads else "head " + "+".join(map(str, heads))
    return f"layer {layer % layers} {which}"


def teacher_forced_alphas(model, tokenizer: Tokenizer, pairs: list[GoldPair]) -> list[tuple[list[str], list[str],
                                                                                              list[np.ndarray]]]:
    """For each pair: source pieces, target pieces (both with `</s>`), and every decoder
    layer's α, (H, T, S) each, T = target pieces, S = source pieces."""
    out = []
    with torch.no_grad():
        for pair in pairs:
            source = tokenizer.encode(normalise(pair.source)) + [EOS_ID]
            target = tokenizer.encode(normalise(pair.target)) + [EOS_ID]
            src = torch.tensor([source])
            tgt_in = torch.tensor([[BOS_ID] + target[:-1]])
            _, alphas = model(src, torch.tensor([len(source)]), tgt_in)
            out.append((tokenizer.pieces(source), tokenizer.pieces(target), [a[0].numpy() for a in alphas]))
    return out


def _variants(layers: int, heads: int, guided: tuple[int, int] | None) -> list[tuple[str, int, tuple[int, ...]]]:
    """(name, layer, heads averaged): every head alone, every layer's mean, and with a guided
    head the mean of its layer's other heads."""
    found = [(variant_name(layer, (h,), layers, heads), layer, (h,)) for layer in range(layers) for h in range(heads)]
    found += [(variant_name(layer, tuple(range(heads)), layers, heads), layer, tuple(range(heads)))
              for layer in range(layers)]
    if guided is not None and heads > 2:
        layer = guided[0] % layers
        found.append((f"layer {layer} heads mean without the guided head", layer,
                      tuple(h for h in range(heads) if h != guided[1])))
    return found


def head_links(model, tokenizer: Tokenizer, pairs: list[GoldPair],
               guided: tuple[int, int] | None) -> tuple[list[dict[str, Links]], dict]:
    """For each pair, each variant's links under every reading and rule, in gold word indices."""
    alphas = teacher_forced_alphas(model, tokenizer, pairs)
    layers, heads = len(alphas[0][2]), alphas[0][2][0].shape[0]
    variants = _variants(layers, heads, guided)
    out = []
    for pair, (source_tokens, target_tokens, by_layer) in zip(pairs, alphas):
        found: dict[str, Links] = {}
        src_map = tgt_map = None
        for name, layer, chosen in variants:
            alpha = by_layer[layer][list(chosen)].mean(axis=0)
            hyp = Hypothesis(text=pair.target, target_tokens=target_tokens, token_log_probs=[], log_prob=0.0,
                             score=0.0, alignment=alpha, source_tokens=source_tokens)
            if src_map is None:
                src_map = word_map(hyp.source_words[:-1], pair.source)
                tgt_map = word_map(hyp.target_words[:-1], pair.target)
            readings = _readings(hyp)
            for reading in READINGS:
                for rule, links in rules_from_alpha(readings[reading]).items():
                    found[f"{name} · {reading} {rule}"] = {(src_map[i], tgt_map[j]) for i, j in links}
        out.append(found)
    return out, {"layers": layers, "heads": heads, "variants": len(variants)}


def evaluate_heads(run_dir: Path, checkpoint: str = "best.pt", gold_dir: Path = GOLD, splits=("dev", "test"),
                   tune_split: str = "dev", samples: int = 1000, seed: int = 25) -> dict:
    """AER of every (layer, heads) variant, reading and rule; the variant with the lowest
    dev AER under the served default rule, and the lowest overall."""
    model = load_model(Path(run_dir) / checkpoint)
    if not hasattr(model, "decoder") or not hasattr(model.cfg, "alignment_layer"):
        raise ValueError(f"{run_dir}/{checkpoint} is not a Transformer: score an RNNsearch's served "
                         "alignment with --model")
    tokenizer = Tokenizer(Path(run_dir) / MODEL_FILE)
    cfg = model.cfg
    guided = (cfg.alignment_layer, cfg.alignment_head) if cfg.alignment_head >= 0 else None
    report: dict = {"run": str(run_dir), "checkpoint": checkpoint, "gold": str(gold_dir), "machine": machine(),
                    "alignment_layer": cfg.alignment_layer, "alignment_head": cfg.alignment_head,
                    "bootstrap": {"samples": samples, "seed": seed, "level": 0.95, "over": "sentence pairs"},
                    "splits": {}}
    for split in sorted(splits, key=lambda name: name != tune_split):
        pairs = [p for p in read_gold(Path(gold_dir) / f"{split}.tsv") if p.annotated]
        found, shape = head_links(model, tokenizer, pairs, guided)
        report.update(shape)
        report["splits"][split] = {"annotated": len(pairs),
                                   "rules": {name: _score(pairs, [f[name] for f in found], samples, seed)
                                             for name in found[0]} if pairs else {}}
    tuned = report["splits"].get(tune_split, {}).get("rules", {})
    if tuned:
        aer = {name: r["aer"]["value"] for name, r in tuned.items()}
        report["best_on_dev"] = min(aer, key=aer.get)
        default_rule = {n: v for n, v in aer.items() if n.endswith(" · " + DEFAULT_RULE)}
        report["best_variant_on_dev"] = min(default_rule, key=default_rule.get).split(" · ")[0]
        if guided is not None:
            report["guided"] = variant_name(guided[0], (guided[1],), report["layers"], report["heads"])
    report["splits"] = {split: report["splits"][split] for split in splits}
    return report


def format_heads(report: dict) -> str:
    """One row per variant: the served default rule's AER on each split, and on dev the
    variant's best rule."""
    splits = list(report["splits"])
    tune = next(iter(s for s in splits if report["splits"][s]["rules"]), None)
    counts = ", ".join(f"{s} {report['splits'][s]['annotated']}" for s in splits)
    out = [f"{report['run']}/{report['checkpoint']}: {report.get('layers')} decoder layers x {report.get('heads')} "
           f"heads, teacher-forced on the gold pairs ({counts}); AER in %, bootstrap 95 % CI. "
           f"Guided head: {report.get('guided', 'none')}. {describe(report['machine'])}",
           ""]
    if tune is None:
        return "\n".join(out + ["(no pair aligned by hand)"])
    rules = report["splits"][tune]["rules"]
    variants = list(dict.fromkeys(name.split(" · ")[0] for name in rules))
    header = "| variant | " + " | ".join(f"{s} AER, {DEFAULT_RULE}" for s in splits) + \
             f" | best rule on {tune} | its " + " | its ".join(f"{s} AER" for s in splits) + " |"
    out += [header, "|---" * (2 + 2 * len(splits)) + "|"]

    def cell(split: str, name: str) -> str:
        a = report["splits"][split]["rules"][name]["aer"]
        return f"{100 * a['value']:.1f} [{100 * a['low']:.1f}, {100 * a['high']:.1f}]"

    for variant in variants:
        mine = {n: r["aer"]["value"] for n, r in rules.items() if n.split(" · ")[0] == variant}
        best = min(mine, key=mine.get)
        marks = (" (guided)" if variant == report.get("guided") else "") + \
                (" **lowest dev**" if variant == report.get("best_variant_on_dev") else "")
        out.append(f"| {variant}{marks} | " + " | ".join(cell(s, f"{variant} · {DEFAULT_RULE}") for s in splits)
                   + f" | {best.split(' · ')[1]} | " + " | ".join(cell(s, best) for s in splits) + " |")
    out += ["", f"Lowest dev AER with the served rule: {report.get('best_variant_on_dev')}; "
                f"lowest overall: {report.get('best_on_dev')}."]
    return "\n".join(out)
