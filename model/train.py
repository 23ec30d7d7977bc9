"""Training either architecture (`architecture:` rnnsearch, model/architectures/rnnsearch.py, or
transformer, model/architectures/transformer.py): Adam, dropout, label smoothing, gradient
clipping, early stopping on dev BLEU, resumable checkpoints; the learning rate is
halved on a dev plateau, or follows a linear warm-up and inverse-square-root decay
(`warmup_steps`, Vaswani et al. §5.3); optionally guided alignment
(model/guided_alignment.py).

A run directory holds everything: `config.yaml` (as run), `spm.model`,
`last.pt` (model, optimizer, position in the epoch, RNG state; written every
`checkpoint_every` steps and at each validation), `best.pt` (weights of the
best dev BLEU), `checkpoints/step-N.pt` (weights of the last `keep_checkpoints`
validations, for `attnmt average`), `train.log` and `dev_hyps.txt`. Running
`attnmt train` again on the same directory resumes where the last checkpoint
left off. A checkpoint without `architecture` is an RNNsearch's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sacrebleu
import torch
import torch.nn.functional as F
import yaml

from attnmt.corpus.splits import corpus_files, read_parallel
from attnmt.model.architectures.rnnsearch import ModelConfig, RNNsearch, count_parameters
from attnmt.model.architectures.transformer import Transformer, TransformerConfig
from attnmt.model.batching import bucket_batches, make_batch
from attnmt.model.data.placeholders import SENTINELS, protect_share
from attnmt.model.data.variants import typed_share
from attnmt.model.guided_alignment import (
    GuidedAlignmentConfig,
    corpus_piece_links,
    guide_matrix,
    guided_alignment_loss,
    links_languages,
    load_links,
    save_links,
    shifted_alignment_loss,
)
from attnmt.model.search import translate_ids
from attnmt.model.tokenizer import EOS_ID, MODEL_FILE, PAD_ID, Tokenizer, train_tokenizer
from attnmt.model.transfer import WIDENABLE, transfer_state, widen_state

# architecture -> (its model config, its network)
ARCHITECTURES = {"rnnsearch": (ModelConfig, RNNsearch), "transformer": (TransformerConfig, Transformer)}


@dataclass
class TrainConfig:
    architecture: str = "rnnsearch"    # rnnsearch (model/architectures/rnnsearch.py ModelConfig) | transformer
                                       # (model/architectures/transformer.py TransformerConfig): which config
                                       # `model:` holds
    data_dir: str = "data/bible"       # {split}.tsv or {split}.{src_lang} + {split}.{tgt_lang}
    src_lang: str = "es"
    tgt_lang: str = "en"
    vocab_size: int = 8000             # joint SentencePiece vocabulary
    spm_type: str = "unigram"          # unigram | bpe
    spm_model: str = ""                # an existing spm.model to use instead of training one (the same pieces as
                                       # another run or model directory); empty: train one on this run's data
    max_length: int = 150              # drop training pairs longer than this (pieces)
    token_budget: int = 3000           # padded target tokens per batch
    learning_rate: float = 1e-3        # Adam; with warmup_steps, the peak reached at the end of the warm-up
    warmup_steps: int = 0              # >0: the rate rises linearly for this many steps, then falls as 1/sqrt(step);
                                       # the plateau halving (lr_decay) is then off. 0: constant until a plateau
    adam_beta2: float = 0.999          # Vaswani et al.: 0.98
    adam_eps: float = 1e-8             # Vaswani et al.: 1e-9
    clip_norm: float = 1.0             # gradient norm clipping
    label_smoothing: float = 0.1
    max_epochs: int = 40
    max_minutes: float = 0.0           # stop after this wall time (0: no limit)
    max_steps: int = 0                 # stop after this many updates (0: no limit): a budget that does not
                                       # depend on how busy the machine was while it trained
    validate_every: int = 0            # steps between dev evaluations (0: once per epoch)
    checkpoint_every: int = 200        # steps between resumable checkpoints
    keep_checkpoints: int = 0          # weights of the last N validations kept in checkpoints/ (`attnmt average`)
    patience: int = 6                  # validations without dev BLEU gain before stopping
    lr_decay: float = 0.5              # multiply the LR by this after `decay_patience` flat validations
    decay_patience: int = 2
    min_learning_rate: float = 1e-5
    seed: int = 1234
    placeholder_rate: float = 0.0      # share of training pairs with placeholders given sentinels instead
                                       # (placeholders.py)
    unpunctuated_rate: float = 0.0     # share of training pairs without their final marks, both sides (variants.py)
    lowercased_rate: float = 0.0       # share of training pairs with the source's first letter lower-cased
    unaccented_rate: float = 0.0       # share of training pairs with the source's accents and ¿ ¡ dropped
    init_from: str = ""                # a run directory (best.pt) or model directory (checkpoint.pt) whose weights
                                       # start this run (continued training); empty: random initialisation
    new_vocabulary: bool = False       # with init_from: train a new SentencePiece on this run's data and carry
                                       # the weights over to it (model/transfer.py); false: keep init_from's
    threads: int = 0                   # torch intra-op threads (0: torch's default)
    device: str = "cpu"                # cpu | cuda: where the updates and dev decoding run (cuda: TF32 matrix
                                       # products); checkpoints load on either, so a run may move between them
                                       # (a resume restores the CPU's random state, not the GPU's dropout masks)
    log_every: int = 50
    guided_alignment: GuidedAlignmentConfig = field(default_factory=GuidedAlignmentConfig)
    model: ModelConfig | TransformerConfig = field(default_factory=ModelConfig)

    def __post_init__(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture must be one of {', '.join(ARCHITECTURES)}, not {self.architecture!r}")
        if not isinstance(self.model, ARCHITECTURES[self.architecture][0]):
            raise ValueError(f"architecture {self.architecture} needs a {ARCHITECTURES[self.architecture][0].__name__}")
        if self.guided_alignment.links and isinstance(self.model, TransformerConfig):
            # The supervised head is the one search and export return as the alignment.
            self.model.alignment_layer = self.guided_alignment.layer
            self.model.alignment_head = self.guided_alignment.head
            self.model.__post_init__()
            shift = self.guided_alignment.shift_head
            if shift >= 0 and (shift == self.guided_alignment.head or shift >= self.model.heads):
                raise ValueError(f"guided_alignment.shift_head {shift} must be another of the {self.model.heads} "
                                 f"heads than guided_alignment.head {self.guided_alignment.head}")

    @classmethod
    def from_yaml(cls, path: Path | None, **overrides) -> "TrainConfig":
        raw = yaml.safe_load(path.read_text()) if path else {}
        score_function = overrides.pop("score_function", None)
        raw = {**(raw or {}), **{k: v for k, v in overrides.items() if v is not None}}
        architecture = raw.get("architecture", "rnnsearch")
        if architecture not in ARCHITECTURES:
            raise ValueError(f"architecture must be one of {', '.join(ARCHITECTURES)}, not {architecture!r}")
        if score_function is not None:           # one config, one run per score function
            if architecture != "rnnsearch":
                raise ValueError(f"score_function is RNNsearch's alignment score; a {architecture} has none")
            raw["model"] = {**(raw.get("model") or {}), "attention": score_function}
        model = ARCHITECTURES[architecture][0](**raw.pop("model", None) or {})
        guided = GuidedAlignmentConfig(**raw.pop("guided_alignment", None) or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(raw) - known
        if unknown:
            raise ValueError(f"unknown training option(s): {', '.join(sorted(unknown))}")
        return cls(model=model, guided_alignment=guided, **raw)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class Log:
    """Lines to train.log and stderr; a progress bar only on a terminal."""

    def __init__(self, path: Path):
        self.file = open(path, "a", encoding="utf-8")

    def __call__(self, message: str) -> None:
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}"
        self.file.write(line + "\n")
        self.file.flush()
        print(("\r" if sys.stderr.isatty() else "") + line, file=sys.stderr, flush=True)


def read_split(cfg: TrainConfig, split: str) -> list[tuple[str, str]]:
    """A split's pairs; training pairs as `training_pairs` makes them."""
    src_path, tgt_path = corpus_files(Path(cfg.data_dir), split, cfg.src_lang, cfg.tgt_lang)
    pairs = list(read_parallel(src_path, tgt_path))
    return training_pairs(cfg, pairs) if split == "train" else pairs


