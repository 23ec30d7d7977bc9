"""`attnmt export` for a Transformer run: the served contract of docs/transformer.md
("The served contract (export)"), L decoder layers, d = d_model, H heads, d_k = d / H.

    encoder.onnx       src_tokens[N,S] int64, src_lengths[N] int64
                       -> cross_keys_0[N,H,S,d_k], cross_values_0[N,H,S,d_k], ... (each layer l),
                          src_mask[N,S] bool, init_self_keys_0[N,H,1,d_k], init_self_values_0, ...
    decoder_step.onnx  prev_tokens[R] int64, self_keys_l[R,H,T,d_k], self_values_l[R,H,T,d_k] (each l),
                       cross_keys_l[R,H,S,d_k], cross_values_l[R,H,S,d_k] (each l), src_mask[R,S],
                       vocab_bias[B,V], k[1] int64, forced_tokens[R] int64, positions[R] int64
                       -> topk_log_probs[R,k], topk_ids[R,k], forced_log_probs[R],
                          new_self_keys_l[R,H,T+1,d_k], new_self_values_l[R,H,T+1,d_k] (each l), alpha[R,S]
    decoder_step_shared.onnx
                       the same with the memory per sentence ([N,...]) and memory_index[R] int64.
    decoder_step_append.onnx
                       decoder_step's inputs with caches of C >= T positions and cache_length[] int64 = T
                       -> the same outputs, but each new_self_*_l only the new entry, [R,H,1,d_k]
    decoder_step_grouped.onnx
                       decoder_step_append with the memory per sentence ([N,...]), group_rows[N,G] int64
                       (sentence n's rows; any row where it has fewer than G) and row_places[R] int64
                       (row r's place n·G + g): each sentence's cross K and V are read once for its rows

Every tensor a step reads is head-major, per layer, as its attention reads it: the step
slices and transposes nothing of the caches or the memory (in the layout it replaced,
each layer's columns of one [R,T,2*L*d] cache and of [N,S,L*d] memories, that slicing
and transposing was 40-45 % of a step). The manifest's `position_axes` tells the server
that these tensors hold their positions on axis 2.

The encoder computes each decoder layer's cross-attention K and V once per sentence (zero
on padding). A self-attention cache holds one entry per position on axis 2. Rows of
different ages share T: a shorter cache is padded with zeros on the left, so a row's own
entries are its last positions[r]; everything before them (the encoder's one zero dummy
entry, left padding) is masked out of self-attention, and the step appends the new
position at the end: Concat(past, new) on axis 2 is both what the step attends over and
its output. The step's input is E[prev]·√d + PE[positions[r]]. α is the mean over the
manifest's `alignment.heads` of layer `alignment.layer`'s cross-attention. Token choice
and weight storage are every architecture's (`directory.py`).

Nothing is written to the output directory unless parity holds: a numpy greedy loop
over the graphs in ONNX Runtime, with half of the rows joining the batch JOIN_DELAY steps
late (caches of different ages, left-padded, as the server keeps them), chooses the
same tokens as PyTorch's incremental decoding (model/search.py TransformerSteps), with
the top-k, forced log-probabilities and α within `tolerance`, and the shared, append and
grouped graphs give the direct graph's rows.
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

from attnmt.model.architectures.transformer import DecoderLayer, Transformer, scaled_dot_product_attention
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
    APPEND_GRAPH,
    CACHE_LENGTH,
    ENCODER_INPUTS,
    GRAPHS,
    GROUP_ROWS,
    GROUPED_GRAPH,
    POSITIONS,
    ROW_PLACES,
    SRC_MASK,
    TRANSFORMER_GRAPHS_REVISION,
    decoder_inputs,
    decoder_outputs,
    encoder_outputs,
    file_entries,
    load_manifest,
    sentence_groups,
)
from attnmt.service.modeldir.vocabulary import no_specials_bias

POSITION_AXIS = 2                                     # of every cache and cross K/V: N or R x H x positions x d_k
JOIN_DELAY = 3                                        # steps the parity loop's late rows wait


@dataclass(frozen=True)
class Contract:
    """The graphs' tensor names for a Transformer with `layers` decoder layers, in the manifest's terms."""
    layers: int

    @property
    def memory(self) -> tuple[str, ...]:
        """Kept once per sentence, fed to every step: each layer's cross K and V, then the mask."""
        return (*(f"cross_{kv}_{i}" for i in range(self.layers) for kv in ("keys", "values")), SRC_MASK)

    @property
    def step_state(self) -> dict[str, str]:
        """Each layer's self-attention keys and values -> the output that replaces them next step."""
        return {f"self_{kv}_{i}": f"new_self_{kv}_{i}" for i in range(self.layers) for kv in ("keys", "values")}

    @property
    def initial_state(self) -> dict[str, str]:
        """Each cache -> the encoder output that starts it."""
        return {name: f"init_{name}" for name in self.step_state}

    @property
    def position_axes(self) -> dict[str, int]:
        return {name: POSITION_AXIS for name in (*self.memory, *self.step_state) if name != SRC_MASK}

    @property
    def encoder_outputs(self) -> tuple[str, ...]:
        return encoder_outputs(self.memory, self.initial_state.values())

    def step_inputs(self, shared: bool = False, append: bool = False, grouped: bool = False) -> tuple[str, ...]:
        return decoder_inputs(self.memory, self.step_state, shared=shared, positions=True, append=append,
                              grouped=grouped)

    @property
    def step_outputs(self) -> tuple[str, ...]:
        return decoder_outputs(self.step_state.values())

    @classmethod
    def of_sessions(cls, sessions: dict) -> "Contract":
        """The contract of graphs `onnx_sessions` opened (and checked against it)."""
        return cls(sum(o.name.startswith("cross_keys_") for o in sessions["encoder"].get_outputs()))


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


