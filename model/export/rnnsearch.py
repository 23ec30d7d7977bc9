"""`attnmt export`: a trained checkpoint to a served model directory
(schema_version 2; `service/modeldir/manifest.py` holds the graphs' signatures).

Three graphs, the layout Hugging Face Optimum and pytorch/translate use for
autoregressive models: `encoder.onnx` runs once per sentence, a step graph once
per output token. The step graphs choose tokens themselves (top k of
log_softmax(logits + vocab_bias), and the log-probability of a forced token), so
a host never copies R x V log-probabilities out of ONNX Runtime.
`decoder_step.onnx` reads one memory row per decoder row; `decoder_step_shared.onnx`
gathers each row's sentence from per-sentence memory, so the rows of a beam do
not each carry a copy of their sentence's annotations.

Weights, `checkpoint.pt`, the token choice and the manifest's common sections are
every architecture's (`directory.py`): float16-rounded weights in one `weights.bin`,
each distinct tensor stored once, and the same numbers in `checkpoint.pt`.

Nothing is written to the output directory unless parity holds: ONNX Runtime,
run on the graphs directly, and PyTorch agree on the top-k log-probabilities,
forced log-probabilities and α within `tolerance` on real sentences, the shared
graph agrees with the direct one, and greedy translations are identical.
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from attnmt.model.architectures.rnnsearch import RNNsearch
from attnmt.model.batching import inference_batches, make_batch
from attnmt.model.export import shortlist
from attnmt.model.export.directory import (  # noqa: F401  (HALF_SUFFIX, full_precision: quantize.py and tests)
    HALF_SUFFIX,
    OPSET,
    PARITY_TOPK,
    base_manifest,
    check_and_publish,
    choose_tokens,
    full_precision,
    placeholder_contract,
    publish,
    round_to_half,
    save_half_checkpoint,
    share_weights,
)
from attnmt.model.export.directory import max_diff as _max_diff
from attnmt.model.export.directory import to_onnx as _to_onnx
from attnmt.model.search import translate_ids
from attnmt.model.tokenizer import BOS_ID, EOS_ID, MODEL_FILE, PAD_ID, Tokenizer
from attnmt.model.train import load_model
from attnmt.service.modeldir.manifest import (
    DECODER_INPUTS,
    DECODER_OUTPUTS,
    ENCODER_INPUTS,
    ENCODER_OUTPUTS,
    GRAPHS,
    SHARED_DECODER_INPUTS,
    SHORTLIST_GRAPHS,
    file_entries,
)
from attnmt.service.modeldir.vocabulary import no_specials_bias

STEP_STATE = {"state": "new_state"}   # recurrent input -> the output that replaces it next step
INITIAL_STATE = {"state": "init_state"}   # recurrent input -> the encoder output that starts it


class EncoderGraph(nn.Module):
    def __init__(self, model: RNNsearch):
        super().__init__()
        self.model = model

    def forward(self, src_tokens: Tensor, src_lengths: Tensor):
        return self.model.encode(src_tokens, src_lengths)


class DecoderStepGraph(nn.Module):
    """`decoder_step.onnx`: one step for R rows, row r attending memory row r,
    with the token choice inside the graph."""

    def __init__(self, model: RNNsearch):
        super().__init__()
        self.model = model

    def forward(self, prev_tokens: Tensor, state: Tensor, annotations: Tensor, keys: Tensor, src_mask: Tensor,
                vocab_bias: Tensor, k: Tensor, forced_tokens: Tensor):
        logits, new_state, alpha = self.model.step_logits(prev_tokens, state, keys, annotations, src_mask)
        return *choose_tokens(logits, vocab_bias, k, forced_tokens), new_state, alpha


class SharedDecoderStepGraph(DecoderStepGraph):
    """`decoder_step_shared.onnx`: the memory is per sentence (N rows) and row r
    attends sentence memory_index[r]."""

    def forward(self, prev_tokens: Tensor, state: Tensor, annotations: Tensor, keys: Tensor, src_mask: Tensor,
                vocab_bias: Tensor, k: Tensor, forced_tokens: Tensor, memory_index: Tensor):
        # annotations: N x S x 2n, keys: N x S x K, src_mask: N x S -> R x S x ...
        return super().forward(prev_tokens, state, annotations.index_select(0, memory_index),
                               keys.index_select(0, memory_index), src_mask.index_select(0, memory_index),
                               vocab_bias, k, forced_tokens)


def export_graphs(model: RNNsearch, out_dir: Path, with_shortlist: bool = False) -> None:
    model.eval()
    src = torch.tensor([[5, 6, 7, EOS_ID], [8, 9, EOS_ID, PAD_ID]])
    lengths = torch.tensor([4, 3])
    annotations, keys, mask, state = model.encode(src, lengths)
    # Three decoder rows over two sentences, so no traced size coincides with another.
    memory_index = torch.tensor([0, 1, 1])
    prev, state = torch.full((3,), BOS_ID), state[memory_index]
    # vocab_bias, k, forced_tokens
    choice = (torch.zeros(1, model.cfg.vocab_size), torch.tensor([2]), torch.tensor([4, 5, 6]))
    per_sentence, per_row = {0: "sentences", 1: "src_len"}, {0: "rows", 1: "src_len"}
    step_axes = {"prev_tokens": {0: "rows"}, "state": {0: "rows"}, "vocab_bias": {0: "bias_rows"},
                 "forced_tokens": {0: "rows"}, "topk_log_probs": {0: "rows", 1: "k"},
                 "topk_ids": {0: "rows", 1: "k"}, "forced_log_probs": {0: "rows"}, "new_state": {0: "rows"},
                 "alpha": per_row}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter announces its deprecation
        _to_onnx(EncoderGraph(model), (src, lengths), out_dir / GRAPHS["encoder"],
                 ENCODER_INPUTS, ENCODER_OUTPUTS,
                 {"src_tokens": per_sentence, "src_lengths": {0: "sentences"}, "annotations": per_sentence,
                  "keys": per_sentence, "src_mask": per_sentence, "init_state": {0: "sentences"}})
        # The direct graph takes one memory row per decoder row: trace it with the memory gathered.
        row_memory = tuple(x[memory_index] for x in (annotations, keys, mask))
        _to_onnx(DecoderStepGraph(model), (prev, state, *row_memory, *choice), out_dir / GRAPHS["decoder_step"],
                 DECODER_INPUTS, DECODER_OUTPUTS,
                 {**step_axes, "annotations": per_row, "keys": per_row, "src_mask": per_row})
        _to_onnx(SharedDecoderStepGraph(model), (prev, state, annotations, keys, mask, *choice, memory_index),
                 out_dir / GRAPHS["decoder_step_shared"], SHARED_DECODER_INPUTS, DECODER_OUTPUTS,
                 {**step_axes, "annotations": per_sentence, "keys": per_sentence, "src_mask": per_sentence,
                  "memory_index": {0: "rows"}})
    if with_shortlist:
        shortlist.export_graphs(model, out_dir, SHORTLIST_GRAPHS, OPSET,
                                {"prev": prev, "state": state, "row_memory": row_memory, "k": choice[1],
                                 "memory": (annotations, keys, mask), "memory_index": memory_index})


# --- the graphs in ONNX Runtime, without the serving engine -------------------------------

def onnx_sessions(model_dir: Path) -> dict:
    """The three graphs of a model directory as ONNX Runtime CPU sessions, checked
    against the contract's input names: parity is a property of the files."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    expected = {"encoder": ENCODER_INPUTS, "decoder_step": DECODER_INPUTS,
                "decoder_step_shared": SHARED_DECODER_INPUTS}
    sessions = {}
    for name, file in GRAPHS.items():
        session = ort.InferenceSession(str(model_dir / file), options, providers=["CPUExecutionProvider"])
        inputs = tuple(i.name for i in session.get_inputs())
        if inputs != expected[name]:
            raise RuntimeError(f"{file}: inputs {inputs}, the contract says {expected[name]}")
        sessions[name] = session
    return sessions


