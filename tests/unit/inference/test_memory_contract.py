"""The attention memory is what the manifest declares (`memory`), not three fixed names: a
model whose encoder hands the step its memory under other names, in another order and as
more tensors is served by the same decode batch, on the host and on the device path.

The model here is the tiny RNNsearch with its memory renamed and split: the step reads
`source_keys` (the attention's keys), `forward_states` and `backward_states` (the two
halves of the annotations, concatenated again inside the step) and `src_mask`, declared
mask first. It computes what the plain model computes, so every answer must be the plain
model's to the last digit; a declared tensor the batch dropped, padded wrongly or fed under
the wrong name would change them."""

import json
import shutil
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from attnmt.model.export.rnnsearch import _to_onnx
from attnmt.model.train import load_model
from attnmt.service.errors import ModelLoadError
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.modeldir.manifest import (
    ENCODER_INPUTS,
    GRAPHS,
    decoder_inputs,
    decoder_outputs,
    encoder_outputs,
    file_entries,
    load_manifest,
    write_manifest,
)
from attnmt.service.text.translator import Translator
from unit.inference.test_decoding import SHORT
from unit.inference.test_device import PLAN, _drive

MEMORY = ["src_mask", "source_keys", "forward_states", "backward_states"]


class SplitEncoder(nn.Module):
    def __init__(self, model, extra: bool = False):
        super().__init__()
        self.model, self.extra = model, extra

    def forward(self, src_tokens, src_lengths):
        annotations, keys, mask, state = self.model.encode(src_tokens, src_lengths)
        n = annotations.shape[-1] // 2                                      # annotations: N x S x 2n
        memory = (mask, keys, annotations[..., :n], annotations[..., n:])
        extra = (annotations.sum(-1, keepdim=True),) if self.extra else ()  # N x S x 1, read by no step
        return (*memory, *extra, state)


class SplitStep(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, prev_tokens, state, src_mask, source_keys, forward_states, backward_states, vocab_bias, k,
                forced_tokens):
        annotations = torch.cat([forward_states, backward_states], -1)     # R x S x 2n
        logits, new_state, alpha = self.model.step_logits(prev_tokens, state, source_keys, annotations, src_mask)
        log_probs = torch.log_softmax(logits + vocab_bias, dim=-1)         # R x V
        topk_log_probs, topk_ids = log_probs.topk(k, dim=-1)
        forced = log_probs.gather(1, forced_tokens.unsqueeze(1)).squeeze(1)
        return topk_log_probs, topk_ids, forced, new_state, alpha


class SharedSplitStep(SplitStep):
    def forward(self, prev_tokens, state, src_mask, source_keys, forward_states, backward_states, vocab_bias, k,
                forced_tokens, memory_index):
        rows = (x.index_select(0, memory_index) for x in (src_mask, source_keys, forward_states, backward_states))
        return super().forward(prev_tokens, state, *rows, vocab_bias, k, forced_tokens)


def _export_encoder(model, out, memory: list[str], extra: bool = False) -> None:
    src, lengths = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]]), torch.tensor([4, 3])
    per_sentence = {0: "sentences", 1: "src_len"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _to_onnx(SplitEncoder(model, extra), (src, lengths), out / GRAPHS["encoder"], ENCODER_INPUTS,
                 encoder_outputs(memory, ("init_state",)),
                 {"src_tokens": per_sentence, "src_lengths": {0: "sentences"}, "init_state": {0: "sentences"},
                  **{name: per_sentence for name in memory}})


def _declare(out, memory: list[str]) -> None:
    manifest = json.loads((out / "manifest.json").read_text())
    manifest.update(graphs=dict(GRAPHS), shortlist=None, memory=memory,
                    architecture="RNNsearch with its memory renamed and split (a test)")
    manifest["files"] = file_entries(out, [*GRAPHS.values(), manifest["tokenizer"], "weights.bin"])
    write_manifest(out, manifest)


@pytest.fixture(scope="module")
def split_model(tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("split") / "tiny-split"
    shutil.copytree(tiny_model, out)
    model = load_model(out / "checkpoint.pt").eval()
    src, lengths = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]]), torch.tensor([4, 3])
    annotations, keys, mask, state = model.encode(src, lengths)
    n = annotations.shape[-1] // 2
    memory = (mask, keys, annotations[..., :n], annotations[..., n:])
    index = torch.tensor([0, 1, 1])                                   # three rows over two sentences
    prev, choice = torch.full((3,), 2), (torch.zeros(1, model.cfg.vocab_size), torch.tensor([2]),
                                         torch.tensor([4, 5, 6]))
    per_row, per_sentence = {0: "rows", 1: "src_len"}, {0: "sentences", 1: "src_len"}
    axes = {"prev_tokens": {0: "rows"}, "state": {0: "rows"}, "vocab_bias": {0: "bias_rows"},
            "forced_tokens": {0: "rows"}, "topk_log_probs": {0: "rows", 1: "k"}, "topk_ids": {0: "rows", 1: "k"},
            "forced_log_probs": {0: "rows"}, "new_state": {0: "rows"}, "alpha": per_row}
    outputs = decoder_outputs(("new_state",))
    _export_encoder(model, out, MEMORY)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _to_onnx(SplitStep(model).eval(), (prev, state[index], *(x[index] for x in memory), *choice),
                 out / GRAPHS["decoder_step"], decoder_inputs(MEMORY, ("state",)), outputs,
                 {**axes, **{name: per_row for name in MEMORY}})
        _to_onnx(SharedSplitStep(model).eval(), (prev, state[index], *memory, *choice, index),
                 out / GRAPHS["decoder_step_shared"], decoder_inputs(MEMORY, ("state",), shared=True), outputs,
                 {**axes, **{name: per_sentence for name in MEMORY}, "memory_index": {0: "rows"}})
    _declare(out, MEMORY)
    return out, model


