"""The step contract carries no RNN assumption: a model whose step keeps
a growing per-row cache, as a Transformer decoder's self-attention does, and reads each
row's position, is served by the same decode loop, on the host and on the device path.

The model here is the tiny RNNsearch with such a cache bolted on: every step appends
its new state to the cache, and the logits get a term from the mean of the row's own
cache entries. Rows of different ages share a batch with their caches aligned on the
right (service/modeldir/manifest.py), so the graph must mask the padding; if the loop padded or
counted wrongly, a sentence's answer would depend on its batch-mates."""

import json
import shutil
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from attnmt.model.export.rnnsearch import _to_onnx
from attnmt.model.train import load_model
from attnmt.service.errors import ModelLoadError
from attnmt.service.inference.batch import DecodeBatch
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.search import SearchOptions
from attnmt.service.modeldir.manifest import (
    DECODER_INPUTS,
    DECODER_OUTPUTS,
    ENCODER_INPUTS,
    GRAPHS,
    MEMORY,
    SHARED_DECODER_INPUTS,
    encoder_outputs,
    file_entries,
    load_manifest,
    write_manifest,
)
from attnmt.service.text.translator import Translator
from unit.inference.test_decoding import LONG, SHORT

CACHE_INPUTS = ("trail", "positions")


class CachedEncoder(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, src_tokens, src_lengths):
        annotations, keys, mask, state = self.model.encode(src_tokens, src_lengths)
        return annotations, keys, mask, state, state.unsqueeze(1)       # the cache starts with s_0


class CachedStep(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        generator = torch.Generator().manual_seed(3)
        d, vocab = model.cfg.decoder_hidden, model.cfg.vocab_size
        self.register_buffer("mix", torch.randn(d, vocab, generator=generator) * 2.0)

    def choose(self, logits, vocab_bias, k, forced_tokens):
        log_probs = torch.log_softmax(logits + vocab_bias, dim=-1)
        topk_log_probs, topk_ids = log_probs.topk(k, dim=-1)
        return topk_log_probs, topk_ids, log_probs.gather(1, forced_tokens.unsqueeze(1)).squeeze(1)

    def forward(self, prev_tokens, state, annotations, keys, src_mask, vocab_bias, k, forced_tokens, trail, positions):
        logits, new_state, alpha = self.model.step_logits(prev_tokens, state, keys, annotations, src_mask)
        own = positions + 1                                                 # s_0 and one entry per step
        T = trail.shape[1]
        mine = torch.arange(T).unsqueeze(0) >= (T - own).unsqueeze(1)       # R x T: the row's last `own`
        summary = (trail * mine.unsqueeze(-1)).sum(1) / own.unsqueeze(1).to(trail.dtype)
        topk_log_probs, topk_ids, forced = self.choose(logits + summary @ self.mix, vocab_bias, k, forced_tokens)
        return topk_log_probs, topk_ids, forced, new_state, alpha, torch.cat([trail, new_state.unsqueeze(1)], 1)


class SharedCachedStep(CachedStep):
    def forward(self, prev_tokens, state, annotations, keys, src_mask, vocab_bias, k, forced_tokens, memory_index,
                trail, positions):
        return super().forward(prev_tokens, state, annotations.index_select(0, memory_index),
                               keys.index_select(0, memory_index), src_mask.index_select(0, memory_index),
                               vocab_bias, k, forced_tokens, trail, positions)


def reference(model, step: CachedStep, source: list[int], eos: int, bos: int, limit: int):
    """Greedy decoding of one sentence in PyTorch, no batch, no padding."""
    with torch.no_grad():
        annotations, keys, mask, state = model.encode(torch.tensor([source]), torch.tensor([len(source)]))
        trail, prev, tokens, log_probs = state.unsqueeze(1), torch.tensor([bos]), [], []
        bias = torch.zeros(1, model.cfg.vocab_size)
        bias[0, [0, bos]] = -float("inf")
        for t in range(limit):
            lp, ids, _, state, _, trail = step(prev, state, annotations, keys, mask, bias, torch.tensor([1]),
                                               torch.tensor([0]), trail, torch.tensor([t]))
            tokens.append(int(ids[0, 0]))
            log_probs.append(float(lp[0, 0]))
            prev = ids[:, 0]
            if tokens[-1] == eos:
                break
    return tokens, log_probs


@pytest.fixture(scope="module")
def cached_model(tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("cached") / "tiny-cached"
    shutil.copytree(tiny_model, out)
    model = load_model(out / "checkpoint.pt").eval()
    step = CachedStep(model).eval()
    src = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]])
    annotations, keys, mask, state = model.encode(src, torch.tensor([4, 3]))
    index = torch.tensor([0, 1, 1])
    choice = (torch.zeros(1, model.cfg.vocab_size), torch.tensor([2]), torch.tensor([4, 5, 6]))
    prev, trail = torch.full((3,), 2), torch.stack([state[index]] * 2, 1)     # <s>; 3 rows x 2 entries
    cache = (trail, torch.tensor([1, 0, 1]))
    rows, per_row, per_sentence = {0: "rows"}, {0: "rows", 1: "src_len"}, {0: "sentences", 1: "src_len"}
    axes = {"prev_tokens": rows, "state": rows, "vocab_bias": {0: "bias_rows"}, "forced_tokens": rows,
            "topk_log_probs": {0: "rows", 1: "k"}, "topk_ids": {0: "rows", 1: "k"}, "forced_log_probs": rows,
            "new_state": rows, "alpha": per_row, "trail": {0: "rows", 1: "T"}, "positions": rows,
            "new_trail": {0: "rows", 1: "T1"}}
    outputs = DECODER_OUTPUTS + ("new_trail",)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _to_onnx(CachedEncoder(model), (src, torch.tensor([4, 3])), out / GRAPHS["encoder"], ENCODER_INPUTS,
                 encoder_outputs(MEMORY, ("init_state", "init_trail")),
                 {"src_tokens": per_sentence, "src_lengths": {0: "sentences"}, "annotations": per_sentence,
                  "keys": per_sentence, "src_mask": per_sentence, "init_state": {0: "sentences"},
                  "init_trail": {0: "sentences"}})
        _to_onnx(step, (prev, state[index], *(x[index] for x in (annotations, keys, mask)), *choice, *cache),
                 out / GRAPHS["decoder_step"], DECODER_INPUTS + CACHE_INPUTS, outputs,
                 {**axes, "annotations": per_row, "keys": per_row, "src_mask": per_row})
        _to_onnx(SharedCachedStep(model).eval(), (prev, state[index], annotations, keys, mask, *choice,
                                                  index, *cache),
                 out / GRAPHS["decoder_step_shared"], SHARED_DECODER_INPUTS + CACHE_INPUTS, outputs,
                 {**axes, "annotations": per_sentence, "keys": per_sentence, "src_mask": per_sentence,
                  "memory_index": rows})
    manifest = json.loads((out / "manifest.json").read_text())
    manifest.update(graphs=dict(GRAPHS), shortlist=None, architecture="RNNsearch with a cache (a test)",
                    step_state={"state": "new_state", "trail": "new_trail"},
                    initial_state={"state": "init_state", "trail": "init_trail"})
    manifest["files"] = file_entries(out, [*GRAPHS.values(), manifest["tokenizer"], "weights.bin"])
    write_manifest(out, manifest)
    load_manifest(out)
    return out, model, step


