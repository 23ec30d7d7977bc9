"""`attnmt export` for a Transformer run: the served contract of docs/transformer.md
("The served contract (export)"), L decoder layers, d = d_model, H heads, d_k = d / H.

    encoder.onnx       src_tokens[N,S] int64, src_lengths[N] int64
                       -> cross_keys[N,S,L*d], cross_values[N,S,L*d], src_mask[N,S] bool,
                          init_self_cache[N,1,2*L*d]
    decoder_step.onnx  prev_tokens[R] int64, self_cache[R,T,2*L*d], cross_keys[R,S,L*d],
                       cross_values[R,S,L*d], src_mask[R,S], vocab_bias[B,V], k[1] int64,
                       forced_tokens[R] int64, positions[R] int64
                       -> topk_log_probs[R,k], topk_ids[R,k], forced_log_probs[R],
                          new_self_cache[R,T+1,2*L*d], alpha[R,S]
    decoder_step_shared.onnx
                       the same with the memory per sentence ([N,S,...]) and memory_index[R] int64.

The encoder computes each decoder layer's cross-attention K and V once per sentence
(layer l at columns l*d:(l+1)*d, head h at l*d + h*d_k; zero on padding). The
self-attention cache holds, for each position, layer l's K at columns 2l*d:(2l+1)*d and
V at (2l+1)*d:(2l+2)*d. Rows of different ages share T: a shorter cache is padded with
zeros on the left, so a row's own entries are its last positions[r]; everything before
them (the encoder's one zero dummy entry, left padding) is masked out of self-attention,
and the step appends the new position at the end. The step's input is
E[prev]·√d + PE[positions[r]]. α is the mean over the manifest's `alignment.heads` of
layer `alignment.layer`'s cross-attention. Token choice and weight storage are every
architecture's (`directory.py`).

Nothing is written to the output directory unless parity holds: a numpy greedy loop
over the graphs in ONNX Runtime, with half of the rows joining the batch JOIN_DELAY steps
late (caches of different ages, left-padded, as the server keeps them), chooses the
same tokens as PyTorch's incremental decoding (model/search.py TransformerSteps), with
the top-k, forced log-probabilities and α within `tolerance`, and the shared graph
gives the direct graph's rows.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from attnmt.model.architectures.transformer import Transformer
from attnmt.model.batching import make_batch
from attnmt.model.export.directory import (
    PARITY_TOPK,
    base_manifest,
    check_and_publish,
    choose_tokens,
    max_diff,
    round_to_half,
    save_half_checkpoint,
    share_weights,
    to_onnx,
)
from attnmt.model.search import TransformerSteps, length_limits
from attnmt.model.tokenizer import BOS_ID, EOS_ID, MODEL_FILE, PAD_ID, Tokenizer
from attnmt.model.train import load_model
from attnmt.service.modeldir.manifest import (
    ENCODER_INPUTS,
    GRAPHS,
    POSITIONS,
    file_entries,
)
from attnmt.service.modeldir.vocabulary import no_specials_bias

MEMORY = ("cross_keys", "cross_values", "src_mask")   # kept once per sentence, fed to every step
ENCODER_OUTPUTS = MEMORY + ("init_self_cache",)
STEP_STATE = {"self_cache": "new_self_cache"}         # cache input -> the output that replaces it next step
INITIAL_STATE = {"self_cache": "init_self_cache"}     # cache input -> the encoder output that starts it
STEP_INPUTS = ("prev_tokens", "self_cache", *MEMORY, "vocab_bias", "k", "forced_tokens", POSITIONS)
SHARED_STEP_INPUTS = STEP_INPUTS + ("memory_index",)
STEP_OUTPUTS = ("topk_log_probs", "topk_ids", "forced_log_probs", "new_self_cache", "alpha")
JOIN_DELAY = 3                                        # steps the parity loop's late rows wait


_SERVABLE = re.compile(r"^layer (\d+) (?:head (\d+)|heads mean) · (attention|shift-att) \S+$")


def alignment_from_report(path: Path, split: str = "dev") -> tuple[int, int, bool, str]:
    """The servable α with the lowest AER on `split` in a report of `attnmt evaluate-alignment
    --run` (bench/alignment_heads.py: every layer, head, reading and rule on the gold set):
    (layer, head or -1 for the layer's mean, Shift-Att or not, the row's name). Head sets other
    than one head or a whole layer are not servable, nor is a reading other than these two."""
    rules = json.loads(Path(path).read_text())["splits"][split]["rules"]
    servable = {name: r["aer"]["value"] for name, r in rules.items() if _SERVABLE.match(name)}
    if not servable:
        raise ValueError(f"{path}: no servable reading with an AER on its {split} split")
    name = min(servable, key=servable.get)
    layer, head, reading = _SERVABLE.match(name).groups()
    return int(layer), -1 if head is None else int(head), reading == "shift-att", name


def alignment_heads(model: Transformer) -> list[int]:
    """The heads whose mean is α: the checkpoint's alignment_head, or all of them for -1."""
    head = model.cfg.alignment_head
    return list(range(model.cfg.heads)) if head < 0 else [head]


