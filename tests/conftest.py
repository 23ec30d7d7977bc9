"""Shared fixtures: a synthetic parallel corpus, a small RNNsearch trained on it
in seconds and exported to a real model directory."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

# A toy language pair: each source word has one target word; adjective-noun
# pairs swap order, so the alignment is not the diagonal.
TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent

NOUNS = {"kasa": "house", "peru": "dog", "libo": "book", "mesa": "table", "gato": "cat", "arbo": "tree",
         "sola": "sun", "luna": "moon"}
ADJECTIVES = {"granda": "big", "roja": "red", "nova": "new", "blanka": "white"}
VERBS = {"vidas": "sees", "havas": "has", "amas": "loves"}


def synthetic_pair(rng: random.Random) -> tuple[str, str]:
    def phrase() -> tuple[list[str], list[str]]:
        noun = rng.choice(list(NOUNS))
        if rng.random() < 0.5:
            adj = rng.choice(list(ADJECTIVES))
            return [noun, adj], [ADJECTIVES[adj], NOUNS[noun]]
        return [noun], [NOUNS[noun]]
    s1, t1 = phrase()
    verb = rng.choice(list(VERBS))
    s2, t2 = phrase()
    return " ".join(s1 + [verb] + s2) + " .", " ".join(["the"] + t1 + [VERBS[verb], "the"] + t2) + " ."


def synthetic_corpus(n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [synthetic_pair(rng) for _ in range(n)]


def write_corpus(data_dir: Path, sizes: dict[str, int]) -> Path:
    data_dir.mkdir(parents=True, exist_ok=True)
    for seed, (split, n) in enumerate(sizes.items()):
        with open(data_dir / f"{split}.tsv", "w") as f:
            for s, t in synthetic_corpus(n, seed):
                f.write(f"{s}\t{t}\n")
    return data_dir


def tiny_config(data_dir: Path, **overrides):
    from attnmt.model.architectures.rnnsearch import ModelConfig
    from attnmt.model.train import TrainConfig
    model = ModelConfig(embedding_size=32, encoder_hidden=32, decoder_hidden=32, attention_size=32,
                        readout_size=32, dropout=0.0)
    values = dict(data_dir=str(data_dir), vocab_size=64, token_budget=600, learning_rate=5e-3, max_epochs=6,
                  validate_every=0, checkpoint_every=50, log_every=50, patience=10, seed=7, threads=1, model=model)
    values.update(overrides)
    return TrainConfig(**values)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """A run directory with a small model trained on the synthetic corpus."""
    from attnmt.model.train import train
    root = tmp_path_factory.mktemp("tiny")
    data = write_corpus(root / "data", {"train": 1500, "dev": 40, "test": 40})
    run = root / "run"
    train(tiny_config(data), run)
    return run


@pytest.fixture(scope="session")
def tiny_transformer_run(tmp_path_factory) -> Path:
    """A run directory with a small Transformer (d 32, 2 heads, 2 + 1 layers, α from head 1)
    trained for about 200 updates (4 epochs, some 15 s) on the synthetic corpus, with dropout as real
    runs have it."""
    from attnmt.model.architectures.transformer import TransformerConfig
    from attnmt.model.train import TrainConfig, train
    root = tmp_path_factory.mktemp("tiny-transformer")
    data = write_corpus(root / "data", {"train": 1500, "dev": 40, "test": 40})
    model = TransformerConfig(d_model=32, heads=2, ffn_size=64, encoder_layers=2, decoder_layers=1, dropout=0.1,
                              max_positions=64, alignment_head=1)
    run = root / "run"
    train(TrainConfig(architecture="transformer", data_dir=str(data), vocab_size=64, token_budget=600,
                      learning_rate=5e-3, warmup_steps=30, adam_beta2=0.98, adam_eps=1e-9, max_epochs=4,
                      validate_every=0, checkpoint_every=50, log_every=50, patience=10, seed=7, threads=1,
                      model=model), run)
    return run


@pytest.fixture(scope="session")
def tiny_transformer(tiny_transformer_run, tmp_path_factory) -> Path:
    """The tiny Transformer exported to a model directory named `tiny-transformer`."""
    from attnmt.model.export.transformer import export
    out = tmp_path_factory.mktemp("models") / "tiny-transformer"
    sentences = [s for s, _ in synthetic_corpus(16, seed=99)]
    export(tiny_transformer_run / "last.pt", tiny_transformer_run / "spm.model", out, "tiny-transformer", "xx", "en",
           sentences, {})
    return out


def without_append_step(model_dir: Path, out: Path) -> Path:
    """A copy of a Transformer's model directory without its append steps (`decoder_step_append`,
    `decoder_step_grouped`), as directories exported before them have it: the engine then steps
    with decoder_step, which returns each cache with the new entry appended."""
    return _without_graphs(model_dir, out, ("decoder_step_append", "decoder_step_grouped"))


def without_grouped_step(model_dir: Path, out: Path) -> Path:
    """A copy of a Transformer's model directory without `decoder_step_grouped`, as directories
    exported before it have it: the engine's append step then reads a copy of each row's memory."""
    return _without_graphs(model_dir, out, ("decoder_step_grouped",))


def _without_graphs(model_dir: Path, out: Path, graphs: tuple[str, ...]) -> Path:
    import json
    import shutil
    shutil.copytree(model_dir, out)
    manifest = json.loads((out / "manifest.json").read_text())
    for graph in graphs:
        file = manifest["graphs"].pop(graph)
        del manifest["files"][file]
        (out / file).unlink()
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


@pytest.fixture(scope="session")
def tiny_model(tiny_run, tmp_path_factory) -> Path:
    """The tiny run exported to an ONNX model directory (parity-checked by export)."""
    from attnmt.model.export.rnnsearch import export
    out = tmp_path_factory.mktemp("models") / "tiny-xx-en"
    sentences = [s for s, _ in synthetic_corpus(16, seed=99)]
    export(tiny_run / "best.pt", tiny_run / "spm.model", out, "tiny", "xx", "en", sentences)
    return out


@pytest.fixture(scope="session")
def listed_model(tiny_run, tmp_path_factory) -> Path:
    """The tiny run exported with a deliberately small lexical shortlist, so that candidate
    sets differ between sentences (tests/unit/inference/test_shortlist.py, tests/unit/model/test_quantize.py)."""
    from attnmt.model.export.rnnsearch import export
    from attnmt.model.export.shortlist import build
    from attnmt.model.tokenizer import BOS_ID, PAD_ID, Tokenizer
    tok = Tokenizer(tiny_run / "spm.model")
    pairs = synthetic_corpus(1500, seed=0)
    lexical = build([tok.encode(s) for s, _ in pairs], [tok.encode(t) for _, t in pairs], len(tok),
                    exclude=[PAD_ID, BOS_ID], frequent=6, per_source=2)
    out = tmp_path_factory.mktemp("models") / "tiny-shortlist"
    export(tiny_run / "best.pt", tiny_run / "spm.model", out, "tiny", "xx", "en",
           [s for s, _ in synthetic_corpus(16, seed=99)], lexical_shortlist=lexical)
    return out


@pytest.fixture(scope="session")
def paired_models(tiny_model, tmp_path_factory) -> list[Path]:
    """Three directions from one network: the tiny model relabelled `tiny-es-en` (es->en, to serve
    first, as the default) and `tiny-en-es` (en->es), then `tiny` itself (xx->en). Their
    translations are alike; what answered is told by the reply's model and pair."""
    import json
    import shutil

    from attnmt.service.modeldir.manifest import write_manifest
    root = tmp_path_factory.mktemp("pairs")
    models = []
    for name, source, target in (("tiny-es-en", "es", "en"), ("tiny-en-es", "en", "es")):
        out = root / name
        shutil.copytree(tiny_model, out)
        manifest = json.loads((out / "manifest.json").read_text())     # its checksums do not cover itself
        write_manifest(out, {**manifest, "name": name, "source_language": source, "target_language": target})
        models.append(out)
    return models + [tiny_model]