def training_pairs(cfg: TrainConfig, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """What training reads of the corpus' pairs: placeholder sentinels at `placeholder_rate`, then
    the typed-input variants at their rates."""
    return typed_share(protect_share(pairs, cfg.placeholder_rate), cfg.unpunctuated_rate, cfg.lowercased_rate,
                       cfg.unaccented_rate)


def load_split(cfg: TrainConfig, split: str, tok: Tokenizer) -> tuple[list[list[int]], list[list[int]], list[str]]:
    pairs = read_split(cfg, split)
    return ([tok.encode(s) for s, _ in pairs], [tok.encode(t) for _, t in pairs], [t for _, t in pairs])


def smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum of label-smoothed cross entropy and of plain NLL over non-pad tokens."""
    flat = logits.reshape(-1, logits.size(-1))
    gold = target.reshape(-1)
    loss = F.cross_entropy(flat, gold, ignore_index=PAD_ID, label_smoothing=smoothing, reduction="sum")
    with torch.no_grad():
        nll = F.cross_entropy(flat, gold, ignore_index=PAD_ID, reduction="sum")
    return loss, nll


def dev_bleu(model: RNNsearch | Transformer, tok: Tokenizer, sources: list[list[int]],
             refs: list[str]) -> tuple[float, float, list[str]]:
    hyps = [tok.decode(ids) for ids in translate_ids(model, sources)]
    return (sacrebleu.corpus_bleu(hyps, [refs]).score, sacrebleu.corpus_chrf(hyps, [refs]).score, hyps)


def save_weights(model: RNNsearch | Transformer, cfg: TrainConfig, path: Path, **extra) -> None:
    torch.save({"architecture": cfg.architecture, "model_config": cfg.model.to_dict(),
                "state_dict": model.state_dict(), **extra}, path)


def build_model(ckpt: dict) -> RNNsearch | Transformer:
    """The network a checkpoint describes, with random weights (no `architecture`: RNNsearch)."""
    config_class, network = ARCHITECTURES[ckpt.get("architecture", "rnnsearch")]
    return network(config_class(**ckpt["model_config"]))


def load_model(path: Path) -> RNNsearch | Transformer:
    """Load `best.pt`/`last.pt`/`averaged.pt`/a model directory's `checkpoint.pt` for inference (fp32, eval mode)."""
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    model = build_model(ckpt)
    model.load_state_dict({k: v.float() for k, v in ckpt["state_dict"].items()})
    return model.eval()


def training_device(name: str) -> torch.device:
    """`device` as torch's; cuda only where PyTorch sees a GPU (never a silent fall back to the CPU)."""
    if name not in ("cpu", "cuda"):
        raise ValueError(f"device must be cpu or cuda, not {name!r}")
    if name == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device cuda: PyTorch sees no CUDA GPU here (torch.cuda.is_available() is False); "
                             "use device cpu")
        # TF32 matrix products: the Transformer trains in fp32 weights either way.
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    return torch.device(name)


