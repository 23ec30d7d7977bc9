"""int8 graphs (model/export/quantize.py): activations quantized per row, so that a sentence's
translation does not depend on its batch-mates, and served by the engine unchanged."""

import numpy as np
import onnx
import pytest

from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.search import SearchOptions
from attnmt.service.modeldir.manifest import load_manifest
from attnmt.service.text.translator import Translator
from conftest import synthetic_corpus

SHORT = "peru vidas kasa ."
LONG = "kasa granda amas libo nova . gato roja havas arbo blanka . sola vidas luna . peru amas mesa roja ."
CROWD = [LONG, "gato .", SHORT, LONG + " " + LONG, "sola amas luna granda ."]
# The float graphs' tolerance (tests/unit/inference/test_decoding.py). The quantization sees one
# row and its int32 accumulation is exact, so batch-mates change nothing through it; they still
# change the float attention's last bits (CROWD pads SHORT's source longer), which int8
# rounding can now and then turn into a whole quantum: rarely on the bundled model
# (docs/benchmarks.md), never on the tiny model's sentences here.
TOLERANCE = 1e-5


def translator(model_dir, **options) -> Translator:
    return Translator(Engine(model_dir, EngineOptions(intra_op_threads=1, **options)))


def batch_mates_change(translator: Translator, options: SearchOptions = SearchOptions()) -> float:
    """How much SHORT's hypotheses change when it is translated among CROWD rather than
    alone: the largest difference in score, token log-probability or α (inf if a text differs)."""
    alone = translator.translate([SHORT], options)[0].hypotheses
    together = translator.translate(CROWD, options)[CROWD.index(SHORT)].hypotheses
    if [h.text for h in alone] != [h.text for h in together]:
        return float("inf")
    return max(max(abs(a.score - b.score), np.abs(np.subtract(a.token_log_probs, b.token_log_probs)).max(),
                   np.abs(a.alignment - b.alignment).max()) for a, b in zip(alone, together))


@pytest.fixture(scope="module")
def int8_model(tiny_model, tmp_path_factory):
    from attnmt.model.export.quantize import write_int8
    out = tmp_path_factory.mktemp("models") / "tiny-int8"
    write_int8(tiny_model, out)
    return out


@pytest.fixture(scope="module")
def per_tensor_model(tiny_model, tmp_path_factory):
    """ONNX Runtime's own dynamic quantization: one activation scale per tensor, i.e. per batch."""
    from attnmt.model.export import quantize
    out = tmp_path_factory.mktemp("models") / "tiny-int8-per-tensor"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(quantize, "per_row_activations", lambda model: 0)
        quantize.write_int8(tiny_model, out)
    return out


@pytest.mark.parametrize("beam", [1, 4])
def test_int8_output_does_not_depend_on_batch_mates(int8_model, beam):
    options = SearchOptions(beam_size=beam, n_best=beam)
    assert batch_mates_change(translator(int8_model), options) <= TOLERANCE


def test_per_tensor_scales_fail_that_test(per_tensor_model):
    assert batch_mates_change(translator(per_tensor_model)) > TOLERANCE


def test_quantize_int8_refuses_graphs_that_batch_mates_change(tiny_model, tmp_path, monkeypatch):
    from attnmt.model.export import quantize
    monkeypatch.setattr(quantize, "per_row_activations", lambda model: 0)
    pairs = synthetic_corpus(40, seed=77)
    with pytest.raises(RuntimeError, match="batch-mates change"):
        quantize.quantize_int8(tiny_model, tmp_path / "int8", [s for s, _ in pairs], [t for _, t in pairs])
    assert not (tmp_path / "int8").exists()


def test_every_activation_is_quantized_per_row(int8_model):
    for graph in load_manifest(int8_model).graphs.values():
        model = onnx.load(str(int8_model / graph))
        constants = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
        ops = [node.op_type for node in model.graph.node]
        assert "DynamicQuantizeLinear" not in ops and "MatMulInteger" in ops
        readers = {name: [n for n in model.graph.node if name in n.input] for node in model.graph.node
                   for name in node.output}
        for node in model.graph.node:
            if node.op_type == "MatMulInteger":         # A's zero point: the one scalar 128
                assert constants[node.input[2]].shape == () and constants[node.input[2]] == 128
                # its int32 rows read once, by a DequantizeLinear with a scale per row
                (reader,) = readers[node.output[0]]
                assert reader.op_type == "DequantizeLinear" and reader.attribute[0].i == 0
            if node.op_type == "QuantizeLinear":        # per row: along axis 0 of x's rows
                assert [a.name for a in node.attribute] == ["axis"] and node.attribute[0].i == 0


def test_onnx_runtime_optimizations_leave_the_int8_results_unchanged(int8_model):
    # ONNX Runtime fuses MatMulInteger -> Cast -> Mul(Mul(a_scale, b_scale)) -> Add(bias) into a
    # MatMulIntegerToFloat that scales the bias too when a_scale is per row; the rescale is written
    # so that the fusion does not apply.
    texts = [SHORT, LONG, "gato ."]
    plain = translator(int8_model, optimization="disable").translate(texts)
    optimized = translator(int8_model, optimization="all").translate(texts)
    for a, b in zip(plain, optimized):
        assert a.best.text == b.best.text
        assert abs(a.best.score - b.best.score) <= TOLERANCE


@pytest.fixture(scope="module")
def listed_models(listed_model, tmp_path_factory):
    """The tiny model with a small shortlist (float, conftest.py), and that directory quantized."""
    from attnmt.model.export.quantize import write_int8
    int8 = tmp_path_factory.mktemp("models") / "listed-int8"
    write_int8(listed_model, int8)
    return listed_model, int8