def split_heads(x: Tensor, heads: int) -> Tensor:
    """R x T x d (heads side by side) -> R x H x T x d_k."""
    return x.reshape(x.size(0), x.size(1), heads, -1).transpose(1, 2)


class EncoderGraph(nn.Module):
    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, src_tokens: Tensor, src_lengths: Tensor):
        memory, src_mask = self.model.encode(src_tokens, src_lengths)                # N x S x d, N x S
        layers = self.model.decoder.layers
        # each layer's [K | V], N x S x 2d: the heads side by side, as split_heads reads them
        keys, values = zip(*(layer.cross_attention.key_value(memory).chunk(2, dim=-1) for layer in layers))
        on_tokens = src_mask.unsqueeze(-1).to(memory.dtype)                          # N x S x 1
        cross_keys = torch.cat(keys, dim=-1) * on_tokens                              # N x S x L*d
        cross_values = torch.cat(values, dim=-1) * on_tokens                          # N x S x L*d
        # one zero entry, masked by every step: the cache's T is never 0
        init_self_cache = memory.new_zeros(memory.size(0), 1, 2 * len(layers) * self.model.cfg.d_model)
        return cross_keys, cross_values, src_mask, init_self_cache


class DecoderStepGraph(nn.Module):
    """`decoder_step.onnx`: one step for R rows of any ages, row r attending memory row r,
    with the token choice inside the graph."""

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model
        self.alignment_heads = alignment_heads(model)

    def forward(self, prev_tokens: Tensor, self_cache: Tensor, cross_keys: Tensor, cross_values: Tensor,
                src_mask: Tensor, vocab_bias: Tensor, k: Tensor, forced_tokens: Tensor, positions: Tensor):
        decoder, d, H = self.model.decoder, self.model.cfg.d_model, self.model.cfg.heads
        T = self_cache.size(1)
        # Entries T - positions[r] .. T are row r's own (the last one is this step's); the
        # dummy entry and the left padding before them are masked.
        entry = torch.arange(T + 1, device=self_cache.device)                        # T+1
        self_mask = entry.unsqueeze(0) >= (T - positions).unsqueeze(1)               # R x T+1
        self_mask = self_mask[:, None, None, :]                                      # R x 1 x 1 x T+1
        src_attention_mask = src_mask[:, None, None, :]                              # R x 1 x 1 x S
        # E[y]·√d + PE[t]: row t of the table is position t + 1, as in Decoder.forward
        x = decoder.embedding(prev_tokens) * decoder.scale + decoder.positions[positions]   # R x d
        x = x.unsqueeze(1)                                                           # R x 1 x d
        entries, alphas = [], []
        for i, layer in enumerate(decoder.layers):
            past = tuple(split_heads(self_cache[:, :, c * d:(c + 1) * d], H) for c in (2 * i, 2 * i + 1))
            memory_kv = tuple(split_heads(m[:, :, i * d:(i + 1) * d], H) for m in (cross_keys, cross_values))
            x, alpha, (keys, values) = layer(x, self_mask, memory_kv, src_attention_mask, past)
            # keys, values: R x H x T+1 x d_k; this position's is the last, heads side by side again
            entries += [keys[:, :, -1].flatten(1), values[:, :, -1].flatten(1)]      # R x d each
            alphas.append(alpha[:, :, 0])                                            # R x H x S
        logits = decoder.output_layer(decoder.layer_norm(x))[:, 0]                   # R x V
        new_self_cache = torch.cat([self_cache, torch.cat(entries, dim=-1).unsqueeze(1)], dim=1)  # R x T+1 x 2Ld
        layer_alpha = alphas[self.model.cfg.alignment_layer]                         # R x H x S
        alpha = layer_alpha[:, self.alignment_heads].mean(1)                         # R x S
        return *choose_tokens(logits, vocab_bias, k, forced_tokens), new_self_cache, alpha