def learning_rate(cfg: TrainConfig, step: int) -> float:
    """With warm-up: the peak × min(step / warmup, sqrt(warmup / step)) (Vaswani et al.'s
    d^-0.5 · min(step^-0.5, step · warmup^-1.5) with the peak named instead of d)."""
    return cfg.learning_rate * min(step / cfg.warmup_steps, (cfg.warmup_steps / step) ** 0.5)


def average_checkpoints(paths: list[Path], out: Path) -> dict:
    """The element-wise mean of the weights of `paths` (same architecture and config), saved
    as a weights file like best.pt (Vaswani et al. average the last 5 or 20 checkpoints)."""
    if not paths:
        raise ValueError("no checkpoints to average")
    first = torch.load(paths[0], map_location="cpu", weights_only=False)
    total = {k: v.double() for k, v in first["state_dict"].items()}
    steps = [first.get("step")]
    for path in paths[1:]:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
        if ckpt["model_config"] != first["model_config"] or ckpt.get("architecture") != first.get("architecture"):
            raise ValueError(f"{path} is another model than {paths[0]}")
        for k, v in ckpt["state_dict"].items():
            total[k] += v.double()
        steps.append(ckpt.get("step"))
    # Tied tensors (one embedding table under three names) stay one tensor, as in best.pt.
    averaged, shared = {}, {}
    for k, v in first["state_dict"].items():
        averaged[k] = shared.setdefault(v.data_ptr(), (total[k] / len(paths)).to(v.dtype))
    torch.save({"architecture": first.get("architecture", "rnnsearch"), "model_config": first["model_config"],
                "state_dict": averaged, "averaged_from": [str(p) for p in paths], "steps": steps}, out)
    return {"averaged": len(paths), "steps": steps, "out": str(out)}


