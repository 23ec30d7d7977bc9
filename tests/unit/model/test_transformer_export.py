"""`attnmt export` for a Transformer (model/export/transformer.py): the served contract of
docs/transformer.md on a tiny trained Transformer, its parity with PyTorch, and caches of
rows of different ages in one batch."""

import json
from pathlib import Path

import numpy as np
import pytest

from attnmt.model.batching import make_batch
from attnmt.model.export.transformer import (
    Contract,
    alignment_heads,
    onnx_encode,
    onnx_greedy,
    onnx_sessions,
    onnx_step,
)
from attnmt.model.tokenizer import BOS_ID, EOS_ID, Tokenizer
from attnmt.model.train import load_model
from attnmt.service.modeldir.manifest import APPEND_GRAPH, GRAPHS, GROUPED_GRAPH, SCHEMA_VERSION, load_manifest
from attnmt.service.modeldir.vocabulary import no_specials_bias
from conftest import synthetic_corpus


@pytest.fixture(scope="module")
def transformer_model(tiny_transformer_run, tmp_path_factory):
    """The tiny Transformer run exported through `attnmt export` (parity-checked on its dev split)."""
    from attnmt.service.cli import main
    out = tmp_path_factory.mktemp("models") / "tiny-transformer"
    # the shortlist, on by default, is skipped for a Transformer
    assert main(["export", "--run", str(tiny_transformer_run), "--out", str(out), "--name", "tiny",
                 "--parity-sentences", "16"]) == 0
    return out


def test_export_writes_the_five_graphs_and_a_manifest(transformer_model, tiny_transformer_run):
    manifest = load_manifest(transformer_model)
    assert manifest.schema_version == SCHEMA_VERSION and manifest.architecture == "Transformer"
    assert manifest.graphs == {**GRAPHS, **APPEND_GRAPH, **GROUPED_GRAPH}
    assert set(manifest.files) == {*GRAPHS.values(), *APPEND_GRAPH.values(), *GROUPED_GRAPH.values(), "weights.bin",
                                   "spm.model", "checkpoint.pt"}
    assert manifest.step_state == {"self_keys_0": "new_self_keys_0", "self_values_0": "new_self_values_0"}
    assert manifest.initial_state == {"self_keys_0": "init_self_keys_0", "self_values_0": "init_self_values_0"}
    raw = json.loads((transformer_model / "manifest.json").read_text())
    assert raw["memory"] == ["cross_keys_0", "cross_values_0", "src_mask"]
    # head-major: positions on axis 2 of every cache and cross K/V
    assert raw["position_axes"] == {"cross_keys_0": 2, "cross_values_0": 2, "self_keys_0": 2, "self_values_0": 2}
    assert raw["alignment"] == {"layer": -1, "heads": [1]}      # the run's alignment_head
    dims = raw["dimensions"]
    assert (dims["encoder_layers"], dims["decoder_layers"], dims["d_model"], dims["heads"], dims["ffn_size"]) == \
        (2, 1, 32, 2, 64)
    assert dims["vocab_size"] == raw["vocab_size"]                    # the run's SentencePiece
    assert raw["training"]["config"]["architecture"] == "transformer" and "shortlist" not in raw
    parity = raw["export_parity"]
    for key in ("memory", "log_probs", "forced_log_probs", "alpha", "shared_vs_direct", "append_vs_direct",
                "grouped_vs_direct"):
        assert parity[key] <= 1e-4, key
    assert parity["greedy_identical"] == "16/16" and parity["late_rows"] == 8
    assert isinstance(load_model(transformer_model / "checkpoint.pt"), type(load_model(tiny_transformer_run
                                                                                        / "best.pt")))


def test_the_contract_names_each_layers_tensors():
    contract = Contract(2)
    assert contract.memory == ("cross_keys_0", "cross_values_0", "cross_keys_1", "cross_values_1", "src_mask")
    assert contract.step_state == {"self_keys_0": "new_self_keys_0", "self_values_0": "new_self_values_0",
                                   "self_keys_1": "new_self_keys_1", "self_values_1": "new_self_values_1"}
    assert contract.initial_state == {name: f"init_{name}" for name in contract.step_state}
    assert contract.position_axes == {name: 2 for name in (*contract.memory[:-1], *contract.step_state)}
    assert contract.encoder_outputs == (*contract.memory, *contract.initial_state.values())
    assert contract.step_inputs(shared=True) == ("prev_tokens", *contract.step_state, *contract.memory, "vocab_bias",
                                                 "k", "forced_tokens", "memory_index", "positions")