@pytest.fixture(scope="session")
def engine(tiny_model):
    from attnmt.service.inference.engine import Engine, EngineOptions
    return Engine(tiny_model, EngineOptions(intra_op_threads=1))


@pytest.fixture(scope="session")
def translator(engine):
    from attnmt.service.text.translator import Translator
    return Translator(engine)


def markov_model(tmp_path: Path, tokenizer_dir: Path, table: np.ndarray, vocab: int | None = None) -> Path:
    """A model directory whose decoder ignores the source: log p(y_i | y_{i-1}) = table[y_{i-1}]
    (renormalised without <pad> and <s>, which the engine forbids).
    With fewer table rows than `vocab`, a step on a later token fails inside ONNX Runtime."""
    import onnx
    from onnx import TensorProto, helper

    from attnmt.service.modeldir.manifest import SCHEMA_VERSION, file_entries, write_manifest
    vocab = vocab or table.shape[0]
    enc = helper.make_graph(
        [helper.make_node("Cast", ["src_tokens"], ["tok_f"], to=TensorProto.FLOAT),
         helper.make_node("Unsqueeze", ["tok_f", "axis2"], ["annotations"]),
         helper.make_node("Identity", ["annotations"], ["keys"]),
         helper.make_node("Shape", ["src_tokens"], ["shape"]),
         helper.make_node("Gather", ["shape", "one"], ["src_len"], axis=0),
         helper.make_node("Range", ["zero", "src_len", "one"], ["positions"]),
         helper.make_node("Unsqueeze", ["src_lengths", "axis1"], ["len_col"]),
         helper.make_node("Less", ["positions", "len_col"], ["src_mask"]),
         helper.make_node("ReduceSum", ["annotations", "axis1"], ["sum"], keepdims=0),
         helper.make_node("Mul", ["sum", "zero_f"], ["init_state"])],
        "encoder",
        [helper.make_tensor_value_info("src_tokens", TensorProto.INT64, ["B", "S"]),
         helper.make_tensor_value_info("src_lengths", TensorProto.INT64, ["B"])],
        [helper.make_tensor_value_info(n, t, None) for n, t in (("annotations", TensorProto.FLOAT),
         ("keys", TensorProto.FLOAT), ("src_mask", TensorProto.BOOL), ("init_state", TensorProto.FLOAT))],
        [helper.make_tensor("axis1", TensorProto.INT64, [1], [1]),
         helper.make_tensor("axis2", TensorProto.INT64, [1], [2]),
         helper.make_tensor("one", TensorProto.INT64, [], [1]), helper.make_tensor("zero", TensorProto.INT64, [], [0]),
         helper.make_tensor("zero_f", TensorProto.FLOAT, [], [0.0])])
    def step_graph(shared: bool):
        memory = "src_mask_rows" if shared else "src_mask"
        nodes = ([helper.make_node("Gather", ["src_mask", "memory_index"], ["src_mask_rows"], axis=0)]
                 if shared else [])
        nodes += [
            helper.make_node("Gather", ["table", "prev_tokens"], ["raw"], axis=0),
            helper.make_node("Add", ["raw", "vocab_bias"], ["biased"]),
            helper.make_node("LogSoftmax", ["biased"], ["log_probs"], axis=-1),
            helper.make_node("TopK", ["log_probs", "k"], ["topk_log_probs", "topk_ids"], axis=-1),
            helper.make_node("Unsqueeze", ["forced_tokens", "axis1"], ["forced_col"]),
            helper.make_node("GatherElements", ["log_probs", "forced_col"], ["forced_lp_col"], axis=1),
            helper.make_node("Squeeze", ["forced_lp_col", "axis1"], ["forced_log_probs"]),
            helper.make_node("Identity", ["state"], ["new_state"]),
            helper.make_node("Cast", [memory], ["mask_f"], to=TensorProto.FLOAT),
            helper.make_node("ReduceSum", ["mask_f", "axis1"], ["count"], keepdims=1),
            helper.make_node("Div", ["mask_f", "count"], ["alpha"]),
            helper.make_node("Identity", ["annotations"], ["unused_a"]),
            helper.make_node("Identity", ["keys"], ["unused_k"])]
        inputs = [helper.make_tensor_value_info("prev_tokens", TensorProto.INT64, ["R"]),
                  helper.make_tensor_value_info("state", TensorProto.FLOAT, ["R", 1]),
                  helper.make_tensor_value_info("annotations", TensorProto.FLOAT, ["N", "S", 1]),
                  helper.make_tensor_value_info("keys", TensorProto.FLOAT, ["N", "S", 1]),
                  helper.make_tensor_value_info("src_mask", TensorProto.BOOL, ["N", "S"]),
                  helper.make_tensor_value_info("vocab_bias", TensorProto.FLOAT, ["B", vocab]),
                  helper.make_tensor_value_info("k", TensorProto.INT64, [1]),
                  helper.make_tensor_value_info("forced_tokens", TensorProto.INT64, ["R"])]
        if shared:
            inputs.append(helper.make_tensor_value_info("memory_index", TensorProto.INT64, ["R"]))
        outputs = [helper.make_tensor_value_info(n, TensorProto.INT64 if n == "topk_ids" else TensorProto.FLOAT, None)
                   for n in ("topk_log_probs", "topk_ids", "forced_log_probs", "new_state", "alpha")]
        return helper.make_graph(nodes, "decoder_step", inputs, outputs,
                                 [helper.make_tensor("table", TensorProto.FLOAT, table.shape, table.flatten().tolist()),
                                  helper.make_tensor("axis1", TensorProto.INT64, [1], [1])])

    out = tmp_path / "markov"
    out.mkdir()
    opset = [helper.make_opsetid("", 17)]
    onnx.save(helper.make_model(enc, opset_imports=opset, ir_version=8), str(out / "encoder.onnx"))
    onnx.save(helper.make_model(step_graph(False), opset_imports=opset, ir_version=8), str(out / "decoder_step.onnx"))
    onnx.save(helper.make_model(step_graph(True), opset_imports=opset, ir_version=8),
              str(out / "decoder_step_shared.onnx"))
    (out / "spm.model").write_bytes((tokenizer_dir / "spm.model").read_bytes())
    write_manifest(out, {"schema_version": SCHEMA_VERSION, "name": "markov", "version": "1", "source_language": "xx",
                         "target_language": "yy", "vocab_size": vocab,
                         "files": file_entries(out, ["encoder.onnx", "decoder_step.onnx", "decoder_step_shared.onnx",
                                                     "spm.model"])})
    return out