def onnx_step(session, prev: np.ndarray, state: np.ndarray, memory: tuple, bias: np.ndarray, k: int,
              forced: np.ndarray, memory_index: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """One run of a step graph; memory is (annotations, keys, src_mask)."""
    feeds = {"prev_tokens": prev, "state": state, "annotations": memory[0], "keys": memory[1],
             "src_mask": memory[2], "vocab_bias": bias, "k": np.array([k], dtype=np.int64),
             "forced_tokens": forced}
    if memory_index is not None:
        feeds["memory_index"] = memory_index
    return dict(zip(DECODER_OUTPUTS, session.run(list(DECODER_OUTPUTS), feeds)))


def onnx_greedy(sessions: dict, sources: list[list[int]], vocab_size: int, batch_size: int = 64,
                max_ratio: float = 1.5, max_extra: int = 10) -> list[list[int]]:
    """Greedy search with the direct step graph (k = 1), batched and compacted as
    `model/search.py`'s greedy_decode, whose translations it must reproduce.
    Returns token ids without </s>."""
    bias = no_specials_bias(vocab_size)
    results: list[list[int]] = [[] for _ in sources]
    for indices in inference_batches(sources, batch_size):
        batch = make_batch([sources[i] for i in indices], None, indices)
        lengths = batch.lengths.numpy()
        annotations, keys, mask, state = sessions["encoder"].run(
            list(ENCODER_OUTPUTS), {"src_tokens": batch.src.numpy(), "src_lengths": lengths})
        limit = ((lengths - 1) * max_ratio).astype(np.int64) + max_extra   # lengths count </s>
        prev = np.full(len(indices), BOS_ID, dtype=np.int64)
        alive = np.arange(len(indices))                                     # batch rows still decoding
        step = 0
        while alive.size:
            memory = (annotations[alive], keys[alive], mask[alive])
            # forced_tokens: greedy reads no forced log-prob; any valid token will do
            out = onnx_step(sessions["decoder_step"], prev, state, memory, bias, 1, prev)
            tokens = out["topk_ids"][:, 0]                                  # alive
            step += 1
            keep = []
            for position, (row, token) in enumerate(zip(alive, tokens)):
                if token == EOS_ID:
                    continue
                results[indices[row]].append(int(token))
                if step < limit[row]:
                    keep.append(position)
            alive, prev, state = alive[keep], tokens[keep], out["new_state"][keep]
    return results


@torch.no_grad()
def step_differences(model: RNNsearch, sessions: dict, sources: list[list[int]],
                     path: list[list[int]]) -> dict[str, float]:
    """Teacher-force `path` (PyTorch's greedy output) through both runtimes and
    return the largest difference of each kind over all steps: the top k (k =
    PARITY_TOPK), the forced token's log-probability, α, and the shared graph,
    with memory_index arange(n) and with beams of 1-3 rows, against the direct one."""
    n = len(sources)
    batch = make_batch(sources, None, list(range(n)))
    annotations, keys, mask, state = model.encode(batch.src, batch.lengths)
    encoded = sessions["encoder"].run(list(ENCODER_OUTPUTS), {"src_tokens": batch.src.numpy(),
                                                              "src_lengths": batch.lengths.numpy()})
    memory = tuple(encoded[:3])                             # ONNX Runtime's own annotations, keys, mask
    bias = no_specials_bias(model.cfg.vocab_size)
    beams = np.repeat(np.arange(n), 1 + np.arange(n) % 3)   # memory_index [0, 1, 1, 2, 2, 2, 3, ...]
    # (memory_index, vocab_bias): 1 x V for arange(n), R x V for the beams
    shared_rows = ((np.arange(n), bias), (beams, np.repeat(bias, len(beams), axis=0)))
    worst = {"annotations": _max_diff(encoded[0], annotations.numpy())}

    def record(name: str, *diffs: float) -> None:
        worst[name] = max(worst.get(name, 0.0), *diffs)

    prev = torch.full((n,), BOS_ID)
    for i in range(max(len(o) for o in path) + 1):
        forced = torch.tensor([o[i] if i < len(o) else EOS_ID for o in path])
        logits, next_state, alpha = model.step_logits(prev, state, keys, annotations, mask)
        log_probs = torch.log_softmax(logits + torch.from_numpy(bias), dim=-1)           # n x V
        best = log_probs.topk(PARITY_TOPK, dim=-1).values.numpy()                         # n x k
        log_probs = log_probs.numpy()
        direct = onnx_step(sessions["decoder_step"], prev.numpy(), state.numpy(), memory, bias, PARITY_TOPK,
                           forced.numpy())
        # The chosen ids are judged by PyTorch's log-probabilities of them, so tied tokens may swap.
        chosen = np.take_along_axis(log_probs, direct["topk_ids"], axis=1)
        record("log_probs", _max_diff(direct["topk_log_probs"], best), _max_diff(chosen, best))
        forced_lp = np.take_along_axis(log_probs, forced.numpy()[:, None], axis=1)[:, 0]
        record("forced_log_probs", _max_diff(direct["forced_log_probs"], forced_lp))
        record("alpha", _max_diff(direct["alpha"], alpha.numpy()))
        for rows, row_bias in shared_rows:
            shared = onnx_step(sessions["decoder_step_shared"], prev.numpy()[rows], state.numpy()[rows], memory,
                               row_bias, PARITY_TOPK, forced.numpy()[rows], rows)
            chosen = np.take_along_axis(log_probs[rows], shared["topk_ids"], axis=1)
            same_outputs = (_max_diff(shared[name], direct[name][rows])
                            for name in ("topk_log_probs", "forced_log_probs", "new_state", "alpha"))
            record("shared_vs_direct", _max_diff(chosen, best[rows]), *same_outputs)
        state, prev = next_state, forced    # both runtimes stay on PyTorch's path: errors cannot compound
    return worst


def check_parity(model: RNNsearch, sessions: dict, sources: list[list[int]], tolerance: float) -> dict:
    """Compare every step along PyTorch's greedy translations, then the greedy
    translations themselves. Raises on any mismatch; returns the figures."""
    torch_out = translate_ids(model, sources, batch_size=len(sources))
    diffs = step_differences(model, sessions, sources, torch_out)
    if not all(d <= tolerance for d in diffs.values()):      # written so that a NaN fails too
        raise RuntimeError(f"ONNX Runtime and PyTorch differ beyond {tolerance}: {diffs}")
    ort_out = onnx_greedy(sessions, sources, model.cfg.vocab_size, batch_size=len(sources))
    same = sum(a == b for a, b in zip(ort_out, torch_out))
    if same != len(sources):
        raise RuntimeError(f"greedy translations differ: {len(sources) - same} of {len(sources)} sentences")
    return {**diffs, "greedy_identical": f"{same}/{len(sources)}", "tolerance": tolerance}


def export(checkpoint: Path, tokenizer: Path, out_dir: Path, name: str, source_language: str, target_language: str,
           parity_sentences: list[str], training: dict | None = None, tolerance: float = 1e-4,
           lexical_shortlist: tuple[np.ndarray, np.ndarray] | None = None) -> dict:
    """Export, check parity in a scratch directory, then move the result to `out_dir`.
    `lexical_shortlist` (frequent ids, per-source table from `shortlist.build`) adds the
    shortlist step graphs and `shortlist.npz`."""
    model = round_to_half(load_model(checkpoint))
    tok = Tokenizer(tokenizer)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        graphs = dict(GRAPHS, **(SHORTLIST_GRAPHS if lexical_shortlist is not None else {}))
        export_graphs(model, tmp, with_shortlist=lexical_shortlist is not None)
        share_weights(tmp, list(graphs.values()), storage="float16")
        shutil.copy(tokenizer, tmp / MODEL_FILE)
        save_half_checkpoint(model, "rnnsearch", tmp / "checkpoint.pt")
        files = [*graphs.values(), "weights.bin", MODEL_FILE, "checkpoint.pt"]
        if lexical_shortlist is not None:
            shortlist.save(tmp, *lexical_shortlist)
            files.append(shortlist.FILE)
        manifest = base_manifest(name, "RNNsearch", source_language, target_language, len(tok), model.cfg.to_dict(),
                                 graphs, file_entries(tmp, files), training)
        manifest.update(score_function=model.cfg.attention, step_state=dict(STEP_STATE),
                        initial_state=dict(INITIAL_STATE))
        if lexical_shortlist is not None:
            frequent_ids, table = lexical_shortlist
            manifest["shortlist"] = {"file": shortlist.FILE, "frequent": len(frequent_ids),
                                     "per_source": table.shape[1], "scoring": "dice, sentence co-occurrence"}
        sources = [tok.encode(s) for s in parity_sentences]
        return check_and_publish(tmp, out_dir, manifest,
                                 lambda: check_parity(model, onnx_sessions(tmp), sources, tolerance))