@pytest.fixture(scope="module")
def split(split_model):
    out, _ = split_model
    return {path: Translator(Engine(out, EngineOptions(intra_op_threads=1, io_binding=path == "device")))
            for path in ("host", "device")}


def test_the_engine_reads_the_declared_memory(split):
    host, device = split["host"].engine, split["device"].engine
    assert host.memory_names == tuple(MEMORY) and host.manifest.alignment is None
    encoded = host.encode([host.tokenizer.encode(SHORT) + [host.eos_id]])
    assert list(encoded.memory) == MEMORY and list(encoded.init_state) == ["state"]
    assert encoded.memory["src_mask"].dtype == bool and encoded.memory["forward_states"].ndim == 3
    assert device.memory_gathers == {"src_mask": "memory_gather_bool_2.onnx",
                                     **{name: "memory_gather_float_3.onnx" for name in MEMORY[1:]}}


@pytest.mark.parametrize("path", ["host", "device"])
def test_a_memory_under_other_names_gives_the_plain_models_answers(translator, split, path):
    """Joins (two groups before a step), a removal, beams opening and narrowing, forced rows,
    the memory growing and shrinking (test_device._drive): every finished hypothesis, its
    log-probs and α, are the plain model's (on the host path) exactly."""
    want = _drive(translator.engine, translator, PLAN)
    got = _drive(split[path].engine, split[path], PLAN)
    assert sum(len(s.finished) for s in want) > 12
    for w, g in zip(want, got):
        assert len(w.finished) == len(g.finished)
        for a, b in zip(w.finished, g.finished):
            assert a.tokens == b.tokens
            assert a.token_log_probs == b.token_log_probs and a.score == b.score
            assert np.array_equal(a.alignment, b.alignment)


def _broken(split_model, tmp_path, memory: list[str]):
    out, _ = split_model
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    _declare(broken, memory)
    return broken


def test_a_memory_without_the_source_mask_is_refused(split_model, tmp_path):
    broken = _broken(split_model, tmp_path, MEMORY[1:])
    with pytest.raises(ModelLoadError, match="lacks 'src_mask'"):
        load_manifest(broken)


def test_a_declared_memory_the_step_does_not_read_is_refused(split_model, tmp_path):
    """The encoder returns one more declared tensor than the step graphs take: the refusal
    names the step graph and the input it lacks."""
    broken = _broken(split_model, tmp_path, MEMORY + ["annotation_sums"])
    _export_encoder(split_model[1], broken, MEMORY + ["annotation_sums"], extra=True)
    _declare(broken, MEMORY + ["annotation_sums"])
    with pytest.raises(ModelLoadError, match=r"decoder_step.onnx: no input 'annotation_sums'"):
        Engine(broken)


def test_a_declared_memory_the_encoder_does_not_return_is_refused(split_model, tmp_path):
    broken = _broken(split_model, tmp_path, ["annotations", "keys", "src_mask"])
    with pytest.raises(ModelLoadError, match=r"encoder.onnx: no output 'annotations', 'keys'"):
        Engine(broken)


def test_a_memory_the_device_path_cannot_gather_is_refused(split):
    """The device path gathers each memory tensor with the slot graph for its element type and
    rank; a tensor of a kind the service ships no graph for is refused by name."""
    sessions = split["device"].engine.sessions
    encoder = SimpleNamespace(get_outputs=lambda: [
        SimpleNamespace(name=name, type="tensor(int64)" if name == "source_keys" else "tensor(float)",
                        shape=["sentences", "src_len", 4]) for name in MEMORY])
    with pytest.raises(ModelLoadError, match=r"memory 'source_keys' \(tensor\(int64\), rank 3\)"):
        sessions.memory_gathers(encoder)