class SharedDecoderStepGraph(DecoderStepGraph):
    """`decoder_step_shared.onnx`: the memory is per sentence (N rows) and row r
    attends sentence memory_index[r]."""

    def forward(self, prev_tokens: Tensor, self_cache: Tensor, cross_keys: Tensor, cross_values: Tensor,
                src_mask: Tensor, vocab_bias: Tensor, k: Tensor, forced_tokens: Tensor, positions: Tensor,
                memory_index: Tensor):
        # cross_keys, cross_values: N x S x L*d, src_mask: N x S -> R x S x ...
        return super().forward(prev_tokens, self_cache, cross_keys.index_select(0, memory_index),
                               cross_values.index_select(0, memory_index), src_mask.index_select(0, memory_index),
                               vocab_bias, k, forced_tokens, positions)


def export_graphs(model: Transformer, out_dir: Path) -> None:
    model.eval()
    # The exporter puts each module back in the mode it found it in, its submodules too: a
    # wrapper left in training mode would leave the model with dropout on after the export.
    encoder, step, shared_step = (graph(model).eval() for graph in (EncoderGraph, DecoderStepGraph,
                                                                      SharedDecoderStepGraph))
    src = torch.tensor([[5, 6, 7, EOS_ID], [8, 9, EOS_ID, PAD_ID]])
    lengths = torch.tensor([4, 3])
    cross_keys, cross_values, mask, _ = encoder(src, lengths)
    # Three decoder rows of different ages over two sentences, so no traced size coincides with another.
    memory_index = torch.tensor([0, 1, 1])
    positions = torch.tensor([4, 2, 0])
    prev = torch.tensor([5, 6, BOS_ID])
    L, d = len(model.decoder.layers), model.cfg.d_model
    self_cache = torch.zeros(3, 5, 2 * L * d)
    # vocab_bias, k, forced_tokens
    choice = (torch.zeros(1, model.cfg.vocab_size), torch.tensor([2]), torch.tensor([4, 5, 6]))
    per_sentence, per_row = {0: "sentences", 1: "src_len"}, {0: "rows", 1: "src_len"}
    step_axes = {"prev_tokens": {0: "rows"}, "self_cache": {0: "rows", 1: "cache_len"},
                 "vocab_bias": {0: "bias_rows"}, "forced_tokens": {0: "rows"}, POSITIONS: {0: "rows"},
                 "topk_log_probs": {0: "rows", 1: "k"}, "topk_ids": {0: "rows", 1: "k"},
                 "forced_log_probs": {0: "rows"}, "new_self_cache": {0: "rows", 1: "new_cache_len"},
                 "alpha": per_row}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter announces its deprecation
        to_onnx(encoder, (src, lengths), out_dir / GRAPHS["encoder"], ENCODER_INPUTS, ENCODER_OUTPUTS,
                {"src_tokens": per_sentence, "src_lengths": {0: "sentences"}, "cross_keys": per_sentence,
                 "cross_values": per_sentence, "src_mask": per_sentence, "init_self_cache": {0: "sentences"}})
        declare_outputs(out_dir / GRAPHS["encoder"], {"cross_keys": ["sentences", "src_len", L * d],
                                                       "cross_values": ["sentences", "src_len", L * d],
                                                       "init_self_cache": ["sentences", 1, 2 * L * d]})
        # The direct graph takes one memory row per decoder row: trace it with the memory gathered.
        row_memory = tuple(x[memory_index] for x in (cross_keys, cross_values, mask))
        to_onnx(step, (prev, self_cache, *row_memory, *choice, positions),
                out_dir / GRAPHS["decoder_step"], STEP_INPUTS, STEP_OUTPUTS,
                {**step_axes, **{name: per_row for name in MEMORY}})
        to_onnx(shared_step, (prev, self_cache, cross_keys, cross_values, mask, *choice, positions, memory_index),
                out_dir / GRAPHS["decoder_step_shared"], SHARED_STEP_INPUTS, STEP_OUTPUTS,
                {**step_axes, **{name: per_sentence for name in MEMORY}, "memory_index": {0: "rows"}})