def test_graph_signatures_are_the_contract(transformer_model):
    H, d_k, V = 2, 16, load_manifest(transformer_model).vocab_size
    contract = Contract(1)
    sessions = onnx_sessions(transformer_model)              # checks the names and their order
    encoder = {o.name: (o.type, o.shape) for o in sessions["encoder"].get_outputs()}
    assert encoder == {"cross_keys_0": ("tensor(float)", ["sentences", H, "src_len", d_k]),
                       "cross_values_0": ("tensor(float)", ["sentences", H, "src_len", d_k]),
                       "src_mask": ("tensor(bool)", ["sentences", "src_len"]),
                       "init_self_keys_0": ("tensor(float)", ["sentences", H, 1, d_k]),
                       "init_self_values_0": ("tensor(float)", ["sentences", H, 1, d_k])}
    for name, shared in (("decoder_step", False), ("decoder_step_shared", True)):
        session = sessions[name]
        got = {i.name: (i.type, i.shape) for i in session.get_inputs()}
        assert tuple(got) == contract.step_inputs(shared)
        memory_rows = "sentences" if shared else "rows"
        assert got["self_keys_0"] == got["self_values_0"] == ("tensor(float)", ["rows", H, "cache_len", d_k])
        assert got["cross_keys_0"] == got["cross_values_0"] == ("tensor(float)", [memory_rows, H, "src_len", d_k])
        assert got["src_mask"] == ("tensor(bool)", [memory_rows, "src_len"])
        for ids in ("prev_tokens", "forced_tokens", "positions"):
            assert got[ids] == ("tensor(int64)", ["rows"])
        assert got["k"] == ("tensor(int64)", [1]) and got["vocab_bias"] == ("tensor(float)", ["bias_rows", V])
        outputs = {o.name: (o.type, o.shape) for o in session.get_outputs()}
        assert tuple(outputs) == contract.step_outputs
        assert outputs["topk_ids"] == ("tensor(int64)", ["rows", "k"])
        for new in ("new_self_keys_0", "new_self_values_0"):
            assert outputs[new] == ("tensor(float)", ["rows", H, "new_cache_len", d_k])


def test_a_step_neither_splits_nor_transposes_the_caches_or_the_memory(transformer_model, tmp_path):
    """Each layer's caches and cross K/V are fed as the attention reads them, [R,H,T,d_k]: as
    ONNX Runtime runs a step graph (its optimized graph), no Transpose is left (Kᵀ of QKᵀ is
    folded into a FusedMatMul, the output layer's transposed table into a constant), the only
    Split is of the step's own Q, K, V (ONNX Runtime's fusion of their three slices), and each
    cache is concatenated with the step's own entry once, along its positions."""
    import onnx
    import onnxruntime as ort
    contract = Contract(1)
    for graph in ("decoder_step", "decoder_step_shared"):
        exported = onnx.load(str(transformer_model / GRAPHS[graph]), load_external_data=False).graph
        assert "Split" not in {node.op_type for node in exported.node}
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(tmp_path / f"{graph}.onnx")
        ort.InferenceSession(str(transformer_model / GRAPHS[graph]), options, providers=["CPUExecutionProvider"])
        nodes = onnx.load(options.optimized_model_filepath, load_external_data=False).graph.node
        assert "Transpose" not in {node.op_type for node in nodes}
        fed = {i.name for i in exported.input}
        splits = [node for node in nodes if node.op_type == "Split"]
        assert len(splits) <= 1 and not any(set(node.input) & fed for node in splits)    # one layer's Q, K, V
        for cache, new in contract.step_state.items():
            readers = [node for node in nodes if cache in node.input and node.op_type != "Shape"]   # T: its shape
            assert [(n.op_type, n.input[0], list(n.output)) for n in readers] == [("Concat", cache, [new])]
            assert [a.i for a in readers[0].attribute if a.name == "axis"] == [2]