def initial_weights(cfg: TrainConfig, run_dir: Path, log: Log,
                    model: RNNsearch | Transformer) -> dict[str, torch.Tensor]:
    """The weights `init_from` names, re-indexed to this run's vocabulary when it is
    new, and placed into wider recurrent layers when this run's are wider (RNNsearch)."""
    source = Path(cfg.init_from)
    weights = source / "best.pt" if (source / "best.pt").exists() else source / "checkpoint.pt"
    if weights.exists():
        ckpt = torch.load(weights, map_location="cpu", weights_only=False)
    else:
        # a bundled model directory ships its graphs, not checkpoint.pt: read the weights back from them
        from attnmt.model.export.recover import recover_checkpoint
        ckpt, weights = recover_checkpoint(source), source / "weights.bin"
        log(f"weights read back from the graphs of {source} (no checkpoint.pt there)")
    architecture = ckpt.get("architecture", "rnnsearch")
    if architecture != cfg.architecture:
        raise ValueError(f"init_from {weights} is a {architecture}, this run a {cfg.architecture}")
    state = {k: v.float() for k, v in ckpt["state_dict"].items()}
    old, new = ckpt["model_config"], cfg.model.to_dict()
    if cfg.architecture == "rnnsearch" and any(old[k] != new[k] for k in WIDENABLE):
        state = widen_state(state, old, new, model.state_dict())
        log("widened from " + ", ".join(f"{k} {old[k]}" for k in WIDENABLE) + " to " + ", ".join(
            f"{new[k]}" for k in WIDENABLE) + " (the new units start with zero weight to the old ones)")
    if not cfg.new_vocabulary:
        return state
    state, counts = transfer_state(state, source / MODEL_FILE, run_dir / MODEL_FILE)
    log(f"vocabulary transferred from {weights}: {counts['shared_pieces']} pieces shared, "
        f"{counts['composed_pieces']} composed from the old pieces")
    return state


def links_cache_key(cfg: TrainConfig) -> str:
    """What a run's cache of piece links (piece_links.npz) was made from. Keyed by the links'
    content, not their path or time, so that a run directory copied to another machine (a GPU's)
    keeps its cache."""
    path = Path(cfg.guided_alignment.links)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    source = f"{path.name} sha256={digest} placeholder_rate={cfg.placeholder_rate}"
    if cfg.unpunctuated_rate or cfg.lowercased_rate:      # a cache written before the variants stays valid
        source += f" unpunctuated_rate={cfg.unpunctuated_rate} lowercased_rate={cfg.lowercased_rate}"
    if cfg.unaccented_rate:
        source += f" unaccented_rate={cfg.unaccented_rate}"
    return source


