"""`device = "openvino"`: the same graphs through OpenVINO's plugin execution provider,
in f32 (the CPU provider's answers) and bf16 (batch-invariant, within a measured tolerance)."""

import sys

import numpy as np
import onnxruntime as ort
import pytest

from attnmt.service.errors import ModelLoadError
from attnmt.service.inference import sessions
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.search import SearchOptions
from attnmt.service.server.settings import BUNDLED_MODEL
from attnmt.service.text.translator import Translator
from conftest import RunningServer

pytest.importorskip("onnxruntime_ep_openvino", reason="pip install 'attnmt[openvino]' (make install does)")


def _no_device_reason() -> str:
    """Why OpenVINO cannot run here ('' where it can): its plugin lists a CPU device only on
    an Intel CPU (on an AMD EPYC it registers and lists none)."""
    try:
        sessions.openvino_devices()
    except ModelLoadError as e:
        return str(e)
    return ""


_NO_DEVICE = _no_device_reason()
needs_device = pytest.mark.skipif(bool(_NO_DEVICE), reason=f"no OpenVINO device: {_NO_DEVICE}")

SHORT = "peru vidas kasa ."
LONG = "kasa granda amas libo nova . gato roja havas arbo blanka . sola vidas luna . peru amas mesa roja ."
CROWD = [LONG, "gato .", SHORT, LONG + " " + LONG, "sola amas luna granda ."]


def openvino(model, precision: str) -> Translator:
    return Translator(Engine(model, EngineOptions(device="openvino", precision=precision, intra_op_threads=1)))


@needs_device
def test_openvino_f32_gives_the_cpu_providers_answers(tiny_model, translator):
    ov = openvino(tiny_model, "f32")
    assert ov.engine.provider == "OpenVINOExecutionProvider"
    options = SearchOptions(beam_size=4, n_best=4)
    for want, got in zip(translator.translate(CROWD, options), ov.translate(CROWD, options)):
        assert [h.text for h in got.hypotheses] == [h.text for h in want.hypotheses]
        for a, b in zip(got.hypotheses, want.hypotheses):
            assert abs(a.score - b.score) < 1e-4
            assert np.abs(a.alignment - b.alignment).max() < 1e-4


@needs_device
def test_bf16_greedy_answers_do_not_depend_on_batch_mates(tiny_model):
    """Greedy under bf16: a sentence alone equals the same sentence in a crowd (measured
    exactly equal on 128 test sentences of the bundled model). Beam search under bf16 is not
    invariant (docs/benchmarks.md): that is why bf16 is an option, not the default."""
    ov = openvino(tiny_model, "bf16")
    options = SearchOptions()
    alone = ov.translate([SHORT], options)[0]
    together = ov.translate(CROWD, options)[2]
    assert [h.text for h in alone.hypotheses] == [h.text for h in together.hypotheses]
    for a, b in zip(alone.hypotheses, together.hypotheses):
        assert abs(a.score - b.score) < 1e-5
        assert np.abs(a.alignment - b.alignment).max() < 1e-5


@needs_device
@pytest.mark.skipif(not (BUNDLED_MODEL / "manifest.json").exists(), reason="no bundled model")
def test_bf16_stays_within_its_measured_tolerance_of_f32_on_the_bundled_model():
    """Forced alignment of f32's translations under bf16: per-token log-probabilities within
    0.25 (measured on 400 test sentences, 11,462 tokens: max 0.136, mean 0.008) and α within 0.05
    (measured max 0.017)."""
    texts = ["Y dijo Dios: Sea la luz; y fue la luz.", "Bienaventurados los mansos, porque ellos recibirán la tierra.",
             "no se pudo abrir el archivo %s", "Uso: %s [OPCIÓN]... [ARCHIVO]...",
             "falta el operando de archivo", "¿Desea continuar? [S/n]"]
    f32 = Translator(Engine(BUNDLED_MODEL, EngineOptions(intra_op_threads=1)))
    pairs = [(s, t.best.text) for s, t in zip(texts, f32.translate(texts))]
    want, got = f32.align(pairs), openvino(BUNDLED_MODEL, "bf16").align(pairs)
    for a, b in zip(want, got):
        assert np.abs(np.array(a.best.token_log_probs) - np.array(b.best.token_log_probs)).max() < 0.25
        assert np.abs(a.best.alignment - b.best.alignment).max() < 0.05


def test_bf16_needs_openvino_and_a_missing_plugin_says_what_to_install(tiny_model, monkeypatch):
    with pytest.raises(ModelLoadError, match="precision bf16 needs device openvino"):
        Engine(tiny_model, EngineOptions(precision="bf16"))
    monkeypatch.setitem(sys.modules, "onnxruntime_ep_openvino", None)     # as if not installed
    with pytest.raises(ModelLoadError, match=r"pip install 'attnmt\[openvino\]'"):
        Engine(tiny_model, EngineOptions(device="openvino"))


@needs_device
def test_a_server_on_openvino_bf16_translates_and_says_so_in_its_metrics(tiny_model):
    import grpc

    from attnmt.service.stubs import translator_pb2, translator_pb2_grpc
    with RunningServer([tiny_model], {"ATTNMT_DEVICE": "openvino", "ATTNMT_PRECISION": "bf16"}) as server:
        with grpc.insecure_channel(server.address) as channel:
            reply = translator_pb2_grpc.TranslatorStub(channel).Translate(
                translator_pb2.TranslateRequest(sentences=[SHORT]), timeout=30)
        assert reply.translations[0].hypotheses[0].text
        assert server.metric("attnmt_model_info", model="tiny", provider="OpenVINOExecutionProvider") == 1


def test_without_an_openvino_device_every_engine_gets_the_same_clear_error(tiny_model, monkeypatch):
    """As on a CPU where the plugin lists no device (ONNX Runtime's list holds only the CPU
    provider): the library is registered once, and the second engine gets the first one's
    error, not ONNX Runtime's "EP library is already registered"."""
    cpu_only = [d for d in ort.get_ep_devices() if d.ep_name != sessions.OPENVINO]
    monkeypatch.setattr(ort, "get_ep_devices", lambda: cpu_only)
    real_register, calls = ort.register_execution_provider_library, []

    def register(name, path):
        calls.append(name)
        real_register(name, path)   # may say "already registered": this process registered it above
    monkeypatch.setattr(ort, "register_execution_provider_library", register)
    monkeypatch.setattr(sessions, "_openvino_registered", False)
    errors = []
    for _ in range(2):
        with pytest.raises(ModelLoadError) as caught:
            Engine(tiny_model, EngineOptions(device="openvino"))
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
    assert "found no CPU device" in errors[0] and "needs an Intel CPU" in errors[0]
    assert calls == [sessions.OPENVINO]