def test_each_step_runs_its_linear_layers_as_gemms_and_reads_no_activations_shape(transformer_model, tmp_path):
    """At a few rows a step costs its nodes more than its numbers: as ONNX Runtime runs each step
    graph, every linear layer's bias is inside a Gemm (the activations are R x d, which its
    MatMul and Add fusion needs; over R x 1 x d they stay two nodes), and no node reads the shape
    of an activation (1/√d_k read from Q's shape was six nodes in each attention)."""
    import onnx
    import onnxruntime as ort
    for graph in ("decoder_step", "decoder_step_shared", *APPEND_GRAPH, *GROUPED_GRAPH):
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(tmp_path / f"{graph}.onnx")
        path = transformer_model / {**GRAPHS, **APPEND_GRAPH, **GROUPED_GRAPH}[graph]
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        optimized = onnx.load(options.optimized_model_filepath, load_external_data=False).graph
        nodes, inputs = optimized.node, {i.name for i in optimized.input}
        biases = [n.name for n in nodes if n.op_type == "Add" and any(i.endswith(".bias") for i in n.input)]
        assert biases == [], graph
        assert {n.op_type for n in nodes} & {"Gemm", "FusedGemm"}, graph
        assert all(n.input[0] in inputs for n in nodes if n.op_type == "Shape"), graph
        assert "Pow" not in {n.op_type for n in nodes}, graph


def test_the_tied_table_is_stored_once_for_the_three_graphs(transformer_model):
    """weights.bin holds each distinct tensor once: the tied embedding (source and target; the
    step graphs' output layer reads it transposed, through a Transpose node that ONNX Runtime
    folds when it loads the graph, not a stored copy) as float16, the sinusoid table as float32
    (float16 cannot hold it exactly)."""
    import onnx
    readers: dict[tuple[int, int], set[str]] = {}            # (offset, length) -> graphs
    dtypes: dict[tuple[int, int], int] = {}
    for graph in GRAPHS.values():
        for tensor in onnx.load(str(transformer_model / graph), load_external_data=False).graph.initializer:
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                entry = {e.key: e.value for e in tensor.external_data}
                span = (int(entry["offset"]), int(entry["length"]))
                readers.setdefault(span, set()).add(graph)
                dtypes[span] = tensor.data_type
    data = (transformer_model / "weights.bin").read_bytes()
    contents = {span: data[span[0]:span[0] + span[1]] for span in readers}
    assert len(set(contents.values())) == len(contents)
    embedding = load_model(transformer_model / "checkpoint.pt").encoder.embedding.weight.detach()
    [table] = [span for span, c in contents.items() if c == embedding.half().numpy().tobytes()]
    assert readers[table] == set(GRAPHS.values())
    transposed = embedding.half().numpy().T.copy().tobytes()
    assert transposed not in contents.values()
    from attnmt.model.architectures.transformer import sinusoids
    [positions] = [span for span, c in contents.items() if c == sinusoids(64, 32).numpy().tobytes()]
    assert dtypes[positions] == onnx.TensorProto.FLOAT and readers[positions] == set(GRAPHS.values())


def encode(transformer_model, sentences):
    tok = Tokenizer(transformer_model / "spm.model")
    return [tok.encode(s) for s in sentences]


def test_the_encoder_writes_zero_memory_on_padding_and_one_dummy_cache_entry(transformer_model):
    sessions = onnx_sessions(transformer_model)
    sources = encode(transformer_model, ["peru vidas kasa .", "kasa granda amas libo nova ."])
    batch = make_batch(sources, None, [0, 1])
    memory, initial = onnx_encode(sessions, Contract(1), batch.src.numpy(), batch.lengths.numpy())
    mask = memory["src_mask"]
    assert mask.tolist() == (np.arange(batch.src.shape[1])[None] < batch.lengths.numpy()[:, None]).tolist()
    for name in ("cross_keys_0", "cross_values_0"):
        by_piece = memory[name].transpose(0, 2, 1, 3)                 # N x S x H x d_k
        assert not by_piece[~mask].any() and by_piece[mask].any()
    for cache in initial.values():
        assert cache.shape == (2, 2, 1, 16) and not cache.any()


def test_rows_of_different_ages_decode_as_each_row_alone(transformer_model):
    """Sentences joining a running batch at different steps, their caches left-padded to the
    batch's length, choose the tokens they choose alone, with the same log-probabilities and α."""
    sessions = onnx_sessions(transformer_model)
    sources = encode(transformer_model, [s for s, _ in synthetic_corpus(10, seed=321)])
    V = load_manifest(transformer_model).vocab_size
    together, _ = onnx_greedy(sessions, sources, V, join_at=[0, 3, 1, 7, 0, 5, 2, 9, 4, 6])
    for source, row in zip(sources, together):
        [alone], _ = onnx_greedy(sessions, [source], V)
        assert row.tokens == alone.tokens
        assert np.abs(np.array(row.topk_log_probs) - np.array(alone.topk_log_probs)).max() <= 1e-5
        assert np.abs(np.array(row.alpha) - np.array(alone.alpha)).max() <= 1e-5
    assert len({len(row.tokens) for row in together}) > 1               # rows leave at different steps too