def guided_links(cfg: TrainConfig, run_dir: Path, tok: Tokenizer, train_src: list[list[int]],
                 train_tgt: list[list[int]], log: Log) -> list | None:
    """Piece links per training pair for guided alignment, or None when it is off or its
    links file does not exist yet (training goes on without it, and says so)."""
    if not cfg.guided_alignment.links or cfg.guided_alignment.weight <= 0:
        return None
    path = Path(cfg.guided_alignment.links)
    if not path.exists():
        log(f"guided alignment off: {path} does not exist (`make links` writes it)")
        return None
    languages = links_languages(path)
    if languages is not None and languages != (cfg.src_lang, cfg.tgt_lang):
        # links of the other direction would supervise α with transposed pairs: refused, not trained on
        raise ValueError(f"{path} links {languages[0]} words (i) to {languages[1]} words (j), this run translates "
                         f"{cfg.src_lang} to {cfg.tgt_lang}: write its own with `attnmt data links {cfg.data_dir} "
                         f"--src {cfg.src_lang} --tgt {cfg.tgt_lang}`")
    # Converting word links to pieces takes a minute or two on a large corpus: the first start
    # caches them in the run directory, so that a resume stays cheap.
    source = links_cache_key(cfg)
    cache = run_dir / "piece_links.npz"
    links = load_links(cache, source)
    if links is None:
        src_path, tgt_path = corpus_files(Path(cfg.data_dir), "train", cfg.src_lang, cfg.tgt_lang)
        raw = list(read_parallel(src_path, tgt_path))
        links, counts = corpus_piece_links(path, raw, training_pairs(cfg, raw), train_src,
                                           train_tgt, tok)
        save_links(cache, links, source)
        log(f"links for {counts['with_links']} of {counts['pairs']} pairs from {path} ({counts['mismatched']} "
            "left out: words and pieces disagree), cached in piece_links.npz")
    log(f"guided alignment on layer {cfg.guided_alignment.layer} head {cfg.guided_alignment.head}, weight "
        f"{cfg.guided_alignment.weight}: {sum(lk is not None for lk in links)} pairs with links")
    if cfg.guided_alignment.shift_head >= 0:
        log(f"and shifted (Shift-Att) on layer {cfg.guided_alignment.layer} head {cfg.guided_alignment.shift_head}")
    return links