@pytest.fixture(scope="module")
def cached(cached_model):
    out, model, step = cached_model
    return (Translator(Engine(out, EngineOptions(intra_op_threads=1))),
            Translator(Engine(out, EngineOptions(intra_op_threads=1, io_binding=True))), model, step)


def test_a_growing_cache_and_positions_give_the_pytorch_answer(cached):
    translator, _, model, step = cached
    engine = translator.engine
    assert engine.positions and engine.state_names == {"state": "new_state", "trail": "new_trail"}
    for text in (SHORT, LONG, "gato ."):
        search = translator.search(text, SearchOptions())
        want_tokens, want_log_probs = reference(model, step, search.source, engine.eos_id, engine.bos_id,
                                                search.max_length)
        (got,) = translator.translate([text])
        assert got.best.target_tokens == engine.tokenizer.pieces(want_tokens)
        assert np.allclose(got.best.token_log_probs, want_log_probs, atol=1e-5)


def _late_joiners(translator, options):
    """SHORT alone, and SHORT joining at step 3 a batch whose rows are older (longer caches)
    and younger ones that join after it."""
    alone = translator.translate([SHORT], options)[0]
    batch = DecodeBatch(translator.engine)
    first = [translator.search(t, options) for t in (LONG, LONG + " " + LONG)]
    batch.add(first)
    for _ in range(3):
        batch.step()
    late = translator.search(SHORT, options)
    batch.add([late])
    batch.step()
    batch.add([translator.search("gato .", options)])
    while len(batch):
        batch.step()
    return alone, translator.result(SHORT, late)


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("path", ["host", "device"])
def test_a_sentence_is_the_same_alone_and_among_older_and_younger_rows(cached, beam, path):
    translator = cached[0] if path == "host" else cached[1]
    alone, together = _late_joiners(translator, SearchOptions(beam_size=beam, n_best=beam))
    assert [h.text for h in alone.hypotheses] == [h.text for h in together.hypotheses]
    for a, b in zip(alone.hypotheses, together.hypotheses):
        assert np.allclose(a.token_log_probs, b.token_log_probs, atol=1e-5)
        assert np.abs(a.alignment - b.alignment).max() < 1e-5