def test_alpha_is_the_alignment_heads_mean_and_rows_sum_to_one(transformer_model):
    sessions = onnx_sessions(transformer_model)
    sources = encode(transformer_model, ["peru vidas kasa .", "kasa granda amas libo nova . gato roja havas arbo ."])
    batch = make_batch(sources, None, [0, 1])
    memory, caches = onnx_encode(sessions, Contract(1), batch.src.numpy(), batch.lengths.numpy())
    bias = no_specials_bias(load_manifest(transformer_model).vocab_size)
    out = onnx_step(sessions["decoder_step"], np.full(2, BOS_ID), caches, memory, bias, 3,
                    np.full(2, EOS_ID), np.zeros(2, dtype=np.int64))
    alpha = out["alpha"]                                                      # 2 x S
    assert np.allclose(alpha.sum(-1), 1, atol=1e-6)
    assert not alpha[0, batch.lengths[0]:].any()                              # zero on the padding
    assert (np.diff(out["topk_log_probs"], axis=1) <= 0).all()                # best first
    # one step in PyTorch: α is alignment_head 1 of the last layer
    import torch

    from attnmt.model.search import TransformerSteps
    model = load_model(transformer_model / "checkpoint.pt")
    assert alignment_heads(model) == [1]
    with torch.no_grad():
        steps = TransformerSteps(model, batch.src, batch.lengths)
        _, theirs = steps.step(torch.full((2,), BOS_ID))
    assert np.abs(alpha - theirs.numpy()).max() < 1e-5
    model.cfg.alignment_head = -1
    assert alignment_heads(model) == [0, 1]                                    # -1: the mean of all heads


def test_nothing_is_written_unless_parity_holds(tiny_transformer_run, tmp_path):
    from attnmt.model.export.transformer import export
    out = tmp_path / "model"
    with pytest.raises(RuntimeError, match="differ beyond"):
        export(tiny_transformer_run / "best.pt", tiny_transformer_run / "spm.model", out, "tiny", "xx", "en",
               ["kasa vidas peru ."], tolerance=-1.0)                       # no difference passes
    assert not out.exists()


def test_the_export_can_name_another_alignment_layer_and_heads(tiny_transformer_run, tiny_run, tmp_path, capsys):
    """`--alignment-head -1`: α becomes the mean of the layer's heads, in the graphs (parity is
    checked against PyTorch with the same choice), the manifest and the stored checkpoint."""
    from attnmt.service.cli import main
    out = tmp_path / "mean"
    assert main(["export", "--run", str(tiny_transformer_run), "--out", str(out), "--parity-sentences", "8",
                 "--alignment-layer", "0", "--alignment-head", "-1"]) == 0
    assert json.loads((out / "manifest.json").read_text())["alignment"] == {"layer": 0, "heads": [0, 1]}
    assert load_model(out / "checkpoint.pt").cfg.alignment_head == -1
    with pytest.raises(ValueError, match="alignment_head must be -1"):
        main(["export", "--run", str(tiny_transformer_run), "--out", str(tmp_path / "bad"), "--alignment-head", "2"])
    assert not (tmp_path / "bad").exists()
    assert main(["export", "--run", str(tiny_run), "--out", str(tmp_path / "rnn"), "--alignment-head", "0"]) == 2
    assert "are for a Transformer" in capsys.readouterr().err