# --- running real servers -----------------------------------------------------

import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

_SERVING = re.compile(r"serving .*? on (?P<host>\S+):(?P<port>\d+) \(.*?\), http on \S+:(?P<http>\d+|off), "
                      r"metrics on \S+:(?P<metrics>\d+|off)")


def serve_command(env: dict[str, str]) -> list[str]:
    """`attnmt serve`, or with `FAULTS` in `env` the test entry point that injects them first."""
    if "FAULTS" in env:
        return [sys.executable, str(Path(__file__).parent / "faults.py"), "serve"]
    return [sys.executable, "-m", "attnmt.service.cli", "serve"]


class RunningServer:
    """`attnmt serve` in a subprocess on free loopback ports."""

    def __init__(self, models: list[Path], env: dict[str, str] | None = None, timeout: float = 60):
        settings = {"ATTNMT_HOST": "127.0.0.1", "ATTNMT_PORT": "0", "ATTNMT_METRICS_HOST": "127.0.0.1",
                    "ATTNMT_METRICS_PORT": "0", "ATTNMT_HTTP_HOST": "127.0.0.1", "ATTNMT_HTTP_PORT": "0",
                    "ATTNMT_MODELS": ",".join(str(m) for m in models),
                    "ATTNMT_INTRA_OP_THREADS": "1", "ATTNMT_LOG_LEVEL": "info", **(env or {})}
        self.proc = subprocess.Popen(serve_command(settings), env={**os.environ, **settings},
                                     stderr=subprocess.PIPE, text=True)
        self.log: list[str] = []
        deadline = time.monotonic() + timeout
        match = None
        while match is None:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("server exited before serving:\n" + "".join(self.log))
            self.log.append(line)
            match = _SERVING.search(line)
            if time.monotonic() > deadline:
                raise RuntimeError("server did not start:\n" + "".join(self.log))
        self.port = int(match["port"])
        self.metrics_port = None if match["metrics"] == "off" else int(match["metrics"])
        self.http_port = None if match["http"] == "off" else int(match["http"])
        self.address = f"127.0.0.1:{self.port}"
        self.http = f"http://127.0.0.1:{self.http_port}"
        self._drain = threading.Thread(target=self._read_log, daemon=True)
        self._drain.start()

    def _read_log(self) -> None:
        for line in self.proc.stderr:
            self.log.append(line)

    def scrape(self) -> str:
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as r:
            return r.read().decode()

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels`."""
        total = 0.0
        for line in self.scrape().splitlines():
            if line.startswith("#") or not line.startswith(name):
                continue
            series, value = line.rsplit(" ", 1)
            metric_name = series.split("{", 1)[0]
            if metric_name != name:
                continue
            if all(f'{k}="{v}"' in series for k, v in labels.items()):
                total += float(value)
        return total

    def terminate(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()

    def __enter__(self) -> "RunningServer":
        return self

    def __exit__(self, *exc) -> None:
        self.terminate()


@pytest.fixture(scope="module")
def server(tiny_model):
    with RunningServer([tiny_model], {"ATTNMT_DEFAULT_BEAM_SIZE": "1"}) as running:
        yield running


@pytest.fixture(scope="module")
def stub(server):
    import grpc

    from attnmt.service.stubs import translator_pb2_grpc
    channel = grpc.insecure_channel(server.address)
    yield translator_pb2_grpc.TranslatorStub(channel)
    channel.close()


# --- calling a running server ---------------------------------------------------

# Sentences of the toy language (synthetic_pair) that the tiny model translates.
SHORT = "peru vidas kasa ."
LONG = "kasa granda amas libo nova . gato roja havas arbo blanka . sola vidas luna . peru amas mesa roja ."
LONG_SENTENCE = " ".join(["kasa granda amas libo nova . gato roja havas arbo blanka ."] * 5)
LONG_TARGET = " ".join(["the big house sees the dog ."] * 45)     # forced decoding: ~950 steps


def error_of(call):
    """The grpc.RpcError that `call()` raises; the test fails if it returns."""
    import grpc
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


def slow_align(stub, **kwargs):
    """Align LONG to LONG_TARGET (forced decoding, ~950 steps), started and not awaited:
    it keeps a decoding row busy for a while."""
    from attnmt.service.stubs import translator_pb2 as pb
    return stub.Align.future(pb.AlignRequest(source=LONG, target=LONG_TARGET), **kwargs)


def at_once(call, count: int) -> list:
    """`call()` from `count` threads started together; their answers, in the order they came."""
    answers: list = []
    threads = [threading.Thread(target=lambda: answers.append(call())) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


@pytest.fixture(scope="session")
def bundled_server():
    """`make serve`'s server: the three bundled models, beam 5; shared by the tests that need them."""
    from attnmt.service.server.settings import SERVED_BY_DEFAULT
    with RunningServer(list(SERVED_BY_DEFAULT), {"ATTNMT_DEFAULT_BEAM_SIZE": "5"}, timeout=120) as running:
        yield running