@pytest.mark.parametrize("path", ["host", "device"])
def test_the_cache_forgets_the_positions_only_rows_that_left_needed(cached, path):
    """Rows are aligned on the right, so the cache is as long as its oldest row: once that row
    leaves, the positions only it read are cut (else a batch that never empties, sentences
    joining as others leave, grows its cache without end), and the rows that stay answer as alone."""
    translator = cached[0] if path == "host" else cached[1]
    alone = translator.translate([SHORT])[0]
    batch = DecodeBatch(translator.engine)
    old = translator.search(LONG + " " + LONG, SearchOptions())
    batch.add([old])
    for _ in range(10):
        batch.step()
    late = translator.search(SHORT, SearchOptions())
    batch.add([late])
    batch.step()

    def cache_positions():
        state = batch.rows.state["trail"] if path == "host" else batch._device.state["trail"].numpy()
        return state.shape[1]

    assert cache_positions() == batch.cache_length() == 12      # the old row's s_0 and 11 steps
    batch.remove(old)
    batch.step()
    assert batch.cache_length() == 3 and cache_positions() == 3  # late's s_0 and 2 steps: 9 positions cut
    while len(batch):
        batch.step()
    together = translator.result(SHORT, late)
    assert together.best.text == alone.best.text
    assert np.allclose(together.best.token_log_probs, alone.best.token_log_probs, atol=1e-5)
    assert batch.cache_bytes() == 0


def test_the_device_path_carries_the_cache_as_the_host_path_does(cached):
    host, device = cached[0], cached[1]
    texts = [SHORT, LONG, "gato .", LONG + " " + LONG, "sola amas luna granda ."]
    for options in (SearchOptions(), SearchOptions(beam_size=3, n_best=3)):
        for a, b in zip(host.translate(texts, options), device.translate(texts, options)):
            assert [h.text for h in a.hypotheses] == [h.text for h in b.hypotheses]
            for x, y in zip(a.hypotheses, b.hypotheses):
                assert x.token_log_probs == y.token_log_probs and np.array_equal(x.alignment, y.alignment)


def test_a_state_without_an_initial_value_is_refused(cached_model, tmp_path):
    out, _, _ = cached_model
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    manifest = json.loads((broken / "manifest.json").read_text())
    manifest["initial_state"] = {"state": "init_state"}
    write_manifest(broken, manifest)
    with pytest.raises(ModelLoadError, match="initial_state"):
        Engine(broken)


def test_a_grown_cache_is_kept_as_the_step_returned_it_and_rows_join_beyond_it():
    """slots.Rows: a step's grown cache becomes the rows' state without a copy; a row joining
    (right-aligned, zero-padded on the left), a beam child beyond it, compaction and
    reordering then work on it as on an array of full capacity."""
    from attnmt.service.inference.slots import Rows
    rows = Rows({"cache": (1, 2)})
    rows.reserve(4, 4, 3)
    for r in rows.add(2):
        rows.put_state(int(r), {"cache": np.full((1, 2), r + 1.0, dtype=np.float32)})
    grown = np.arange(2 * 2 * 2, dtype=np.float32).reshape(2, 2, 2)      # 2 rows, cache of 2 entries
    rows.store_state({"cache": grown}, 2)
    assert rows.state["cache"] is grown                                    # kept, not copied
    (joined,) = rows.add(1)
    rows.put_state(int(joined), {"cache": np.full((1, 2), 9.0, dtype=np.float32)})
    cache = rows.state["cache"]
    assert cache.shape == (rows.capacity, 2, 2)
    np.testing.assert_array_equal(cache[:2], grown)                        # the live rows moved over once
    np.testing.assert_array_equal(cache[2], [[0, 0], [9, 9]])              # right-aligned, zeros on the left
    rows.steps[:3] = 1
    (child,) = rows.add(1)
    rows.copy(np.array([child]), np.array([0]), np.array([1]), np.array([3]))
    np.testing.assert_array_equal(rows.state["cache"][child], grown[0])
    rows.free([1])                                                         # row 3 moves into row 1
    np.testing.assert_array_equal(rows.state["cache"][1], grown[0])
    rows.permute(np.array([2, 1, 0]))                                      # row i becomes old row order[i]
    np.testing.assert_array_equal(rows.state["cache"][:3], [[[0, 0], [9, 9]], grown[0], grown[0]])