def test_a_shift_att_export_serves_each_piece_the_next_steps_row(tiny_transformer_run, tmp_path):
    """`--alignment-shift-att`: the manifest says so, ModelInfo reports it, and the Translator gives
    target piece k the α of step k + 1 (`</s>` keeps its own), on the Align path and in translation."""
    from attnmt.service.cli import main
    from attnmt.service.inference.engine import Engine, EngineOptions
    from attnmt.service.server.convert import alignment_defaults_pb
    from attnmt.service.text.translator import Translator
    plain, shifted = tmp_path / "plain", tmp_path / "shifted"
    for out, extra in ((plain, []), (shifted, ["--alignment-shift-att"])):
        assert main(["export", "--run", str(tiny_transformer_run), "--out", str(out), "--parity-sentences", "4",
                     "--alignment-head", "1", *extra]) == 0
    assert json.loads((shifted / "manifest.json").read_text())["alignment"] == {"layer": -1, "heads": [1],
                                                                                 "shift_att": True}
    translators = [Translator(Engine(d, EngineOptions(intra_op_threads=1))) for d in (plain, shifted)]
    assert [alignment_defaults_pb(t.engine.manifest).shift_att for t in translators] == [False, True]
    source, target = synthetic_corpus(1, 5)[0]
    for a, b in ([t.align([(source, target)])[0] for t in translators],
                 [t.translate([source])[0] for t in translators]):
        before, after = a.best.alignment, b.best.alignment
        assert len(before) >= 3 and a.best.target_tokens == b.best.target_tokens
        assert np.array_equal(after[:-1], before[1:]) and np.array_equal(after[-1], before[-1])


def test_the_export_takes_the_servable_alpha_with_the_lowest_dev_aer(tiny_transformer_run, tmp_path, capsys):
    """`--alignment-from REPORT` (what `attnmt evaluate-alignment --run --json` writes): the lowest dev
    AER among one head or a layer's mean, read as served or Shift-Att; other head sets are skipped."""
    from attnmt.model.export.transformer import alignment_from_report
    from attnmt.service.cli import main

    def report(aers: dict[str, float]) -> Path:
        path = tmp_path / f"heads-{len(list(tmp_path.iterdir()))}.json"
        path.write_text(json.dumps({"splits": {"dev": {"rules": {n: {"aer": {"value": v}} for n, v in aers.items()}},
                                               "test": {"rules": {n: {"aer": {"value": 0.0}} for n in aers}}}}))
        return path

    rows = {"layer 1 head 0 · attention source-argmax": 0.26, "layer 0 head 1 · shift-att grow-diag": 0.18,
            "layer 1 heads mean without the guided head · shift-att grow-diag": 0.10,
            "layer 0 head 0+1 · attention union": 0.05, "layer 1 heads mean · attention union": 0.30}
    assert alignment_from_report(report(rows)) == (0, 1, True, "layer 0 head 1 · shift-att grow-diag")
    assert alignment_from_report(report({**rows, "layer 1 heads mean · attention union": 0.12}))[:3] == (1, -1, False)
    with pytest.raises(ValueError, match="no servable reading"):
        alignment_from_report(report({"layer 0 head 0+1 · attention union": 0.05}))
    out = tmp_path / "chosen"
    assert main(["export", "--run", str(tiny_transformer_run), "--out", str(out), "--parity-sentences", "4",
                 "--alignment-from", str(report(rows))]) == 0
    assert json.loads((out / "manifest.json").read_text())["alignment"] == {"layer": 0, "heads": [1], "shift_att": True}
    assert "layer 0 head 1 · shift-att grow-diag" in capsys.readouterr().err
    assert main(["export", "--run", str(tiny_transformer_run), "--out", str(tmp_path / "both"),
                 "--alignment-from", str(report(rows)), "--alignment-head", "0"]) == 2


def test_the_append_step_reads_caches_with_room_and_returns_only_the_new_entries(transformer_model, tmp_path):
    """decoder_step_append: the caches [R,H,C,d_k] are only read (no Concat copies them, as
    ONNX Runtime runs the graph), cache_length is a scalar, and the new entries [R,H,1,d_k]
    are all the state it returns."""
    import onnx
    import onnxruntime as ort
    H, d_k = 2, 16
    contract = Contract(1)
    session = onnx_sessions(transformer_model)["decoder_step_append"]
    got = {i.name: (i.type, i.shape) for i in session.get_inputs()}
    assert tuple(got) == contract.step_inputs(append=True) and got["cache_length"] == ("tensor(int64)", [])
    outputs = {o.name: (o.type, o.shape) for o in session.get_outputs()}
    assert tuple(outputs) == contract.step_outputs
    for new in contract.step_state.values():
        assert outputs[new] == ("tensor(float)", ["rows", H, 1, d_k])
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp_path / "append.onnx")
    ort.InferenceSession(str(transformer_model / "decoder_step_append.onnx"), options,
                         providers=["CPUExecutionProvider"])
    nodes = onnx.load(options.optimized_model_filepath, load_external_data=False).graph.node
    for cache in contract.step_state:
        assert {n.op_type for n in nodes if cache in n.input} <= {"Shape", "FusedMatMul", "MatMul"}