def declare_outputs(path: Path, shapes: dict[str, list]) -> None:
    """Write the contract's output shapes where the tracer could not infer them (a width
    behind a broadcast, the one dummy cache entry): ints are fixed, strings named axes."""
    import onnx

    model = onnx.load(str(path))
    for output in model.graph.output:
        for dim, size in zip(output.type.tensor_type.shape.dim, shapes.get(output.name, ())):
            if isinstance(size, int):
                dim.dim_value = size
            else:
                dim.dim_param = size
    onnx.save(model, str(path))


# --- the graphs in ONNX Runtime, without the serving engine -------------------------------

def onnx_sessions(model_dir: Path) -> dict:
    """The three graphs as ONNX Runtime CPU sessions, checked against the contract's names."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    expected = {"encoder": (ENCODER_INPUTS, ENCODER_OUTPUTS), "decoder_step": (STEP_INPUTS, STEP_OUTPUTS),
                "decoder_step_shared": (SHARED_STEP_INPUTS, STEP_OUTPUTS)}
    sessions = {}
    for name, file in GRAPHS.items():
        session = ort.InferenceSession(str(model_dir / file), options, providers=["CPUExecutionProvider"])
        signature = (tuple(i.name for i in session.get_inputs()), tuple(o.name for o in session.get_outputs()))
        if signature != expected[name]:
            raise RuntimeError(f"{file}: {signature[0]} -> {signature[1]}, the contract says {expected[name]}")
        sessions[name] = session
    return sessions


def onnx_step(session, prev: np.ndarray, self_cache: np.ndarray, memory: tuple, bias: np.ndarray, k: int,
              forced: np.ndarray, positions: np.ndarray, memory_index: np.ndarray | None = None
              ) -> dict[str, np.ndarray]:
    """One run of a step graph; memory is (cross_keys, cross_values, src_mask)."""
    feeds = {"prev_tokens": prev, "self_cache": self_cache, **dict(zip(MEMORY, memory)), "vocab_bias": bias,
             "k": np.array([k], dtype=np.int64), "forced_tokens": forced, POSITIONS: positions}
    if memory_index is not None:
        feeds["memory_index"] = memory_index
    return dict(zip(STEP_OUTPUTS, session.run(list(STEP_OUTPUTS), feeds)))


@dataclass
class Trace:
    """One sentence's greedy decoding, step by step."""
    tokens: list[int] = field(default_factory=list)                 # chosen ids, </s> too where chosen
    topk_log_probs: list[np.ndarray] = field(default_factory=list)  # PARITY_TOPK each, best first (the chosen)
    forced_log_probs: list[float] = field(default_factory=list)     # of the teacher's token (ONNX Runtime only)
    alpha: list[np.ndarray] = field(default_factory=list)           # the sentence's source length each


