"""All server configuration, in one place.

Sources, later ones winning: defaults below, a TOML or YAML file (`attnmt serve
--config FILE` or `ATTNMT_CONFIG`), environment variables `ATTNMT_<FIELD>`
(e.g. `ATTNMT_PORT=50052`, `ATTNMT_MODELS=/m/a,/m/b`), then command-line flags.
An invalid value stops start-up with a message naming the field.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, InitSettingsSource, NoDecode, SettingsConfigDict
from typing_extensions import Annotated

from attnmt.service.errors import ConfigError
from attnmt.service.inference.offline import GPU_ROWS, workers_and_threads
from attnmt.service.inference.sessions import precision_problem

# On a GPU a decoder step costs about the same at 64 rows as at 256, so the defaults with device
# cuda are 4x the CPU's (H200, 2026-11-26: offline greedy 2.1x the sentences/s at 256 rows as at
# 64 for RNNsearch, beam 5 2.2x; the server at 256 clients 454 -> 539 sentences/s; docs/benchmarks.md).
GPU_BATCH_ROWS, GPU_BATCH_TOKENS = GPU_ROWS, 4 * 8192

REPO_ROOT = Path(__file__).resolve().parents[2]
# The two bundled architectures. The default, first, is the one the bundled-model rule chooses
# (tests/integration/test_bundled_model.py): since 2026-11-26 the Transformer, better on the Bible,
# software and everyday test sets and in its links (docs/benchmarks.md); the RNNsearch is served
# beside it by name.
# English→Spanish is served beside them (its pair routes to it; it is never the default).
BUNDLED_MODEL = REPO_ROOT / "models" / "rnnsearch-es-en"
BUNDLED_TRANSFORMER = REPO_ROOT / "models" / "transformer-es-en"
BUNDLED_MODELS = (BUNDLED_TRANSFORMER, BUNDLED_MODEL)
BUNDLED_EN_ES = REPO_ROOT / "models" / "transformer-en-es"
SERVED_BY_DEFAULT = (*BUNDLED_MODELS, BUNDLED_EN_ES)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ATTNMT_", extra="forbid", validate_default=True)

    # --- network ---
    host: str = Field("[::]", description="gRPC listen address ('[::]': all interfaces)")
    port: int = Field(50051, ge=0, le=65535, description="gRPC port (0: pick a free one)")
    metrics_host: str = Field("0.0.0.0", description="Prometheus /metrics listen address")
    metrics_port: int = Field(8002, ge=0, le=65535, description="Prometheus port (0: pick a free one)")
    metrics_enabled: bool = Field(True, description="serve /metrics")
    max_connection_age_seconds: float = Field(0, ge=0, description="close client connections after this age "
                                              "(0: never), so clients reconnect and spread over new replicas")
    reflection: bool = Field(True, description="gRPC server reflection (grpcurl without the .proto)")
    http_enabled: bool = Field(True, description="serve HTTP beside gRPC in the same process: the JSON API (/v1/), "
                                                 "LibreTranslate's API, /healthz, /readyz, /openapi.json, /docs")
    http_host: str = Field("0.0.0.0", description="HTTP listen address")
    http_port: int = Field(8080, ge=0, le=65535, description="HTTP port (0: pick a free one)")
    # A client that holds a connection without finishing its request holds a file descriptor:
    # these bound how long, and how many connections there are at once.
    http_head_timeout_seconds: float = Field(10.0, gt=0, description="time for an HTTP request's head (request "
                                             "line and headers) to arrive, from the connection's opening or "
                                             "the request's first byte; past it the connection is closed (408 "
                                             "if part of a head came)")
    http_body_timeout_seconds: float = Field(60.0, gt=0, description="time for an HTTP request's body to "
                                             "arrive once its head has; past it 408 and the connection is closed")
    http_keep_alive_seconds: float = Field(5.0, gt=0, description="an idle HTTP keep-alive connection is "
                                           "closed after this long")
    http_max_connections: int = Field(1000, ge=1, description="HTTP connections (and requests in flight) at once; "
                                      "past it a request is answered 503 with Retry-After and its connection closed")
    api_keys: Path | None = Field(None, description="file of HTTP API keys, one per line (`KEY` or `KEY NAME`; "
                                                    "# comments); when set, HTTP calls without a known key get 403, "
                                                    "and the key names the client for fairness")
    trusted_proxies: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="addresses or networks (CIDR) of reverse proxies whose X-Forwarded-For "
                                          "names the HTTP client (env: comma-separated); empty: the peer address")
    cors_allow_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["*"], description="origins browsers may call the HTTP API from (env: "
                                                   "comma-separated; '*' any, as LibreTranslate answers)")
    tls_cert: Path | None = Field(None, description="PEM server certificate; with tls_key enables TLS")
    tls_key: Path | None = Field(None, description="PEM private key of tls_cert")
    tls_client_ca: Path | None = Field(None, description="PEM CA bundle; when set, clients must present a certificate "
                                                         "it signed (mutual TLS)")

    # --- models ---
    models: Annotated[list[Path], NoDecode] = Field(
        default_factory=lambda: list(SERVED_BY_DEFAULT),
        description="model directories to serve (env: comma-separated); the name in each manifest selects it")
    default_model: str | None = Field(None, description="model used when a request names none "
                                                        "(default: the first in `models`)")
    device: Literal["cpu", "cuda", "openvino"] = Field(
        "cpu", description="execution provider; cuda refuses to start if ONNX Runtime cannot use the GPU; "
                           "openvino runs on the CPU through OpenVINO's plugin (pip install 'attnmt[openvino]')")
    # Off by default: bf16 through OpenVINO decodes faster, but its answers differ from f32's.
    precision: Literal["f32", "bf16"] = Field("f32", description="bf16: bfloat16 matrix products "
                                                                 "(device openvino only)")
    intra_op_threads: int = Field(0, ge=0, description="ONNX Runtime threads per step (0: the cores shared out "
                                                       "between the decode workers)")
    # Two workers of one thread each beat one of two threads on 2 cores (docs/benchmarks.md):
    # each step's parallel-for waits for its slowest thread, and a lone thread waits for nobody.
    decode_workers: int = Field(0, ge=0, le=64, description="decode workers per model, each with its own batch "
                                "and a share of the cores and of max_batch_rows, max_batch_tokens and "
                                "max_cache_bytes (0: two on a CPU with the cores for two workers of "
                                "intra_op_threads each, else one; at most one per beam that max_batch_rows holds)")
    # Left to the kernel, the two workers and the event loop's thread now and then queue on one
    # core while the other idles: 7.5-8.6 % of two cores idle at 64 clients, 3.6 % with the
    # workers kept apart, and 1.06x the sentences/s (AMD EPYC, 2 cores, 2026-11-29; six rounds
    # alternated, docs/benchmarks.md).
    pin_decode_workers: bool = Field(True, description="each decode worker's thread keeps to a core of its own "
                                     "where the process may run on exactly one core per worker and the workers "
                                     "step on one thread each (a cpuset, a pod's exclusive cores); elsewhere no "
                                     "effect")
    inter_op_threads: int = Field(1, ge=0, description="ONNX Runtime inter-op threads")
    graph_optimization: Literal["disable", "basic", "extended", "all"] = Field(
        "all", description="ORT graph optimisation (`disable` also leaves the float16 weights' Casts to run at "
                           "every step instead of folding them at load)")
    # Off by default: threads that spin within a step (they stop when it ends) lower a lone
    # sentence's latency, but under overload they take the cores the event loop needs to refuse
    # callers, and goodput drops.
    allow_spinning: bool = Field(False, description="ORT worker threads spin within a decoder step or encoder "
                                                    "call (they stop when it ends): lower latency when idle, "
                                                    "less goodput under overload")
    idle_spinning: bool = Field(True, description="without allow_spinning: ORT threads spin within the decoder "
                                                  "steps of an idle server (at most 8 rows, nobody waiting); "
                                                  "30-50 MB more memory per model")
    warmup: bool = Field(True, description="translate one sentence per model before reporting SERVING")
    # The decode thread gets the GIL back after each ONNX Runtime call only when the event
    # loop's thread drops it, at the latest after this interval (Python's default: 5 ms), which
    # can be longer than a whole decoder step.
    switch_interval_ms: float = Field(5.0, gt=0, le=100, description="Python's thread switch interval "
                                      "(sys.setswitchinterval) in the server process")
    # Off by default: faster for a lone sentence, slower for full batches, where confining each
    # sentence to its own candidates whatever its batch-mates costs a rows x vocabulary mask.
    shortlist: bool = Field(False, description="use a model's lexical shortlist when it has one (each sentence's "
                                               "output layer over its candidate pieces; BLEU change in its manifest)")

    # --- scheduling ---
    batching: Literal["continuous", "request"] = Field(
        "continuous", description="continuous: sentences join and leave the decode batch at every step; "
                                  "request: a batch is formed, decoded to the end, then the next one starts")
    max_batch_rows: int = Field(64, ge=1, le=4096, description="decoder rows per step (a beam of k takes k rows; "
                                                               f"unset with device cuda: {GPU_BATCH_ROWS})")
    max_batch_tokens: int = Field(8192, ge=16, description="rows x longest source length allowed in one step "
                                                           f"(unset with device cuda: {GPU_BATCH_TOKENS})")
    max_cache_bytes: int = Field(512 * 2**20, ge=0, description="a Transformer's self-attention caches in one "
                                 "model's decode batch at most this many bytes, counted at their peak (every row as "
                                 "long as the longest, until the longest-lived sentence ends, with the append step's "
                                 "16 positions of room); a sentence that could "
                                 "pass it waits until rows leave (a lone sentence always runs); 0: no limit")
    # Unset: 0 with continuous batching, where a later arrival joins at the next step anyway (a
    # wait would only add latency), 2 ms with request-level batching, whose batch is closed once
    # it starts.
    max_queue_delay_ms: float | None = Field(None, ge=0, le=10_000, description="wait this long for more "
                                             "sentences before starting a step on an idle batch (unset: 0 "
                                             "with continuous batching, 2 with request-level)")
    min_joiners: int = Field(4, ge=1, description="a running batch at least half full takes waiting sentences "
                                                  "once this many wait and have rows, so the encoder runs them "
                                                  "together (1: at every step)")
    max_join_delay_ms: float = Field(10.0, ge=0, le=10_000, description="the longest a sentence waits for "
                                                                     "min_joiners company before it joins")
    max_bulk_rows_beside_interactive: int = Field(4, ge=1, description="while interactive calls (Translate, "
                                                  "Align, HTTP) are being decoded or arrived within the last second, "
                                                  "bulk work (streams, files) joins a decode batch only up to this "
                                                  "many rows, so an interactive sentence's steps stay small; "
                                                  "beside sentences being decoded, once every 0.1 s at most")
    max_queue: int = Field(1024, ge=1, description="sentences waiting for admission; beyond it RESOURCE_EXHAUSTED")
    retry_after_seconds: float = Field(0.5, gt=0, description="retry hint (RetryInfo) sent with RESOURCE_EXHAUSTED "
                                                              "while refusals are few")
    retry_after_max_seconds: float = Field(4.0, gt=0, description="the most the retry hint grows to while "
                                                                   "refusals keep coming")
    overload_refusals_per_second: float = Field(200.0, gt=0, description="refusals per second above which the retry "
                                                "hint doubles each second (below half of it, it halves back)")
    grace_period_seconds: float = Field(20.0, ge=0, description="on SIGTERM: time for in-flight requests to finish")

    # --- request limits ---
    max_sentences_per_request: int = Field(64, ge=1, description="sentences in one Translate or Align call")
    max_chars_per_sentence: int = Field(2000, ge=1, description="characters in one sentence")
    max_tokens_per_sentence: int = Field(256, ge=2, description="SentencePiece tokens in one sentence (with </s>)")
    max_target_tokens: int = Field(512, ge=2, description="target pieces a translation may reach, whatever "
                                                          "max_length_ratio and max_length_extra ask for")
    max_message_bytes: int = Field(4 * 1024 * 1024, ge=1024, description="largest gRPC message accepted or sent")
    max_beam_size: int = Field(16, ge=1, description="largest beam a request may ask for")
    default_beam_size: int = Field(5, ge=1, description="beam size when a request sets 0, and of "
                                   "`attnmt translate` without --beam, offline too (1: greedy)")
    cache_size: int = Field(0, ge=0, description="finished translations kept per model in an LRU cache and reused "
                                                 "for identical requests (same text and options); 0: no cache")
    max_deadline_seconds: float = Field(300, ge=0, description="longest a call may wait for its translations, "
                                        "whatever deadline it set (also for calls without one); 0: no cap")
    stream_idle_timeout_seconds: float = Field(300, ge=0, description="end a TranslateStream (DEADLINE_EXCEEDED) "
                                               "that sends nothing this long with nothing in flight; 0: never")
    # gRPC clients multiplex their calls on one connection. The admission gate, fairness and
    # the caps above protect the server; a stream limit would only turn a client's calls into
    # HTTP/2 refusals, which it reports as UNAVAILABLE.
    max_concurrent_streams: int = Field(0, ge=0, description="concurrent RPCs per client connection "
                                        "(HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); 0: no limit. Past a "
                                        "limit a client holds its further calls back, but some are refused "
                                        "anyway (UNAVAILABLE, 'RST_STREAM ... error code 7')")
    max_stream_in_flight: int = Field(64, ge=1, description="sentences one TranslateStream call may have in flight")
    max_document_chars: int = Field(50_000, ge=1, description="characters in one entry sent with split_sentences "
                                    "or as HTML (its sentences each keep max_chars_per_sentence)")
    max_document_sentences: int = Field(256, ge=1, description="sentences one such entry may split into "
                                        "(alt and title values count)")

    # --- files (LibreTranslate's /translate_file, /v1/translate_file) ---
    max_file_bytes: int = Field(5 * 2**20, ge=1, description="largest file translated (any format served: "
                                ".txt, .po, .xlf, .docx, ...); a larger one is refused 400, and an HTTP body "
                                "over it by 64 KiB 413")
    max_html_file_bytes: int = Field(2**20, ge=1, description="largest .html/.htm file: one is parsed whole to be "
                                     "cut into entries (about 150 MB and seconds of CPU a MiB); a larger one is "
                                     "refused 400")
    file_store_dir: Path | None = Field(None, description="directory of the translated files kept for download "
                                        "(LibreTranslate's translatedFileUrl); replicas that share it (a "
                                        "ReadWriteMany volume) serve each other's files, each once; unset: a "
                                        "temporary directory of the process's own, removed at shutdown")
    # 32 MiB: within the 64 MiB /tmp the Kubernetes base mounts (deploy/kubernetes/base), beside uploads
    file_store_max_bytes: int = Field(32 * 2**20, ge=1, description="translated files kept for download at "
                                      "most this many bytes together (in a shared file_store_dir, every "
                                      "replica's); the oldest go first to make room")
    file_store_expiry_seconds: float = Field(600, gt=0, description="a translated file not fetched within this "
                                             "long is deleted (one that is fetched is deleted at once)")

    # --- glossaries ---
    glossaries: Annotated[dict[str, Path], NoDecode] = Field(
        default_factory=dict, description="named glossaries requests use by `glossary_name`: name -> TSV file "
                                          "(source<TAB>target a line, '#' comments), read at start-up "
                                          "(env: name=FILE,name=FILE)")
    max_glossary_entries: int = Field(1000, ge=0, description="entries a request's own glossary may have "
                                                              "(named glossaries are not limited)")

    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="logging level; debug "
                                                                    "adds one line per Translator call")
    log_format: Literal["text", "json"] = Field("text", description="log lines as text or one JSON object each "
                                                "(time, level, logger, message; request lines add trace id, "
                                                "model, status and timings)")
    tracing: bool = Field(False, description="OpenTelemetry traces of Translator calls over OTLP (pip install "
                                             "'attnmt[otel]'; endpoint, sampler, service name from OTEL_* variables)")

    @field_validator("models", mode="before")
    @classmethod
    def _split_models(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [p.strip() for p in value.split(",") if p.strip()]
        return value

    @field_validator("trusted_proxies", "cors_allow_origins", mode="before")
    @classmethod
    def _split_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _check_networks(cls, value: list[str]) -> list[str]:
        for item in value:
            ipaddress.ip_network(item, strict=False)     # ValueError names the bad one
        return value

    @field_validator("glossaries", mode="before")
    @classmethod
    def _split_glossaries(cls, value: Any) -> Any:
        if isinstance(value, str):
            pairs = [item.split("=", 1) for item in value.split(",") if item.strip()]
            if any(len(pair) != 2 for pair in pairs):
                raise ValueError("expected name=FILE,name=FILE")
            return {name.strip(): path.strip() for name, path in pairs}
        return value

    @model_validator(mode="after")
    def _check(self) -> "Settings":
        if not self.models:
            raise ValueError("models: at least one model directory is required")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key must be set together")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ValueError("tls_client_ca (mutual TLS) needs tls_cert and tls_key")
        problem = precision_problem(self.device, self.precision)
        if problem:
            raise ValueError(problem)
        if self.default_beam_size > self.max_beam_size:
            raise ValueError("default_beam_size must not exceed max_beam_size")
        if self.device == "cuda":      # a GPU step costs about the same at 64 rows as at 256
            if "max_batch_rows" not in self.model_fields_set:
                self.max_batch_rows = GPU_BATCH_ROWS
            if "max_batch_tokens" not in self.model_fields_set:
                self.max_batch_tokens = GPU_BATCH_TOKENS
        if self.max_batch_rows < self.max_beam_size:
            raise ValueError(f"max_batch_rows ({self.max_batch_rows}) must be at least max_beam_size "
                             f"({self.max_beam_size}): a beam's rows decode in one step")
        return self

    @property
    def workers(self) -> int:
        """Decode workers per model: decode_workers, or its default; never more than the beams
        max_batch_rows holds (each worker's share must take a whole beam)."""
        chosen, _ = workers_and_threads(self.device, self.decode_workers, self.intra_op_threads)
        return max(1, min(chosen, self.max_batch_rows // self.max_beam_size))

    @property
    def worker_threads(self) -> int:
        """ONNX Runtime threads each decode worker's steps run on (0: ONNX Runtime's default)."""
        return workers_and_threads(self.device, self.workers, self.intra_op_threads)[1]

    @property
    def queue_delay_seconds(self) -> float:
        """max_queue_delay_ms, or its default for the batching mode, in seconds."""
        if self.max_queue_delay_ms is not None:
            return self.max_queue_delay_ms / 1000
        return 0.0 if self.batching == "continuous" else 0.002

    def file_limits(self, max_bytes: int | None = None):
        """The limits a file is read with (service/text/files/): max_file_bytes, or `max_bytes`
        where a file's texts go in calls of their own (`attnmt translate --file`); a .txt
        paragraph's lines an eighth of the sentences an entry may have (a line holds a few)."""
        from attnmt.service.text.files import Limits
        return Limits(self.max_file_bytes if max_bytes is None else max_bytes, self.max_document_chars,
                      max(1, self.max_document_sentences // 8), max_entry_sentences=self.max_document_sentences,
                      max_html_bytes=self.max_html_file_bytes)


def read_config_file(path: Path) -> dict:
    # imported here: `attnmt translate` reads these settings for its default beam, and most
    # runs have no file
    text = Path(path).read_text(encoding="utf-8")
    if Path(path).suffix == ".toml":
        import tomllib
        return tomllib.loads(text)
    import yaml
    return yaml.safe_load(text) or {}


def load_settings(config_file: Path | None = None, **flags: Any) -> Settings:
    """Flags (None ignored) beat the environment, which beats the file, which beats the defaults."""
    config_file = config_file or (Path(os.environ["ATTNMT_CONFIG"]) if os.environ.get("ATTNMT_CONFIG") else None)
    file_values = read_config_file(config_file) if config_file else {}
    flag_values = {k: v for k, v in flags.items() if v is not None}

    class Layered(Settings):
        @classmethod
        def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings,
                                       file_secret_settings):
            # First source wins.
            return (InitSettingsSource(settings_cls, init_kwargs=flag_values), env_settings,
                    InitSettingsSource(settings_cls, init_kwargs=file_values))

    try:
        return Settings.model_validate(Layered().model_dump())
    except ValidationError as e:
        raise ConfigError(_explain(e)) from e


def _explain(error: ValidationError) -> str:
    lines = []
    for e in error.errors():
        field = ".".join(str(p) for p in e["loc"]) or "settings"
        lines.append(f"invalid configuration: {field}: {e['msg']} (got {e.get('input')!r})")
    return "\n".join(lines)
