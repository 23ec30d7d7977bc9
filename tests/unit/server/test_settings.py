import subprocess
import sys

import grpc
import pytest

from attnmt.service.errors import ConfigError
from attnmt.service.server.settings import Settings, load_settings
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from conftest import RunningServer


def test_defaults_work_out_of_the_box():
    s = Settings()
    assert s.port == 50051 and s.metrics_port == 8002 and s.batching == "continuous"
    assert s.models[0].name == "transformer-es-en"


def test_the_idle_batch_waits_only_where_a_batch_closes():
    """Continuous batching lets a later sentence join at the next step, so an idle batch
    does not wait for company by default; a request-level batch is closed once it starts."""
    assert load_settings(models=["m"]).queue_delay_seconds == 0.0
    assert load_settings(models=["m"], batching="request").queue_delay_seconds == 0.002
    assert load_settings(models=["m"], max_queue_delay_ms=5).queue_delay_seconds == 0.005


def test_file_then_environment_then_flags(tmp_path, monkeypatch):
    toml = tmp_path / "attnmt.toml"
    toml.write_text('port = 6000\nmax_queue = 7\nmodels = ["/m/a", "/m/b"]\n')
    assert load_settings(toml).max_queue == 7
    monkeypatch.setenv("ATTNMT_MAX_QUEUE", "9")
    assert load_settings(toml).max_queue == 9                 # environment beats the file
    assert load_settings(toml, max_queue=11).max_queue == 11  # flags beat the environment
    assert [str(m) for m in load_settings(toml).models] == ["/m/a", "/m/b"]
    yml = tmp_path / "attnmt.yaml"
    yml.write_text("batching: request\n")
    assert load_settings(yml).batching == "request"