def left_pad(cache: np.ndarray, length: int) -> np.ndarray:
    """R x T x W -> R x length x W, zeros before: a row's own entries stay last."""
    return np.pad(cache, ((0, 0), (length - cache.shape[1], 0), (0, 0)))


def onnx_greedy(sessions: dict, sources: list[list[int]], vocab_size: int, join_at: list[int] | None = None,
                teacher: list[list[int]] | None = None, max_ratio: float = 1.5, max_extra: int = 10,
                check_shared: bool = True) -> tuple[list[Trace], float]:
    """Greedy search with the direct step graph, the rows in one batch as the server keeps
    them: sentence i joins at step join_at[i] (default 0) with its encoder's initial cache,
    left-padded (or the others' padded) to the batch's T, and leaves at </s> or its length
    limit (`model/search.py` greedy_decode's). forced_tokens are `teacher`'s (else </s>).
    Each step also runs the shared graph (unless not `check_shared`), on per-sentence memory
    and on beams of 1-3 copies of each row; returns the traces and the shared graph's
    largest difference from the direct one."""
    n = len(sources)
    join_at = join_at or [0] * n
    batch = make_batch(sources, None, list(range(n)))
    lengths = batch.lengths.numpy()
    *memory, init_cache = sessions["encoder"].run(list(ENCODER_OUTPUTS), {"src_tokens": batch.src.numpy(),
                                                                         "src_lengths": lengths})
    limit = length_limits(batch.lengths, max_ratio, max_extra).numpy()
    bias = no_specials_bias(vocab_size)
    traces = [Trace() for _ in range(n)]
    rows = np.zeros(0, dtype=np.int64)                          # R: each row's sentence
    prev = np.zeros(0, dtype=np.int64)                          # R
    positions = np.zeros(0, dtype=np.int64)                     # R: steps each row has taken
    cache = np.zeros((0, 1, init_cache.shape[2]), dtype=np.float32)   # R x T x 2Ld
    shared_diff = 0.0
    step = 0
    while rows.size or step <= max(join_at):
        joining = np.array([i for i in range(n) if join_at[i] == step], dtype=np.int64)
        if joining.size:
            T = max(cache.shape[1], init_cache.shape[1])
            cache = np.concatenate([left_pad(cache, T), left_pad(init_cache[joining], T)])
            rows = np.concatenate([rows, joining])
            prev = np.concatenate([prev, np.full(joining.size, BOS_ID)])
            positions = np.concatenate([positions, np.zeros(joining.size, dtype=np.int64)])
        step += 1
        if not rows.size:
            continue
        forced = np.array([teacher[i][t] if teacher and t < len(teacher[i]) else EOS_ID
                           for i, t in zip(rows, positions)], dtype=np.int64)
        row_memory = tuple(m[rows] for m in memory)
        out = onnx_step(sessions["decoder_step"], prev, cache, row_memory, bias, PARITY_TOPK, forced, positions)
        beams = np.repeat(np.arange(rows.size), 1 + np.arange(rows.size) % 3)       # [0, 1, 1, 2, 2, 2, 3 ...]
        checks = ((np.arange(rows.size), bias), (beams, np.repeat(bias, beams.size, axis=0))) if check_shared else ()
        for copies, row_bias in checks:
            shared = onnx_step(sessions["decoder_step_shared"], prev[copies], cache[copies], memory, row_bias,
                               PARITY_TOPK, forced[copies], positions[copies], rows[copies])
            shared_diff = max(shared_diff, *(max_diff(shared[name], out[name][copies]) for name in STEP_OUTPUTS))
        tokens = out["topk_ids"][:, 0]                                               # R
        keep = []
        for r, (i, token) in enumerate(zip(rows, tokens)):
            trace = traces[i]
            trace.tokens.append(int(token))
            trace.topk_log_probs.append(out["topk_log_probs"][r])
            trace.forced_log_probs.append(float(out["forced_log_probs"][r]))
            trace.alpha.append(out["alpha"][r, :lengths[i]])
            if token != EOS_ID and positions[r] + 1 < limit[i]:
                keep.append(r)
        rows, prev, positions = rows[keep], tokens[keep], positions[keep] + 1
        cache = out["new_self_cache"][keep]
    return traces, shared_diff