class EncoderGraph(nn.Module):
    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, src_tokens: Tensor, src_lengths: Tensor):
        memory, src_mask = self.model.encode(src_tokens, src_lengths)                # N x S x d, N x S
        on_tokens = src_mask[:, None, :, None].to(memory.dtype)                      # N x 1 x S x 1
        cross = []
        for layer in self.model.decoder.layers:
            keys, values = layer.cross_attention.keys_values(memory)                 # N x H x S x d_k each
            cross += [keys * on_tokens, values * on_tokens]
        N, H = memory.size(0), self.model.cfg.heads
        # one zero entry per cache, masked by every step: a cache's T is never 0
        initial = [memory.new_zeros(N, H, 1, self.model.cfg.d_model // H) for _ in cross]
        return *cross, src_mask, *initial


def _sizes(layer: DecoderLayer) -> tuple[int, int]:
    """(d, H) of a layer as plain ints, never read from a tensor's shape: every reshape of a step
    then has a constant shape (-1 for the rows), where sizes read from shapes become Shape,
    Gather, Unsqueeze and Concat nodes that run at every step; at a few rows a step costs its
    nodes more than its numbers (the append step: 352 exported nodes before, 241 after; docs/transformer.md)."""
    return layer.self_attention.output.in_features, layer.self_attention.heads


def _linear(linear: nn.Linear, x: Tensor) -> Tensor:
    """linear(x) for x of R x d, traced as MatMul and Add, not as one Gemm: ONNX Runtime fuses
    the two into a Gemm when it loads the graph, and the weight stays stored as the MatMul's
    (the int8 export quantizes MatMuls, and a model directory re-exported keeps its weights.bin)."""
    return x @ linear.weight.t() + linear.bias


def _ffn(layer: DecoderLayer, x: Tensor) -> Tensor:
    return _linear(layer.ffn.linear_2, torch.relu(_linear(layer.ffn.linear_1, layer.ffn_norm(x))))


def _own_qkv(layer: DecoderLayer, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The position's own self-attention Q, K, V (R x H x 1 x d_k each) from x (R x d). One
    position, so splitting the heads is a reshape: [Q | K | V] holds 3H heads side by side."""
    d, H = _sizes(layer)
    qkv = _linear(layer.self_attention.query_key_value, layer.self_attention_norm(x)).reshape(-1, 3 * H, 1, d // H)
    return qkv[:, :H], qkv[:, H:2 * H], qkv[:, 2 * H:]


def _after_self_attention(layer: DecoderLayer, x: Tensor, context: Tensor, cross_keys: Tensor, cross_values: Tensor,
                          src_mask: Tensor, groups: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    """The rest of the layer from its self-attention context (R x H x 1 x d_k): the residual,
    cross-attention and the FFN. x: R x d. Returns x and α (R x H x S). With `groups`
    (group_rows, row_places) the memory is per sentence (`_grouped_cross_attention`).
    A step's activations are R x d, not R x 1 x d: ONNX Runtime then runs each linear layer as
    one Gemm with its bias inside, where over three dimensions it is a MatMul and an Add."""
    d, H = _sizes(layer)
    x = x + _linear(layer.self_attention.output, context.reshape(-1, d))                      # heads side by side again
    q = _linear(layer.cross_attention.query, layer.cross_attention_norm(x))                   # R x d
    if groups is None:
        context, alpha = scaled_dot_product_attention(q.reshape(-1, H, 1, d // H), cross_keys, cross_values, src_mask,
                                                      scale=(d // H) ** -0.5)
        alpha = alpha[:, :, 0]
    else:
        context, alpha = _grouped_cross_attention(q, cross_keys, cross_values, src_mask, *groups, H, d)
    context = context.reshape(-1, d)
    x = x + _linear(layer.cross_attention.output, context)
    x = x + _ffn(layer, x)
    return x, alpha


def _grouped_cross_attention(q: Tensor, cross_keys: Tensor, cross_values: Tensor, src_mask: Tensor,
                             group_rows: Tensor, row_places: Tensor, H: int, d: int) -> tuple[Tensor, Tensor]:
    """Cross-attention with the memory per sentence (N x H x S x d_k; src_mask N x 1 x 1 x S): the
    queries of each sentence's rows side by side (group_rows N x G; a place no row takes holds
    any row, whose answer there is never read), so each sentence's keys and values are read
    once for all its rows, a beam's included, where the direct graph reads a copy per row.
    q: R x d. Returns the context (R x d) and α (R x H x S), row r's at place
    row_places[r] = n·G + g of the N x G grid. H and d are the model's (plain ints): constant
    reshapes (`_sizes`)."""
    grid = q.reshape(-1, H, d // H)[group_rows].transpose(1, 2)                      # N x H x G x d_k
    context, alpha = scaled_dot_product_attention(grid, cross_keys, cross_values, src_mask, scale=(d // H) ** -0.5)
    context = context.transpose(1, 2).reshape(-1, d)[row_places]                      # R x d
    alpha = alpha.transpose(1, 2).reshape(-1, H, cross_keys.size(2))[row_places]     # R x H x S (S: an input's)
    return context, alpha


def layer_step(layer: DecoderLayer, x: Tensor, past_keys: Tensor, past_values: Tensor, self_mask: Tensor,
               cross_keys: Tensor, cross_values: Tensor, src_mask: Tensor) -> tuple[Tensor, ...]:
    """DecoderLayer.forward (in eval mode) for one position, on head-major caches and memory.
    x: R x d; past_*: R x H x T x d_k; cross_*: R x H x S x d_k. Returns x, α (R x H x S)
    and the keys and values attended over (R x H x T+1 x d_k: the new caches)."""
    d, H = _sizes(layer)
    q, k, v = _own_qkv(layer, x)
    keys = torch.cat([past_keys, k], dim=2)                                          # R x H x T+1 x d_k
    values = torch.cat([past_values, v], dim=2)
    context, _ = scaled_dot_product_attention(q, keys, values, self_mask, scale=(d // H) ** -0.5)   # R x H x 1 x d_k
    x, alpha = _after_self_attention(layer, x, context, cross_keys, cross_values, src_mask)
    return x, alpha, keys, values


def layer_append_step(layer: DecoderLayer, x: Tensor, past_keys: Tensor, past_values: Tensor, past_mask: Tensor,
                      cross_keys: Tensor, cross_values: Tensor, src_mask: Tensor,
                      groups: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, ...]:
    """`layer_step` over caches with room to grow, without appending to them: the new
    position's scores and values are taken beside the cache's (one softmax over both), and
    only its keys and values are returned (R x H x 1 x d_k each). past_*: R x H x C x d_k;
    past_mask: R x 1 x 1 x C, True on each row's own entries; groups: as in
    `_after_self_attention` (the memory then per sentence)."""
    d, H = _sizes(layer)
    q, k, v = _own_qkv(layer, x)
    scale = (d // H) ** -0.5
    past = (q @ past_keys.transpose(-2, -1) * scale).masked_fill(~past_mask, float("-inf"))   # R x H x 1 x C
    new = (q * k).sum(-1, keepdim=True) * scale                                      # R x H x 1 x 1
    weights = torch.softmax(torch.cat([past, new], dim=-1), dim=-1)                  # R x H x 1 x C+1
    context = weights[..., :-1] @ past_values + weights[..., -1:] * v                # R x H x 1 x d_k
    x, alpha = _after_self_attention(layer, x, context, cross_keys, cross_values, src_mask, groups)
    return x, alpha, k, v


class DecoderStepGraph(nn.Module):
    """`decoder_step.onnx`: one step for R rows of any ages, row r attending memory row r,
    with the token choice inside the graph. Its inputs are `Contract.step_inputs()`."""

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model
        self.alignment_heads = alignment_heads(model)

    def forward(self, prev_tokens: Tensor, *inputs: Tensor):
        L = len(self.model.decoder.layers)
        src_mask, vocab_bias, k, forced_tokens, positions = inputs[4 * L:]
        return self.step(prev_tokens, inputs[:2 * L], inputs[2 * L:4 * L], src_mask, vocab_bias, k,
                         forced_tokens, positions)

    def step(self, prev_tokens: Tensor, caches: tuple[Tensor, ...], cross: tuple[Tensor, ...], src_mask: Tensor,
             vocab_bias: Tensor, k: Tensor, forced_tokens: Tensor, positions: Tensor):
        """caches: self_keys_0, self_values_0, ... (R x H x T x d_k); cross: cross_keys_0,
        cross_values_0, ... (R x H x S x d_k)."""
        decoder = self.model.decoder
        T = caches[0].size(2)
        # Entries T - positions[r] .. T are row r's own (the last one is this step's); the
        # dummy entry and the left padding before them are masked.
        entry = torch.arange(T + 1, device=prev_tokens.device)                       # T+1
        self_mask = entry.unsqueeze(0) >= (T - positions).unsqueeze(1)               # R x T+1
        self_mask = self_mask[:, None, None, :]                                      # R x 1 x 1 x T+1
        src_attention_mask = src_mask[:, None, None, :]                              # R x 1 x 1 x S
        # E[y]·√d + PE[t]: row t of the table is position t + 1, as in Decoder.forward
        x = decoder.embedding(prev_tokens) * decoder.scale + decoder.positions[positions]   # R x d
        new_caches, alphas = [], []
        for i, layer in enumerate(decoder.layers):
            x, alpha, keys, values = layer_step(layer, x, caches[2 * i], caches[2 * i + 1], self_mask,
                                                cross[2 * i], cross[2 * i + 1], src_attention_mask)
            new_caches += [keys, values]
            alphas.append(alpha)                                                     # R x H x S
        logits = decoder.output_layer(decoder.layer_norm(x))                         # R x V
        layer_alpha = alphas[self.model.cfg.alignment_layer]                         # R x H x S
        alpha = layer_alpha[:, self.alignment_heads].mean(1)                         # R x S
        return *choose_tokens(logits, vocab_bias, k, forced_tokens), *new_caches, alpha


class SharedDecoderStepGraph(DecoderStepGraph):
    """`decoder_step_shared.onnx`: the memory is per sentence (N rows) and row r
    attends sentence memory_index[r]. Its inputs are `Contract.step_inputs(shared=True)`."""

    def forward(self, prev_tokens: Tensor, *inputs: Tensor):
        L = len(self.model.decoder.layers)
        src_mask, vocab_bias, k, forced_tokens, memory_index, positions = inputs[4 * L:]
        # N x H x S x d_k, N x S -> R x ...
        cross = tuple(m.index_select(0, memory_index) for m in inputs[2 * L:4 * L])
        return self.step(prev_tokens, inputs[:2 * L], cross, src_mask.index_select(0, memory_index), vocab_bias, k,
                         forced_tokens, positions)


class AppendStepGraph(DecoderStepGraph):
    """`decoder_step_append.onnx`: the direct step over caches with room to grow. Entries
    cache_length - positions[r] .. cache_length of row r's caches are its own, the rest
    (the encoder's dummy entry, left padding, the room beyond cache_length) is masked; the
    step returns each cache's new entry, which the host writes at position cache_length.
    Its inputs are `Contract.step_inputs(append=True)`."""

    def forward(self, prev_tokens: Tensor, *inputs: Tensor):
        L = len(self.model.decoder.layers)
        return self.append_step(prev_tokens, inputs[:2 * L], inputs[2 * L:4 * L], *inputs[4 * L:])

    def append_step(self, prev_tokens: Tensor, caches: tuple[Tensor, ...], cross: tuple[Tensor, ...],
                    src_mask: Tensor, vocab_bias: Tensor, k: Tensor, forced_tokens: Tensor, positions: Tensor,
                    cache_length: Tensor, groups: tuple[Tensor, Tensor] | None = None):
        decoder = self.model.decoder
        entry = torch.arange(caches[0].size(2), device=prev_tokens.device)          # C
        own = (entry.unsqueeze(0) >= (cache_length - positions).unsqueeze(1)) & (entry < cache_length)   # R x C
        x = decoder.embedding(prev_tokens) * decoder.scale + decoder.positions[positions]   # R x d
        entries, alphas = [], []
        for i, layer in enumerate(decoder.layers):
            x, alpha, keys, values = layer_append_step(layer, x, caches[2 * i], caches[2 * i + 1],
                                                       own[:, None, None, :], cross[2 * i], cross[2 * i + 1],
                                                       src_mask[:, None, None, :], groups)
            entries += [keys, values]
            alphas.append(alpha)
        logits = decoder.output_layer(decoder.layer_norm(x))                         # R x V
        alpha = alphas[self.model.cfg.alignment_layer][:, self.alignment_heads].mean(1)   # R x S
        return *choose_tokens(logits, vocab_bias, k, forced_tokens), *entries, alpha


class GroupedStepGraph(AppendStepGraph):
    """`decoder_step_grouped.onnx`: the append step with the memory per sentence, each
    sentence's rows grouped for its cross-attention (`_grouped_cross_attention`): the CPU
    host's step, beams and all, with no copy of a sentence's memory per row. Its inputs are
    `Contract.step_inputs(append=True, grouped=True)`."""

    def forward(self, prev_tokens: Tensor, *inputs: Tensor):
        L = len(self.model.decoder.layers)
        *rest, group_rows, row_places = inputs[4 * L:]
        return self.append_step(prev_tokens, inputs[:2 * L], inputs[2 * L:4 * L], *rest,
                                groups=(group_rows, row_places))


def export_graphs(model: Transformer, out_dir: Path) -> None:
    model.eval()
    # The exporter puts each module back in the mode it found it in, its submodules too: a
    # wrapper left in training mode would leave the model with dropout on after the export.
    encoder, step, shared_step, append_step, grouped_step = (graph(model).eval() for graph in (
        EncoderGraph, DecoderStepGraph, SharedDecoderStepGraph, AppendStepGraph, GroupedStepGraph))
    contract = Contract(len(model.decoder.layers))
    H, d_k = model.cfg.heads, model.cfg.d_model // model.cfg.heads
    src = torch.tensor([[5, 6, 7, EOS_ID], [8, 9, EOS_ID, PAD_ID]])
    lengths = torch.tensor([4, 3])
    memory = encoder(src, lengths)[:len(contract.memory)]
    # Three decoder rows of different ages over two sentences, so no traced size coincides with another.
    memory_index = torch.tensor([0, 1, 1])
    positions = torch.tensor([4, 2, 0])
    prev = torch.tensor([5, 6, BOS_ID])
    caches = tuple(torch.zeros(3, H, 5, d_k) for _ in contract.step_state)
    # vocab_bias, k, forced_tokens
    choice = (torch.zeros(1, model.cfg.vocab_size), torch.tensor([2]), torch.tensor([4, 5, 6]))
    per_sentence = {name: {0: "sentences", POSITION_AXIS: "src_len"} for name in contract.memory}
    per_row = {name: {0: "rows", POSITION_AXIS: "src_len"} for name in contract.memory}
    per_sentence[SRC_MASK], per_row[SRC_MASK] = {0: "sentences", 1: "src_len"}, {0: "rows", 1: "src_len"}
    step_axes = {"prev_tokens": {0: "rows"}, "vocab_bias": {0: "bias_rows"}, "forced_tokens": {0: "rows"},
                 POSITIONS: {0: "rows"}, "topk_log_probs": {0: "rows", 1: "k"}, "topk_ids": {0: "rows", 1: "k"},
                 "forced_log_probs": {0: "rows"}, "alpha": {0: "rows", 1: "src_len"},
                 **{name: {0: "rows", POSITION_AXIS: "cache_len"} for name in contract.step_state},
                 **{new: {0: "rows", POSITION_AXIS: "new_cache_len"} for new in contract.step_state.values()}}
    new_caches = {new: ["rows", H, "new_cache_len", d_k] for new in contract.step_state.values()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter announces its deprecation
        to_onnx(encoder, (src, lengths), out_dir / GRAPHS["encoder"], ENCODER_INPUTS, contract.encoder_outputs,
                {"src_tokens": {0: "sentences", 1: "src_len"}, "src_lengths": {0: "sentences"}, **per_sentence,
                 **{init: {0: "sentences"} for init in contract.initial_state.values()}})
        declare_outputs(out_dir / GRAPHS["encoder"],
                        {**{name: ["sentences", H, "src_len", d_k] for name in contract.memory if name != SRC_MASK},
                         **{init: ["sentences", H, 1, d_k] for init in contract.initial_state.values()}})
        # The direct graph takes one memory row per decoder row: trace it with the memory gathered.
        row_memory = tuple(x[memory_index] for x in memory)
        to_onnx(step, (prev, *caches, *row_memory, *choice, positions), out_dir / GRAPHS["decoder_step"],
                contract.step_inputs(), contract.step_outputs, {**step_axes, **per_row})
        declare_outputs(out_dir / GRAPHS["decoder_step"], new_caches)
        to_onnx(shared_step, (prev, *caches, *memory, *choice, memory_index, positions),
                out_dir / GRAPHS["decoder_step_shared"], contract.step_inputs(shared=True), contract.step_outputs,
                {**step_axes, **per_sentence, "memory_index": {0: "rows"}})
        declare_outputs(out_dir / GRAPHS["decoder_step_shared"], new_caches)
        # Caches of 6 positions, 5 in use: rows of 4, 2 and 0 earlier steps, and a position of room.
        roomy = tuple(torch.zeros(3, H, 6, d_k) for _ in contract.step_state)
        to_onnx(append_step, (prev, *roomy, *row_memory, *choice, positions, torch.tensor(5)),
                out_dir / APPEND_GRAPH["decoder_step_append"], contract.step_inputs(append=True),
                contract.step_outputs, {**step_axes, **per_row})
        declare_outputs(out_dir / APPEND_GRAPH["decoder_step_append"],
                        {new: ["rows", H, 1, d_k] for new in contract.step_state.values()})
        # Sentence 0's row and sentence 1's two in a grid of G = 5 places (the places no row takes
        # hold the sentence's first row), so that G coincides with no other traced size.
        group_rows, row_places = torch.tensor([[0, 0, 0, 0, 0], [1, 2, 1, 1, 1]]), torch.tensor([0, 5, 6])
        to_onnx(grouped_step, (prev, *roomy, *memory, *choice, positions, torch.tensor(5), group_rows, row_places),
                out_dir / GROUPED_GRAPH["decoder_step_grouped"], contract.step_inputs(append=True, grouped=True),
                contract.step_outputs, {**step_axes, **per_sentence, GROUP_ROWS: {0: "sentences", 1: "group_width"},
                                        ROW_PLACES: {0: "rows"}})
        declare_outputs(out_dir / GROUPED_GRAPH["decoder_step_grouped"],
                        {new: ["rows", H, 1, d_k] for new in contract.step_state.values()})


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
    """The three graphs (and the append and grouped steps where the directory has them) as ONNX Runtime CPU
    sessions, checked against the contract's names for the manifest's number of decoder layers."""
    import onnxruntime as ort

    contract = Contract(load_manifest(model_dir, verify=False).dimensions["decoder_layers"])
    options = ort.SessionOptions()
    options.log_severity_level = 3
    expected = {"encoder": (ENCODER_INPUTS, contract.encoder_outputs),
                "decoder_step": (contract.step_inputs(), contract.step_outputs),
                "decoder_step_shared": (contract.step_inputs(shared=True), contract.step_outputs),
                "decoder_step_append": (contract.step_inputs(append=True), contract.step_outputs),
                "decoder_step_grouped": (contract.step_inputs(append=True, grouped=True), contract.step_outputs)}
    sessions = {}
    optional = {name: file for name, file in {**APPEND_GRAPH, **GROUPED_GRAPH}.items() if (model_dir / file).is_file()}
    for name, file in {**GRAPHS, **optional}.items():
        session = ort.InferenceSession(str(model_dir / file), options, providers=["CPUExecutionProvider"])
        signature = (tuple(i.name for i in session.get_inputs()), tuple(o.name for o in session.get_outputs()))
        if signature != expected[name]:
            raise RuntimeError(f"{file}: {signature[0]} -> {signature[1]}, the contract says {expected[name]}")
        sessions[name] = session
    return sessions


def onnx_step(session, prev: np.ndarray, caches: dict[str, np.ndarray], memory: dict[str, np.ndarray],
              bias: np.ndarray, k: int, forced: np.ndarray, positions: np.ndarray,
              memory_index: np.ndarray | None = None, cache_length: int | None = None,
              groups: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """One run of a step graph: caches and memory by name (the contract's step_state inputs
    and memory); returns every output by name. cache_length: the append step's; groups:
    the grouped step's (group_rows, row_places)."""
    feeds = {"prev_tokens": prev, **caches, **memory, "vocab_bias": bias, "k": np.array([k], dtype=np.int64),
             "forced_tokens": forced, POSITIONS: positions}
    if memory_index is not None:
        feeds["memory_index"] = memory_index
    if cache_length is not None:
        feeds[CACHE_LENGTH] = np.array(cache_length, dtype=np.int64)
    if groups is not None:
        feeds[GROUP_ROWS], feeds[ROW_PLACES] = groups
    outputs = [o.name for o in session.get_outputs()]
    return dict(zip(outputs, session.run(outputs, feeds)))


def onnx_encode(sessions: dict, contract: Contract, src: np.ndarray, lengths: np.ndarray
           ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The encoder graph on a padded batch: (memory, each cache's initial value), by name."""
    outputs = dict(zip(contract.encoder_outputs, sessions["encoder"].run(
        list(contract.encoder_outputs), {"src_tokens": src, "src_lengths": lengths})))
    return ({name: outputs[name] for name in contract.memory},
            {name: outputs[init] for name, init in contract.initial_state.items()})


@dataclass
class Trace:
    """One sentence's greedy decoding, step by step."""
    tokens: list[int] = field(default_factory=list)                 # chosen ids, </s> too where chosen
    topk_log_probs: list[np.ndarray] = field(default_factory=list)  # PARITY_TOPK each, best first (the chosen)
    forced_log_probs: list[float] = field(default_factory=list)     # of the teacher's token (ONNX Runtime only)
    alpha: list[np.ndarray] = field(default_factory=list)           # the sentence's source length each


def left_pad(cache: np.ndarray, length: int) -> np.ndarray:
    """R x H x T x d_k -> R x H x length x d_k, zeros before: a row's own entries stay last."""
    return np.pad(cache, ((0, 0), (0, 0), (length - cache.shape[POSITION_AXIS], 0), (0, 0)))


def onnx_greedy(sessions: dict, sources: list[list[int]], vocab_size: int, join_at: list[int] | None = None,
                teacher: list[list[int]] | None = None, max_ratio: float = 1.5, max_extra: int = 10,
                check_shared: bool = True, differences: dict[str, float] | None = None) -> tuple[list[Trace], float]:
    """Greedy search with the direct step graph, the rows in one batch as the server keeps
    them: sentence i joins at step join_at[i] (default 0) with its encoder's initial caches,
    left-padded (or the others' padded) to the batch's T, and leaves at </s> or its length
    limit (`model/search.py` greedy_decode's). forced_tokens are `teacher`'s (else </s>).
    Each step also runs the shared graph (unless not `check_shared`), on per-sentence memory
    and on beams of 1-3 copies of each row, and with `differences` the append step where
    `sessions` has it, on the caches with APPEND_ROOM positions of room (its largest
    difference from the direct graph goes to differences["append_vs_direct"]), and the grouped
    step likewise, on the beams' copies in a shuffled order over every sentence's memory, the
    finished ones' included (differences["grouped_vs_direct"]); returns the traces and the
    shared graph's largest difference from the direct one."""
    n = len(sources)
    join_at = join_at or [0] * n
    contract = Contract.of_sessions(sessions)
    batch = make_batch(sources, None, list(range(n)))
    lengths = batch.lengths.numpy()
    memory, initial = onnx_encode(sessions, contract, batch.src.numpy(), lengths)   # N x ..., N x H x 1 x d_k
    limit = length_limits(batch.lengths, max_ratio, max_extra).numpy()
    bias = no_specials_bias(vocab_size)
    traces = [Trace() for _ in range(n)]
    rows = np.zeros(0, dtype=np.int64)                          # R: each row's sentence
    prev = np.zeros(0, dtype=np.int64)                          # R
    positions = np.zeros(0, dtype=np.int64)                     # R: steps each row has taken
    caches = {name: value[:0] for name, value in initial.items()}                  # R x H x T x d_k each
    shared_diff = 0.0
    step = 0
    while rows.size or step <= max(join_at):
        joining = np.array([i for i in range(n) if join_at[i] == step], dtype=np.int64)
        if joining.size:
            T = max(c.shape[POSITION_AXIS] for c in (*caches.values(), *initial.values()))
            caches = {name: np.concatenate([left_pad(cache, T), left_pad(initial[name][joining], T)])
                      for name, cache in caches.items()}
            rows = np.concatenate([rows, joining])
            prev = np.concatenate([prev, np.full(joining.size, BOS_ID)])
            positions = np.concatenate([positions, np.zeros(joining.size, dtype=np.int64)])
        step += 1
        if not rows.size:
            continue
        forced = np.array([teacher[i][t] if teacher and t < len(teacher[i]) else EOS_ID
                           for i, t in zip(rows, positions)], dtype=np.int64)
        row_memory = {name: m[rows] for name, m in memory.items()}
        out = onnx_step(sessions["decoder_step"], prev, caches, row_memory, bias, PARITY_TOPK, forced, positions)
        beams = np.repeat(np.arange(rows.size), 1 + np.arange(rows.size) % 3)       # [0, 1, 1, 2, 2, 2, 3 ...]
        checks = ((np.arange(rows.size), bias), (beams, np.repeat(bias, beams.size, axis=0))) if check_shared else ()
        for copies, row_bias in checks:
            shared = onnx_step(sessions["decoder_step_shared"], prev[copies],
                               {name: c[copies] for name, c in caches.items()}, memory, row_bias, PARITY_TOPK,
                               forced[copies], positions[copies], rows[copies])
            shared_diff = max(shared_diff, *(max_diff(shared[name], out[name][copies]) for name in out))
        if differences is not None and "decoder_step_append" in sessions:
            differences["append_vs_direct"] = max(differences.get("append_vs_direct", 0.0),
                                                  _append_difference(sessions["decoder_step_append"], out, prev, caches,
                                                                     row_memory, bias, forced, positions, contract))
        if differences is not None and "decoder_step_grouped" in sessions:
            copies = np.random.default_rng(step).permutation(beams)
            differences["grouped_vs_direct"] = max(
                differences.get("grouped_vs_direct", 0.0),
                _append_difference(sessions["decoder_step_grouped"], {name: o[copies] for name, o in out.items()},
                                   prev[copies], {name: c[copies] for name, c in caches.items()}, memory, bias,
                                   forced[copies], positions[copies], contract,
                                   sentence_groups(rows[copies], len(sources))))
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
        caches = {name: out[new][keep] for name, new in contract.step_state.items()}
    return traces, shared_diff


APPEND_ROOM = 3                                       # positions of room the parity loop gives the append step


def _append_difference(session, out: dict[str, np.ndarray], prev: np.ndarray, caches: dict[str, np.ndarray],
                       memory: dict[str, np.ndarray], bias: np.ndarray, forced: np.ndarray, positions: np.ndarray,
                       contract: Contract, groups: tuple[np.ndarray, np.ndarray] | None = None) -> float:
    """The append step (the grouped one with `groups`, its memory per sentence) on the direct
    step's feeds, its caches given APPEND_ROOM positions of room (zeros), against the direct
    step's outputs `out`: the largest difference of its top k, forced log-probabilities and α,
    and of each new entry from the last position of the direct step's new caches."""
    T = next(iter(caches.values())).shape[POSITION_AXIS]
    roomy = {name: np.pad(c, ((0, 0), (0, 0), (0, APPEND_ROOM), (0, 0))) for name, c in caches.items()}
    mine = onnx_step(session, prev, roomy, memory, bias, PARITY_TOPK, forced, positions, cache_length=T,
                     groups=groups)
    worst = max(max_diff(mine[name], out[name]) for name in ("topk_log_probs", "topk_ids", "forced_log_probs", "alpha"))
    for new in contract.step_state.values():
        worst = max(worst, max_diff(mine[new], out[new][:, :, -1:]))
    return worst


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
    """The encoder graph's cross_keys_l and cross_values_l against Transformer.start's, on real tokens."""
    batch = make_batch(sources, None, list(range(len(sources))))
    contract = Contract(len(model.decoder.layers))
    memory, _ = onnx_encode(sessions, contract, batch.src.numpy(), batch.lengths.numpy())
    mask = memory[SRC_MASK]                                              # N x S
    state = model.start(*model.encode(batch.src, batch.lengths))
    theirs = [kv.numpy() for layer in state.memory_kv for kv in layer]  # N x H x S x d_k each, in memory's order
    worst = 0.0
    for name, their in zip(contract.memory, theirs):
        # the real pieces of every sentence: (pieces, H, d_k)
        worst = max(worst, max_diff(memory[name].transpose(0, 2, 1, 3)[mask], their.transpose(0, 2, 1, 3)[mask]))
    return worst


def check_parity(model: Transformer, sessions: dict, sources: list[list[int]], tolerance: float) -> dict:
    """ONNX Runtime's greedy search, half of the rows joining JOIN_DELAY steps late, against
    PyTorch's: the same tokens, and at every step up to a sentence's first different token
    the top k, the forced (PyTorch's chosen) token's log-probability and α within
    `tolerance`. Raises on any mismatch; returns the figures."""
    theirs = torch_greedy(model, sources)
    join_at = [JOIN_DELAY * (i % 2) for i in range(len(sources))]
    appended: dict[str, float] = {}
    ours, shared_diff = onnx_greedy(sessions, sources, model.cfg.vocab_size, join_at,
                                    teacher=[t.tokens for t in theirs], differences=appended)
    worst = {"memory": memory_difference(model, sessions, sources), "log_probs": 0.0, "forced_log_probs": 0.0,
             "alpha": 0.0, "shared_vs_direct": shared_diff, **appended}
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
    model = load_model(checkpoint)
    if not isinstance(model, Transformer):
        raise ValueError(f"{checkpoint} holds a {type(model).__name__}, not a Transformer")
    layer, head = alignment
    if layer is not None or head is not None:
        model.cfg = replace(model.cfg, alignment_layer=model.cfg.alignment_layer if layer is None else layer,
                            alignment_head=model.cfg.alignment_head if head is None else head)  # validated
    return export_model(model, tokenizer, out_dir, name, source_language, target_language, parity_sentences,
                        training, tolerance, shift_att)


def export_model(model: Transformer, tokenizer: Path, out_dir: Path, name: str, source_language: str,
                 target_language: str, parity_sentences: list[str], training: dict | None = None,
                 tolerance: float = 1e-4, shift_att: bool = False) -> dict:
    """`export` of a network already loaded (its weights rounded to float16 here), α from its
    cfg's alignment layer and head."""
    model = round_to_half(model)
    contract = Contract(len(model.decoder.layers))
    tok = Tokenizer(tokenizer)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        export_graphs(model, tmp)
        graphs = {**GRAPHS, **APPEND_GRAPH, **GROUPED_GRAPH}
        share_weights(tmp, list(graphs.values()), storage="float16")
        shutil.copy(tokenizer, tmp / MODEL_FILE)
        save_half_checkpoint(model, "transformer", tmp / "checkpoint.pt")
        files = [*graphs.values(), "weights.bin", MODEL_FILE, "checkpoint.pt"]
        manifest = base_manifest(name, "Transformer", source_language, target_language, len(tok),
                                 model.cfg.to_dict(), graphs, file_entries(tmp, files), training)
        manifest.update(memory=list(contract.memory), step_state=contract.step_state,
                        initial_state=contract.initial_state, position_axes=contract.position_axes,
                        alignment={"layer": model.cfg.alignment_layer, "heads": alignment_heads(model),
                                   **({"shift_att": True} if shift_att else {})},
                        graphs_revision=TRANSFORMER_GRAPHS_REVISION)
        sources = [tok.encode(s) for s in parity_sentences]
        return check_and_publish(tmp, out_dir, manifest,
                                 lambda: check_parity(model, onnx_sessions(tmp), sources, tolerance))