@pytest.mark.parametrize("content, field", [
    ("max_batch_rows = 0\n", "max_batch_rows"),
    ("max_batch_rows = 8\nmax_beam_size = 16\n", "max_batch_rows .8. must be at least max_beam_size"),
    ("batching = 'sometimes'\n", "batching"),
    ("max_queue_size = 3\n", "max_queue_size"),          # a typo is an error, not ignored
    ("tls_cert = '/x.pem'\n", "tls_cert and tls_key"),
    ("precision = 'bf16'\n", "precision bf16 needs device openvino"),
    ("device = 'tpu'\n", "device"),
])
def test_invalid_configuration_names_the_field(tmp_path, content, field):
    path = tmp_path / "bad.toml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=field):
        load_settings(path)


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=attnmt-test-ca",
            "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"))
    for name, extension in (("server", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
                            ("client", "extendedKeyUsage=clientAuth")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", str(d / f"{name}.key"),
                "-out", str(d / f"{name}.csr"))
        (d / f"{name}.ext").write_text(extension + "\n")
        openssl("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(d / "ca.pem"), "-CAkey", str(d / "ca.key"),
                "-CAcreateserial", "-days", "2", "-extfile", str(d / f"{name}.ext"), "-out", str(d / f"{name}.pem"))
    return d


def test_mutual_tls(tiny_model, certificates):
    d = certificates
    env = {"ATTNMT_TLS_CERT": str(d / "server.pem"), "ATTNMT_TLS_KEY": str(d / "server.key"),
           "ATTNMT_TLS_CLIENT_CA": str(d / "ca.pem"), "ATTNMT_DEFAULT_BEAM_SIZE": "1"}
    with RunningServer([tiny_model], env) as server:
        address = f"localhost:{server.port}"
        ca = (d / "ca.pem").read_bytes()
        good = grpc.ssl_channel_credentials(ca, (d / "client.key").read_bytes(), (d / "client.pem").read_bytes())
        with grpc.secure_channel(address, good) as channel:
            answer = pb_grpc.TranslatorStub(channel).Translate(pb.TranslateRequest(sentences=["peru vidas kasa ."]),
                                                               timeout=10)
            assert answer.translations[0].text == "the dog sees the house ."
        cli = subprocess.run([sys.executable, "-m", "attnmt.service.cli", "translate", "--server", address,
                              "--tls-ca", str(d / "ca.pem"), "--tls-cert", str(d / "client.pem"),
                              "--tls-key", str(d / "client.key"), "peru vidas kasa ."],
                             capture_output=True, text=True, check=True)
        assert cli.stdout.strip() == "the dog sees the house ."
        # no client certificate: the handshake is refused
        with grpc.secure_channel(address, grpc.ssl_channel_credentials(ca)) as channel:
            with pytest.raises(grpc.RpcError) as info:
                pb_grpc.TranslatorStub(channel).Translate(pb.TranslateRequest(sentences=["a"]), timeout=10)
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        # plaintext against a TLS port fails too
        with grpc.insecure_channel(server.address) as channel:
            with pytest.raises(grpc.RpcError):
                pb_grpc.TranslatorStub(channel).Translate(pb.TranslateRequest(sentences=["a"]), timeout=5)


def test_decoding_options_become_search_options_with_the_server_defaults():
    from attnmt.service.errors import InvalidInput
    from attnmt.service.server.convert import search_options
    settings = Settings(default_beam_size=4, max_beam_size=8)
    plain = search_options(pb.DecodingOptions(), settings)
    assert (plain.beam_size, plain.n_best, plain.early_exit) == (4, 1, False)
    assert plain.length_penalty is None         # unset: the model's own (Translator.search)
    chosen = search_options(pb.DecodingOptions(beam_size=6, n_best=2, early_exit=True, length_penalty=0.0), settings)
    assert (chosen.beam_size, chosen.n_best, chosen.early_exit, chosen.length_penalty) == (6, 2, True, 0.0)
    with pytest.raises(InvalidInput, match="options.beam_size must be between 1 and 8"):
        search_options(pb.DecodingOptions(beam_size=9), settings)


def test_a_gpu_gets_four_times_the_rows_unless_they_are_set():
    from pathlib import Path

    from attnmt.service.server.settings import GPU_BATCH_ROWS, GPU_BATCH_TOKENS
    model = str(Path(__file__).resolve().parents[3] / "models" / "rnnsearch-es-en")
    cpu, gpu = Settings(models=[model]), Settings(models=[model], device="cuda")
    assert (cpu.max_batch_rows, cpu.max_batch_tokens) == (64, 8192)
    assert (gpu.max_batch_rows, gpu.max_batch_tokens) == (GPU_BATCH_ROWS, GPU_BATCH_TOKENS) == (256, 32768)
    chosen = Settings(models=[model], device="cuda", max_batch_rows=32)
    assert (chosen.max_batch_rows, chosen.max_batch_tokens) == (32, 32768)


@pytest.mark.parametrize("cpus", [1, 2, 8])
def test_decode_workers_default_to_two_of_one_thread_each_on_two_cores(monkeypatch, cpus):
    """Two workers on a CPU of two cores or more (one on one core, one on a GPU), the cores
    shared out between them; never more workers than whole beams fit in max_batch_rows."""
    from attnmt.service.inference import offline
    monkeypatch.setattr(offline, "cores", lambda: cpus)
    s = load_settings(models=["m"])
    assert s.workers == (2 if cpus >= 2 else 1)
    assert s.worker_threads == {1: 0, 2: 1, 8: 4}[cpus]
    assert load_settings(models=["m"], intra_op_threads=3).worker_threads == 3
    # threads set for one worker (a pod's CPU limit) keep one worker unless the cores hold two
    assert load_settings(models=["m"], intra_op_threads=2).workers == (2 if cpus >= 4 else 1)
    assert load_settings(models=["m"], decode_workers=3).workers == 3
    assert load_settings(models=["m"], max_batch_rows=9, max_beam_size=5, decode_workers=4).workers == 1
    assert load_settings(models=["m"], max_batch_rows=1, max_beam_size=1, default_beam_size=1).workers == 1
    assert load_settings(models=["m"], device="cuda").workers == 1


def test_each_worker_gets_its_share_of_the_batch_limits():
    from attnmt.service.server.scheduler import worker_share
    from attnmt.service.server.worker import SchedulerLimits
    limits = SchedulerLimits.from_settings(load_settings(models=["m"], decode_workers=2, max_batch_rows=64,
                                                         max_batch_tokens=8192, max_cache_bytes=2**20))
    share = worker_share(limits)
    assert (share.max_batch_rows, share.max_batch_tokens, share.max_cache_bytes) == (32, 4096, 2**19)
    assert share.max_queue == limits.max_queue        # the queue's bound stays the model's