@torch.no_grad()
def torch_greedy(model: Transformer, sources: list[list[int]], max_ratio: float = 1.5,
                 max_extra: int = 10) -> list[Trace]:
    """PyTorch's incremental decoding (model/search.py TransformerSteps), greedy, every row
    from step 0, the log-probabilities renormalised without <pad> and <s> as the graphs'
    vocabulary bias does."""
    n = len(sources)
    batch = make_batch(sources, None, list(range(n)))
    steps = TransformerSteps(model, batch.src, batch.lengths)
    limit = length_limits(batch.lengths, max_ratio, max_extra).tolist()
    lengths = batch.lengths.tolist()
    bias = torch.from_numpy(no_specials_bias(model.cfg.vocab_size))                # 1 x V
    traces = [Trace() for _ in range(n)]
    alive = torch.arange(n)                                                          # rows still decoding
    prev = torch.full((n,), BOS_ID, dtype=torch.long)
    t = 0
    while alive.numel():
        log_probs, alpha = steps.step(prev)                                          # R x V, R x S
        top_log_probs, top_ids = torch.log_softmax(log_probs + bias, dim=-1).topk(PARITY_TOPK, dim=-1)
        tokens = top_ids[:, 0]                                                       # R
        t += 1
        keep = []
        for r, (i, token) in enumerate(zip(alive.tolist(), tokens.tolist())):
            traces[i].tokens.append(token)
            traces[i].topk_log_probs.append(top_log_probs[r].numpy())
            traces[i].alpha.append(alpha[r, :lengths[i]].numpy())
            if token != EOS_ID and t < limit[i]:
                keep.append(r)
        keep_t = torch.tensor(keep, dtype=torch.long)
        alive, prev = alive[keep_t], tokens[keep_t]
        steps.select(keep_t)
    return traces


@torch.no_grad()
def memory_difference(model: Transformer, sessions: dict, sources: list[list[int]]) -> float:
    """The encoder graph's cross_keys and cross_values against Transformer.start's, on real tokens."""
    batch = make_batch(sources, None, list(range(len(sources))))
    cross_keys, cross_values, mask, _ = sessions["encoder"].run(
        list(ENCODER_OUTPUTS), {"src_tokens": batch.src.numpy(), "src_lengths": batch.lengths.numpy()})
    state = model.start(*model.encode(batch.src, batch.lengths))
    worst = 0.0
    for i, (keys, values) in enumerate(state.memory_kv):                 # N x H x S x d_k each
        d = model.cfg.d_model
        for ours, theirs in ((cross_keys, keys), (cross_values, values)):
            theirs = theirs.transpose(1, 2).flatten(2).numpy()           # N x S x d, heads side by side
            worst = max(worst, max_diff(ours[:, :, i * d:(i + 1) * d][mask], theirs[mask]))
    return worst