def train(cfg: TrainConfig, run_dir: Path) -> dict:
    device = training_device(cfg.device)          # refused before anything is written
    run_dir.mkdir(parents=True, exist_ok=True)
    log = Log(run_dir / "train.log")
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)

    config_file = run_dir / "config.yaml"
    if not config_file.exists():
        config_file.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))

    if cfg.init_from and not cfg.new_vocabulary and not (run_dir / MODEL_FILE).exists():
        # Continued training keeps the vocabulary the weights were trained with.
        (run_dir / MODEL_FILE).write_bytes((Path(cfg.init_from) / MODEL_FILE).read_bytes())
    if cfg.spm_model and not (run_dir / MODEL_FILE).exists():
        (run_dir / MODEL_FILE).write_bytes(Path(cfg.spm_model).read_bytes())
        log(f"SentencePiece model from {cfg.spm_model}")
    if not (run_dir / MODEL_FILE).exists():
        sentences = [s for pair in read_split(cfg, "train") for s in pair]
        symbols = SENTINELS if cfg.placeholder_rate > 0 else []
        train_tokenizer(sentences, run_dir, cfg.vocab_size, cfg.spm_type, user_symbols=symbols)
        log(f"trained {cfg.spm_type} SentencePiece ({cfg.vocab_size} pieces) on {len(sentences)} sentences")
    tok = Tokenizer(run_dir / MODEL_FILE)
    cfg.model.vocab_size = len(tok)

    train_src, train_tgt, _ = load_split(cfg, "train", tok)
    train_links = guided_links(cfg, run_dir, tok, train_src, train_tgt, log)
    keep = [i for i in range(len(train_src))
            if 0 < len(train_src[i]) <= cfg.max_length and 0 < len(train_tgt[i]) <= cfg.max_length]
    train_src, train_tgt = [train_src[i] for i in keep], [train_tgt[i] for i in keep]
    train_links = [train_links[i] for i in keep] if train_links else None
    dev_src, _, dev_refs = load_split(cfg, "dev", tok)

    model = ARCHITECTURES[cfg.architecture][1](cfg.model)
    if cfg.init_from:
        model.load_state_dict(initial_weights(cfg, run_dir, log, model))
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, betas=(0.9, cfg.adam_beta2),
                                 eps=cfg.adam_eps)
    state = {"epoch": 0, "batch_in_epoch": 0, "step": 0, "best_bleu": -1.0, "flat": 0, "flat_since_decay": 0,
             "history": [], "seconds": 0.0}
    last = run_dir / "last.pt"
    if last.exists():
        ckpt = torch.load(last, map_location="cpu", weights_only=False)
        model.load_state_dict(ckpt["state_dict"])
        optimizer.load_state_dict(ckpt["optimizer"])
        state = ckpt["state"]
        torch.set_rng_state(ckpt["torch_rng"])
        log(f"resumed from step {state['step']} (epoch {state['epoch'] + 1}, batch {state['batch_in_epoch']})")
    else:
        log(f"{type(model).__name__} with {count_parameters(model):,} parameters"
            f"{f' (initialised from {cfg.init_from})' if cfg.init_from else ''}; {len(train_src)} training pairs "
            f"(of {len(keep)} kept), {len(dev_src)} dev pairs")

    def checkpoint() -> None:
        tmp = last.with_suffix(".tmp")
        torch.save({"architecture": cfg.architecture, "model_config": cfg.model.to_dict(),
                    "state_dict": model.state_dict(), "optimizer": optimizer.state_dict(), "state": state,
                    "torch_rng": torch.get_rng_state()}, tmp)
        tmp.replace(last)

    def keep_checkpoint(bleu: float) -> None:
        """This validation's weights into checkpoints/, the oldest beyond keep_checkpoints dropped."""
        folder = run_dir / "checkpoints"
        folder.mkdir(exist_ok=True)
        save_weights(model, cfg, folder / f"step-{state['step']:07d}.pt", dev_bleu=bleu, step=state["step"])
        for old in sorted(folder.glob("step-*.pt"))[:-cfg.keep_checkpoints]:
            old.unlink()

    def validate() -> bool:
        """Dev BLEU; returns False when training should stop."""
        bleu, chrf, hyps = dev_bleu(model, tok, dev_src, dev_refs)
        model.train()
        lr = optimizer.param_groups[0]["lr"]
        improved = bleu > state["best_bleu"]
        state["history"].append({"step": state["step"], "epoch": state["epoch"] + 1, "dev_bleu": bleu,
                                 "dev_chrf": chrf, "lr": lr, "minutes": state["seconds"] / 60})
        if cfg.keep_checkpoints:
            keep_checkpoint(bleu)
        if improved:
            state["best_bleu"], state["flat"], state["flat_since_decay"] = bleu, 0, 0
            save_weights(model, cfg, run_dir / "best.pt", dev_bleu=bleu, dev_chrf=chrf, step=state["step"])
            (run_dir / "dev_hyps.txt").write_text("\n".join(hyps) + "\n")
        else:
            state["flat"] += 1
            state["flat_since_decay"] += 1
            if (not cfg.warmup_steps and state["flat_since_decay"] >= cfg.decay_patience
                    and lr * cfg.lr_decay >= cfg.min_learning_rate):
                for group in optimizer.param_groups:
                    group["lr"] = lr * cfg.lr_decay
                state["flat_since_decay"] = 0
                log(f"learning rate {lr:g} -> {lr * cfg.lr_decay:g}")
        log(f"validation step {state['step']}: dev BLEU {bleu:.2f} chrF {chrf:.2f}"
            f"{' (best)' if improved else ''}; best {state['best_bleu']:.2f}")
        (run_dir / "history.json").write_text(json.dumps(state["history"], indent=1))
        checkpoint()
        return state["flat"] < cfg.patience

    model.train()
    progress = sys.stderr.isatty()           # a live bar on a terminal; log lines either way
    tokens_seen, loss_sum, nll_sum, t_last = 0, 0.0, 0.0, time.time()
    align_sum, align_rows = 0.0, 0
    shift_sum, shift_rows_seen = 0.0, 0
    shift_head = (cfg.guided_alignment.shift_head if train_links and isinstance(model, Transformer)
                  and cfg.guided_alignment.shift_head >= 0 else None)
    stop = bool(cfg.max_steps and state["step"] >= cfg.max_steps)     # resumed after its last update: done
    while state["epoch"] < cfg.max_epochs and not stop:
        batches = bucket_batches(train_src, train_tgt, cfg.token_budget, cfg.seed, state["epoch"])
        for b in range(state["batch_in_epoch"], len(batches)):
            indices = batches[b]
            batch = make_batch([train_src[i] for i in indices], [train_tgt[i] for i in indices], indices).to(device)
            if cfg.warmup_steps:
                for group in optimizer.param_groups:
                    group["lr"] = learning_rate(cfg, state["step"] + 1)
            logits, alphas = model(batch.src, batch.lengths, batch.tgt_in)
            loss, nll = smoothed_loss(logits, batch.tgt_out, cfg.label_smoothing)
            n_tokens = batch.target_tokens
            objective = loss / n_tokens
            guide = guide_matrix([train_links[i] for i in indices], batch.src.size(1),
                                 batch.tgt_out.size(1)) if train_links else None
            if guide is not None:
                guide = guide.to(device)
                alpha = model.alignment(alphas) if isinstance(model, Transformer) else alphas   # B x T x S
                align_loss, rows = guided_alignment_loss(alpha, guide)
                objective = objective + cfg.guided_alignment.weight * align_loss / rows.clamp_min(1)
                align_sum += align_loss.item()
                align_rows += int(rows)
                if shift_head is not None:
                    shift_loss, shift_rows = shifted_alignment_loss(alphas[cfg.guided_alignment.layer][:, shift_head],
                                                                    guide, batch.tgt_out, EOS_ID)
                    objective = objective + cfg.guided_alignment.weight * shift_loss / shift_rows.clamp_min(1)
                    shift_sum += shift_loss.item()
                    shift_rows_seen += int(shift_rows)
            optimizer.zero_grad()
            objective.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
            optimizer.step()

            state["step"] += 1
            state["batch_in_epoch"] = b + 1
            tokens_seen += n_tokens
            loss_sum += loss.item()
            nll_sum += nll.item()
            if progress:
                rate = tokens_seen / max(time.time() - t_last, 1e-6)
                print(f"\repoch {state['epoch'] + 1} [{b + 1}/{len(batches)}] loss {loss_sum / tokens_seen:.3f} "
                      f"{rate:.0f} tok/s ", end="", file=sys.stderr, flush=True)
            if state["step"] % cfg.log_every == 0:
                now = time.time()
                state["seconds"] += now - t_last
                alignment = f" alignment {align_sum / align_rows:.3f}" if align_rows else ""
                alignment += f" shifted {shift_sum / shift_rows_seen:.3f}" if shift_rows_seen else ""
                log(f"epoch {state['epoch'] + 1} batch {b + 1}/{len(batches)} step {state['step']}: "
                    f"loss {loss_sum / tokens_seen:.3f} ppl {math.exp(nll_sum / tokens_seen):.1f}{alignment} "
                    f"lr {optimizer.param_groups[0]['lr']:.3g} {tokens_seen / (now - t_last):.0f} tok/s")
                tokens_seen, loss_sum, nll_sum, t_last = 0, 0.0, 0.0, now
                align_sum, align_rows = 0.0, 0
                shift_sum, shift_rows_seen = 0.0, 0
            if cfg.validate_every and state["step"] % cfg.validate_every == 0:
                stop = not validate()
            elif state["step"] % cfg.checkpoint_every == 0:
                checkpoint()
            if cfg.max_minutes and state["seconds"] / 60 >= cfg.max_minutes:
                log(f"time limit of {cfg.max_minutes} minutes reached")
                stop = True
            if cfg.max_steps and state["step"] >= cfg.max_steps:
                log(f"update limit of {cfg.max_steps} reached")
                if not (cfg.validate_every and state["step"] % cfg.validate_every == 0):
                    validate()          # the last weights are validated (and kept for averaging) too
                stop = True
            if stop:
                break
        else:
            state["epoch"] += 1
            state["batch_in_epoch"] = 0
            if not cfg.validate_every:
                stop = not validate()
    checkpoint()
    log(f"finished: best dev BLEU {state['best_bleu']:.2f} after {state['step']} steps")
    return {"best_dev_bleu": state["best_bleu"], "steps": state["step"], "history": state["history"]}