def test_the_shortlist_graphs_are_quantized_too(listed_models):
    from attnmt.service.modeldir.manifest import SHORTLIST_GRAPHS
    _, int8 = listed_models
    manifest = load_manifest(int8)
    assert set(SHORTLIST_GRAPHS.values()) <= set(manifest.files) and manifest.shortlist["file"] in manifest.files
    for graph in SHORTLIST_GRAPHS.values():
        ops = {node.op_type for node in onnx.load(str(int8 / graph), load_external_data=False).graph.node}
        assert "MatMulInteger" in ops and "DynamicQuantizeLinear" not in ops
    listed = translator(int8, shortlist=True)
    assert listed.engine.shortlist is not None
    # A row's softmax runs over its own candidates in int8 as in float: the shortlist graph's distribution
    # is the int8 full graph's renormalised over the sentence's candidates. (Translations are not compared
    # with float32's: int8 rounds by the CPU's integer kernels, VNNI, AMX or AVX2, and a test must not
    # depend on the vendor.)
    full = Engine(int8, EngineOptions(intra_op_threads=1, shortlist=False))
    for sentence in [s for s, _ in synthetic_corpus(4, seed=4)]:
        source = full.tokenizer.encode(sentence) + [full.eos_id]
        encoded = full.encode([source])
        prev, forced = np.array([full.bos_id]), np.array([0])
        everything = full.step(prev, encoded.init_state, encoded.memory, full.vocab_size - 2, forced)
        log_p = np.full(full.vocab_size, -np.inf)
        log_p[everything.topk_ids[0]] = everything.topk_log_probs[0]
        own = listed.engine.shortlist.candidates(source)
        renormalised = log_p[own] - np.logaddexp.reduce(log_p[own])
        out = listed.engine.step(prev, encoded.init_state, encoded.memory, len(own), forced,
                                 vocab_bias=np.zeros((1, len(own)), dtype=np.float32), candidates=own)
        np.testing.assert_allclose(np.sort(out.topk_log_probs[0]), np.sort(renormalised), atol=TOLERANCE)
    texts = [s for s, _ in synthetic_corpus(12, seed=4)]
    assert all(t.best.text for t in listed.translate(texts))
    for beam in (1, 3):
        assert batch_mates_change(listed, SearchOptions(beam_size=beam, n_best=beam)) <= TOLERANCE


def test_the_int8_shortlist_graph_over_every_id_equals_the_int8_full_graph(listed_models):
    """The engine runs a shortlisted sentence through the shortlist graph or the masked full
    graph depending on its batch-mates (service/inference/vocab_bias.py), so their int8 output layers
    must compute the same log-probabilities."""
    _, int8 = listed_models
    full, listed = (Engine(int8, EngineOptions(intra_op_threads=1, shortlist=on)) for on in (False, True))
    sentences = [s for s, _ in synthetic_corpus(8, seed=3)]
    encoded = full.encode([full.tokenizer.encode(s) + [full.eos_id] for s in sentences])
    memory = encoded.memory
    prev = np.full(len(sentences), full.bos_id, dtype=np.int64)
    forced = np.full(len(sentences), 5, dtype=np.int64)
    a = full.step(prev, encoded.init_state, memory, 4, forced)
    b = listed.step(prev, encoded.init_state, memory, 4, forced, vocab_bias=full.default_bias,
                    candidates=np.arange(full.vocab_size))
    assert np.array_equal(a.topk_ids, b.topk_ids)
    np.testing.assert_allclose(a.topk_log_probs, b.topk_log_probs, atol=TOLERANCE)
    np.testing.assert_allclose(a.forced_log_probs, b.forced_log_probs, atol=TOLERANCE)


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("middle", ["s", 1], ids=["rows", "one_row_each"])
def test_integer_matmul_on_rows_keeps_the_input_shape_and_each_row_to_itself(opset, middle):
    """The rewrite on a [b, s, K] input (flattened to rows and back) and on a [b, 1, K] one (a
    step's activations: quantized as it is, no Flatten or Reshape) at both ReduceMax forms (axes an
    attribute up to opset 17, an input from 18): the output has the input's leading axes, is the
    float product within the quantization's error, and a row's result does not change with the
    other rows."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from attnmt.model.export.quantize import integer_matmuls
    rng = np.random.RandomState(opset)
    w = rng.randn(8, 5).astype(np.float32)
    w_scale = np.float32(np.abs(w).max() / 63)
    wq = np.round(w / w_scale).astype(np.int8)
    graph = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["wq", "w_scale", "w_zero_point"], ["w"]),
         helper.make_node("MatMul", ["x", "w"], ["y"])], "projection",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", middle, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", middle, 5])],
        [numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(np.array(w_scale), "w_scale"),
         numpy_helper.from_array(np.array(0, np.int8), "w_zero_point")])
    # ir_version 8: what ONNX Runtime reads (the onnx package would write a newer one)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    assert integer_matmuls(model) == 1
    onnx.checker.check_model(model, full_check=True)
    ops = {node.op_type for node in model.graph.node}
    assert ({"Flatten", "Reshape"} <= ops) == (middle == "s")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = rng.randn(2, 3 if middle == "s" else 1, 8).astype(np.float32)
    x[1, -1] *= 1000                                   # one loud row: a shared scale would flatten the others
    y = session.run(None, {"x": x})[0]
    assert y.shape == (*x.shape[:2], 5)
    exact = x @ (wq.astype(np.float32) * w_scale)
    error = np.abs(x).max(axis=-1, keepdims=True) / 127 * np.abs(wq * w_scale).sum(axis=0)   # per row, per output
    assert (np.abs(y - exact) <= error).all()
    alone = session.run(None, {"x": x[:1, :1]})[0]
    np.testing.assert_array_equal(alone[0, 0], y[0, 0])