def check_parity(model: Transformer, sessions: dict, sources: list[list[int]], tolerance: float) -> dict:
    """ONNX Runtime's greedy search, half of the rows joining JOIN_DELAY steps late, against
    PyTorch's: the same tokens, and at every step up to a sentence's first different token
    the top k, the forced (PyTorch's chosen) token's log-probability and α within
    `tolerance`. Raises on any mismatch; returns the figures."""
    theirs = torch_greedy(model, sources)
    join_at = [JOIN_DELAY * (i % 2) for i in range(len(sources))]
    ours, shared_diff = onnx_greedy(sessions, sources, model.cfg.vocab_size, join_at,
                                    teacher=[t.tokens for t in theirs])
    worst = {"memory": memory_difference(model, sessions, sources), "log_probs": 0.0, "forced_log_probs": 0.0,
             "alpha": 0.0, "shared_vs_direct": shared_diff}
    same = 0
    for o, t in zip(ours, theirs):
        same += o.tokens == t.tokens
        for step in range(min(len(o.tokens), len(t.tokens))):
            worst["log_probs"] = max(worst["log_probs"], max_diff(o.topk_log_probs[step], t.topk_log_probs[step]))
            worst["forced_log_probs"] = max(worst["forced_log_probs"],
                                            abs(o.forced_log_probs[step] - float(t.topk_log_probs[step][0])))
            worst["alpha"] = max(worst["alpha"], max_diff(o.alpha[step], t.alpha[step]))
            if o.tokens[step] != t.tokens[step]:
                break                            # the two paths part here: later steps compare nothing
    if not all(d <= tolerance for d in worst.values()):      # written so that a NaN fails too
        raise RuntimeError(f"ONNX Runtime and PyTorch differ beyond {tolerance}: {worst}")
    if same != len(sources):
        raise RuntimeError(f"greedy translations differ: {len(sources) - same} of {len(sources)} sentences")
    return {**worst, "greedy_identical": f"{same}/{len(sources)}", "late_rows": sum(map(bool, join_at)),
            "join_delay": JOIN_DELAY, "tolerance": tolerance}


def export(checkpoint: Path, tokenizer: Path, out_dir: Path, name: str, source_language: str, target_language: str,
           parity_sentences: list[str], training: dict | None = None, tolerance: float = 1e-4,
           alignment: tuple[int | None, int | None] = (None, None), shift_att: bool = False) -> dict:
    """Export, check parity in a scratch directory, then move the result to `out_dir`.
    `alignment`: (decoder layer, head or -1 for their mean) whose cross-attention becomes α,
    either None for the checkpoint's own (the guided head when trained with one). `shift_att`:
    the server reads each piece's α from the step after it (a head trained with `shift_head`)."""
    model = round_to_half(load_model(checkpoint))
    if not isinstance(model, Transformer):
        raise ValueError(f"{checkpoint} holds a {type(model).__name__}, not a Transformer")
    layer, head = alignment
    if layer is not None or head is not None:
        model.cfg = replace(model.cfg, alignment_layer=model.cfg.alignment_layer if layer is None else layer,
                            alignment_head=model.cfg.alignment_head if head is None else head)  # validated
    tok = Tokenizer(tokenizer)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        export_graphs(model, tmp)
        share_weights(tmp, list(GRAPHS.values()), half=True)
        shutil.copy(tokenizer, tmp / MODEL_FILE)
        save_half_checkpoint(model, "transformer", tmp / "checkpoint.pt")
        files = [*GRAPHS.values(), "weights.bin", MODEL_FILE, "checkpoint.pt"]
        manifest = base_manifest(name, "Transformer", source_language, target_language, len(tok),
                                 model.cfg.to_dict(), dict(GRAPHS), file_entries(tmp, files), training)
        manifest.update(memory=list(MEMORY), step_state=dict(STEP_STATE), initial_state=dict(INITIAL_STATE),
                        alignment={"layer": model.cfg.alignment_layer, "heads": alignment_heads(model),
                                   **({"shift_att": True} if shift_att else {})})
        sources = [tok.encode(s) for s in parity_sentences]
        return check_and_publish(tmp, out_dir, manifest,
                                 lambda: check_parity(model, onnx_sessions(tmp), sources, tolerance))
